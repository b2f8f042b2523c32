/* Per-layer parity of the CUDA backend against the CPU backend (the reference), the way ggml's
 * test-backend-ops works: for each case, one small network around one layer type and variant is
 * built twice from the same config and seed, once by ct_prepare on the CPU (devices = cpu) and once
 * by ct_graph_build + ct_graph_bind on a CUDA backend that every case of the precision's round
 * shares (one per set of options: a backend measures a convolution shape once and keeps its
 * choice, so each shape is searched once a round, not once a case; binding case after case on one
 * backend is what a batch search and a rebind do too). Both get identical parameters and random
 * inputs, run one training pass (set_step, forward, loss, backward, every buffer backward must
 * write poisoned with NaN first: nothing is cleared before a step) and then an evaluation forward, and every layer's output, output gradient, parameter gradients and batch-norm
 * running statistics are compared: relative error norm-wise, ||gpu - cpu|| / max(||cpu||, tiny),
 * with NaN or inf on either side failing. Each optimizer's update is compared the same way. One
 * line per case and tensor shows the figures in the log. The CUDA backend runs with deterministic
 * algorithms (and one case without); each bound layer keeps its pre-activation only where its
 * activation's gradient needs it. Every case runs in fp32, then in fp16 and bf16 (train.precision on
 * both sides, names suffixed @fp16 / @bf16): the CPU's half path is the reference, half tensors are
 * widened to compare, and the tolerances are per precision (PRECISIONS, with their reasons).
 * Exits 77 (skipped) without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "base/half.h"
#include "cpu/cpu_backend.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"

enum { CLASSES = 5 };

/* fp32 with TF32 off: both sides round each product and sum to fp32 and differ only in order. */
#define TOL 1e-4
/* Gradients of networks with a convolution: cuDNN's fp32 algorithms (FFT, Winograd and the
 * tiled implicit GEMMs it may pick) add transform rounding and reduce backward-filter over
 * n*oh*ow products per weight in their own order, and backward-data errors compound down the
 * chain; forward outputs keep TOL, gradients get twice it. */
#define TOL_CONV_GRAD 2e-4
#define TINY 1e-30

/* Every case runs in each precision (the config's train.precision); both backends then store the
 * same tensors in the same half type (the CPU through its half path, engine/cpu/half.c) from the
 * same fp32 masters and the same half copy, and the figures compare half tensors widened to fp32
 * (exact). Where both sides compute the same fp32 value in another order and round it to half,
 * they agree unless the value sits by a rounding boundary (then one ulp apart); the CUDA backend
 * also rounds three times more than the CPU (docs/architecture.md, engine/cuda/layer_common.h): a
 * convolution's product is rounded to half before its bias is added, the gradient before a fused
 * activation is stored in half, and conv's weight gradient goes through half. Each is at most
 * about an ulp of the value it touches, in up to every element of a layer, and they pile up along
 * a chain of a dozen layers forward and again backward. The tolerances are multiples of the half
 * type's relative ulp u (fp16 2^-11 = 4.9e-4, bf16 2^-8 = 3.9e-3): outputs and statistics 10u,
 * gradients 20u (twice the roundings: forward's reach them, backward adds its own). A wrong
 * formula, a missed scale or a value read in the wrong type gives errors of order 1; a half
 * tensor read as fp32 gives NaN or garbage. */
typedef struct precision_case {
    const char *name;        /* train.precision */
    ct_precision precision;
    double tol_y;            /* outputs, loss, batch-norm running statistics */
    double tol_grad;         /* activation and parameter gradients of networks without a convolution */
    double tol_conv_grad;    /* the same with a convolution (cuDNN's algorithms, conv dw through half) */
    /* Gradients of F_TIES cases. In half, a max-pool whose input went through a biased convolution
     * or an activation after one gets values that differ by an ulp between the backends in about a
     * quarter of the elements (the extra roundings); where a window's two largest values lie within
     * an ulp, the two backends may pick different cells, and the gradient of that window goes
     * elsewhere: about 1/sqrt(windows) of a gradient's norm per flip (0.04 in the network case),
     * expected a fraction of a time in fp16 and a few times in bf16. No tolerance in ulps survives
     * that, so these gradients get 0.25: a wrong routing or formula still gives order 1. (The pool
     * cases avoid it in half: their convolution has no bias and a leaky activation, which leaves the
     * positive values, those a max picks, rounded once on both sides.) */
    double tol_ties;
    const char *train_keys;  /* added to [train] */
} precision_case;

static const precision_case PRECISIONS[] = {
    {"fp32", CT_PREC_FP32, TOL, TOL, TOL_CONV_GRAD, 0.0, ""},
    /* a first loss scale of 2^10 keeps the scaled gradients of these small networks far from fp16's
     * 65504 while exercising the scaled loss and the unscale pass (1/1024 is exact) */
    {"fp16", CT_PREC_FP16, 5e-3, 1e-2, 1e-2, 0.25, "precision = fp16\nloss_scale_init = 1024\n"},
    {"bf16", CT_PREC_BF16, 4e-2, 8e-2, 8e-2, 0.25, "precision = bf16\n"},
};
static const precision_case *prec = &PRECISIONS[0];
static unsigned case_flags;  /* the running case's */

/* Case flags. */
enum {
    F_BN_EVAL = 1,   /* random running statistics before the evaluation forward */
    F_PARTIAL = 2,   /* a second training pass at a smaller n than the bound batch */
    F_TIES = 4,      /* a max-pool reads values the backends round differently in half (below) */
};

static ct_rng rng = {20251129};
static unsigned case_counter;


static float uniform(float lo, float hi) { return lo + (hi - lo) * ct_rng_uniform(&rng); }

/* deterministic: parity is measured against one run's rounding, not whichever atomics came first */
static const ct_backend_options GPU_OPTIONS = {.capture = 1, .allow_tf32 = 0, .deterministic = 1};
/* PyTorch's default, the fastest algorithms, for the cases that check that path too */
static const ct_backend_options GPU_FASTEST = {.capture = 1, .allow_tf32 = 0, .deterministic = 0};

/* The running round's CUDA backends, one per set of options, each opened by the first case that
 * asks for it and closed when the round ends (round_close). Per round, because a backend keeps
 * state a case of another precision must not inherit: fp16's loss scaler, once set, scales every
 * later loss on that backend. `noted`: how much of the backend's note the log has shown (a note
 * is written once per backend, by the case that caused it). */
typedef struct round_backend {
    const ct_backend_options *opt;
    ct_backend *be;
    size_t noted;
} round_backend;
static round_backend round_gpu[] = {{&GPU_OPTIONS, NULL, 0}, {&GPU_FASTEST, NULL, 0}};
#define N_ROUND_GPU (sizeof round_gpu / sizeof round_gpu[0])

/* Host copy of `bytes` of backend memory; NULL after a failed check. */
static void *fetch(ct_backend *be, const void *src, size_t bytes)
{
    void *host = xmalloc(bytes);
    ct_err err = {0};
    if (bytes && be->dev->ops->download(be->dev, host, src, bytes, &err) != CT_OK) {
        CHECK_MSG(0, "download of %zu bytes from the %s backend: %s", bytes, be->ops->name, err.msg);
        free(host);
        return NULL;
    }
    return host;
}

/* The first `count` values of a backend tensor (fp32, fp16 or bf16), widened to fp32 on the host
 * (exact); NULL after a failed check. */
