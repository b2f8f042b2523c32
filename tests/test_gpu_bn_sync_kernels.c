/* The synced batch norm's kernels (kernels/batchnorm.cu, sync_bn = on) with one replica, whose
 * hook is the identity: mean, variance about it, normalise, backward sums and dx against the CPU
 * backend's ct_cpu_batchnorm_forward_train and ct_cpu_batchnorm_backward on the same random data
 * (x offset from 0 so that the variance has something to cancel), fp32 and fp16 activations.
 * Both sum in double, in different orders and the CPU's variance in one pass about the first row,
 * the GPU's in two: fp32 agrees to TOL_F32 (relative to each output's largest value), fp16 to
 * TOL_F16 (y and dx rounded to fp16 once on the GPU: half an fp16 ulp, 2^-11, plus the fp32 part).
 * Also: several chunks of rows and a channel count that is no multiple of 32, dx accumulated, the
 * same bits on a second run (no atomics), and no rows giving zero figures.
 * Exits 77 (skipped) without a GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifdef CUTRAIN_HAVE_CUDA

#include <cuda_runtime.h>

#include "base/half.h"
#include "base/rng.h"
#include "base/tensor.h"
#include "cpu/cpu_ops.h"
#include "kernels/kernels.h"
#include "tests/gpu_test.h"

#define TOL_F32 2e-5
#define TOL_F16 2e-3

static ct_rng rng = {4242};

static float uniform(float lo, float hi) { return lo + (hi - lo) * ct_rng_uniform(&rng); }

/* max |a - b| / max(max |b|, 1e-30) over n */
static double max_rel(const float *a, const float *b, size_t n)
{
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > d || isnan(e))
            d = isnan(e) ? INFINITY : e;
        if (fabs((double)b[i]) > m)
            m = fabs((double)b[i]);
    }
    return d / (m > 1e-30 ? m : 1e-30);
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    GPU_OK(cudaMalloc(&p, bytes ? bytes : 4));
    return p;
}

/* host fp32 values -> a device tensor of dtype dt; *widened: the values the device holds, as fp32 */
static void *upload(const float *v, size_t n, int dt, float *widened)
{
    size_t es = dt == CT_DTYPE_F32 ? 4 : 2;
    void *d = dev_alloc(n * es);
    if (dt == CT_DTYPE_F32) {
        memcpy(widened, v, n * sizeof *v);
        GPU_OK(cudaMemcpy(d, v, n * 4, cudaMemcpyHostToDevice));
        return d;
    }
    uint16_t *h = xmalloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        h[i] = ct_f16_from_f32(v[i]);
        widened[i] = ct_f32_from_f16(h[i]);
    }
    GPU_OK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static void download(const void *d, size_t n, int dt, float *out)
{
    if (dt == CT_DTYPE_F32) {
        GPU_OK(cudaMemcpy(out, d, n * 4, cudaMemcpyDeviceToHost));
        return;
    }
    uint16_t *h = xmalloc(n * 2);
    GPU_OK(cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        out[i] = ct_f32_from_f16(h[i]);
    free(h);
}

static float *fetch(const float *d, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    GPU_OK(cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost));
    return h;
}

/* One forward and backward of (rows, c) in dtype dt, compared with the CPU; returns the largest
 * relative difference seen (reported). */
