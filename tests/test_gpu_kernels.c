/* The CUDA kernels of kernels/ against CPU references computed here in double precision, on
 * random data: bias + activation (every activation, vectorised and scalar paths), SGD (plain,
 * weight decay, momentum, Nesterov; several steps so the momentum buffer carries), and softmax
 * cross-entropy (loss sum, gradient, accuracy, ties, in place, evaluation only, bad labels).
 * Exits 77 (skipped) without a GPU or without the CUDA backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifdef CUTRAIN_HAVE_CUDA

#include <cuda_runtime.h>

#include "engine/cuda/cuda_device.h"
#include "engine/rng.h"
#include "engine/types.h"
#include "kernels/kernels.h"

/* Setup calls that must work for the test to mean anything: fail the whole program on error. */
#define GPU_OK(call) do { \
    cudaError_t rc_ = (cudaError_t)(call); \
    if (rc_ != cudaSuccess) { \
        fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, \
                cudaGetErrorString(rc_), cudaGetErrorName(rc_)); \
        exit(1); \
    } \
} while (0)

#define REL_TOL 1e-5

static ct_rng rng = { 12345 };

static float uniform(float lo, float hi) { return lo + (hi - lo) * ct_rng_uniform(&rng); }

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return p;
}

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

/* offset (in floats) shifts y and bias off 16-byte alignment to take the scalar path. */
static void test_bias_act_case(cudaStream_t s, long rows, int c, int with_bias, int offset, int act)
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
    GPU_OK(cudaMemcpy(dy + offset, y, (size_t)total * sizeof *y, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(db + offset, b, (size_t)c * sizeof *b, cudaMemcpyHostToDevice));
    char what[128];
    snprintf(what, sizeof what, "bias_act %s rows=%ld c=%d bias=%d offset=%d", ct_activation_name(act), rows,
             c, with_bias, offset);
    sync_launch(what, ct_launch_bias_activation_forward(dy + offset, with_bias ? db + offset : NULL, rows, c,
                                                        act, s), s);
    GPU_OK(cudaMemcpy(out, dy + offset, (size_t)total * sizeof *out, cudaMemcpyDeviceToHost));
    check_close(what, out, want, total, REL_TOL, 1e-7);
    GPU_OK(cudaFree(dy));
    GPU_OK(cudaFree(db));
    free(y), free(b), free(out), free(want);
}

static void test_bias_act(cudaStream_t s)
{
    for (int act = 0; act < CT_ACT_COUNT; act++) {
        test_bias_act_case(s, 257, 64, 1, 0, act);   /* float4 path */
        test_bias_act_case(s, 37, 13, 1, 0, act);    /* c % 4 != 0: scalar path */
        test_bias_act_case(s, 33, 8, 1, 1, act);     /* misaligned: scalar path */
        test_bias_act_case(s, 19, 12, 0, 0, act);    /* no bias */
    }

    /* NaN survives every activation, so the finite checks downstream still see it. */
    float *d = dev_alloc(4 * sizeof *d);
    for (int act = 0; act < CT_ACT_COUNT; act++) {
        float h[4] = { NAN, 1.0f, -1.0f, NAN };
        GPU_OK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
        sync_launch("bias_act NaN", ct_launch_bias_activation_forward(d, NULL, 1, 4, act, s), s);
        GPU_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
        CHECK_MSG(isnan(h[0]) && isnan(h[3]), "activation %s lost a NaN", ct_activation_name(act));
    }
    GPU_OK(cudaFree(d));

    CHECK(ct_launch_bias_activation_forward(NULL, NULL, 0, 4, CT_ACT_RELU, s) == 0);
    CHECK(ct_launch_bias_activation_forward(NULL, NULL, 1, 4, CT_ACT_COUNT, s) == (int)cudaErrorInvalidValue);
}

/* ---- SGD ---- */