static float *fetch_f32(ct_backend *be, const ct_tensor *t, size_t count)
{
    if (t->dtype != CT_DTYPE_F32 && !ct_dtype_is_half(t->dtype)) {
        CHECK_MSG(0, "a %s tensor where fp32, fp16 or bf16 was expected", ct_dtype_name(t->dtype));
        return NULL;
    }
    if (t->dtype == CT_DTYPE_F32)
        return fetch(be, t->data, count * sizeof(float));
    uint16_t *h = fetch(be, t->data, count * sizeof(uint16_t));
    if (!h)
        return NULL;
    float *f = xmalloc(count * sizeof *f);
    for (size_t i = 0; i < count; i++)
        f[i] = t->dtype == CT_DTYPE_F16 ? ct_f32_from_f16(h[i]) : ct_f32_from_bf16(h[i]);
    free(h);
    return f;
}

static int put(ct_backend *be, void *dst, const void *src, size_t bytes)
{
    ct_err err = {0};
    ct_status st = be->dev->ops->upload(be->dev, dst, src, bytes, &err);
    CHECK_MSG(st == CT_OK, "upload of %zu bytes to the %s backend: %s", bytes, be->ops->name, err.msg);
    return st == CT_OK;
}

static ct_step_scalars scalars(float lr, long t, float beta1, float beta2, uint64_t dropout_seed)
{
    return (ct_step_scalars){
        .lr = lr, .t = t,
        .bias1 = (float)(1.0 - pow((double)beta1, (double)t)),
        .bias2 = (float)(1.0 - pow((double)beta2, (double)t)),
        .dropout_seed = dropout_seed,
    };
}

/* ||a - b|| / max(||b||, tiny) in double; INFINITY when either side holds a NaN or inf. */
static double rel_error(const float *a, const float *b, size_t n, size_t *bad_a, size_t *bad_b)
{
    double num = 0.0, den = 0.0;
    *bad_a = *bad_b = 0;
    for (size_t i = 0; i < n; i++) {
        int fa = isfinite(a[i]), fb = isfinite(b[i]);
        *bad_a += !fa;
        *bad_b += !fb;
        if (fa && fb) {
            double d = (double)a[i] - (double)b[i];
            num += d * d;
            den += (double)b[i] * b[i];
        }
    }
    if (*bad_a || *bad_b)
        return INFINITY;
    return sqrt(num) / fmax(sqrt(den), TINY);
}

/* One CHECK per tensor of host arrays: a (GPU) against b (CPU reference), printed either way. */
static void check_host(const char *cs, const char *layer, const char *what, const float *a, const float *b,
                       size_t n, double tol)
{
    size_t bad_a, bad_b;
    double e = rel_error(a, b, n, &bad_a, &bad_b);
    if (bad_a || bad_b)
        printf("%-24s %-7s %-10s NON-FINITE (gpu %zu, cpu %zu of %zu)  FAIL\n", cs, layer, what, bad_a, bad_b, n);
    else
        printf("%-24s %-7s %-10s rel %.2e  tol %.2g%s\n", cs, layer, what, e, tol, e <= tol ? "" : "  FAIL");
    CHECK_MSG(e <= tol, "[%s] %s %s: relative error %.3g over tolerance %g (%zu values, %zu/%zu non-finite)",
              cs, layer, what, e, tol, n, bad_a, bad_b);
}

/* The same for device memory: the first n values of GPU tensor ta against the CPU tensor tb. */
static void check_tensor(const char *cs, const char *layer, const char *what, ct_backend *gpu,
                         const ct_tensor *ta, ct_backend *cpu, const ct_tensor *tb, size_t n, double tol)
{
    if (n == 0)
        return;
    const void *dev_a = ta ? ta->data : NULL, *dev_b = tb ? tb->data : NULL;
    CHECK_MSG(dev_a && dev_b, "[%s] %s %s: missing on the %s side", cs, layer, what, dev_a ? "cpu" : "gpu");
    if (!dev_a || !dev_b)
        return;
    CHECK_MSG(ta->dtype == tb->dtype, "[%s] %s %s: %s on the GPU, %s on the CPU", cs, layer, what,
              ct_dtype_name(ta->dtype), ct_dtype_name(tb->dtype));
    if (ta->dtype != tb->dtype)
        return;
    float *a = fetch_f32(gpu, ta, n), *b = fetch_f32(cpu, tb, n);
    if (a && b)
        check_host(cs, layer, what, a, b, n, tol);
    free(a);
    free(b);
}

/* The output gradient of a layer whose relu gradient the CPU folds into its max-pool reader
 * (ct_cpu_relu_grad_in_reader): the CPU's dy is already the pre-activation gradient, relu's mask
 * applied, so the GPU's dy is compared with that mask, from the GPU's own y, applied the same way. */
static void check_relu_folded_dy(const char *cs, const char *layer, const char *what, ct_backend *gpu,
                                 const ct_layer *lg, ct_backend *cpu, const ct_layer *lc, size_t n, double tol)
{
    float *a = fetch_f32(gpu, lg->dy, n), *y = fetch_f32(gpu, lg->y, n), *b = fetch_f32(cpu, lc->dy, n);
    if (a && y && b) {
        for (size_t i = 0; i < n; i++)
            a[i] = y[i] > 0.0f ? a[i] : 0.0f;
        check_host(cs, layer, what, a, b, n, tol);
    }
    free(a);
    free(y);
    free(b);
}

/* Dropout: the masks must agree bit for bit. With inputs that are never exactly 0 (the cases
 * avoid relu before dropout), y is 0 exactly where the mask dropped, so the zero patterns of the
 * two outputs are the two masks. Fed by the data itself at rate 0.5 (scale exactly 2), the
 * outputs must be identical to the bit. */
static void check_dropout(const char *cs, const char *tag, ct_backend *gpu, const ct_layer *lg, ct_backend *cpu,
                          const ct_layer *lc, int n)
{
    size_t count = (size_t)n * ct_shape_size(lc->out);
    float *a = fetch_f32(gpu, lg->y, count), *b = fetch_f32(cpu, lc->y, count);
    if (a && b) {
        size_t differ = 0, kept = 0;
        for (size_t i = 0; i < count; i++) {
            differ += (a[i] == 0.0f) != (b[i] == 0.0f);
            kept += b[i] != 0.0f;
        }
        double keep = (double)kept / (double)count, want = 1.0 - lc->cfg->rate;
        int exact = lc->in[0] == CT_INPUT_NODE && lc->cfg->rate == 0.5f;
        int same = memcmp(a, b, count * sizeof(float)) == 0;
        printf("%-24s %-7s mask%-6s %zu of %zu positions differ, kept %.3f (rate %.2f)%s%s\n", cs,
               lc->cfg->name, tag, differ, count, keep, lc->cfg->rate,
               exact ? (same ? ", outputs bit-identical" : ", outputs NOT bit-identical") : "",
               differ || (exact && !same) ? "  FAIL" : "");
        CHECK_MSG(differ == 0, "[%s] %s: %zu of %zu dropout mask positions differ from the CPU", cs,
                  lc->cfg->name, differ, count);
        if (count >= 200)
            CHECK_MSG(fabs(keep - want) < 0.1, "[%s] %s: kept %.3f of the values, rate %.2f", cs,
                      lc->cfg->name, keep, lc->cfg->rate);
        if (exact)
            CHECK_MSG(same, "[%s] %s: y differs from the CPU's (x * 2 must be exact)", cs, lc->cfg->name);
    }
    free(a);
    free(b);
}

static int has_conv(const ct_graph *g)
{
    for (int i = 0; i < g->n_layers; i++)
        if (g->layers[i].type == CT_LAYER_CONV2D)
            return 1;
    return 0;
}

/* Every layer: y, and with `grads` dy, then dw and db (slices of g->grads at w_off/w_count and
 * b_off/b_count) and the running statistics (g->state at state_off). `tag` marks the pass. */
