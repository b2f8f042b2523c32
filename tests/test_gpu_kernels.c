/* The CUDA kernels of kernels/ against references on random data: computed here in double
 * precision for bias + activation (every activation, vectorised and scalar paths), SGD (plain,
 * weight decay, momentum, Nesterov; several steps so the momentum buffer carries; also bit for bit
 * against the CPU's ct_cpu_sgd_step, whose order the kernel follows), and softmax
 * cross-entropy (loss sum, gradient, accuracy, ties, in place, evaluation only, bad labels); the
 * CPU backend's own functions (engine/cpu/cpu_ops.h) for activations and their gradients, add,
 * accumulate, column sums (also run twice: bit-identical), dropout (masks bit for bit), padding,
 * max and average pooling (overlapping windows, padding, a window wholly in the padding, ties),
 * Adam and AdamW over several steps, and the non-finite count.
 * Where the kernels follow the CPU's arithmetic operation for operation, values that are not
 * bit-identical are reported as a note (not a failure), to show where the two part; for SGD they
 * are a failure: its kernel is held to the CPU's bits.
 * Exits 77 (skipped) without a GPU or without the CUDA backend. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifdef CUTRAIN_HAVE_CUDA

#include <cuda_runtime.h>

#include "cpu/cpu_ops.h"
#include "tests/gpu_test.h"
#include "base/rng.h"
#include "base/types.h"
#include "kernels/kernels.h"


#define REL_TOL 1e-5

static ct_rng rng = { 12345 };

static float uniform(float lo, float hi) { return lo + (hi - lo) * ct_rng_uniform(&rng); }


static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    GPU_OK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

/* One CHECK per array: all of got within rel * |want| + abs_tol of want, NaN never passing. */
static void check_close(const char *what, const float *got, const double *want, long n, double rel,
                        double abs_tol)
{
    long bad = 0, first = -1;
    for (long i = 0; i < n; i++) {
        double tol = rel * fabs(want[i]) + abs_tol;
        if (!(fabs((double)got[i] - want[i]) <= tol)) {  /* false for NaN too */
            if (first < 0)
                first = i;
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %ld of %ld values differ; first [%ld]: got %.9g, want %.9g", what, bad, n,
              first, first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0);
}

static void sync_launch(const char *what, int rc, cudaStream_t s)
{
    CHECK_MSG(rc == 0, "%s: launcher returned %d (%s)", what, rc, cudaGetErrorString((cudaError_t)rc));
    GPU_OK(cudaStreamSynchronize(s));
}

/* Copies in the test's stream, then waits: a plain cudaMemcpy from pageable memory may return
 * before its data reaches the device, and it is not ordered with a non-blocking stream. */
static void h2d(void *dst, const void *src, size_t bytes, cudaStream_t s)
{
    GPU_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    GPU_OK(cudaStreamSynchronize(s));
}

static void d2h(void *dst, const void *src, size_t bytes, cudaStream_t s)
{
    GPU_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    GPU_OK(cudaStreamSynchronize(s));
}

static void dmemset(void *dst, int value, size_t bytes, cudaStream_t s)
{
    GPU_OK(cudaMemsetAsync(dst, value, bytes, s));
    GPU_OK(cudaStreamSynchronize(s));
}

static float *falloc(long n) { return xmalloc((size_t)n * sizeof(float)); }
static float *dev_floats(long n) { return dev_alloc((size_t)n * sizeof(float)); }

static void fill(float *v, long n, float lo, float hi)
{
    for (long i = 0; i < n; i++)
        v[i] = uniform(lo, hi);
}

/* check_close against a float reference (the CPU backend's output). */
static void check_close_f(const char *what, const float *got, const float *want, long n, double rel,
                          double abs_tol)
{
    double *w = xmalloc((size_t)n * sizeof *w);
    for (long i = 0; i < n; i++)
        w[i] = want[i];
    check_close(what, got, w, n, rel, abs_tol);
    free(w);
}

/* Index of the first value whose bits differ (NaN equals NaN only with the same bits), or -1;
 * *count gets how many differ. */
static long first_bit_diff(const float *got, const float *want, long n, long *count)
{
    long first = -1, bad = 0;
    for (long i = 0; i < n; i++) {
        if (memcmp(got + i, want + i, sizeof(float)) != 0) {
            if (first < 0)
                first = i;
            bad++;
        }
    }
    *count = bad;
    return first;
}

/* One CHECK: every value bit for bit equal to the reference. */
static void check_bits(const char *what, const float *got, const float *want, long n)
{
    long bad;
    long first = first_bit_diff(got, want, n, &bad);
    CHECK_MSG(bad == 0, "%s: %ld of %ld values not bit-identical; first [%ld]: got %.9g, want %.9g", what, bad,
              n, first, first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0);
}

/* Not a check: says how many values differ in their bits from the CPU's, where the kernel follows
 * the CPU's operations in order and the two are expected to agree exactly. */
static void note_bits(const char *what, const float *got, const float *want, long n)
{
    long bad;
    long first = first_bit_diff(got, want, n, &bad);
    if (bad)
        printf("note: %s: %ld of %ld values differ from the CPU's in their last bits; first [%ld]: %.9g vs %.9g\n",
               what, bad, n, first, got[first], want[first]);
}

#define INVALID ((int)cudaErrorInvalidValue)

/* The per-step scalars the optimizer and dropout kernels read on the device. */
static ct_device_step *g_step;

static void set_step(cudaStream_t s, float lr, float bias1, float bias2, unsigned long long seed)
{
    ct_device_step h;
    memset(&h, 0, sizeof h);
    h.lr = lr;
    h.bias1 = bias1;
    h.bias2 = bias2;
    h.dropout_seed = seed;
    h2d(g_step, &h, sizeof h, s);
}

/* ---- bias + activation ---- */

static double ref_act(double x, int act)
{
    switch (act) {
    case CT_ACT_RELU: return x < 0 ? 0 : x;
    case CT_ACT_LEAKY: return x < 0 ? 0.1 * x : x;
    case CT_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case CT_ACT_TANH: return tanh(x);
    case CT_ACT_GELU: return 0.5 * x * erfc(-x / sqrt(2.0));
    default: return x;
    }
}

/* offset (in floats) shifts y and bias off 16-byte alignment to take the scalar path. keep: through
 * ct_launch_bias_activation_keep with the output apart, which must also leave z + bias (the
 * pre-activation, bit for bit the float sum) in z. */
static void test_bias_act_case(cudaStream_t s, long rows, int c, int with_bias, int offset, int act, int keep)
{
    long total = rows * c;
    float *y = xmalloc((size_t)total * sizeof *y), *b = xmalloc((size_t)c * sizeof *b);
    float *out = xmalloc((size_t)total * sizeof *out);
    double *want = xmalloc((size_t)total * sizeof *want);
    for (long i = 0; i < total; i++)
        y[i] = uniform(-6.0f, 6.0f);
    for (int j = 0; j < c; j++)
        b[j] = uniform(-1.0f, 1.0f);
    /* The sum in float, as the kernel does it: the reference checks the activation, not one
     * rounding of the addition. */
    for (long i = 0; i < total; i++)
        want[i] = ref_act((double)(float)(y[i] + (with_bias ? b[i % c] : 0.0f)), act);

    float *dy = dev_alloc((size_t)(total + offset) * sizeof *dy);
    float *db = dev_alloc((size_t)(c + offset) * sizeof *db);
    float *dout = keep ? dev_alloc((size_t)(total + offset) * sizeof *dout) : NULL;
    h2d(dy + offset, y, (size_t)total * sizeof *y, s);
    h2d(db + offset, b, (size_t)c * sizeof *b, s);
    if (dout)
        dmemset(dout, 0xff, (size_t)(total + offset) * sizeof *dout, s);  /* NaN: must be overwritten */
    char what[128];
    snprintf(what, sizeof what, "bias_act %s rows=%ld c=%d bias=%d offset=%d keep=%d", ct_activation_name(act),
             rows, c, with_bias, offset, keep);
    const float *bias = with_bias ? db + offset : NULL;
    if (keep)
        sync_launch(what, ct_launch_bias_activation_keep(dy + offset, bias, dout + offset, rows, c, act, s), s);
    else
        sync_launch(what, ct_launch_bias_activation_forward(dy + offset, bias, rows, c, act, s), s);
    d2h(out, (keep ? dout : dy) + offset, (size_t)total * sizeof *out, s);
    check_close(what, out, want, total, REL_TOL, 1e-7);
    if (keep) {
        float *sum = xmalloc((size_t)total * sizeof *sum);
        for (long i = 0; i < total; i++)
            sum[i] = with_bias ? y[i] + b[i % c] : y[i];
        d2h(out, dy + offset, (size_t)total * sizeof *out, s);
        char zwhat[160];
        snprintf(zwhat, sizeof zwhat, "%s (pre-activation)", what);
        check_bits(zwhat, out, sum, total);
        free(sum);
        GPU_OK(cudaFree(dout));
    }
    GPU_OK(cudaFree(dy));
    GPU_OK(cudaFree(db));
    free(y), free(b), free(out), free(want);
}

static void test_bias_act(cudaStream_t s)
{
    for (int act = 0; act < CT_ACT_COUNT; act++) {
        for (int keep = 0; keep <= 1; keep++) {
            test_bias_act_case(s, 257, 64, 1, 0, act, keep);   /* float4 path */
            test_bias_act_case(s, 37, 13, 1, 0, act, keep);    /* c % 4 != 0: scalar path */
            test_bias_act_case(s, 33, 8, 1, 1, act, keep);     /* misaligned: scalar path */
            test_bias_act_case(s, 19, 12, 0, 0, act, keep);    /* no bias */
        }
    }

    /* NaN survives every activation, so the finite checks downstream still see it. */
    float *d = dev_alloc(4 * sizeof *d);
    for (int act = 0; act < CT_ACT_COUNT; act++) {
        float h[4] = { NAN, 1.0f, -1.0f, NAN };
        h2d(d, h, sizeof h, s);
        sync_launch("bias_act NaN", ct_launch_bias_activation_forward(d, NULL, 1, 4, act, s), s);
        d2h(h, d, sizeof h, s);
        CHECK_MSG(isnan(h[0]) && isnan(h[3]), "activation %s lost a NaN", ct_activation_name(act));
    }
    GPU_OK(cudaFree(d));

    CHECK(ct_launch_bias_activation_forward(NULL, NULL, 0, 4, CT_ACT_RELU, s) == 0);
    CHECK(ct_launch_bias_activation_forward(NULL, NULL, 1, 4, CT_ACT_COUNT, s) == (int)cudaErrorInvalidValue);
    float *e = dev_alloc(4 * sizeof *e);
    CHECK(ct_launch_bias_activation_keep(e, NULL, NULL, 1, 4, CT_ACT_GELU, s) == (int)cudaErrorInvalidValue);
    CHECK(ct_launch_bias_activation_keep(NULL, NULL, e, 1, 4, CT_ACT_GELU, s) == (int)cudaErrorInvalidValue);
    CHECK(ct_launch_bias_activation_keep(NULL, NULL, NULL, 0, 4, CT_ACT_GELU, s) == 0);
    GPU_OK(cudaFree(e));
}

/* ---- SGD ---- */

/* Against a double-precision reference (the formula) within REL_TOL, and against the CPU
 * backend's ct_cpu_sgd_step bit for bit: the kernel follows its operations in order. Every
 * fourth weight is near zero (|w| < 1e-4), where a fused multiply-add's single rounding shows as
 * a relative difference of ~1e-5 after a few steps. */
static void test_sgd_case(cudaStream_t s, long n, int offset, float lr, float momentum, int nesterov,
                          float wd)
{
    const int steps = 3;
    float *w = xmalloc((size_t)n * sizeof *w), *g = xmalloc((size_t)n * steps * sizeof *g);
    float *out = xmalloc((size_t)n * sizeof *out);
    float *cw = xmalloc((size_t)n * sizeof *cw), *cv = xmalloc((size_t)n * sizeof *cv);
    double *rw = xmalloc((size_t)n * sizeof *rw), *rv = xmalloc((size_t)n * sizeof *rv);
    for (long i = 0; i < n; i++) {
        w[i] = i % 4 == 3 ? uniform(-1e-4f, 1e-4f) : uniform(-1.0f, 1.0f);
        rw[i] = w[i];
        rv[i] = 0.0;
        cw[i] = w[i];
        cv[i] = 0.0f;
    }
    for (long i = 0; i < n * steps; i++)
        g[i] = uniform(-1.0f, 1.0f);

    float *dw = dev_alloc((size_t)(n + offset) * sizeof *dw);
    float *dg = dev_alloc((size_t)(n + offset) * sizeof *dg);
    float *dv = momentum != 0.0f ? dev_alloc((size_t)(n + offset) * sizeof *dv) : NULL;
    h2d(dw + offset, w, (size_t)n * sizeof *w, s);
    if (dv)
        dmemset(dv, 0, (size_t)(n + offset) * sizeof *dv, s);

    char what[160];
    snprintf(what, sizeof what, "sgd n=%ld offset=%d lr=%g momentum=%g nesterov=%d wd=%g", n, offset, lr,
             momentum, nesterov, wd);
    for (int t = 0; t < steps; t++) {
        const float *gt = g + (size_t)t * n;
        h2d(dg + offset, gt, (size_t)n * sizeof *dg, s);
        /* the learning rate changes each step: the kernel must read this step's from the device */
        const float lr_t = lr * (1.0f - 0.25f * (float)t);
        set_step(s, lr_t, 1.0f, 1.0f, 0);
        sync_launch(what, ct_launch_sgd_step(dw + offset, dg + offset, dv ? dv + offset : NULL, n, g_step,
                                             momentum, nesterov, wd, s), s);
        ct_cpu_sgd_step(cw, gt, momentum != 0.0f ? cv : NULL, (size_t)n, lr_t, momentum, nesterov, wd);
        for (long i = 0; i < n; i++) {
            double d = (double)gt[i] + (double)wd * rw[i];
            if (momentum != 0.0f) {
                rv[i] = momentum * rv[i] + d;
                d = nesterov ? d + momentum * rv[i] : rv[i];
            }
            rw[i] -= lr_t * d;
        }
    }
    char cpu_what[200];
    snprintf(cpu_what, sizeof cpu_what, "%s vs ct_cpu_sgd_step", what);
    d2h(out, dw + offset, (size_t)n * sizeof *out, s);
    check_close(what, out, rw, n, REL_TOL, 1e-6);  /* w, vel are O(1): a few ulps absolute */
    check_bits(cpu_what, out, cw, n);
    if (dv) {
        d2h(out, dv + offset, (size_t)n * sizeof *out, s);
        char vwhat[240];
        snprintf(vwhat, sizeof vwhat, "%s (velocity)", what);
        check_close(vwhat, out, rv, n, REL_TOL, 1e-6);
        snprintf(vwhat, sizeof vwhat, "%.200s (velocity)", cpu_what);
        check_bits(vwhat, out, cv, n);
        GPU_OK(cudaFree(dv));
    }
    GPU_OK(cudaFree(dw));
    GPU_OK(cudaFree(dg));
    free(w), free(g), free(out), free(rw), free(rv), free(cw), free(cv);
}

static void test_sgd(cudaStream_t s)
{
    const long sizes[] = { 3, 1000003 };   /* below one float4; and with a tail of 3 */
    for (int si = 0; si < 2; si++) {
        for (int offset = 0; offset <= 1; offset++) {   /* aligned (float4) and scalar paths */
            long n = sizes[si];
            test_sgd_case(s, n, offset, 0.1f, 0.0f, 0, 0.0f);
            test_sgd_case(s, n, offset, 0.1f, 0.0f, 0, 5e-4f);
            test_sgd_case(s, n, offset, 0.05f, 0.9f, 0, 0.0f);
            test_sgd_case(s, n, offset, 0.05f, 0.9f, 0, 5e-4f);
            test_sgd_case(s, n, offset, 0.05f, 0.9f, 1, 5e-4f);
        }
    }
    float *d = dev_alloc(16);
    CHECK(ct_launch_sgd_step(d, d, NULL, 4, g_step, 0.9f, 0, 0.0f, s) == INVALID);
    CHECK(ct_launch_sgd_step(d, d, NULL, 4, g_step, 0.0f, 1, 0.0f, s) == INVALID);
    CHECK(ct_launch_sgd_step(d, d, NULL, 4, NULL, 0.0f, 0, 0.0f, s) == INVALID);
    CHECK(ct_launch_sgd_step(NULL, NULL, NULL, 0, g_step, 0.0f, 0, 0.0f, s) == 0);
    GPU_OK(cudaFree(d));
}

/* ---- softmax cross-entropy ---- */

/* mode 0: separate dlogits; 1: in place (dlogits == logits); 2: evaluation (dlogits NULL).
 * ties: every third row is constant, so argmax must pick index 0. */
static void test_xent_case(cudaStream_t s, int n, int k, int mode)
{
    float *x = xmalloc((size_t)n * k * sizeof *x), *out = xmalloc((size_t)n * k * sizeof *out);
    double *want = xmalloc((size_t)n * k * sizeof *want);
    int *y = xmalloc((size_t)n * sizeof *y);
    const float grad_scale = 1.0f / (float)n;
    double want_loss = 0.0;
    unsigned want_correct = 0;
    for (int r = 0; r < n; r++) {
        float *xr = x + (size_t)r * k;
        int tie = r % 3 == 0;
        float tv = uniform(-2.0f, 2.0f);
        for (int j = 0; j < k; j++)
            xr[j] = tie ? tv : uniform(-5.0f, 5.0f);
        y[r] = tie && r % 2 == 0 ? 0 : (int)(ct_rng_uniform(&rng) * k) % k;
        double m = xr[0];
        int am = 0;
        for (int j = 1; j < k; j++)
            if (xr[j] > m) {
                m = xr[j];
                am = j;
            }
        double sum = 0.0;
        for (int j = 0; j < k; j++)
            sum += exp(xr[j] - m);
        want_loss += log(sum) - (xr[y[r]] - m);
        want_correct += am == y[r];
        for (int j = 0; j < k; j++)
            want[(size_t)r * k + j] = (exp(xr[j] - m) / sum - (j == y[r])) * grad_scale;
    }

    float *dx = dev_alloc((size_t)n * k * sizeof *dx), *dd = dev_alloc((size_t)n * k * sizeof *dd);
    int *dy = dev_alloc((size_t)n * sizeof *dy);
    float *dloss = dev_alloc(sizeof *dloss);
    unsigned *dcorrect = dev_alloc(sizeof *dcorrect);
    h2d(dx, x, (size_t)n * k * sizeof *x, s);
    h2d(dy, y, (size_t)n * sizeof *y, s);
    dmemset(dloss, 0, sizeof *dloss, s);
    dmemset(dcorrect, 0, sizeof *dcorrect, s);
    float *grad = mode == 0 ? dd : mode == 1 ? dx : NULL;

    char what[96];
    snprintf(what, sizeof what, "softmax_xent n=%d k=%d mode=%d", n, k, mode);
    sync_launch(what, ct_launch_softmax_xent(dx, dy, grad, dloss, dcorrect, n, k, grad_scale, s), s);
    float loss = 0.0f;
    unsigned correct = 0;
    d2h(&loss, dloss, sizeof loss, s);
    d2h(&correct, dcorrect, sizeof correct, s);
    CHECK_MSG(fabs(loss - want_loss) <= REL_TOL * fabs(want_loss) + 1e-6, "%s: loss sum %.9g, want %.9g", what,
              loss, want_loss);
    CHECK_MSG(correct == want_correct, "%s: correct %u, want %u", what, correct, want_correct);
    if (grad) {
        d2h(out, grad, (size_t)n * k * sizeof *out, s);
        check_close(what, out, want, (long)n * k, REL_TOL, 1e-7 * grad_scale);
    }
    GPU_OK(cudaFree(dx));
    GPU_OK(cudaFree(dd));
    GPU_OK(cudaFree(dy));
    GPU_OK(cudaFree(dloss));
    GPU_OK(cudaFree(dcorrect));
    free(x), free(out), free(want), free(y);
}

static void test_xent(cudaStream_t s)
{
    test_xent_case(s, 1000, 10, 0);
    test_xent_case(s, 37, 100, 0);     /* k > 32: lanes loop over the row */
    test_xent_case(s, 5, 1, 0);        /* one class: loss 0, gradient 0 */
    test_xent_case(s, 16384, 10, 0);   /* many blocks adding into one accumulator */
    test_xent_case(s, 301, 33, 1);     /* in place */
    test_xent_case(s, 301, 10, 2);     /* evaluation: no gradient */

    /* A label outside [0, k) makes the loss NaN instead of reading out of bounds. */
    float x[4] = { 0.5f, -1.0f, 2.0f, 0.0f };
    int y[2] = { 1, 7 };
    float *dx = dev_alloc(sizeof x), *dloss = dev_alloc(sizeof(float));
    int *dy = dev_alloc(sizeof y);
    h2d(dx, x, sizeof x, s);
    h2d(dy, y, sizeof y, s);
    dmemset(dloss, 0, sizeof(float), s);
    sync_launch("softmax_xent bad label", ct_launch_softmax_xent(dx, dy, NULL, dloss, NULL, 2, 2, 1.0f, s), s);
    float loss = 0.0f;
    d2h(&loss, dloss, sizeof loss, s);
    CHECK_MSG(isnan(loss), "bad label gave loss %g, want NaN", loss);
    GPU_OK(cudaFree(dx));
    GPU_OK(cudaFree(dy));
    GPU_OK(cudaFree(dloss));

    CHECK(ct_launch_softmax_xent(NULL, NULL, NULL, NULL, NULL, 0, 10, 1.0f, s) == 0);
    CHECK(ct_launch_softmax_xent(NULL, NULL, NULL, NULL, NULL, 4, 0, 1.0f, s) == (int)cudaErrorInvalidValue);
}

/* ---- activations and their gradients, against the CPU backend ---- */

static void test_activation_case(cudaStream_t s, long n, int act)
{
    float *x = falloc(n), *y = falloc(n), *dy = falloc(n), *dx0 = falloc(n), *want = falloc(n),
          *out = falloc(n);
    fill(x, n, -6.0f, 6.0f);
    x[0] = 0.0f;  /* the kink of relu and leaky: no gradient either way */
    fill(dy, n, -1.0f, 1.0f);
    fill(dx0, n, -1.0f, 1.0f);
    ct_cpu_activation_forward((ct_activation)act, x, y, (size_t)n);

    float *d_x = dev_floats(n), *d_y = dev_floats(n), *d_dy = dev_floats(n), *d_dx = dev_floats(n);
    h2d(d_x, x, (size_t)n * sizeof *x, s);
    char what[128];
    snprintf(what, sizeof what, "activation_forward %s n=%ld", ct_activation_name(act), n);
    sync_launch(what, ct_launch_activation_forward(d_x, d_y, n, act, s), s);
    d2h(out, d_y, (size_t)n * sizeof *out, s);
    /* libm and CUDA's math differ by ulps, and gelu's erfc form is more exact than the CPU's 1 + erf
     * for negative x: close, not bit-identical */
    check_close_f(what, out, y, n, 1e-5, 1e-6);

    snprintf(what, sizeof what, "activation_forward %s n=%ld in place", ct_activation_name(act), n);
    sync_launch(what, ct_launch_activation_forward(d_x, d_x, n, act, s), s);
    d2h(out, d_x, (size_t)n * sizeof *out, s);
    check_close_f(what, out, y, n, 1e-5, 1e-6);

    /* Backward from the CPU's own y, so relu, leaky, sigmoid and tanh see the same numbers as the
     * CPU (which takes them from x). relu and leaky get no x at all, as the contract allows. */
    h2d(d_x, x, (size_t)n * sizeof *x, s);
    h2d(d_y, y, (size_t)n * sizeof *y, s);
    h2d(d_dy, dy, (size_t)n * sizeof *dy, s);
    const float *gx = act == CT_ACT_RELU || act == CT_ACT_LEAKY ? NULL : d_x;
    for (int accumulate = 0; accumulate <= 1; accumulate++) {
        if (accumulate) {
            memcpy(want, dx0, (size_t)n * sizeof *want);
            h2d(d_dx, dx0, (size_t)n * sizeof *dx0, s);
        } else {
            memset(want, 0, (size_t)n * sizeof *want);
            dmemset(d_dx, 0xff, (size_t)n * sizeof(float), s);  /* NaN: must be overwritten */
        }
        ct_cpu_activation_backward((ct_activation)act, x, y, dy, want, (size_t)n, accumulate);
        snprintf(what, sizeof what, "activation_backward %s n=%ld accumulate=%d", ct_activation_name(act), n,
                 accumulate);
        sync_launch(what, ct_launch_activation_backward(gx, d_y, d_dy, d_dx, n, act, accumulate, s), s);
        d2h(out, d_dx, (size_t)n * sizeof *out, s);
        check_close_f(what, out, want, n, 1e-5, 1e-6);
        if (act != CT_ACT_GELU)
            note_bits(what, out, want, n);
    }
    GPU_OK(cudaFree(d_x));
    GPU_OK(cudaFree(d_y));
    GPU_OK(cudaFree(d_dy));
    GPU_OK(cudaFree(d_dx));
    free(x), free(y), free(dy), free(dx0), free(want), free(out);
}

static void test_activation(cudaStream_t s)
{
    for (int act = 0; act < CT_ACT_COUNT; act++) {
        test_activation_case(s, 1, act);
        test_activation_case(s, 1001, act);
        test_activation_case(s, 300007, act);  /* several blocks */
    }
    /* NaN survives every activation forward. */
    float *d = dev_floats(3);
    for (int act = 0; act < CT_ACT_COUNT; act++) {
        float h[3] = { NAN, 1.0f, -1.0f };
        h2d(d, h, sizeof h, s);
        sync_launch("activation_forward NaN", ct_launch_activation_forward(d, d, 3, act, s), s);
        d2h(h, d, sizeof h, s);
        CHECK_MSG(isnan(h[0]), "activation_forward %s lost a NaN", ct_activation_name(act));
    }
    CHECK(ct_launch_activation_forward(NULL, NULL, 0, CT_ACT_RELU, s) == 0);
    CHECK(ct_launch_activation_forward(d, d, 3, CT_ACT_COUNT, s) == INVALID);
    CHECK(ct_launch_activation_forward(d, d, -1, CT_ACT_RELU, s) == INVALID);
    CHECK(ct_launch_activation_backward(NULL, d, d, d, 3, CT_ACT_GELU, 1, s) == INVALID);    /* gelu needs x */
    CHECK(ct_launch_activation_backward(d, NULL, d, d, 3, CT_ACT_SIGMOID, 1, s) == INVALID); /* sigmoid needs y */
    CHECK(ct_launch_activation_backward(d, d, NULL, d, 3, CT_ACT_RELU, 1, s) == INVALID);
    CHECK(ct_launch_activation_backward(NULL, NULL, NULL, NULL, 0, CT_ACT_RELU, 1, s) == 0);
    GPU_OK(cudaFree(d));
}

/* ---- add, accumulate ---- */

static void test_add(cudaStream_t s)
{
    const long n = 100003;
    float *a = falloc(n), *b = falloc(n), *want = falloc(n), *out = falloc(n);
    fill(a, n, -1.0f, 1.0f);
    fill(b, n, -1.0f, 1.0f);
    ct_cpu_add_forward(a, b, want, (size_t)n);
    float *da = dev_floats(n), *db = dev_floats(n), *dy = dev_floats(n);
    for (int mode = 0; mode < 3; mode++) {  /* y separate, y == a, y == b */
        h2d(da, a, (size_t)n * sizeof *a, s);
        h2d(db, b, (size_t)n * sizeof *b, s);
        float *y = mode == 0 ? dy : mode == 1 ? da : db;
        char what[64];
        snprintf(what, sizeof what, "add mode=%d", mode);
        sync_launch(what, ct_launch_add(da, db, y, n, s), s);
        d2h(out, y, (size_t)n * sizeof *out, s);
        check_bits(what, out, want, n);
    }
    /* accumulate: dx (here b) += dy (here a); and written over NaN (accumulate = 0) */
    for (int accumulate = 0; accumulate <= 1; accumulate++) {
        memcpy(want, b, (size_t)n * sizeof *want);
        ct_cpu_accumulate(a, want, (size_t)n, accumulate);
        h2d(da, a, (size_t)n * sizeof *a, s);
        if (accumulate)
            h2d(db, b, (size_t)n * sizeof *b, s);
        else
            dmemset(db, 0xff, (size_t)n * sizeof(float), s);
        char what[64];
        snprintf(what, sizeof what, "accumulate=%d", accumulate);
        sync_launch(what, ct_launch_accumulate(da, db, n, accumulate, s), s);
        d2h(out, db, (size_t)n * sizeof *out, s);
        check_bits(what, out, want, n);
    }

    CHECK(ct_launch_add(NULL, NULL, NULL, 0, s) == 0);
    CHECK(ct_launch_add(da, NULL, dy, 4, s) == INVALID);
    CHECK(ct_launch_accumulate(NULL, NULL, 0, 1, s) == 0);
    CHECK(ct_launch_accumulate(da, db, -1, 1, s) == INVALID);
    GPU_OK(cudaFree(da));
    GPU_OK(cudaFree(db));
    GPU_OK(cudaFree(dy));
    free(a), free(b), free(want), free(out);
}

/* ---- column sums ---- */

/* tall = 1: the two-pass launcher with a partials workspace (the convolution bias path). */
static void test_column_sums_case(cudaStream_t s, long rows, int c, int tall)
{
    const long total = rows * c;
    float *dy = falloc(total), *want = falloc(c), *out = falloc(c), *again = falloc(c);
    fill(dy, total, -1.0f, 1.0f);
    ct_cpu_column_sums(dy, want, (size_t)rows, c);

    float *d_dy = dev_floats(total), *d_db = dev_floats(c);
    h2d(d_dy, dy, (size_t)total * sizeof *dy, s);
    char what[96];
    snprintf(what, sizeof what, "column_sums%s rows=%ld c=%d", tall ? "_tall" : "", rows, c);
    size_t ws_bytes = (size_t)1024 * (size_t)c * sizeof(double);
    void *ws = NULL;
    if (tall)
        GPU_OK(cudaMalloc(&ws, ws_bytes));
    for (int run = 0; run < 2; run++) {
        dmemset(d_db, 0xff, (size_t)c * sizeof(float), s);  /* NaN: the sums are written, not added */
        sync_launch(what, tall ? ct_launch_column_sums_tall(d_dy, d_db, rows, c, ws, ws_bytes, s)
                               : ct_launch_column_sums(d_dy, d_db, rows, c, s), s);
        d2h(run ? again : out, d_db, (size_t)c * sizeof *out, s);
    }
    if (ws)
        GPU_OK(cudaFree(ws));
    /* both sum in double, in different orders: at most the last bit of the float differs */
    check_close_f(what, out, want, c, 1e-6, 1e-6);
    char rwhat[128];
    snprintf(rwhat, sizeof rwhat, "%s (run twice)", what);
    check_bits(rwhat, again, out, c);
    GPU_OK(cudaFree(d_dy));
    GPU_OK(cudaFree(d_db));
    free(dy), free(want), free(out), free(again);
}

static void test_column_sums(cudaStream_t s)
{
    test_column_sums_case(s, 1, 1, 0);
    test_column_sums_case(s, 37, 13, 0);
    test_column_sums_case(s, 31, 32, 0);     /* fewer rows than row lanes */
    test_column_sums_case(s, 1000, 37, 0);   /* two column tiles, the second nearly empty */
    test_column_sums_case(s, 4097, 70, 0);
    test_column_sums_case(s, 65536, 10, 0);  /* tall and narrow: long loops per lane */
    test_column_sums_case(s, 3, 1025, 0);
    test_column_sums_case(s, 100, 7, 1);     /* short: falls back to one pass */
    test_column_sums_case(s, 173056, 32, 1); /* fmnist_cnn conv1's bias at batch 256 */
    test_column_sums_case(s, 1000003, 64, 1);/* 1024 chunks, a short last one */
    test_column_sums_case(s, 5000, 70, 1);   /* chunks of 512 rows, three column tiles */

    float *d = dev_floats(4);
    CHECK(ct_launch_column_sums(NULL, NULL, 0, 4, s) == 0);
    CHECK(ct_launch_column_sums(d, d, 1, 0, s) == INVALID);
    CHECK(ct_launch_column_sums(d, NULL, 1, 4, s) == INVALID);
    GPU_OK(cudaFree(d));
}

/* ---- dropout ---- */

static void test_dropout_case(cudaStream_t s, long n, float rate, unsigned long long seed,
                              unsigned long long stream_id)
{
    float *x = falloc(n), *want = falloc(n), *out = falloc(n), *dy = falloc(n), *dx0 = falloc(n);
    uint8_t *mask = xmalloc((size_t)n), *got_mask = xmalloc((size_t)n);
    fill(x, n, -2.0f, 2.0f);
    fill(dy, n, -1.0f, 1.0f);
    fill(dx0, n, -1.0f, 1.0f);
    ct_cpu_dropout_forward(x, want, mask, (size_t)n, rate, seed, stream_id);

    float *d_x = dev_floats(n), *d_y = dev_floats(n), *d_dx = dev_floats(n);
    unsigned char *d_mask = dev_alloc((size_t)n);
    h2d(d_x, x, (size_t)n * sizeof *x, s);
    set_step(s, 0.0f, 1.0f, 1.0f, seed);
    char what[128];
    snprintf(what, sizeof what, "dropout_forward n=%ld rate=%g seed=%llx stream=%llu", n, rate, seed, stream_id);
    sync_launch(what, ct_launch_dropout_forward(d_x, d_y, d_mask, n, rate, g_step, stream_id, s), s);
    d2h(out, d_y, (size_t)n * sizeof *out, s);
    d2h(got_mask, d_mask, (size_t)n, s);
    long bad = 0, first = -1, kept = 0;
    for (long i = 0; i < n; i++) {
        kept += mask[i];
        if (got_mask[i] != mask[i]) {
            if (first < 0)
                first = i;
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %ld of %ld mask bytes differ from the CPU's; first [%ld]: %d, want %d", what, bad, n,
              first, first >= 0 ? got_mask[first] : 0, first >= 0 ? mask[first] : 0);
    check_bits(what, out, want, n);
    if (n >= 10000) {  /* the masks are right only if they are also random */
        double frac = (double)kept / (double)n;
        CHECK_MSG(fabs(frac - (1.0 - rate)) < 0.01, "%s: kept %.4f, want about %.4f", what, frac, 1.0 - rate);
    }

    /* backward through the CPU's mask, added to dx0 and written over NaN */
    h2d(d_mask, mask, (size_t)n, s);
    h2d(d_y, dy, (size_t)n * sizeof *dy, s);
    for (int accumulate = 0; accumulate <= 1; accumulate++) {
        if (accumulate)
            h2d(d_dx, dx0, (size_t)n * sizeof *dx0, s);
        else
            dmemset(d_dx, 0xff, (size_t)n * sizeof(float), s);
        memcpy(want, dx0, (size_t)n * sizeof *want);
        ct_cpu_dropout_backward(dy, mask, want, (size_t)n, rate, accumulate);
        snprintf(what, sizeof what, "dropout_backward n=%ld rate=%g accumulate=%d", n, rate, accumulate);
        sync_launch(what, ct_launch_dropout_backward(d_y, d_mask, d_dx, n, rate, accumulate, s), s);
        d2h(out, d_dx, (size_t)n * sizeof *out, s);
        check_close_f(what, out, want, n, 1e-6, 0.0);
        note_bits(what, out, want, n);
    }

    GPU_OK(cudaFree(d_x));
    GPU_OK(cudaFree(d_y));
    GPU_OK(cudaFree(d_dx));
    GPU_OK(cudaFree(d_mask));
    free(x), free(want), free(out), free(dy), free(dx0), free(mask), free(got_mask);
}

static void test_dropout(cudaStream_t s)
{
    test_dropout_case(s, 100003, 0.5f, 0x0123456789abcdefULL, 42);
    test_dropout_case(s, 100003, 0.5f, 0x0123456789abcdeeULL, 42);  /* the seed comes from the device */
    test_dropout_case(s, 100003, 0.5f, 0x0123456789abcdefULL, 43);
    test_dropout_case(s, 77777, 0.3f, 0xfedcba9876543210ULL, 0x100000001ULL);
    test_dropout_case(s, 1000, 0.0f, 7, 1);  /* nothing dropped, nothing scaled */
    test_dropout_case(s, 1000, 1.0f, 7, 1);  /* everything dropped */
    test_dropout_case(s, 1, 0.5f, 3, 3);

    float *d = dev_floats(4);
    unsigned char *m = dev_alloc(4);
    CHECK(ct_launch_dropout_forward(d, d, m, 4, 1.5f, g_step, 0, s) == INVALID);
    CHECK(ct_launch_dropout_forward(d, d, m, 4, NAN, g_step, 0, s) == INVALID);
    CHECK(ct_launch_dropout_forward(d, d, m, 4, 0.5f, NULL, 0, s) == INVALID);
    CHECK(ct_launch_dropout_forward(NULL, NULL, NULL, 0, 0.5f, NULL, 0, s) == 0);
    CHECK(ct_launch_dropout_backward(d, NULL, d, 4, 0.5f, 1, s) == INVALID);
    CHECK(ct_launch_dropout_backward(NULL, NULL, NULL, 0, 0.5f, 1, s) == 0);
    GPU_OK(cudaFree(d));
    GPU_OK(cudaFree(m));
}

/* ---- padding ---- */

static void test_pad_case(cudaStream_t s, int n, int h, int w, int c, int hp, int wp)
{
    const long nx = (long)n * h * w * c, np = (long)n * hp * wp * c;
    float *x = falloc(nx), *xp = falloc(np), *want = falloc(np > nx ? np : nx), *out = falloc(np > nx ? np : nx);
    float *dx0 = falloc(nx);
    fill(x, nx, -1.0f, 1.0f);
    fill(xp, np, -1.0f, 1.0f);
    fill(dx0, nx, -1.0f, 1.0f);
    float *d_x = dev_floats(nx), *d_xp = dev_floats(np);
    h2d(d_x, x, (size_t)nx * sizeof *x, s);
    dmemset(d_xp, 0xff, (size_t)np * sizeof(float), s);  /* NaN: every element must be written */

    for (long i = 0; i < np; i++) {
        long ch = i % c, p = i / c, xx = p % wp, yy = (p / wp) % hp, sm = p / wp / hp;
        want[i] = yy < h && xx < w ? x[((sm * h + yy) * w + xx) * c + ch] : 0.0f;
    }
    char what[128];
    snprintf(what, sizeof what, "pad_nhwc (%d,%d,%d,%d) -> (%d,%d)", n, h, w, c, hp, wp);
    sync_launch(what, ct_launch_pad_nhwc(d_x, d_xp, n, h, w, c, hp, wp, s), s);
    d2h(out, d_xp, (size_t)np * sizeof *out, s);
    check_bits(what, out, want, np);

    /* crop back: dx += xp's top-left corner, or dx = it over NaN */
    h2d(d_xp, xp, (size_t)np * sizeof *xp, s);
    for (int accumulate = 0; accumulate <= 1; accumulate++) {
        if (accumulate)
            h2d(d_x, dx0, (size_t)nx * sizeof *dx0, s);
        else
            dmemset(d_x, 0xff, (size_t)nx * sizeof(float), s);
        for (long i = 0; i < nx; i++) {
            long ch = i % c, p = i / c, xx = p % w, yy = (p / w) % h, sm = p / w / h;
            want[i] = (accumulate ? dx0[i] : 0.0f) + xp[((sm * hp + yy) * wp + xx) * c + ch];
        }
        snprintf(what, sizeof what, "crop_accumulate_nhwc (%d,%d,%d,%d) <- (%d,%d) accumulate=%d", n, h, w, c, hp,
                 wp, accumulate);
        sync_launch(what, ct_launch_crop_accumulate_nhwc(d_xp, d_x, n, h, w, c, hp, wp, accumulate, s), s);
        d2h(out, d_x, (size_t)nx * sizeof *out, s);
        check_bits(what, out, want, nx);
    }

    GPU_OK(cudaFree(d_x));
    GPU_OK(cudaFree(d_xp));
    free(x), free(xp), free(want), free(out), free(dx0);
}

static void test_pad(cudaStream_t s)
{
    test_pad_case(s, 3, 5, 7, 3, 6, 9);
    test_pad_case(s, 2, 4, 4, 1, 4, 5);    /* right only */
    test_pad_case(s, 2, 4, 4, 5, 5, 4);    /* bottom only */
    test_pad_case(s, 1, 3, 3, 2, 3, 3);    /* no padding: a copy */
    test_pad_case(s, 64, 13, 13, 32, 14, 14);

    float *d = dev_floats(16);
    CHECK(ct_launch_pad_nhwc(d, d, 1, 2, 2, 1, 1, 2, s) == INVALID);  /* hp < h */
    CHECK(ct_launch_pad_nhwc(NULL, NULL, 0, 2, 2, 1, 3, 3, s) == 0);
    CHECK(ct_launch_crop_accumulate_nhwc(d, d, 1, 2, 2, 1, 2, 1, 1, s) == INVALID);  /* wp < w */
    CHECK(ct_launch_crop_accumulate_nhwc(NULL, NULL, 1, 0, 2, 1, 2, 2, 1, s) == 0);
    GPU_OK(cudaFree(d));
}

/* ---- pooling ---- */

/* A pool's window: as many output channels as input ones (f = c). */
static ct_window_geom pool_geom(int n, int h, int w, int c, int kh, int kw, int stride, int pad_t, int pad_l,
                                int oh, int ow)
{
    ct_window_geom g = { n, h, w, c, c, kh, kw, stride, pad_t, pad_l, oh, ow };
    return g;
}

static void test_pool_case(cudaStream_t s, ct_window_geom g)
{
    const ct_window_geom *d = &g;  /* the CPU's and the kernels' geometry are one type */
    const long nx = (long)g.n * g.h * g.w * g.c, ny = (long)g.n * g.oh * g.ow * g.c;
    float *x = falloc(nx), *y = falloc(ny), *dy = falloc(ny), *dx0 = falloc(nx), *want = falloc(nx);
    float *out = falloc(nx > ny ? nx : ny), *again = falloc(nx);
    int32_t *am = xmalloc((size_t)ny * sizeof *am), *got_am = xmalloc((size_t)ny * sizeof *got_am);
    /* values on a grid of 9 levels: many ties, so the first maximum must win */
    for (long i = 0; i < nx; i++)
        x[i] = floorf(uniform(-2.0f, 2.5f) * 2.0f) * 0.5f;
    fill(dy, ny, -1.0f, 1.0f);
    fill(dx0, nx, -1.0f, 1.0f);

    float *d_x = dev_floats(nx), *d_y = dev_floats(ny), *d_dy = dev_floats(ny), *d_dx = dev_floats(nx);
    int *d_am = dev_alloc((size_t)ny * sizeof *d_am);
    h2d(d_x, x, (size_t)nx * sizeof *x, s);
    h2d(d_dy, dy, (size_t)ny * sizeof *dy, s);
    char what[192], geo[128];
    snprintf(geo, sizeof geo, "(%d,%d,%d,%d) k=%dx%d stride=%d pad=%d,%d out=%dx%d", g.n, g.h, g.w, g.c, g.kh, g.kw,
             g.stride, g.pad_t, g.pad_l, g.oh, g.ow);

    /* max: values and argmax exactly the CPU's */
    ct_cpu_maxpool_forward(&g, x, y, am);
    snprintf(what, sizeof what, "maxpool_forward %s", geo);
    sync_launch(what, ct_launch_maxpool_forward(d, d_x, d_y, d_am, s), s);
    d2h(out, d_y, (size_t)ny * sizeof *out, s);
    d2h(got_am, d_am, (size_t)ny * sizeof *got_am, s);
    check_bits(what, out, y, ny);
    long bad = 0, first = -1, empty = 0;
    for (long i = 0; i < ny; i++) {
        empty += am[i] < 0;
        if (got_am[i] != am[i]) {
            if (first < 0)
                first = i;
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %ld of %ld argmax differ; first [%ld]: %d, want %d", what, bad, ny, first,
              first >= 0 ? got_am[first] : 0, first >= 0 ? am[first] : 0);

    /* max backward through the CPU's argmax, added to dx0 and written over NaN (cells no window
     * picks included); run twice for determinism */
    h2d(d_am, am, (size_t)ny * sizeof *am, s);
    for (int accumulate = 0; accumulate <= 1; accumulate++) {
        memcpy(want, dx0, (size_t)nx * sizeof *want);
        ct_cpu_maxpool_backward(&g, dy, am, NULL, want, accumulate);
        snprintf(what, sizeof what, "maxpool_backward %s accumulate=%d", geo, accumulate);
        for (int run = 0; run < 2; run++) {
            if (accumulate)
                h2d(d_dx, dx0, (size_t)nx * sizeof *dx0, s);
            else
                dmemset(d_dx, 0xff, (size_t)nx * sizeof(float), s);
            sync_launch(what, ct_launch_maxpool_backward(d, d_dy, d_am, d_dx, accumulate, s), s);
            d2h(run ? again : out, d_dx, (size_t)nx * sizeof *out, s);
        }
        check_close_f(what, out, want, nx, 1e-6, 1e-7);
        note_bits(what, out, want, nx);
        snprintf(what, sizeof what, "maxpool_backward %s accumulate=%d (run twice)", geo, accumulate);
        check_bits(what, again, out, nx);
    }

    /* average, on continuous values */
    fill(x, nx, -1.0f, 1.0f);
    h2d(d_x, x, (size_t)nx * sizeof *x, s);
    ct_cpu_avgpool_forward(&g, x, y);
    snprintf(what, sizeof what, "avgpool_forward %s", geo);
    sync_launch(what, ct_launch_avgpool_forward(d, d_x, d_y, s), s);
    d2h(out, d_y, (size_t)ny * sizeof *out, s);
    check_close_f(what, out, y, ny, 1e-6, 1e-7);
    note_bits(what, out, y, ny);

    for (int accumulate = 0; accumulate <= 1; accumulate++) {
        memcpy(want, dx0, (size_t)nx * sizeof *want);
        ct_cpu_avgpool_backward(&g, dy, want, accumulate);
        snprintf(what, sizeof what, "avgpool_backward %s accumulate=%d", geo, accumulate);
        if (accumulate)
            h2d(d_dx, dx0, (size_t)nx * sizeof *dx0, s);
        else
            dmemset(d_dx, 0xff, (size_t)nx * sizeof(float), s);
        sync_launch(what, ct_launch_avgpool_backward(d, d_dy, d_dx, accumulate, s), s);
        d2h(out, d_dx, (size_t)nx * sizeof *out, s);
        check_close_f(what, out, want, nx, 1e-6, 1e-7);
        note_bits(what, out, want, nx);
    }

    if (empty)
        printf("pool %s: %ld outputs wholly in the padding\n", geo, empty);
    GPU_OK(cudaFree(d_x));
    GPU_OK(cudaFree(d_y));
    GPU_OK(cudaFree(d_dy));
    GPU_OK(cudaFree(d_dx));
    GPU_OK(cudaFree(d_am));
    free(x), free(y), free(dy), free(dx0), free(want), free(out), free(again), free(am), free(got_am);
}

static void test_pool(cudaStream_t s)
{
    test_pool_case(s, pool_geom(2, 7, 9, 3, 3, 3, 2, 1, 1, 4, 5));     /* overlapping, padded all round */
    test_pool_case(s, pool_geom(2, 4, 4, 5, 2, 2, 2, 2, 0, 3, 2));     /* the first row of windows wholly in padding */
    test_pool_case(s, pool_geom(1, 3, 4, 3, 2, 3, 2, 0, 3, 2, 3));     /* the first column wholly in padding */
    test_pool_case(s, pool_geom(1, 6, 5, 1, 3, 3, 1, 1, 1, 6, 5));     /* stride 1: up to 9 windows per cell */
    test_pool_case(s, pool_geom(3, 8, 8, 6, 2, 2, 3, 0, 0, 3, 3));     /* stride > k: cells in no window */
    test_pool_case(s, pool_geom(2, 5, 5, 7, 2, 2, 2, 0, 0, 3, 3));     /* last windows clipped at the far edge */
    test_pool_case(s, pool_geom(64, 26, 26, 32, 2, 2, 2, 0, 0, 13, 13)); /* fmnist_cnn's pooling */

    ct_window_geom bad = pool_geom(1, 4, 4, 1, 2, 2, 0, 0, 0, 2, 2);  /* stride 0 */
    float *d = dev_floats(16);
    int *a = dev_alloc(16 * sizeof *a);
    CHECK(ct_launch_maxpool_forward(&bad, d, d, a, s) == INVALID);
    CHECK(ct_launch_avgpool_backward(&bad, d, d, 1, s) == INVALID);
    CHECK(ct_launch_maxpool_forward(NULL, d, d, a, s) == INVALID);
    ct_window_geom wide = pool_geom(1, 4, 4, 1, 2, 2, 2, 0, 0, 2, 2);
    wide.f = 2;  /* a pool cannot change the channel count */
    CHECK(ct_launch_maxpool_forward(&wide, d, d, a, s) == INVALID);
    CHECK(ct_launch_avgpool_forward(&wide, d, d, s) == INVALID);
    ct_window_geom empty = pool_geom(0, 4, 4, 1, 2, 2, 2, 0, 0, 2, 2);
    CHECK(ct_launch_maxpool_forward(&empty, NULL, NULL, NULL, s) == 0);
    CHECK(ct_launch_maxpool_backward(&empty, NULL, NULL, NULL, 1, s) == 0);
    CHECK(ct_launch_avgpool_forward(&empty, NULL, NULL, s) == 0);
    CHECK(ct_launch_avgpool_backward(&empty, NULL, NULL, 1, s) == 0);
    GPU_OK(cudaFree(d));
    GPU_OK(cudaFree(a));
}

/* ---- Adam / AdamW ---- */

static void test_adam_case(cudaStream_t s, long n, int offset, float lr, float wd, int decoupled)
{
    const int steps = 5;
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float *w = falloc(n), *m = falloc(n), *v = falloc(n), *g = falloc(n), *out = falloc(n);
    fill(w, n, -1.0f, 1.0f);
    memset(m, 0, (size_t)n * sizeof *m);
    memset(v, 0, (size_t)n * sizeof *v);
    float *dw = dev_floats(n + offset), *dg = dev_floats(n + offset), *dm = dev_floats(n + offset),
          *dv = dev_floats(n + offset);
    h2d(dw + offset, w, (size_t)n * sizeof *w, s);
    dmemset(dm, 0, (size_t)(n + offset) * sizeof(float), s);
    dmemset(dv, 0, (size_t)(n + offset) * sizeof(float), s);

    char what[160];
    snprintf(what, sizeof what, "adam n=%ld offset=%d lr=%g wd=%g decoupled=%d", n, offset, lr, wd, decoupled);
    for (int t = 1; t <= steps; t++) {
        fill(g, n, -1.0f, 1.0f);
        h2d(dg + offset, g, (size_t)n * sizeof *g, s);
        /* a different rate each step: the kernel reads this step's from the device */
        const float lr_t = lr * (1.0f + 0.1f * (float)t);
        set_step(s, lr_t, (float)(1.0 - pow(b1, (double)t)), (float)(1.0 - pow(b2, (double)t)), 0);
        sync_launch(what, ct_launch_adam_step(dw + offset, dg + offset, dm + offset, dv + offset, n, g_step, b1, b2,
                                              eps, wd, decoupled, s), s);
        ct_cpu_adam_step(w, g, m, v, (size_t)n, lr_t, b1, b2, eps, wd, decoupled, t);
    }
    const float *want[3] = { w, m, v };
    const float *dev[3] = { dw, dm, dv };
    const char *names[3] = { "w", "m", "v" };
    for (int k = 0; k < 3; k++) {
        char kwhat[200];
        snprintf(kwhat, sizeof kwhat, "%s (%s)", what, names[k]);
        d2h(out, dev[k] + offset, (size_t)n * sizeof *out, s);
        check_close_f(kwhat, out, want[k], n, 1e-5, 1e-7);
        note_bits(kwhat, out, want[k], n);
    }
    GPU_OK(cudaFree(dw));
    GPU_OK(cudaFree(dg));
    GPU_OK(cudaFree(dm));
    GPU_OK(cudaFree(dv));
    free(w), free(m), free(v), free(g), free(out);
}

static void test_adam(cudaStream_t s)
{
    test_adam_case(s, 1000003, 0, 1e-2f, 0.0f, 0);    /* Adam */
    test_adam_case(s, 1000003, 0, 1e-2f, 1e-2f, 0);   /* Adam with L2 */
    test_adam_case(s, 1000003, 1, 1e-2f, 1e-1f, 1);   /* AdamW, unaligned */
    test_adam_case(s, 5, 0, 1e-3f, 1e-2f, 1);
    float *d = dev_floats(4);
    CHECK(ct_launch_adam_step(d, d, NULL, d, 4, g_step, 0.9f, 0.999f, 1e-8f, 0.0f, 0, s) == INVALID);
    CHECK(ct_launch_adam_step(d, d, d, d, 4, NULL, 0.9f, 0.999f, 1e-8f, 0.0f, 0, s) == INVALID);
    CHECK(ct_launch_adam_step(d, d, d, d, -1, g_step, 0.9f, 0.999f, 1e-8f, 0.0f, 0, s) == INVALID);
    CHECK(ct_launch_adam_step(NULL, NULL, NULL, NULL, 0, NULL, 0.9f, 0.999f, 1e-8f, 0.0f, 0, s) == 0);
    GPU_OK(cudaFree(d));
}

/* ---- non-finite count ---- */

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_nonfinite_case(cudaStream_t s, long n, int offset)
{
    float *x = falloc(n);
    fill(x, n, -1.0f, 1.0f);
    /* finite extremes that must not count */
    const float finite[] = { FLT_MAX, -FLT_MAX, 1e-40f, -0.0f, from_bits(0x7f7fffffu) };
    for (int k = 0; k < 5 && k < n; k++)
        x[(k * 7919L) % n] = finite[k];
    /* NaNs of several kinds, and both infinities, at the ends and inside */
    const float bad[] = { NAN, INFINITY, -INFINITY, from_bits(0xffc00000u), from_bits(0x7f800001u) };
    const long where[] = { 0, n / 2, n - 1, n / 3, n - 2 };
    unsigned planted = 0;
    for (int k = 0; k < 5; k++) {
        long i = where[k];
        if (i >= 0 && i < n && !isnan(x[i]) && !isinf(x[i])) {
            x[i] = bad[k];
            planted++;
        }
    }
    CHECK(ct_cpu_all_finite(x, (size_t)n) == (planted == 0));

    float *dx = dev_floats(n + offset);
    unsigned *dcount = dev_alloc(sizeof *dcount);
    const unsigned start = 5;  /* the launcher adds to the counter */
    h2d(dx + offset, x, (size_t)n * sizeof *x, s);
    h2d(dcount, &start, sizeof start, s);
    char what[96];
    snprintf(what, sizeof what, "count_nonfinite n=%ld offset=%d", n, offset);
    sync_launch(what, ct_launch_count_nonfinite(dx + offset, n, dcount, s), s);
    unsigned count = 0;
    d2h(&count, dcount, sizeof count, s);
    CHECK_MSG(count == start + planted, "%s: counter %u, want %u", what, count, start + planted);
    GPU_OK(cudaFree(dx));
    GPU_OK(cudaFree(dcount));
    free(x);
}

static void test_nonfinite(cudaStream_t s)
{
    for (int offset = 0; offset <= 1; offset++) {  /* float4 and scalar paths */
        test_nonfinite_case(s, 1000003, offset);
        test_nonfinite_case(s, 3, offset);          /* only the float4 path's tail */
        test_nonfinite_case(s, 1, offset);
    }
    /* all finite: the counter is not touched */
    float *d = dev_floats(1000);
    unsigned *c = dev_alloc(sizeof *c);
    dmemset(d, 0, 1000 * sizeof(float), s);
    dmemset(c, 0, sizeof *c, s);
    sync_launch("count_nonfinite zeros", ct_launch_count_nonfinite(d, 1000, c, s), s);
    unsigned count = 1;
    d2h(&count, c, sizeof count, s);
    CHECK(count == 0);
    CHECK(ct_launch_count_nonfinite(NULL, 0, NULL, s) == 0);
    CHECK(ct_launch_count_nonfinite(d, 4, NULL, s) == INVALID);
    GPU_OK(cudaFree(d));
    GPU_OK(cudaFree(c));
}

int main(void)
{
    ct_err err;
    ct_err_clear(&err);
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    char name[256];
    size_t mem = 0;
    int driver = 0, runtime = 0;
    char dv[32], rv[32];
    if (ct_cuda_device_name(0, name, sizeof name, &mem, &err) != CT_OK ||
        ct_cuda_versions(&driver, &runtime, &err) != CT_OK) {
        fprintf(stderr, "test_gpu_kernels: %s\n", err.msg);
        return 1;
    }
    ct_cuda_version_format(driver, dv, sizeof dv);
    ct_cuda_version_format(runtime, rv, sizeof rv);
    printf("device 0: %s, %.1f GiB; driver CUDA %s, runtime %s\n", name,
           (double)mem / (1024.0 * 1024.0 * 1024.0), dv, rv);
    CHECK(name[0] != '\0' && mem > 0 && runtime > 0 && driver >= runtime);

    cudaStream_t s;
    GPU_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    g_step = dev_alloc(sizeof *g_step);
    test_bias_act(s);
    test_activation(s);
    test_add(s);
    test_column_sums(s);
    test_dropout(s);
    test_pad(s);
    test_pool(s);
    test_sgd(s);
    test_adam(s);
    test_nonfinite(s);
    test_xent(s);
    GPU_OK(cudaFree(g_step));
    GPU_OK(cudaStreamDestroy(s));
    return ct_test_done();
}

#else

#include "tests/no_cuda_main.h"

#endif