static double check_case(int rows, int c, int dt, int accumulate)
{
    const char *name = dt == CT_DTYPE_F32 ? "fp32" : "fp16";
    const float momentum = 0.1f, eps = 1e-5f;
    size_t n = (size_t)rows * c;
    float *x = xmalloc(n * 4), *dy = xmalloc(n * 4), *dx0 = xmalloc(n * 4);
    float *xw = xmalloc(n * 4), *dyw = xmalloc(n * 4), *dx0w = xmalloc(n * 4);
    float gamma[256], beta[256], run[512], run_cpu[512];
    for (size_t i = 0; i < n; i++) {
        int j = (int)(i % (size_t)c);
        x[i] = 3.0f + 0.25f * (float)(j % 5) + uniform(-1.0f, 1.0f) * (0.5f + 0.1f * (float)(j % 7));
        dy[i] = uniform(-1.0f, 1.0f) * 0.01f;
        dx0[i] = uniform(-1.0f, 1.0f) * 0.01f;
    }
    for (int j = 0; j < c; j++) {
        gamma[j] = uniform(0.5f, 1.5f);
        beta[j] = uniform(-0.5f, 0.5f);
        run[j] = run_cpu[j] = uniform(-0.1f, 0.1f);
        run[c + j] = run_cpu[c + j] = uniform(0.9f, 1.1f);
    }
    void *d_x = upload(x, n, dt, xw), *d_dy = upload(dy, n, dt, dyw), *d_dx = upload(dx0, n, dt, dx0w);
    void *d_y = dev_alloc(n * (dt == CT_DTYPE_F32 ? 4 : 2));
    float *d_p = dev_alloc(2 * (size_t)c * 4), *d_saved = dev_alloc(2 * (size_t)c * 4);
    float *d_run = dev_alloc(2 * (size_t)c * 4), *d_coef = dev_alloc(3 * (size_t)c * 4);
    float *d_sums = dev_alloc(2 * (size_t)c * 4), *d_dp = dev_alloc(2 * (size_t)c * 4);
    GPU_OK(cudaMemcpy(d_p, gamma, (size_t)c * 4, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(d_p + c, beta, (size_t)c * 4, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(d_run, run, 2 * (size_t)c * 4, cudaMemcpyHostToDevice));
    size_t ws_bytes = ct_bn_sums_workspace(rows, c);
    void *ws = dev_alloc(ws_bytes);

    /* the GPU: the synced sequence, the hook the identity (one replica) */
    double unbias = rows > 1 ? (double)rows / (rows - 1) : 1.0;
    CHECK(ct_launch_bn_mean_dt(d_x, d_saved, rows, c, ws, ws_bytes, dt, NULL) == 0);
    CHECK(ct_launch_bn_variance_dt(d_x, d_saved, d_saved + c, rows, c, ws, ws_bytes, dt, NULL) == 0);
    CHECK(ct_launch_bn_normalise_dt(d_x, d_y, d_p, d_p + c, d_saved, d_saved + c, d_run, d_run + c, d_coef, rows, c,
                                    unbias, momentum, eps, dt, NULL) == 0);
    CHECK(ct_launch_bn_backward_sums_dt(d_x, d_dy, d_saved, d_saved + c, d_sums, d_dp, d_dp + c, rows, c, ws, ws_bytes,
                                        dt, NULL) == 0);
    CHECK(ct_launch_bn_backward_dx_dt(d_x, d_dy, d_p, d_saved, d_saved + c, d_sums, d_dx, d_coef, rows, c, accumulate,
                                      dt, NULL) == 0);
    GPU_OK(cudaDeviceSynchronize());
    float *y = xmalloc(n * 4), *dx = xmalloc(n * 4);
    download(d_y, n, dt, y);
    download(d_dx, n, dt, dx);
    float *saved = fetch(d_saved, 2 * (size_t)c), *run_gpu = fetch(d_run, 2 * (size_t)c);
    float *dp = fetch(d_dp, 2 * (size_t)c);

    /* the CPU on the values the GPU held */
    float *y_cpu = xmalloc(n * 4), *dx_cpu = xmalloc(n * 4), saved_cpu[512], dp_cpu[512];
    memcpy(dx_cpu, dx0w, n * 4);
    ct_cpu_batchnorm_forward_train(xw, gamma, beta, y_cpu, saved_cpu, saved_cpu + c, run_cpu, run_cpu + c, rows, c,
                                   momentum, eps);
    ct_cpu_batchnorm_backward(xw, gamma, dyw, saved_cpu, saved_cpu + c, dx_cpu, dp_cpu, dp_cpu + c, rows, c,
                              accumulate);
    double tol = dt == CT_DTYPE_F32 ? TOL_F32 : TOL_F16;
    double e_stats = max_rel(saved, saved_cpu, 2 * (size_t)c), e_run = max_rel(run_gpu, run_cpu, 2 * (size_t)c);
    double e_y = max_rel(y, y_cpu, n), e_dp = max_rel(dp, dp_cpu, 2 * (size_t)c), e_dx = max_rel(dx, dx_cpu, n);
    gpu_report("sync_bn kernels %s rows %d c %d%s against the CPU: relative mean/invstd %.2g, running %.2g, "
               "y %.2g, dgamma/dbeta %.2g, dx %.2g (tolerance %.0g)\n", name, rows, c,
               accumulate ? " accumulate" : "", e_stats, e_run, e_y, e_dp, e_dx, tol);
    /* the statistics are fp32 in every dtype: fp32's tolerance */
    CHECK_MSG(e_stats <= TOL_F32, "%s: saved mean/invstd differ by %g", name, e_stats);
    CHECK_MSG(e_run <= TOL_F32, "%s: running statistics differ by %g", name, e_run);
    CHECK_MSG(e_dp <= TOL_F32, "%s: dgamma/dbeta differ by %g", name, e_dp);
    CHECK_MSG(e_y <= tol, "%s: y differs by %g", name, e_y);
    CHECK_MSG(e_dx <= tol, "%s: dx differs by %g", name, e_dx);

    /* the same bits again: y and the sums (fixed reduction order) */
    GPU_OK(cudaMemcpy(d_run, run, 2 * (size_t)c * 4, cudaMemcpyHostToDevice));
    CHECK(ct_launch_bn_mean_dt(d_x, d_saved, rows, c, ws, ws_bytes, dt, NULL) == 0);
    CHECK(ct_launch_bn_variance_dt(d_x, d_saved, d_saved + c, rows, c, ws, ws_bytes, dt, NULL) == 0);
    CHECK(ct_launch_bn_normalise_dt(d_x, d_y, d_p, d_p + c, d_saved, d_saved + c, d_run, d_run + c, d_coef, rows, c,
                                    unbias, momentum, eps, dt, NULL) == 0);
    CHECK(ct_launch_bn_backward_sums_dt(d_x, d_dy, d_saved, d_saved + c, d_sums, d_dp, d_dp + c, rows, c, ws, ws_bytes,
                                        dt, NULL) == 0);
    GPU_OK(cudaDeviceSynchronize());
    float *y2 = xmalloc(n * 4), *saved2 = fetch(d_saved, 2 * (size_t)c), *dp2 = fetch(d_dp, 2 * (size_t)c);
    download(d_y, n, dt, y2);
    CHECK_MSG(memcmp(y, y2, n * 4) == 0 && memcmp(saved, saved2, 2 * (size_t)c * 4) == 0 &&
                  memcmp(dp, dp2, 2 * (size_t)c * 4) == 0, "%s: a second run gave other bits", name);

    free(x); free(dy); free(dx0); free(xw); free(dyw); free(dx0w); free(y); free(dx); free(saved);
    free(run_gpu); free(dp); free(y_cpu); free(dx_cpu); free(y2); free(saved2); free(dp2);
    void *dev[] = {d_x, d_dy, d_dx, d_y, d_p, d_saved, d_run, d_coef, d_sums, d_dp, ws};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        GPU_OK(cudaFree(dev[i]));
    double worst = e_y > e_dx ? e_y : e_dx;
    return worst > e_stats ? worst : e_stats;
}

/* A replica with no samples: zero figures; a workspace too small for one chunk is refused. */
static void check_no_rows(void)
{
    const int c = 8;
    float *d_v = dev_alloc(4 * c * 4), *d_sums = dev_alloc(2 * c * 4), *d_dp = dev_alloc(2 * c * 4);
    float ones[32];
    for (int i = 0; i < 32; i++)
        ones[i] = 1.0f;
    GPU_OK(cudaMemcpy(d_v, ones, sizeof ones, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(d_sums, ones, 2 * c * 4, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(d_dp, ones, 2 * c * 4, cudaMemcpyHostToDevice));
    CHECK(ct_launch_bn_mean_dt(NULL, d_v, 0, c, NULL, 0, CT_DTYPE_F32, NULL) == 0);
    CHECK(ct_launch_bn_variance_dt(NULL, d_v, d_v + c, 0, c, NULL, 0, CT_DTYPE_F16, NULL) == 0);
    CHECK(ct_launch_bn_backward_sums_dt(NULL, NULL, d_v, d_v + 2 * c, d_sums, d_dp, d_dp + c, 0, c, NULL, 0,
                                        CT_DTYPE_F32, NULL) == 0);
    CHECK(ct_bn_sums_workspace(0, c) == 0);
    GPU_OK(cudaDeviceSynchronize());
    float v[32], s[16], p[16];
    GPU_OK(cudaMemcpy(v, d_v, sizeof v, cudaMemcpyDeviceToHost));
    GPU_OK(cudaMemcpy(s, d_sums, sizeof s, cudaMemcpyDeviceToHost));
    GPU_OK(cudaMemcpy(p, d_dp, sizeof p, cudaMemcpyDeviceToHost));
    int zeros = 1;
    for (int j = 0; j < 2 * c; j++)
        zeros &= v[j] == 0.0f && s[j] == 0.0f && p[j] == 0.0f;
    CHECK_MSG(zeros, "no rows: the mean, variance, sums and dgamma/dbeta are not all 0");
    /* a workspace too small for even one chunk is refused, not overrun */
    CHECK(ct_launch_bn_mean_dt(d_v, d_v, 4, c, d_sums, 8, CT_DTYPE_F32, NULL) == (int)cudaErrorInvalidValue);
    GPU_OK(cudaFree(d_v));
    GPU_OK(cudaFree(d_sums));
    GPU_OK(cudaFree(d_dp));
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    check_case(6000, 37, CT_DTYPE_F32, 0);   /* 12 chunks, a partial block of channels */
    check_case(6000, 37, CT_DTYPE_F16, 1);
    check_case(200, 64, CT_DTYPE_F32, 1);    /* one chunk */
    check_case(2048, 16, CT_DTYPE_F16, 0);
    check_no_rows();
    return ct_test_done();
}

#else
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 77;
}
#endif