static void compare_graphs(const char *cs, const char *tag, ct_graph *gg, ct_graph *gc, int n, int grads)
{
    double grad_tol = has_conv(gc) ? prec->tol_conv_grad : prec->tol_grad;
    if (case_flags & F_TIES)
        grad_tol = fmax(grad_tol, prec->tol_ties);
    char what[32];
    float *dg = NULL, *dc = NULL, *sg = NULL, *sc = NULL;
    if (grads) {
        dg = fetch(gg->be, gg->grads.data, ct_tensor_bytes(&gg->grads));
        dc = fetch(gc->be, gc->grads.data, ct_tensor_bytes(&gc->grads));
        sg = fetch(gg->be, gg->state.data, gg->n_state * sizeof(float));
        sc = fetch(gc->be, gc->state.data, gc->n_state * sizeof(float));
    }
    for (int i = 0; i < gc->n_layers; i++) {
        const ct_layer *lg = &gg->layers[i], *lc = &gc->layers[i];
        const char *name = lc->cfg->name;
        size_t out = (size_t)n * ct_shape_size(lc->out);
        snprintf(what, sizeof what, "y%s", tag);
        check_tensor(cs, name, what, gg->be, lg->y, gc->be, lc->y, out, prec->tol_y);
        if (lc->type == CT_LAYER_DROPOUT && grads)
            check_dropout(cs, tag, gg->be, lg, gc->be, lc, n);
        if (!grads)
            continue;
        snprintf(what, sizeof what, "dy%s", tag);
        if (ct_cpu_relu_grad_in_reader(lc))
            check_relu_folded_dy(cs, name, what, gg->be, lg, gc->be, lc, out, grad_tol);
        else
            check_tensor(cs, name, what, gg->be, lg->dy, gc->be, lc->dy, out, grad_tol);
        if (dg && dc && lc->w_count) {
            snprintf(what, sizeof what, "dw%s", tag);
            check_host(cs, name, what, dg + lc->w_off, dc + lc->w_off, lc->w_count, grad_tol);
        }
        if (dg && dc && lc->b_count) {
            snprintf(what, sizeof what, "db%s", tag);
            check_host(cs, name, what, dg + lc->b_off, dc + lc->b_off, lc->b_count, grad_tol);
        }
        if (sg && sc && lc->state_count) {
            size_t c = lc->state_count / 2;  /* running mean, then running variance */
            snprintf(what, sizeof what, "rmean%s", tag);
            check_host(cs, name, what, sg + lc->state_off, sc + lc->state_off, c, prec->tol_y);
            snprintf(what, sizeof what, "rvar%s", tag);
            check_host(cs, name, what, sg + lc->state_off + c, sc + lc->state_off + c, c, prec->tol_y);
        }
    }
    free(dg);
    free(dc);
    free(sg);
    free(sc);
}

/* Samples whose two largest CPU logits lie closer than `margin`: where the GPU's logits, within
 * the tolerance of the CPU's, may pick the other class. */
static long near_ties(ct_graph *gc, int n, double margin)
{
    const ct_layer *out = ct_graph_output(gc);
    int k = (int)ct_shape_size(out->out);
    float *z = fetch_f32(gc->be, out->y, (size_t)n * (size_t)k);
    long ties = 0;
    for (int i = 0; z && i < n; i++) {
        float top = -INFINITY, second = -INFINITY;
        for (int j = 0; j < k; j++) {
            float v = z[(size_t)i * k + j];
            if (v > top) {
                second = top;
                top = v;
            } else if (v > second) {
                second = v;
            }
        }
        ties += (double)top - (double)second < margin;
    }
    free(z);
    return ties;
}

/* The loss sums and correct counts since the last read, on both sides. In fp32 the correct counts
 * must agree exactly; in half precision a sample whose two best logits lie within twice the output
 * tolerance of each other (scaled by the largest logit) may go either way, and only those. */
static void compare_metrics(const char *cs, const char *tag, ct_backend *gpu, ct_backend *cpu, ct_graph *gc, int n)
{
    double loss[2] = {0, 0};
    long correct[2] = {0, 0}, slack = 0;
    ct_err err = {0};
    if (prec->precision != CT_PREC_FP32) {
        const ct_layer *out = ct_graph_output(gc);
        size_t count = (size_t)n * ct_shape_size(out->out);
        float *z = fetch_f32(gc->be, out->y, count);
        double big = 0.0;
        for (size_t i = 0; z && i < count; i++)
            big = fmax(big, fabs((double)z[i]));
        free(z);
        slack = near_ties(gc, n, 2.0 * prec->tol_y * big);
    }
    CHECK_MSG(gpu->ops->read_metrics(gpu, &loss[0], &correct[0], 1, &err) == CT_OK, "[%s] %s", cs, err.msg);
    CHECK_MSG(cpu->ops->read_metrics(cpu, &loss[1], &correct[1], 1, &err) == CT_OK, "[%s] %s", cs, err.msg);
    double e = fabs(loss[0] - loss[1]) / fmax(fabs(loss[1]), TINY);
    int ok = isfinite(loss[0]) && isfinite(loss[1]) && e <= prec->tol_y;
    long apart = labs(correct[0] - correct[1]);
    printf("%-24s %-7s %-10s rel %.2e  tol %.0e  (gpu %.7g, cpu %.7g; correct %ld, %ld, near ties %ld)%s\n", cs,
           "loss", tag, e, prec->tol_y, loss[0], loss[1], correct[0], correct[1], slack,
           ok && apart <= slack ? "" : "  FAIL");
    CHECK_MSG(ok, "[%s] loss %s: gpu %.9g, cpu %.9g", cs, tag, loss[0], loss[1]);
    CHECK_MSG(apart <= slack, "[%s] correct %s: gpu %ld, cpu %ld (%ld near ties)", cs, tag, correct[0], correct[1],
              slack);
}

/* NaN over every buffer a backward must write in full for n samples: each layer's parameter
 * gradients and every gradient a layer hands back (a gradient no layer writes, that of a layer
 * nothing reads, keeps its zeros). A backward that adds where it should write, or leaves values
 * out, then shows as NaN. */
static ct_status poison_gradients(ct_graph *g, int n, ct_err *err)
{
    ct_device *dev = g->be->dev;
    ct_status st = CT_OK;
    for (int i = 0; i < g->n_layers && st == CT_OK; i++) {
        ct_layer *l = &g->layers[i];
        ct_tensor *t[2 + CT_MAX_INPUTS] = {l->dw, l->db};
        size_t count[2 + CT_MAX_INPUTS] = {l->dw ? l->dw->count : 0, l->db ? l->db->count : 0};
        for (int k = 0; k < l->n_in; k++) {
            t[2 + k] = l->dx[k];
            count[2 + k] = (size_t)n * ct_shape_size(l->in_shapes[k]);
        }
        for (int j = 0; j < 2 + l->n_in && st == CT_OK; j++) {
            if (!t[j] || !count[j])
                continue;
            /* in the tensor's own type: a half gradient takes 2 bytes an element */
            size_t bytes = count[j] * ct_dtype_size(t[j]->dtype);
            void *nan = xmalloc(bytes);
            if (t[j]->dtype == CT_DTYPE_F32) {
                for (size_t q = 0; q < count[j]; q++)
                    ((float *)nan)[q] = NAN;
            } else {
                uint16_t bits = t[j]->dtype == CT_DTYPE_F16 ? ct_f16_from_f32(NAN) : ct_bf16_from_f32(NAN);
                for (size_t q = 0; q < count[j]; q++)
                    ((uint16_t *)nan)[q] = bits;
            }
            st = dev->ops->upload(dev, t[j]->data, nan, bytes, err);
            free(nan);
        }
    }
    return st;
}

/* One training pass as the trainer runs it, without the optimizer; in fp16 the loss gradient is
 * scaled and the unscale pass brings the parameter gradients back to size, as the trainer's step
 * does. */
