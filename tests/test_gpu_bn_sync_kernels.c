/* Batch norm's own kernels (kernels/batchnorm.cu): the training sequence that sync_bn runs with one
 * replica, whose hook is the identity, and that bf16 runs with no hook (the same thing); and
 * evaluation's scale and shift from the running statistics.
 *
 * Training: mean, variance about it, normalise, backward sums and dx against the CPU backend's
 * ct_cpu_batchnorm_forward_train and ct_cpu_batchnorm_backward on the same random data (x offset
 * from 0 so that the variance has something to cancel), in fp32, fp16 and bf16; evaluation:
 * ct_launch_bn_inference_dt against ct_cpu_batchnorm_forward_eval. Both sum in double, in
 * different orders and the CPU's variance in one pass about the first row, the GPU's in two: fp32
 * agrees to TOL_F32 (relative to each output's largest value). A half dtype's y and dx must be the
 * CPU's fp32 result rounded once, as cpu/half.c rounds it, give or take the fp32 tolerance: each
 * within half an ulp (of the half value) plus TOL_F32 of the largest value from the CPU's fp32
 * figure. The per-channel figures agree to an fp32 rounding (the GPU's, like the CPU's synced
 * path, pass the variance through fp32; the CPU's own path does not), so some values near a
 * rounding boundary round the other way, which this allows; a value rounded twice, or computed from
 * a figure rounded to half, misses by up to an ulp. The statistics are fp32 in every dtype: fp32's
 * tolerance.
 *
 * The running variance's count: n / (n - 1) for the global batch's n rows, read on the device. A
 * forward captured in a CUDA graph with one count and replayed with others (the same slice of
 * another global batch, and none) must unbias with each replay's count.
 *
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

static ct_rng rng = {4242};

static float uniform(float lo, float hi) { return lo + (hi - lo) * ct_rng_uniform(&rng); }

static const char *dtype_name(int dt) { return dt == CT_DTYPE_F32 ? "fp32" : dt == CT_DTYPE_F16 ? "fp16" : "bf16"; }

static size_t elem_bytes(int dt) { return dt == CT_DTYPE_F32 ? 4 : 2; }

static uint16_t half_bits(int dt, float v) { return dt == CT_DTYPE_F16 ? ct_f16_from_f32(v) : ct_bf16_from_f32(v); }

static float half_value(int dt, uint16_t h) { return dt == CT_DTYPE_F16 ? ct_f32_from_f16(h) : ct_f32_from_bf16(h); }

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
    void *d = dev_alloc(n * elem_bytes(dt));
    if (dt == CT_DTYPE_F32) {
        memcpy(widened, v, n * sizeof *v);
        GPU_OK(cudaMemcpy(d, v, n * 4, cudaMemcpyHostToDevice));
        return d;
    }
    uint16_t *h = xmalloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        h[i] = half_bits(dt, v[i]);
        widened[i] = half_value(dt, h[i]);
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
        out[i] = half_value(dt, h[i]);
    free(h);
}

static float *fetch(const float *d, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    GPU_OK(cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost));
    return h;
}

/* Half an ulp of the half value v: half the step to its neighbour away from 0. */
static double half_ulp(int dt, float v)
{
    uint16_t h = half_bits(dt, v), away = (uint16_t)((h & 0x8000u) | ((h & 0x7fffu) + 1u));
    return fabs((double)half_value(dt, away) - v) / 2.0;
}

/* One output of the GPU (as stored, widened) against the CPU's fp32 result ref over n values (see
 * the top). fp32: returns the relative difference. A half dtype: every value must be ref rounded
 * once, give or take the fp32 tolerance: |gpu - ref| <= half an ulp of gpu + TOL_F32 max |ref|
 * (a value rounded twice, or from a figure rounded to half on the way, misses by up to an ulp);
 * returns the largest |gpu - ref| as a fraction of that allowance. */
