/* The CPU backend's oneDNN convolutions (engine/cpu/onednn.c) against its im2col path (conv2d.c,
 * which test_cpu_ops checks against direct loops and finite differences), on the same random
 * inputs: forward with the bias and a fused relu / leaky, input gradients written and added to,
 * weight and bias gradients; each within 1e-5 of the largest value, a NaN never passing; on the
 * plan's thread count and on one thread; with Winograd allowed and not, and that it runs exactly
 * where it may (3x3, stride 1, channels in sixteens). Also that the primitives are reused, that the workspace
 * the plan is told of is enough and one byte less is refused, and, in a build without oneDNN,
 * that its stubs decline every convolution. */
#include <omp.h>
#include <stdint.h>

#include "base/rng.h"
#include "cpu/cpu_ops.h"
#include "cpu/onednn.h"
#include "tests/test_util.h"

typedef struct spec {
    const char *name;
    int n, h, w, c, f, k, stride, same, bias;
} spec;

static float *floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static void fill(float *v, size_t n, ct_rng *rng)
{
    for (size_t i = 0; i < n; i++) v[i] = 2.0f * ct_rng_uniform(rng) - 1.0f;
}

/* max |a - b| over max |b| (at least `floor`); a NaN anywhere gives infinity */
static double rel_err(const float *a, const float *b, size_t n, double floor)
{
    double worst = 0.0, scale = floor > 1e-30 ? floor : 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            return INFINITY;
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return worst / scale;
}

static ct_window_geom geom(const spec *s)
{
    ct_window_geom g = {.n = s->n, .h = s->h, .w = s->w, .c = s->c, .f = s->f, .kh = s->k, .kw = s->k,
                        .stride = s->stride};
    ct_window_dim(s->h, s->k, s->stride, s->same, &g.oh, &g.pad_t);
    ct_window_dim(s->w, s->k, s->stride, s->same, &g.ow, &g.pad_l);
    return g;
}

static void apply(ct_activation act, float *y, size_t n)
{
    ct_cpu_activation_forward(act, y, y, n);
}

static void test_case(ct_cpu_dnnl *d, const spec *s, ct_activation act, int winograd, int seed)
{
    ct_rng rng = {(uint64_t)seed};
    ct_window_geom g = geom(s);
    ct_cpu_dnnl_conv c = {g, s->bias, act, 1, winograd};
    size_t bytes = 0;
    int taken = ct_cpu_dnnl_conv2d_workspace(d, &c, &bytes);
#ifdef CUTRAIN_HAVE_ONEDNN
    /* every convolution of the model zoo's shapes is oneDNN's */
    CHECK_MSG(taken, "oneDNN declined %s", s->name);
    /* Winograd where allowed on its shapes (oneDNN 2.x has it for every x86-64 with AVX-512;
     * elsewhere the direct kernels serve) and its forward takes the activation (relu, not leaky:
     * then the direct forward, beside a Winograd backward), never where not allowed */
    const char *algo = ct_cpu_dnnl_conv2d_algorithm(d, &c);
    int wino_shape = s->k == 3 && s->stride == 1 && s->c % 16 == 0 && s->f % 16 == 0 && act != CT_ACT_LEAKY;
    CHECK_MSG(algo && strcmp(algo, winograd && wino_shape && ct_test_winograd_runs() ? "winograd" : "direct") == 0,
              "%s (%s, winograd %s): ran %s", s->name, ct_activation_names[act], winograd ? "on" : "off",
              algo ? algo : "nothing");
#else
    CHECK(!taken && bytes == 0);
#endif
    if (!taken)
        return;
    size_t nx = (size_t)g.n * g.h * g.w * g.c, nw = (size_t)g.f * g.kh * g.kw * g.c;
    size_t ny = (size_t)g.n * g.oh * g.ow * g.f;
    float *x = floats(nx), *w = floats(nw), *b = floats(g.f), *dy = floats(ny);
    float *y_ref = floats(ny), *y = floats(ny), *ws_ref = floats(ct_cpu_conv2d_workspace(&g));
    /* oneDNN's workspace exactly as large as it asked for (a multiple of 64 bytes): ASan catches
     * a byte beyond; aligned as the backend's, which Winograd's kernels need */
    void *ws = aligned_alloc(64, bytes ? bytes : 64);
    fill(x, nx, &rng), fill(w, nw, &rng), fill(b, g.f, &rng), fill(dy, ny, &rng);
    const float *bias = s->bias ? b : NULL;
    ct_err err = {0};

    ct_cpu_conv2d_forward(&g, x, w, bias, y_ref, ws_ref);
    /* the activations are 1-Lipschitz: the output's error is measured against the pre-activation's
     * scale, as tanh's outputs stay below 1 where the sums reach tens */
    double z_scale = 0.0;
    for (size_t i = 0; i < ny; i++) z_scale = fmax(z_scale, fabs(y_ref[i]));
    apply(act, y_ref, ny);
    for (size_t i = 0; i < ny; i++) y[i] = NAN;
    CHECK_MSG(ct_cpu_dnnl_conv2d_forward(d, &c, x, w, bias, y, ws, bytes, &err) == CT_OK, "%s", err.msg);
    /* the caller applies what oneDNN does not fuse */
    if (!ct_cpu_dnnl_fuses(act))
        apply(act, y, ny);
    double e = rel_err(y, y_ref, ny, z_scale);
    CHECK_MSG(e < 1e-5, "%s (%s) forward off by %g", s->name, ct_activation_names[act], e);

    /* gradients: written over NaN, then added onto a prefilled dx */
    float *dx_ref = floats(nx), *dw_ref = floats(nw), *db_ref = floats(g.f);
    float *dx = floats(nx), *dw = floats(nw), *db = floats(g.f);
    ct_cpu_conv2d_backward(&g, x, w, dy, dx_ref, dw_ref, bias ? db_ref : NULL, ws_ref, 0);
    for (size_t i = 0; i < nx; i++) dx[i] = NAN;
    for (size_t i = 0; i < nw; i++) dw[i] = NAN;
    for (int i = 0; i < g.f; i++) db[i] = NAN;
    CHECK_MSG(ct_cpu_dnnl_conv2d_backward(d, &c, x, w, dy, dx, dw, bias ? db : NULL, 0, ws, bytes, &err) == CT_OK,
              "%s", err.msg);
    CHECK_MSG((e = rel_err(dx, dx_ref, nx, 0)) < 1e-5, "%s dx written off by %g", s->name, e);
    CHECK_MSG((e = rel_err(dw, dw_ref, nw, 0)) < 1e-5, "%s dw off by %g", s->name, e);
    if (bias)
        CHECK_MSG((e = rel_err(db, db_ref, g.f, 0)) < 1e-5, "%s db off by %g", s->name, e);
    for (size_t i = 0; i < nx; i++) {
        dx[i] = 0.25f;
        dx_ref[i] += 0.25f;
    }
    CHECK_MSG(ct_cpu_dnnl_conv2d_backward(d, &c, x, w, dy, dx, NULL, NULL, 1, ws, bytes, &err) == CT_OK, "%s",
              err.msg);
    CHECK_MSG((e = rel_err(dx, dx_ref, nx, 0)) < 1e-5, "%s dx added off by %g", s->name, e);

    /* a workspace smaller than asked for is an error with a message, not a write past its end (on
     * fewer threads than processors a step's primitives may need less than the plan's) */
    if (bytes > 0 && omp_get_max_threads() == omp_get_num_procs()) {
        ct_err small = {0};
        CHECK(ct_cpu_dnnl_conv2d_forward(d, &c, x, w, bias, y, ws, bytes - 1, &small) != CT_OK ||
              ct_cpu_dnnl_conv2d_backward(d, &c, x, w, dy, dx, dw, bias ? db : NULL, 1, ws, bytes - 1, &small) !=
                  CT_OK);
    }
    /* asked again, the cached primitives give the same answer */
    size_t again = 0;
    CHECK(ct_cpu_dnnl_conv2d_workspace(d, &c, &again) && again == bytes);

    free(x), free(w), free(b), free(dy), free(y_ref), free(y), free(ws_ref), free(ws);
    free(dx_ref), free(dw_ref), free(db_ref), free(dx), free(dw), free(db);
}