static ct_status train_pass(ct_graph *g, int n, const ct_step_scalars *s, ct_err *err)
{
    ct_backend *be = g->be;
    ct_layer *out = ct_graph_output(g);
    ct_status st = poison_gradients(g, n, err);
    if (st == CT_OK)
        st = be->ops->set_step(be, s, err);
    if (st == CT_OK)
        st = ct_graph_forward(g, n, 1, err);
    if (st == CT_OK)
        st = be->ops->loss(be, out->y, &g->labels, out->dy, n, err);
    if (st == CT_OK)
        st = ct_graph_backward(g, n, err);
    if (st == CT_OK && g->precision == CT_PREC_FP16)
        st = be->ops->unscale(be, &g->grads, err);
    return st;
}

/* fp16: no gradient of the pass overflowed at the case's scale on either side (a pass the scaler
 * would skip compares nothing the trainer uses). The optimizer, which clears the count, does not run
 * here, so it covers every pass so far. */
static void check_no_overflow(const char *cs, ct_backend *gpu, ct_backend *cpu)
{
    if (prec->precision != CT_PREC_FP16)
        return;
    ct_scaler s[2];
    ct_err err = {0};
    ct_backend *be[2] = {gpu, cpu};
    for (int b = 0; b < 2; b++) {
        ct_status st = be[b]->ops->scaler_get(be[b], &s[b], &err);
        CHECK_MSG(st == CT_OK, "[%s] %s scaler_get: %s", cs, be[b]->ops->name, err.msg);
        if (st != CT_OK)
            return;
    }
    printf("%-24s %-7s %-10s scale %g, non-finite gradients: gpu %d, cpu %d%s\n", cs, "scaler", "",
           (double)s[1].loss_scale, (int)s[0].nonfinite, (int)s[1].nonfinite,
           s[0].nonfinite || s[1].nonfinite ? "  FAIL" : "");
    CHECK_MSG(s[0].loss_scale == s[1].loss_scale, "[%s] loss scale: gpu %g, cpu %g", cs, (double)s[0].loss_scale,
              (double)s[1].loss_scale);
    CHECK_MSG(s[0].nonfinite == 0 && s[1].nonfinite == 0, "[%s] non-finite gradients: gpu %d, cpu %d", cs,
              (int)s[0].nonfinite, (int)s[1].nonfinite);
}

static ct_status eval_pass(ct_graph *g, int n, ct_err *err)
{
    ct_status st = ct_graph_forward(g, n, 0, err);
    if (st == CT_OK)
        st = g->be->ops->loss(g->be, ct_graph_output(g)->y, &g->labels, NULL, n, err);
    return st;
}

/* Runs the same pass on both graphs; 1 when both succeeded. */
static int both_train(const char *cs, ct_graph *gg, ct_graph *gc, int n, const ct_step_scalars *s)
{
    ct_err eg = {0}, ec = {0};
    ct_status sc = train_pass(gc, n, s, &ec);
    CHECK_MSG(sc == CT_OK, "[%s] cpu training pass at n = %d: %s", cs, n, ec.msg);
    ct_status sg = train_pass(gg, n, s, &eg);
    CHECK_MSG(sg == CT_OK, "[%s] gpu training pass at n = %d: %s", cs, n, eg.msg);
    return sc == CT_OK && sg == CT_OK;
}

static void reset_metrics(ct_backend *be)
{
    double loss;
    long correct;
    ct_err err = {0};
    CHECK_MSG(be->ops->read_metrics(be, &loss, &correct, 1, &err) == CT_OK, "%s", err.msg);
}

static void case_body(const char *cs, ct_net *net, ct_graph *gg, unsigned flags)
{
    ct_graph *gc = &net->run.replicas[0].graph;
    ct_backend *cpu = gc->be, *gpu = gg->be;
    const ct_train_config *tc = &net->run.cfg.train;
    int n = gc->batch;
    CHECK_MSG(gg->param_span == gc->param_span && gg->n_state == gc->n_state && gg->n_layers == gc->n_layers &&
              gg->batch == gc->batch, "[%s] the two graphs differ in size", cs);
    if (gg->param_span != gc->param_span || gg->n_state != gc->n_state || gg->n_layers != gc->n_layers)
        return;

    /* the same seed draws the same initial parameters and state on the host (the padding between
     * parameter tensors included) */
    size_t pbytes = ct_tensor_bytes(&gc->params), sbytes = gc->n_state * sizeof(float);
    float *pc = fetch(cpu, gc->params.data, pbytes), *pg = fetch(gpu, gg->params.data, pbytes);
    float *sc = fetch(cpu, gc->state.data, sbytes), *sg = fetch(gpu, gg->state.data, sbytes);
    int same_p = pc && pg && memcmp(pc, pg, pbytes) == 0;
    int same_s = sc && sg && memcmp(sc, sg, sbytes) == 0;
    printf("%-24s %-7s %-10s %zu parameters %s, %zu state %s\n", cs, "init", "", gc->n_params,
           same_p ? "identical" : "DIFFER", gc->n_state, same_s ? "identical" : "DIFFER");
    CHECK_MSG(same_p, "[%s] initial parameters differ between the backends", cs);
    CHECK_MSG(same_s, "[%s] initial batch-norm state differs between the backends", cs);
    if (!pc || !sc) {
        free(pc); free(pg); free(sc); free(sg);
        return;
    }
    /* then a small identical perturbation: biases start at 0, which would hide a bias that is
     * added wrongly, and batch-norm's gamma 1 and beta 0 would hide either being ignored */
    for (int i = 0; i < gc->n_layers; i++) {
        const ct_layer *l = &gc->layers[i];
        for (size_t k = 0; k < l->w_count; k++)
            pc[l->w_off + k] += uniform(-0.05f, 0.05f);
        for (size_t k = 0; k < l->b_count; k++)
            pc[l->b_off + k] += uniform(-0.05f, 0.05f);
    }
    /* ct_graph_set_params, the one way parameters are set: the masters and, in a half run, the half
     * copy the half dense and conv2d layers read (a plain upload of the masters would leave the copy
     * holding the initial weights) */
    ct_err perr = {0};
    ct_status pst = ct_graph_set_params(gc, pc, &perr);
    CHECK_MSG(pst == CT_OK, "[%s] cpu set_params: %s", cs, perr.msg);
    int ok = pst == CT_OK;
    pst = ct_graph_set_params(gg, pc, &perr);
    CHECK_MSG(pst == CT_OK, "[%s] gpu set_params: %s", cs, perr.msg);
    ok = ok && pst == CT_OK;
    if (ok && gg->params_half.data) {
        /* the GPU's half copy is the rounding of the masters just set, as the CPU's */
        float *hg = fetch_f32(gpu, &gg->params_half, gg->param_span);
        size_t differ = 0;
        for (size_t i = 0; hg && i < gg->param_span; i++) {
            float want = gg->compute_dtype == CT_DTYPE_F16 ? ct_round_f16(pc[i]) : ct_round_bf16(pc[i]);
            differ += memcmp(&hg[i], &want, sizeof want) != 0;
        }
        printf("%-24s %-7s %-10s %zu of %zu half weights differ from the masters' rounding%s\n", cs, "init", "",
               differ, gg->param_span, differ ? "  FAIL" : "");
        CHECK_MSG(hg && differ == 0, "[%s] the GPU's half copy is not the rounding of the parameters set", cs);
        free(hg);
    }

    /* identical random inputs and labels */
    size_t xcount = (size_t)n * ct_shape_size(gc->input);
    float *x = xmalloc(xcount * sizeof *x);
    int32_t *labels = xmalloc((size_t)n * sizeof *labels);
    for (size_t i = 0; i < xcount; i++)
        x[i] = uniform(-1.0f, 1.0f);
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)(ct_rng_next(&rng) % (uint64_t)gc->classes);
    ok = ok && put(cpu, gc->x.data, x, xcount * sizeof *x) && put(gpu, gg->x.data, x, xcount * sizeof *x);
    ok = ok && put(cpu, gc->labels.data, labels, (size_t)n * sizeof *labels) &&
         put(gpu, gg->labels.data, labels, (size_t)n * sizeof *labels);
    reset_metrics(cpu);
    reset_metrics(gpu);

    /* training pass */
    ct_step_scalars s = scalars(0.01f, 1, tc->beta1, tc->beta2, ct_hash3(tc->seed, 0x44524f50, 1));
    if (ok && both_train(cs, gg, gc, n, &s)) {
        check_no_overflow(cs, gpu, cpu);
        compare_metrics(cs, "", gpu, cpu, gc, n);
        compare_graphs(cs, "", gg, gc, n, 1);
    }

    /* evaluation pass: running statistics instead of batch statistics, no dropout */
    if (ok && (flags & F_BN_EVAL) && gc->n_state) {
        for (int i = 0; i < gc->n_layers; i++) {
            const ct_layer *l = &gc->layers[i];
            size_t c = l->state_count / 2;
            for (size_t j = 0; j < c; j++) {
                sc[l->state_off + j] = uniform(-0.5f, 0.5f);     /* running mean */
                sc[l->state_off + c + j] = uniform(0.5f, 1.5f);  /* running variance */
            }
        }
        ok = put(cpu, gc->state.data, sc, sbytes) && put(gpu, gg->state.data, sc, sbytes);
    }
    if (ok) {
        ct_err eg = {0}, ec = {0};
        ct_status stc = eval_pass(gc, n, &ec), stg = eval_pass(gg, n, &eg);
        CHECK_MSG(stc == CT_OK, "[%s] cpu evaluation pass: %s", cs, ec.msg);
        CHECK_MSG(stg == CT_OK, "[%s] gpu evaluation pass: %s", cs, eg.msg);
        if (stc == CT_OK && stg == CT_OK) {
            compare_metrics(cs, "@eval", gpu, cpu, gc, n);
            compare_graphs(cs, "@eval", gg, gc, n, 0);
        }
    }

    /* a smaller batch through buffers bound for the full one (the epoch's last batch) */
    if (ok && (flags & F_PARTIAL) && n > 5) {
        int n2 = n - 5;
        char tag[16];
        snprintf(tag, sizeof tag, "@n=%d", n2);
        s = scalars(0.01f, 2, tc->beta1, tc->beta2, ct_hash3(tc->seed, 0x44524f50, 2));
        if (both_train(cs, gg, gc, n2, &s)) {
            check_no_overflow(cs, gpu, cpu);
            compare_metrics(cs, tag, gpu, cpu, gc, n2);
            compare_graphs(cs, tag, gg, gc, n2, 1);
        }
    }
    free(x);
    free(labels);
    free(pc); free(pg); free(sc); free(sg);
}