static void test_sgd_case(cudaStream_t s, long n, int offset, float lr, float momentum, int nesterov,
                          float wd)
{
    const int steps = 3;
    float *w = xmalloc((size_t)n * sizeof *w), *g = xmalloc((size_t)n * steps * sizeof *g);
    float *out = xmalloc((size_t)n * sizeof *out);
    double *rw = xmalloc((size_t)n * sizeof *rw), *rv = xmalloc((size_t)n * sizeof *rv);
    for (long i = 0; i < n; i++) {
        w[i] = uniform(-1.0f, 1.0f);
        rw[i] = w[i];
        rv[i] = 0.0;
    }
    for (long i = 0; i < n * steps; i++)
        g[i] = uniform(-1.0f, 1.0f);

    float *dw = dev_alloc((size_t)(n + offset) * sizeof *dw);
    float *dg = dev_alloc((size_t)(n + offset) * sizeof *dg);
    float *dv = momentum != 0.0f ? dev_alloc((size_t)(n + offset) * sizeof *dv) : NULL;
    GPU_OK(cudaMemcpy(dw + offset, w, (size_t)n * sizeof *w, cudaMemcpyHostToDevice));
    if (dv)
        GPU_OK(cudaMemset(dv, 0, (size_t)(n + offset) * sizeof *dv));

    char what[160];
    snprintf(what, sizeof what, "sgd n=%ld offset=%d lr=%g momentum=%g nesterov=%d wd=%g", n, offset, lr,
             momentum, nesterov, wd);
    for (int t = 0; t < steps; t++) {
        const float *gt = g + (size_t)t * n;
        GPU_OK(cudaMemcpy(dg + offset, gt, (size_t)n * sizeof *dg, cudaMemcpyHostToDevice));
        sync_launch(what, ct_launch_sgd_step(dw + offset, dg + offset, dv ? dv + offset : NULL, n, lr, momentum,
                                             nesterov, wd, s), s);
        for (long i = 0; i < n; i++) {
            double d = (double)gt[i] + (double)wd * rw[i];
            if (momentum != 0.0f) {
                rv[i] = momentum * rv[i] + d;
                d = nesterov ? d + momentum * rv[i] : rv[i];
            }
            rw[i] -= lr * d;
        }
    }
    GPU_OK(cudaMemcpy(out, dw + offset, (size_t)n * sizeof *out, cudaMemcpyDeviceToHost));
    check_close(what, out, rw, n, REL_TOL, 1e-6);  /* w, vel are O(1): a few ulps absolute */
    if (dv) {
        GPU_OK(cudaMemcpy(out, dv + offset, (size_t)n * sizeof *out, cudaMemcpyDeviceToHost));
        char vwhat[200];
        snprintf(vwhat, sizeof vwhat, "%s (velocity)", what);
        check_close(vwhat, out, rv, n, REL_TOL, 1e-6);
        GPU_OK(cudaFree(dv));
    }
    GPU_OK(cudaFree(dw));
    GPU_OK(cudaFree(dg));
    free(w), free(g), free(out), free(rw), free(rv);
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
    CHECK(ct_launch_sgd_step(d, d, NULL, 4, 0.1f, 0.9f, 0, 0.0f, s) == (int)cudaErrorInvalidValue);
    CHECK(ct_launch_sgd_step(d, d, NULL, 4, 0.1f, 0.0f, 1, 0.0f, s) == (int)cudaErrorInvalidValue);
    CHECK(ct_launch_sgd_step(NULL, NULL, NULL, 0, 0.1f, 0.0f, 0, 0.0f, s) == 0);
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
    const float scale = 1.0f / (float)n;
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
            want[(size_t)r * k + j] = (exp(xr[j] - m) / sum - (j == y[r])) * scale;
    }

    float *dx = dev_alloc((size_t)n * k * sizeof *dx), *dd = dev_alloc((size_t)n * k * sizeof *dd);
    int *dy = dev_alloc((size_t)n * sizeof *dy);
    float *dloss = dev_alloc(sizeof *dloss);
    unsigned *dcorrect = dev_alloc(sizeof *dcorrect);
    GPU_OK(cudaMemcpy(dx, x, (size_t)n * k * sizeof *x, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(dy, y, (size_t)n * sizeof *y, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemset(dloss, 0, sizeof *dloss));
    GPU_OK(cudaMemset(dcorrect, 0, sizeof *dcorrect));
    float *grad = mode == 0 ? dd : mode == 1 ? dx : NULL;

    char what[96];
    snprintf(what, sizeof what, "softmax_xent n=%d k=%d mode=%d", n, k, mode);
    sync_launch(what, ct_launch_softmax_xent(dx, dy, grad, dloss, dcorrect, n, k, scale, s), s);
    float loss = 0.0f;
    unsigned correct = 0;
    GPU_OK(cudaMemcpy(&loss, dloss, sizeof loss, cudaMemcpyDeviceToHost));
    GPU_OK(cudaMemcpy(&correct, dcorrect, sizeof correct, cudaMemcpyDeviceToHost));
    CHECK_MSG(fabs(loss - want_loss) <= REL_TOL * fabs(want_loss) + 1e-6, "%s: loss sum %.9g, want %.9g", what,
              loss, want_loss);
    CHECK_MSG(correct == want_correct, "%s: correct %u, want %u", what, correct, want_correct);
    if (grad) {
        GPU_OK(cudaMemcpy(out, grad, (size_t)n * k * sizeof *out, cudaMemcpyDeviceToHost));
        check_close(what, out, want, (long)n * k, REL_TOL, 1e-7 * scale);
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
    GPU_OK(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(dy, y, sizeof y, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemset(dloss, 0, sizeof(float)));
    sync_launch("softmax_xent bad label", ct_launch_softmax_xent(dx, dy, NULL, dloss, NULL, 2, 2, 1.0f, s), s);
    float loss = 0.0f;
    GPU_OK(cudaMemcpy(&loss, dloss, sizeof loss, cudaMemcpyDeviceToHost));
    CHECK_MSG(isnan(loss), "bad label gave loss %g, want NaN", loss);
    GPU_OK(cudaFree(dx));
    GPU_OK(cudaFree(dy));
    GPU_OK(cudaFree(dloss));

    CHECK(ct_launch_softmax_xent(NULL, NULL, NULL, NULL, NULL, 0, 10, 1.0f, s) == 0);
    CHECK(ct_launch_softmax_xent(NULL, NULL, NULL, NULL, NULL, 4, 0, 1.0f, s) == (int)cudaErrorInvalidValue);
}

int main(void)
{
    ct_err err;
    ct_err_clear(&err);
    int count = 0;
    char reason[256];
    if (ct_cuda_devices(&count, reason, sizeof reason) != CT_OK) {
        fprintf(stderr, "test_gpu_kernels: %s\n", reason);
        return 1;
    }
    if (count == 0) {
        printf("skipped: no usable CUDA device: %s\n", reason);
        return 77;
    }
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
    printf("device 0 of %d: %s, %.1f GiB; driver CUDA %s, runtime %s\n", count, name,
           (double)mem / (1024.0 * 1024.0 * 1024.0), dv, rv);
    CHECK(name[0] != '\0' && mem > 0 && runtime > 0 && driver >= runtime);

    cudaStream_t s;
    GPU_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    test_bias_act(s);
    test_sgd(s);
    test_xent(s);
    GPU_OK(cudaStreamDestroy(s));
    return ct_test_done();
}

#else

int main(void)
{
    printf("skipped: built without the CUDA backend\n");
    return 77;
}

#endif