static double compare(const char *what, int dt, const float *gpu, const float *ref, size_t n)
{
    const char *name = dtype_name(dt);
    if (dt == CT_DTYPE_F32) {
        double e = max_rel(gpu, ref, n);
        CHECK_MSG(e <= TOL_F32, "%s: %s differs from the CPU's by %g", name, what, e);
        return e;
    }
    double top = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        top = fabs((double)ref[i]) > top ? fabs((double)ref[i]) : top;
    size_t off = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)gpu[i] - ref[i]), allowed = half_ulp(dt, gpu[i]) + TOL_F32 * top;
        if (isnan(e) || e / allowed > worst)
            worst = isnan(e) ? INFINITY : e / allowed;
        if (!(e <= allowed) && off++ == 0)
            first = i;
    }
    CHECK_MSG(off == 0, "%s: %s: %zu of %zu values are not the CPU's rounded once (the first, [%zu], %.9g against "
                        "%.9g)", name, what, off, n, first, first < n ? gpu[first] : 0.0f,
              first < n ? ref[first] : 0.0f);
    return worst;
}

/* One forward and backward of (rows, c) in dtype dt, compared with the CPU. counted: the running
 * variance's count from a device int holding rows (samples of one row), else from rows itself. */
static void check_case(int rows, int c, int dt, int accumulate, int counted)
{
    const char *name = dtype_name(dt);
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
    void *d_y = dev_alloc(n * elem_bytes(dt));
    float *d_p = dev_alloc(2 * (size_t)c * 4), *d_saved = dev_alloc(2 * (size_t)c * 4);
    float *d_run = dev_alloc(2 * (size_t)c * 4), *d_coef = dev_alloc(3 * (size_t)c * 4);
    float *d_sums = dev_alloc(2 * (size_t)c * 4), *d_dp = dev_alloc(2 * (size_t)c * 4);
    int *d_samples = dev_alloc(sizeof(int));
    GPU_OK(cudaMemcpy(d_p, gamma, (size_t)c * 4, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(d_p + c, beta, (size_t)c * 4, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(d_run, run, 2 * (size_t)c * 4, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(d_samples, &rows, sizeof rows, cudaMemcpyHostToDevice));
    const int *samples = counted ? d_samples : NULL;
    size_t ws_bytes = ct_bn_sums_workspace(rows, c);
    void *ws = dev_alloc(ws_bytes);

    /* the GPU: the training sequence, the hook the identity (one replica) or absent (bf16) */
    CHECK(ct_launch_bn_mean_dt(d_x, d_saved, rows, c, ws, ws_bytes, dt, NULL) == 0);
    CHECK(ct_launch_bn_variance_dt(d_x, d_saved, d_saved + c, rows, c, ws, ws_bytes, dt, NULL) == 0);
    CHECK(ct_launch_bn_normalise_dt(d_x, d_y, d_p, d_p + c, d_saved, d_saved + c, d_run, d_run + c, d_coef, rows, c,
                                    samples, 1, momentum, eps, dt, NULL) == 0);
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

    /* the CPU on the values the GPU held (cpu/half.c widens them; its dx adds to the held dx) */
    float *y_cpu = xmalloc(n * 4), *dx_cpu = xmalloc(n * 4), saved_cpu[512], dp_cpu[512];
    memcpy(dx_cpu, dx0w, n * 4);
    ct_cpu_batchnorm_forward_train(xw, gamma, beta, y_cpu, saved_cpu, saved_cpu + c, run_cpu, run_cpu + c, rows, c,
                                   momentum, eps, 0);
    ct_cpu_batchnorm_backward(xw, gamma, beta, dyw, saved_cpu, saved_cpu + c, dx_cpu, dp_cpu, dp_cpu + c, rows, c,
                              accumulate, 0);
    double e_stats = max_rel(saved, saved_cpu, 2 * (size_t)c), e_run = max_rel(run_gpu, run_cpu, 2 * (size_t)c);
    double e_dp = max_rel(dp, dp_cpu, 2 * (size_t)c);
    CHECK_MSG(e_stats <= TOL_F32, "%s: saved mean/invstd differ by %g", name, e_stats);
    CHECK_MSG(e_run <= TOL_F32, "%s: running statistics differ by %g", name, e_run);
    CHECK_MSG(e_dp <= TOL_F32, "%s: dgamma/dbeta differ by %g", name, e_dp);
    double e_y = compare("y", dt, y, y_cpu, n), e_dx = compare("dx", dt, dx, dx_cpu, n);
    gpu_report("bn kernels %s rows %d c %d%s%s against the CPU: relative mean/invstd %.2g, running %.2g, "
               "dgamma/dbeta %.2g; y %.2g, dx %.2g (fp32: relative; half: of the rounded-once allowance)\n",
               name, rows, c, accumulate ? " accumulate" : "", counted ? " counted" : "", e_stats, e_run, e_dp, e_y,
               e_dx);

    /* the same bits again: y and the sums (fixed reduction order) */
    GPU_OK(cudaMemcpy(d_run, run, 2 * (size_t)c * 4, cudaMemcpyHostToDevice));
    CHECK(ct_launch_bn_mean_dt(d_x, d_saved, rows, c, ws, ws_bytes, dt, NULL) == 0);
    CHECK(ct_launch_bn_variance_dt(d_x, d_saved, d_saved + c, rows, c, ws, ws_bytes, dt, NULL) == 0);
    CHECK(ct_launch_bn_normalise_dt(d_x, d_y, d_p, d_p + c, d_saved, d_saved + c, d_run, d_run + c, d_coef, rows, c,
                                    samples, 1, momentum, eps, dt, NULL) == 0);
    CHECK(ct_launch_bn_backward_sums_dt(d_x, d_dy, d_saved, d_saved + c, d_sums, d_dp, d_dp + c, rows, c, ws, ws_bytes,
                                        dt, NULL) == 0);
    GPU_OK(cudaDeviceSynchronize());
    float *y2 = xmalloc(n * 4), *saved2 = fetch(d_saved, 2 * (size_t)c), *dp2 = fetch(d_dp, 2 * (size_t)c);
    download(d_y, n, dt, y2);
    CHECK_MSG(memcmp(y, y2, n * 4) == 0 && memcmp(saved, saved2, 2 * (size_t)c * 4) == 0 &&
                  memcmp(dp, dp2, 2 * (size_t)c * 4) == 0, "%s: a second run gave other bits", name);

    free(x); free(dy); free(dx0); free(xw); free(dyw); free(dx0w); free(y); free(dx); free(saved);
    free(run_gpu); free(dp); free(y_cpu); free(dx_cpu); free(y2); free(saved2); free(dp2);
    void *dev[] = {d_x, d_dy, d_dx, d_y, d_p, d_saved, d_run, d_coef, d_sums, d_dp, d_samples, ws};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        GPU_OK(cudaFree(dev[i]));
}

/* Evaluation of (rows, c) in dtype dt: the scale and shift from the running statistics. */
static void check_inference(int rows, int c, int dt)
{
    const float eps = 1e-5f;
    size_t n = (size_t)rows * c;
    float *x = xmalloc(n * 4), *xw = xmalloc(n * 4), *y = xmalloc(n * 4), *y_cpu = xmalloc(n * 4);
    float p[512], run[512];
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0f + 0.5f * (float)(i % (size_t)c % 3) + uniform(-1.5f, 1.5f);
    for (int j = 0; j < c; j++) {
        p[j] = uniform(0.5f, 1.5f);
        p[c + j] = uniform(-0.5f, 0.5f);
        run[j] = uniform(1.5f, 3.0f);
        run[c + j] = uniform(0.2f, 1.2f);
    }
    void *d_x = upload(x, n, dt, xw), *d_y = dev_alloc(n * elem_bytes(dt));
    float *d_p = dev_alloc(2 * (size_t)c * 4), *d_run = dev_alloc(2 * (size_t)c * 4);
    float *d_coef = dev_alloc(2 * (size_t)c * 4);
    GPU_OK(cudaMemcpy(d_p, p, 2 * (size_t)c * 4, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(d_run, run, 2 * (size_t)c * 4, cudaMemcpyHostToDevice));
    CHECK(ct_launch_bn_inference_dt(d_x, d_y, d_p, d_p + c, d_run, d_run + c, d_coef, rows, c, eps, dt, NULL) == 0);
    GPU_OK(cudaDeviceSynchronize());
    download(d_y, n, dt, y);
    ct_cpu_batchnorm_forward_eval(xw, p, p + c, run, run + c, y_cpu, rows, c, eps, 0);
    double e = compare("evaluation's y", dt, y, y_cpu, n);
    gpu_report("bn inference %s rows %d c %d against the CPU: y %.2g (fp32: relative; half: of the rounded-once "
               "allowance)\n", dtype_name(dt), rows, c, e);
    free(x); free(xw); free(y); free(y_cpu);
    void *dev[] = {d_x, d_y, d_p, d_run, d_coef};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        GPU_OK(cudaFree(dev[i]));
}

/* The forward captured once in a CUDA graph with the count at this replica's samples, replayed
 * with the count of a global batch three times its slice and with none: each replay's running
 * variance is unbiased by that replay's rows (n / (n - 1); 1 for n <= 1), against the biased
 * variance computed here in double. */
static void check_replayed_count(void)
{
    enum { PER_SAMPLE = 4, LOCAL = 16, ROWS = PER_SAMPLE * LOCAL, C = 8 };
    const float momentum = 0.5f, eps = 1e-5f;
    float x[ROWS * C], p[2 * C], run[2 * C];
    double var[C];
    for (int i = 0; i < ROWS * C; i++)
        x[i] = 1.0f + uniform(-1.0f, 1.0f) * (float)(1 + i % C);
    for (int j = 0; j < C; j++) {
        p[j] = uniform(0.5f, 1.5f);
        p[C + j] = uniform(-0.5f, 0.5f);
        run[j] = 0.0f;
        run[C + j] = uniform(0.05f, 0.1f);
        double mean = 0.0, ss = 0.0;
        for (int i = 0; i < ROWS; i++)
            mean += x[i * C + j];
        mean /= ROWS;
        for (int i = 0; i < ROWS; i++)
            ss += (x[i * C + j] - mean) * (x[i * C + j] - mean);
        var[j] = ss / ROWS;
    }
    float *d_x = dev_alloc(sizeof x), *d_y = dev_alloc(sizeof x), *d_p = dev_alloc(sizeof p);
    float *d_run = dev_alloc(sizeof run), *d_saved = dev_alloc(2 * C * 4), *d_coef = dev_alloc(2 * C * 4);
    int *d_samples = dev_alloc(sizeof(int));
    size_t ws_bytes = ct_bn_sums_workspace(ROWS, C);
    void *ws = dev_alloc(ws_bytes);
    GPU_OK(cudaMemcpy(d_x, x, sizeof x, cudaMemcpyHostToDevice));
    GPU_OK(cudaMemcpy(d_p, p, sizeof p, cudaMemcpyHostToDevice));
    cudaStream_t s;
    GPU_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int counts[3] = {LOCAL, 3 * LOCAL, 0};
    GPU_OK(cudaMemcpyAsync(d_samples, &counts[0], sizeof(int), cudaMemcpyHostToDevice, s));
    GPU_OK(cudaStreamSynchronize(s));

    cudaGraph_t recorded = NULL;
    cudaGraphExec_t exec = NULL;
    GPU_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    int rc_mean = ct_launch_bn_mean_dt(d_x, d_saved, ROWS, C, ws, ws_bytes, CT_DTYPE_F32, s);
    int rc_var = ct_launch_bn_variance_dt(d_x, d_saved, d_saved + C, ROWS, C, ws, ws_bytes, CT_DTYPE_F32, s);
    int rc_norm = ct_launch_bn_normalise_dt(d_x, d_y, d_p, d_p + C, d_saved, d_saved + C, d_run, d_run + C, d_coef,
                                            ROWS, C, d_samples, PER_SAMPLE, momentum, eps, CT_DTYPE_F32, s);
    GPU_OK(cudaStreamEndCapture(s, &recorded));
    CHECK(rc_mean == 0 && rc_var == 0 && rc_norm == 0);
    GPU_OK(cudaGraphInstantiate(&exec, recorded, 0));

    double worst = 0.0;
    for (int k = 0; k < 3; k++) {
        GPU_OK(cudaMemcpyAsync(d_run, run, sizeof run, cudaMemcpyHostToDevice, s));
        GPU_OK(cudaMemcpyAsync(d_samples, &counts[k], sizeof(int), cudaMemcpyHostToDevice, s));
        GPU_OK(cudaGraphLaunch(exec, s));
        GPU_OK(cudaStreamSynchronize(s));
        float got[2 * C];
        GPU_OK(cudaMemcpy(got, d_run, sizeof got, cudaMemcpyDeviceToHost));
        long rows_total = (long)counts[k] * PER_SAMPLE;
        double unbias = rows_total > 1 ? (double)rows_total / (double)(rows_total - 1) : 1.0;
        float want[C];
        for (int j = 0; j < C; j++)
            want[j] = (float)((1.0 - momentum) * run[C + j] + momentum * var[j] * unbias);
        double e = max_rel(got + C, want, C);
        worst = e > worst ? e : worst;
        CHECK_MSG(e <= TOL_F32, "a replayed forward with %d samples over all replicas: running variance off by %g "
                                "(the capture's count baked in?)", counts[k], e);
    }
    gpu_report("bn kernels: the running variance's count read at replay (samples %d, %d, %d): relative %.2g\n",
               counts[0], counts[1], counts[2], worst);
    GPU_OK(cudaGraphExecDestroy(exec));
    GPU_OK(cudaGraphDestroy(recorded));
    GPU_OK(cudaStreamDestroy(s));
    void *dev[] = {d_x, d_y, d_p, d_run, d_saved, d_coef, d_samples, ws};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        GPU_OK(cudaFree(dev[i]));
}

/* A replica with no samples: zero figures; a workspace too small for one chunk is refused, and a
 * count without its rows per sample. */
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
    CHECK(ct_launch_bn_variance_dt(NULL, d_v, d_v + c, 0, c, NULL, 0, CT_DTYPE_BF16, NULL) == 0);
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
    /* a count needs the rows each sample has */
    CHECK(ct_launch_bn_normalise_dt(d_v, d_v, d_dp, d_dp, d_v, d_v + c, d_sums, d_sums + c, d_dp, 1, c,
                                    (const int *)d_sums, 0, 0.1f, 1e-5f, CT_DTYPE_F32, NULL) ==
          (int)cudaErrorInvalidValue);
    GPU_OK(cudaFree(d_v));
    GPU_OK(cudaFree(d_sums));
    GPU_OK(cudaFree(d_dp));
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    check_case(6000, 37, CT_DTYPE_F32, 0, 0);   /* 12 chunks, a partial block of channels */
    check_case(6000, 37, CT_DTYPE_F16, 1, 1);
    check_case(6000, 37, CT_DTYPE_BF16, 1, 0);
    check_case(200, 64, CT_DTYPE_F32, 1, 1);    /* one chunk */
    check_case(2048, 16, CT_DTYPE_F16, 0, 0);
    check_case(2048, 16, CT_DTYPE_BF16, 0, 1);
    check_inference(6000, 37, CT_DTYPE_F32);
    check_inference(6000, 37, CT_DTYPE_F16);
    check_inference(3000, 64, CT_DTYPE_BF16);
    check_replayed_count();
    check_no_rows();
    return ct_test_done();
}

#else
#include "tests/no_cuda_main.h"
#endif