static round_backend *round_of(const ct_backend_options *opt)
{
    for (size_t i = 0; i < N_ROUND_GPU; i++)
        if (round_gpu[i].opt == opt)
            return &round_gpu[i];
    return NULL;
}

/* The round's backend with options opt (GPU_OPTIONS or GPU_FASTEST), opened on first use; NULL
 * when it cannot be opened (err says why). */
static ct_backend *round_open(const ct_backend_options *opt, ct_err *err)
{
    round_backend *r = round_of(opt);
    if (!r) {
        ct_fail(err, CT_ERR_INTERNAL, "no round backend has these options");
        return NULL;
    }
    if (!r->be && ct_gpu_test_open(&r->be, opt, err) == CT_OK)
        r->noted = 0;
    return r->be;
}

/* The part of the note of the round's backend with options opt that the log has not shown yet,
 * printed under the case that caused it. Not a failure: cuDNN may lack a deterministic algorithm
 * for a shape (the parity still holds), but the log says so. */
static void round_note(const char *cs, const ct_backend_options *opt)
{
    round_backend *r = round_of(opt);
    size_t len = r && r->be ? strlen(r->be->note) : 0;
    if (r && len > r->noted) {
        printf("%-24s note: %s\n", cs, r->be->note + r->noted);
        r->noted = len;
    }
}

static void round_close(void)
{
    for (size_t i = 0; i < N_ROUND_GPU; i++) {
        ct_gpu_test_close(round_gpu[i].be);
        round_gpu[i].be = NULL;
    }
}

/* Builds `layers` on the CPU (ct_prepare, devices = cpu) and on the round's CUDA backend with opt,
 * both in the precision of the round (prec). */
static void run_case_with(const char *base, const char *shape, int batch, const char *layers, unsigned flags,
                          const ct_backend_options *opt)
{
    char text[4096], cs[96];
    /* fp32 keeps the case's plain name (and its seed: the same draws as before precisions came) */
    if (prec->precision == CT_PREC_FP32)
        snprintf(cs, sizeof cs, "%s", base);
    else
        snprintf(cs, sizeof cs, "%s@%s", base, prec->name);
    int len = snprintf(text, sizeof text,
                       "[data]\nformat = synthetic\nshape = %s\nclasses = %d\ncount = 64\ntest_count = 0\n"
                       "[train]\nbatch = %d\ndevices = cpu\noptimizer = adam\nseed = %u\n%s%s",
                       shape, CLASSES, batch, 1000u + case_counter++, prec->train_keys, layers);
    if (len < 0 || (size_t)len >= sizeof text) {
        CHECK_MSG(0, "[%s] config text too long", cs);
        return;
    }
    printf("== %s\n", cs);
    case_flags = flags;
    ct_net *net = NULL;
    ct_status st = ct_open_string(text, cs, &net);
    if (st == CT_OK)
        st = ct_prepare(net);
    CHECK_MSG(st == CT_OK, "[%s] the CPU network: %s", cs, ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return;
    }
    const ct_graph *gc = &net->run.replicas[0].graph;
    CHECK_MSG(net->run.n_replicas == 1 && strcmp(gc->be->ops->name, "cpu") == 0, "[%s] devices = cpu built on '%s'",
              cs, gc->be->ops->name);

    ct_err err = {0};
    ct_graph gg;
    memset(&gg, 0, sizeof gg);
    ct_backend *gpu = round_open(opt, &err);
    st = gpu ? CT_OK : CT_ERR_BACKEND;
    if (st == CT_OK)
        st = ct_graph_build(&gg, &net->run.cfg, gc->input, gc->classes, &err);
    if (st == CT_OK)
        st = ct_graph_bind(&gg, gpu, gc->batch, net->run.cfg.train.optimizer, net->run.cfg.train.seed, 0, &err);
    /* fp16: the CPU network got the config's scaler at ct_prepare; the CUDA backend the same */
    if (st == CT_OK && net->run.cfg.train.precision == CT_PREC_FP16) {
        ct_scaler s = ct_train_scaler_start(&net->run.cfg.train);
        st = gpu->ops->scaler_set(gpu, &s, &err);
    }
    CHECK_MSG(st == CT_OK, "[%s] the CUDA network: %s", cs, err.msg);
    if (st == CT_OK) {
        /* both built in the round's precision, every layer in the same dtype, and some of it half
         * (else the round would compare fp32 twice) */
        int half_layers = 0, same = gg.precision == prec->precision && gc->precision == prec->precision;
        for (int i = 0; i < gg.n_layers; i++) {
            same = same && gg.layers[i].dtype == gc->layers[i].dtype;
            half_layers += ct_dtype_is_half(gg.layers[i].dtype);
        }
        CHECK_MSG(same, "[%s] the two networks differ in precision or in a layer's dtype", cs);
        CHECK_MSG((half_layers > 0) == (prec->precision != CT_PREC_FP32), "[%s] %d half layers in %s", cs,
                  half_layers, prec->name);
        /* batch norm in a half round runs in the half type (bf16: the project's own kernels), which
         * is what its figures below measure */
        for (int i = 0; i < gg.n_layers - 1; i++)
            if (gg.layers[i].type == CT_LAYER_BATCHNORM)
                CHECK_MSG(gg.layers[i].dtype == gg.compute_dtype, "[%s] %s: batch norm in %s in a %s round", cs,
                          gg.layers[i].cfg->name, ct_dtype_name(gg.layers[i].dtype), prec->name);
        /* the pre-activation is kept exactly where the activation's gradient needs it (gelu) */
        for (int i = 0; i < gg.n_layers; i++) {
            const ct_layer *l = &gg.layers[i];
            int apart = l->z->data != l->y->data;
            CHECK_MSG(apart == ct_layer_keeps_preactivation(l) && (!apart || l->act == CT_ACT_GELU),
                      "[%s] %s: pre-activation %s", cs, l->cfg->name, apart ? "kept" : "not kept");
        }
        case_body(cs, net, &gg, flags);
        round_note(cs, opt);
    }
    ct_graph_free(&gg);
    ct_close(net);
}