int main(void)
{
    ct_cpu_dnnl *d = NULL;
    ct_err err = {0};
    CHECK_MSG(ct_cpu_dnnl_create(&d, &err) == CT_OK, "%s", err.msg);
#ifdef CUTRAIN_HAVE_ONEDNN
    CHECK_MSG(d != NULL, "a build with oneDNN made no CPU engine");
#else
    printf("built without oneDNN: checking that its stubs decline\n");
#endif
    static const spec specs[] = {
        /* name                       n  h   w   c   f  k  s same bias */
        {"fmnist_cnn conv1 (1 channel)", 4, 28, 28, 1, 32, 3, 1, 0, 1},
        {"fmnist_cnn conv2",            3, 13, 13, 32, 64, 3, 1, 0, 1},
        {"convnet 5x5 same",            2, 14, 14, 32, 64, 5, 1, 1, 1},
        {"3x3 same, no bias",           2, 8, 8, 16, 16, 3, 1, 1, 0},
        {"3x3 stride 2 same",           2, 9, 9, 8, 24, 3, 2, 1, 1},
        {"3x3 stride 2 valid, odd",     2, 8, 8, 3, 5, 3, 2, 0, 1},
        {"1x1 stride 2 (shortcut)",     2, 8, 8, 16, 32, 1, 2, 0, 0},
        {"1x1",                         2, 5, 5, 7, 3, 1, 1, 0, 1},
        {"odd channels",                2, 7, 6, 5, 7, 3, 1, 1, 1},
        {"resnet 3x3, 64 channels",     2, 8, 8, 64, 64, 3, 1, 1, 0},
        {"3x3 16 -> 32, odd size",      3, 7, 9, 16, 32, 3, 1, 1, 1},
        {"3x3 valid, 32 channels",      2, 10, 10, 32, 32, 3, 1, 0, 1},
    };
    static const ct_activation acts[] = {CT_ACT_LINEAR, CT_ACT_RELU, CT_ACT_LEAKY, CT_ACT_TANH};
    /* the plan's primitives (one thread per processor), then a step on one thread, whose primitives
     * are made for it and fit in the plan's workspace */
    int seed = 1;
    for (int threads = omp_get_num_procs(); threads >= 1; threads = threads > 1 ? 1 : 0) {
        omp_set_num_threads(threads);
        for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
            for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
                for (int winograd = 0; winograd <= 1; winograd++) test_case(d, &specs[i], acts[a], winograd, seed++);
    }
    ct_cpu_dnnl_destroy(d);
    return ct_test_done();
}