static void run_case(const char *cs, const char *shape, int batch, const char *layers, unsigned flags)
{
    run_case_with(cs, shape, batch, layers, flags, &GPU_OPTIONS);
}

/* ---- the cases ---- */

static const char *const ACTS[] = {"linear", "relu", "leaky", "sigmoid", "tanh", "gelu"};
#define N_ACTS (int)(sizeof ACTS / sizeof ACTS[0])

static const char *const HEAD = "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n";

static void dense_cases(void)
{
    char name[64], body[1024];
    for (int a = 0; a < N_ACTS; a++) {
        for (int bias = 1; bias >= 0; bias--) {
            snprintf(name, sizeof name, "dense_%s%s", ACTS[a], bias ? "_bias" : "");
            /* flatten of the data input copies (it cannot alias the input batch) */
            snprintf(body, sizeof body,
                     "[flat]\ntype = flatten\n"
                     "[d]\ntype = dense\nunits = 16\nactivation = %s\nbias = %s\n"
                     "[out]\ntype = dense\nunits = 5\n", ACTS[a], bias ? "on" : "off");
            run_case(name, "4, 4, 3", 7, body, 0);
        }
    }
    /* wide enough for the library's matrix-product paths rather than a toy shape */
    run_case("dense_wide", "8, 8, 4", 32,
             "[flat]\ntype = flatten\n"
             "[d]\ntype = dense\nunits = 96\nactivation = relu\n"
             "[d2]\ntype = dense\nunits = 64\nactivation = tanh\nbias = off\n"
             "[out]\ntype = dense\nunits = 5\n", 0);
}

static void conv_cases(void)
{
    static const int sizes[] = {1, 3, 5};
    char name[64], body[1024];
    for (int k = 0; k < 3; k++)
        for (int stride = 1; stride <= 2; stride++)
            for (int same = 0; same <= 1; same++)
                for (int bias = 1; bias >= 0; bias--) {
                    /* an 8x8 input: with stride 2, 'same' pads 3x3 by 0 before and 1 after, 5x5 by
                     * 1 and 2 (TensorFlow's asymmetric split) */
                    snprintf(name, sizeof name, "conv_k%d_s%d_%s%s", sizes[k], stride, same ? "same" : "valid",
                             bias ? "_bias" : "");
                    snprintf(body, sizeof body,
                             "[c]\ntype = conv2d\nfilters = 4\nsize = %d\nstride = %d\npadding = %s\n"
                             "bias = %s\nactivation = relu\n%s", sizes[k], stride, same ? "same" : "valid",
                             bias ? "on" : "off", HEAD);
                    run_case(name, "8, 8, 3", 7, body, 0);
                }
    /* every fused activation, with and without a bias, through the one bias + activation pass:
     * gelu keeps its pre-activation apart, the others run in place; stride 2 'same' on an 8x8
     * input takes the padded-copy path too */
    for (int a = 0; a < N_ACTS; a++)
        for (int bias = 1; bias >= 0; bias--) {
            snprintf(name, sizeof name, "conv_%s%s", ACTS[a], bias ? "_bias" : "");
            snprintf(body, sizeof body,
                     "[c]\ntype = conv2d\nfilters = 8\nsize = 3\npadding = same\nbias = %s\nactivation = %s\n"
                     "[c2]\ntype = conv2d\nfilters = 4\nsize = 3\nstride = 2\npadding = same\nbias = %s\n"
                     "activation = %s\n%s", bias ? "on" : "off", ACTS[a], bias ? "on" : "off", ACTS[a], HEAD);
            run_case(name, "8, 8, 3", 7, body, 0);
        }
    /* more channels: shapes where cuDNN has real algorithm choices */
    static const char *const wide =
        "[c]\ntype = conv2d\nfilters = 16\nsize = 3\npadding = same\nactivation = relu\n"
        "[c2]\ntype = conv2d\nfilters = 16\nsize = 3\nstride = 2\npadding = same\nactivation = leaky\n"
        "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n";
    run_case("conv_k3_wide", "16, 16, 4", 8, wide, 0);
    /* and with deterministic off: the fastest algorithms, which may add in any order, are still
     * within the tolerance */
    run_case_with("conv_k3_wide_fastest", "16, 16, 4", 8, wide, F_PARTIAL, &GPU_FASTEST);
}

static void pool_cases(void)
{
    static const struct { const char *name, *opts; } pools[] = {
        {"maxpool_2", "type = maxpool\nsize = 2\n"},
        {"maxpool_3s2_same", "type = maxpool\nsize = 3\nstride = 2\npadding = same\n"},
        {"maxpool_3s1_same", "type = maxpool\nsize = 3\nstride = 1\npadding = same\n"},
        {"maxpool_3s2_valid", "type = maxpool\nsize = 3\nstride = 2\n"},
        {"maxpool_global", "type = maxpool\nglobal = on\n"},
        {"avgpool_2", "type = avgpool\nsize = 2\n"},
        {"avgpool_3s2_same", "type = avgpool\nsize = 3\nstride = 2\npadding = same\n"},
        {"avgpool_3s1_same", "type = avgpool\nsize = 3\nstride = 1\npadding = same\n"},
        {"avgpool_3s2_valid", "type = avgpool\nsize = 3\nstride = 2\n"},
        {"avgpool_global", "type = avgpool\nglobal = on\n"},
    };
    char body[1024];
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
        /* leaky before the pool: no ties for a max to break differently (relu's zeros would tie); in
         * half no bias, so that both backends round the values a max picks once (tol_ties) */
        snprintf(body, sizeof body,
                 "[c]\ntype = conv2d\nfilters = 4\nsize = 3\npadding = same\nactivation = leaky\n%s"
                 "[p]\n%s%s", prec->precision == CT_PREC_FP32 ? "" : "bias = off\n", pools[i].opts, HEAD);
        run_case(pools[i].name, "8, 8, 3", 7, body, 0);
    }
}

/* relu before a max pool, the zoo's pattern: the CPU applies relu's gradient in the pool's backward
 * and skips the relu pass (ct_cpu_relu_grad_in_reader); tiling and overlapping windows. relu's
 * zeros tie inside a window, but a window whose max is 0 routes 0 wherever it routes. */
static void relu_pool_cases(void)
{
    char body[1024];
    snprintf(body, sizeof body,
             "[c]\ntype = conv2d\nfilters = 8\nsize = 3\npadding = same\nactivation = relu\n"
             "[p]\ntype = maxpool\nsize = 2\n"
             "[c2]\ntype = conv2d\nfilters = 8\nsize = 3\npadding = same\nactivation = relu\n"
             "[p2]\ntype = maxpool\nsize = 3\nstride = 2\npadding = same\n%s", HEAD);
    run_case("conv_relu_maxpool", "8, 8, 3", 7, body, F_TIES);
}

static void batchnorm_cases(void)
{
    /* the convolution before a batch norm has no bias: its gradient would be 0 up to rounding */
    run_case("batchnorm_conv", "8, 8, 3", 7,
             "[c]\ntype = conv2d\nfilters = 4\nsize = 3\npadding = same\nbias = off\n"
             "[bn]\ntype = batchnorm\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", F_BN_EVAL);
    run_case("batchnorm_conv_opts", "6, 6, 3", 9,
             "[c]\ntype = conv2d\nfilters = 6\nsize = 3\nbias = off\nactivation = tanh\n"
             "[bn]\ntype = batchnorm\nmomentum = 0.3\nepsilon = 0.001\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", F_BN_EVAL);
    run_case("batchnorm_dense", "4, 4, 3", 7,
             "[flat]\ntype = flatten\n"
             "[d]\ntype = dense\nunits = 16\nbias = off\n"
             "[bn]\ntype = batchnorm\n"
             "[out]\ntype = dense\nunits = 5\n", F_BN_EVAL);
    /* more channels than one block of the CUDA reductions spans (32) and rows over several of their
     * chunks (8 x 16 x 16 = 2048 rows, then 768 at the partial batch), through training, the smaller
     * batch and evaluation: in bf16 the project's own batch-norm kernels, compared at the round's
     * tolerances (10 ulps of bf16 for outputs and statistics, 20 for gradients) */
    run_case("batchnorm_conv_wide", "16, 16, 3", 8,
             "[c]\ntype = conv2d\nfilters = 40\nsize = 3\npadding = same\nbias = off\n"
             "[bn]\ntype = batchnorm\n"
             "[act]\ntype = activation\nactivation = leaky\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", F_BN_EVAL | F_PARTIAL);
    /* straight on the network's input: x cast to the layer's dtype, and no dx to make */
    run_case("batchnorm_input", "4, 4, 3", 7,
             "[bn]\ntype = batchnorm\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", F_BN_EVAL);
    /* activation = relu / gelu on the batch norm: the CPU's relu inside its passes (mask
     * recomputed from x) and gelu after it, against cuDNN's batch norm, the activation kernel and
     * its gradient written over dy; gelu keeps its input apart; on the network's input the fused
     * gradient must not take the scratch that the discarded dx goes to */
    run_case("batchnorm_relu", "8, 8, 3", 7,
             "[c]\ntype = conv2d\nfilters = 40\nsize = 3\npadding = same\nbias = off\n"
             "[bn]\ntype = batchnorm\nactivation = relu\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", F_BN_EVAL | F_PARTIAL);
    run_case("batchnorm_gelu_input", "4, 4, 3", 7,
             "[bn]\ntype = batchnorm\nactivation = gelu\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", F_BN_EVAL);
    /* its producer also feeds an add: dx is added into a gradient another consumer has written */
    run_case("batchnorm_branch", "6, 6, 3", 7,
             "[c]\ntype = conv2d\nfilters = 4\nsize = 3\npadding = same\nbias = off\n"
             "[bn]\ntype = batchnorm\n"
             "[res]\ntype = add\ninputs = bn, c\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", F_BN_EVAL);
    /* one row per channel (a last batch of one): no unbiased variance, so the running variance
     * takes the biased 0, and x - mean, y - beta and dx are exactly 0 on both sides */
    run_case("batchnorm_dense_one", "4, 4, 3", 1,
             "[flat]\ntype = flatten\n"
             "[d]\ntype = dense\nunits = 16\nbias = off\n"
             "[bn]\ntype = batchnorm\n"
             "[out]\ntype = dense\nunits = 5\n", F_BN_EVAL);
    /* after a layer pinned to fp32: x cast to the round's dtype, dx back into an fp32 gradient */
    run_case("batchnorm_after_fp32", "6, 6, 3", 7,
             "[c]\ntype = conv2d\nfilters = 4\nsize = 3\npadding = same\nbias = off\ndtype = fp32\n"
             "[bn]\ntype = batchnorm\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", F_BN_EVAL);
}

static void simple_cases(void)
{
    run_case("dropout_input", "4, 4, 3", 7,
             "[drop]\ntype = dropout\nrate = 0.5\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", 0);
    run_case("dropout_conv", "8, 8, 3", 7,
             "[c]\ntype = conv2d\nfilters = 4\nsize = 3\npadding = same\nactivation = leaky\n"
             "[drop]\ntype = dropout\nrate = 0.5\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", 0);
    run_case("flatten_chain", "8, 8, 3", 7,
             "[c]\ntype = conv2d\nfilters = 4\nsize = 3\nactivation = tanh\n"
             "[flat]\ntype = flatten\n"
             "[d]\ntype = dense\nunits = 12\nactivation = sigmoid\n"
             "[out]\ntype = dense\nunits = 5\n", 0);
    char name[64], body[1024];
    for (int a = 0; a < N_ACTS; a++) {
        snprintf(name, sizeof name, "activation_%s", ACTS[a]);
        snprintf(body, sizeof body,
                 "[c]\ntype = conv2d\nfilters = 4\nsize = 3\npadding = same\n"
                 "[act]\ntype = activation\nactivation = %s\n%s", ACTS[a], HEAD);
        run_case(name, "8, 8, 3", 7, body, 0);
    }
    /* c1 feeds both c2 and the add: its gradient accumulates from two consumers */
    run_case("add_residual_conv", "8, 8, 3", 7,
             "[c1]\ntype = conv2d\nfilters = 4\nsize = 3\npadding = same\nactivation = leaky\n"
             "[c2]\ntype = conv2d\nfilters = 4\nsize = 3\npadding = same\nactivation = tanh\n"
             "[res]\ntype = add\ninputs = c1, c2\nactivation = relu\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", 0);
    run_case("add_residual_dense", "4, 4, 3", 7,
             "[flat]\ntype = flatten\n"
             "[d1]\ntype = dense\nunits = 16\nactivation = tanh\n"
             "[d2]\ntype = dense\nunits = 16\n"
             "[res]\ntype = add\ninputs = d1, d2\n"
             "[d3]\ntype = dense\nunits = 16\nactivation = gelu\n"
             "[res2]\ntype = add\ninputs = d3, res\nactivation = gelu\n"
             "[out]\ntype = dense\nunits = 5\n", 0);
    /* strided copies of 3, 4 and 5 channels into 12, and back; c1 also feeds c2 and c3 */
    run_case("concat_conv", "8, 8, 3", 7,
             "[c1]\ntype = conv2d\nfilters = 4\nsize = 3\npadding = same\nactivation = leaky\n"
             "[c2]\ntype = conv2d\nfilters = 3\nsize = 3\npadding = same\nactivation = tanh\n"
             "[c3]\ntype = conv2d\nfilters = 5\nsize = 1\ninput = c1\n"
             "[cat]\ntype = concat\ninputs = c2, c1, c3\n"
             "[c4]\ntype = conv2d\nfilters = 4\nsize = 3\nactivation = relu\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 5\n", F_PARTIAL);
    /* an aliasing flatten joined with the dense layer that reads it */
    run_case("concat_dense", "4, 4, 3", 7,
             "[flat]\ntype = flatten\n"
             "[d1]\ntype = dense\nunits = 16\nactivation = tanh\n"
             "[cat]\ntype = concat\ninputs = d1, flat\n"
             "[out]\ntype = dense\nunits = 5\n", 0);
}

/* A small whole network: asymmetric 'same' stride 2, batch norm, a shared activation feeding two
 * convolutions, residual adds, overlapping max-pool with padding, average and global pooling,
 * aliasing flattens, dropout and dense layers. */
static void network_cases(void)
{
    run_case("network", "12, 12, 3", 16,
             "[c1]\ntype = conv2d\nfilters = 8\nsize = 3\nstride = 2\npadding = same\nactivation = leaky\nbias = off\n"
             "[bn]\ntype = batchnorm\n"
             "[act]\ntype = activation\nactivation = relu\n"
             "[c2]\ntype = conv2d\nfilters = 8\nsize = 3\npadding = same\nactivation = gelu\n"
             "[c3]\ntype = conv2d\nfilters = 8\nsize = 1\ninput = act\nbias = off\n"
             "[res]\ntype = add\ninputs = c2, c3\nactivation = tanh\n"
             "[mp]\ntype = maxpool\nsize = 3\nstride = 2\npadding = same\n"
             "[ap]\ntype = avgpool\nsize = 2\nstride = 1\n"
             "[flat]\ntype = flatten\n"
             "[fc]\ntype = dense\nunits = 8\nactivation = gelu\n"
             "[gp]\ntype = avgpool\nglobal = on\ninput = res\n"
             "[flat2]\ntype = flatten\n"
             "[sum]\ntype = add\ninputs = fc, flat2\nactivation = leaky\n"
             "[drop]\ntype = dropout\nrate = 0.3\n"
             "[fc2]\ntype = dense\nunits = 16\nactivation = sigmoid\n"
             "[out]\ntype = dense\nunits = 5\n",
             F_BN_EVAL | F_PARTIAL | F_TIES);
}

/* ---- optimizers ---- */

/* Three steps of each optimizer from the same weights and gradients (new gradients each step, so
 * the moments carry), on both backends: the updates w - w0 and the moments are compared. */
static void optimizer_cases(void)
{
    enum { P = 10007, STEPS = 3 };  /* odd: vectorised kernels need their scalar tail */
    static const struct {
        const char *name;
        ct_optimizer kind;
        float momentum, weight_decay;
        int nesterov;
    } opts[] = {
        {"sgd", CT_OPT_SGD, 0.0f, 1e-2f, 0},
        {"momentum", CT_OPT_MOMENTUM, 0.9f, 1e-3f, 0},
        {"nesterov", CT_OPT_MOMENTUM, 0.9f, 1e-3f, 1},
        {"adam", CT_OPT_ADAM, 0.0f, 0.0f, 0},
        {"adam_l2", CT_OPT_ADAM, 0.0f, 1e-3f, 0},
        {"adamw", CT_OPT_ADAMW, 0.0f, 1e-2f, 0},
    };
    static const float lrs[STEPS] = {0.01f, 0.02f, 0.005f};
    const float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
    ct_err err = {0};
    ct_backend *be[2] = {NULL, NULL};  /* 0: gpu, 1: cpu */
    CHECK_MSG(ct_gpu_test_open(&be[0], &GPU_OPTIONS, &err) == CT_OK, "%s", err.msg);
    CHECK_MSG(ct_gpu_test_open(&be[1], NULL, &err) == CT_OK, "%s", err.msg);
    if (!be[0] || !be[1]) {
        ct_gpu_test_close(be[0]);
        ct_gpu_test_close(be[1]);
        return;
    }
    printf("== optimizers\n");
    float *w0 = xmalloc(P * sizeof(float)), *g = xmalloc((size_t)STEPS * P * sizeof(float));
    for (size_t i = 0; i < P; i++)
        w0[i] = uniform(-0.5f, 0.5f);
    for (size_t i = 0; i < (size_t)STEPS * P; i++)
        g[i] = (i % 97 == 0) ? 0.0f : uniform(-0.02f, 0.02f);  /* some exact zeros */
    float *res_w[2], *res_m[2], *res_v[2];
    for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
        int has_m = opts[o].kind != CT_OPT_SGD;
        int has_v = opts[o].kind == CT_OPT_ADAM || opts[o].kind == CT_OPT_ADAMW;
        int ok = 1;
        for (int b = 0; b < 2; b++) {
            res_w[b] = res_m[b] = res_v[b] = NULL;
            ct_device *dev = be[b]->dev;
            float *w = dev->ops->alloc(dev, P * sizeof(float));
            float *grad = dev->ops->alloc(dev, P * sizeof(float));
            float *m = dev->ops->alloc(dev, P * sizeof(float));
            float *v = dev->ops->alloc(dev, P * sizeof(float));
            ct_tensor tw = ct_tensor_flat(w, CT_DTYPE_F32, P), tg = ct_tensor_flat(grad, CT_DTYPE_F32, P);
            ct_tensor tm = ct_tensor_flat(m, CT_DTYPE_F32, P), tv = ct_tensor_flat(v, CT_DTYPE_F32, P);
            CHECK(w && grad && m && v);
            if (!w || !grad || !m || !v) {
                ok = 0;
            } else {
                ok = ok && put(be[b], w, w0, P * sizeof(float));
                for (int t = 1; t <= STEPS && ok; t++) {
                    ok = put(be[b], grad, g + (size_t)(t - 1) * P, P * sizeof(float));
                    if (!ok)
                        break;
                    ct_step_scalars s = scalars(lrs[t - 1], t, beta1, beta2, 0);
                    ct_optim_step os = {
                        .kind = opts[o].kind, .params = &tw, .grads = &tg, .m = has_m ? &tm : NULL,
                        .v = has_v ? &tv : NULL, .momentum = opts[o].momentum, .beta1 = beta1,
                        .beta2 = beta2, .epsilon = eps, .weight_decay = opts[o].weight_decay,
                        .nesterov = opts[o].nesterov,
                    };
                    ct_status st = be[b]->ops->set_step(be[b], &s, &err);
                    if (st == CT_OK)
                        st = be[b]->ops->optimizer_step(be[b], &os, &err);
                    CHECK_MSG(st == CT_OK, "[%s] %s step %d: %s", opts[o].name, be[b]->ops->name, t, err.msg);
                    ok = st == CT_OK;
                }
                if (ok) {
                    res_w[b] = fetch(be[b], w, P * sizeof(float));
                    res_m[b] = has_m ? fetch(be[b], m, P * sizeof(float)) : NULL;
                    res_v[b] = has_v ? fetch(be[b], v, P * sizeof(float)) : NULL;
                    ok = res_w[b] && (!has_m || res_m[b]) && (!has_v || res_v[b]);
                }
            }
            if (w) dev->ops->free(dev, w);
            if (grad) dev->ops->free(dev, grad);
            if (m) dev->ops->free(dev, m);
            if (v) dev->ops->free(dev, v);
        }
        if (ok) {
            /* the update itself, not the weights it is a small change of */
            for (size_t i = 0; i < P; i++) {
                res_w[0][i] -= w0[i];
                res_w[1][i] -= w0[i];
            }
            check_host(opts[o].name, "optim", "w - w0", res_w[0], res_w[1], P, TOL);
            if (has_m)
                check_host(opts[o].name, "optim", has_v ? "m" : "velocity", res_m[0], res_m[1], P, TOL);
            if (has_v)
                check_host(opts[o].name, "optim", "v", res_v[0], res_v[1], P, TOL);
        }
        for (int b = 0; b < 2; b++) {
            free(res_w[b]);
            free(res_m[b]);
            free(res_v[b]);
        }
    }
    free(w0);
    free(g);
    ct_gpu_test_close(be[0]);
    ct_gpu_test_close(be[1]);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* figures and failures interleave in order in a log */
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    for (size_t p = 0; p < sizeof PRECISIONS / sizeof PRECISIONS[0]; p++) {
        prec = &PRECISIONS[p];
        case_counter = 0;  /* each precision's cases draw the same seeds as fp32's */
        printf("==== precision %s: outputs tol %.0e, gradients tol %.0e (with a convolution %.0e)\n", prec->name,
               prec->tol_y, prec->tol_grad, prec->tol_conv_grad);
        dense_cases();
        conv_cases();
        pool_cases();
        relu_pool_cases();
        batchnorm_cases();
        simple_cases();
        network_cases();
        round_close();
    }
    prec = &PRECISIONS[0];
    optimizer_cases();
    return ct_test_done();
}
#else
#include "tests/no_cuda_main.h"
#endif
