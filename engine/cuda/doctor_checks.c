/* One GPU on its own, on its own stream: 64 MiB allocated, filled and read back; a cuBLAS SGEMM
 * and a cuDNN convolution, each against plain CPU loops in double precision. The three are queued
 * together and waited for once, so the check costs one round trip.
 *
 * A failure ends the checks with its message; everything made is released on every path (the
 * first failure of a release is reported too). Nothing here prints, aborts or exits. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "base/rng.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_device.h"
#include "cuda/doctor_checks.h"
#include "cuda/doctor_release.h"
#include "cuda/doctor_wait.h"

#define CT_DOCTOR_PROBE_BYTES ((size_t)64 << 20)  /* the allocation check */
#define CT_DOCTOR_PROBE_TAIL 4096                 /* bytes of it read back */

enum { GEMM_N = CT_DOCTOR_GEMM_N };  /* (GEMM_N x GEMM_N) times (GEMM_N x GEMM_N), row-major */
/* The convolution: NHWC fp32 input (CONV_N, CONV_H, CONV_W, CONV_C), CONV_F filters of
 * CONV_K x CONV_K x CONV_C, stride 1, zero padding CONV_PAD, so the output is CONV_H x CONV_W. */
enum { CONV_N = 2, CONV_H = 8, CONV_W = 8, CONV_C = 4, CONV_F = 8, CONV_K = CT_DOCTOR_CONV_K, CONV_PAD = 1 };

typedef struct gpu_probe {
    int device;
    int stuck;                   /* its work did not finish: do not synchronise on it */
    cudaStream_t stream;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    void *probe;                 /* the 64 MiB allocation */
    float *d_a, *d_b, *d_c;      /* GEMM */
    float *d_x, *d_w, *d_y;      /* convolution */
    void *d_workspace;
    void *host;                  /* one pinned block, cut into: */
    float *h_a, *h_b, *h_c, *h_x, *h_w, *h_y;
    unsigned char *h_tail;
} gpu_probe;

static void fill_uniform(float *x, size_t n, uint64_t seed)
{
    ct_rng rng = {seed};
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0f * ct_rng_uniform(&rng) - 1.0f;
}

/* The largest difference over the largest reference value: a normwise relative error (element by
 * element ratios blow up where a sum of signed products comes near zero). NaN or infinity in the
 * GPU's result gives INFINITY. */
static double gemm_error(const gpu_probe *p)
{
    double worst = 0.0, magnitude = 0.0;
    for (int i = 0; i < GEMM_N; i++)
        for (int j = 0; j < GEMM_N; j++) {
            double ref = 0.0;
            for (int k = 0; k < GEMM_N; k++)
                ref += (double)p->h_a[i * GEMM_N + k] * p->h_b[k * GEMM_N + j];
            double got = p->h_c[i * GEMM_N + j];
            if (!isfinite(got))
                return INFINITY;
            worst = fmax(worst, fabs(got - ref));
            magnitude = fmax(magnitude, fabs(ref));
        }
    return worst / fmax(magnitude, 1e-30);
}

static double conv_error(const gpu_probe *p)
{
    double worst = 0.0, magnitude = 0.0;
    for (int n = 0; n < CONV_N; n++)
        for (int oy = 0; oy < CONV_H; oy++)
            for (int ox = 0; ox < CONV_W; ox++)
                for (int f = 0; f < CONV_F; f++) {
                    double ref = 0.0;
                    for (int ky = 0; ky < CONV_K; ky++)
                        for (int kx = 0; kx < CONV_K; kx++) {
                            int iy = oy + ky - CONV_PAD, ix = ox + kx - CONV_PAD;
                            if (iy < 0 || iy >= CONV_H || ix < 0 || ix >= CONV_W)
                                continue;
                            const float *x = p->h_x + ((n * CONV_H + iy) * CONV_W + ix) * CONV_C;
                            const float *w = p->h_w + ((f * CONV_K + ky) * CONV_K + kx) * CONV_C;
                            for (int c = 0; c < CONV_C; c++)
                                ref += (double)x[c] * w[c];
                        }
                    double got = p->h_y[((n * CONV_H + oy) * CONV_W + ox) * CONV_F + f];
                    if (!isfinite(got))
                        return INFINITY;
                    worst = fmax(worst, fabs(got - ref));
                    magnitude = fmax(magnitude, fabs(ref));
                }
    return worst / fmax(magnitude, 1e-30);
}

static ct_status probe_host(gpu_probe *p, ct_err *err)
{
    const size_t gemm = (size_t)GEMM_N * GEMM_N;
    const size_t x = (size_t)CONV_N * CONV_H * CONV_W * CONV_C, w = (size_t)CONV_F * CONV_K * CONV_K * CONV_C,
                 y = (size_t)CONV_N * CONV_H * CONV_W * CONV_F;
    const size_t floats = 3 * gemm + x + w + y;
    CT_CUDA_CHECK(cudaMallocHost(&p->host, floats * sizeof(float) + CT_DOCTOR_PROBE_TAIL), err);
    float *f = p->host;
    p->h_a = f;
    p->h_b = p->h_a + gemm;
    p->h_c = p->h_b + gemm;
    p->h_x = p->h_c + gemm;
    p->h_w = p->h_x + x;
    p->h_y = p->h_w + w;
    p->h_tail = (unsigned char *)(p->h_y + y);
    return CT_OK;
}


/* Allocates 64 MiB, fills it and queues a read of its last bytes. */
static ct_status queue_memory(gpu_probe *p, ct_err *err)
{
    CT_CUDA_CHECK(cudaMalloc(&p->probe, CT_DOCTOR_PROBE_BYTES), err);
    CT_CUDA_CHECK(cudaMemsetAsync(p->probe, 0xA5, CT_DOCTOR_PROBE_BYTES, p->stream), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->h_tail, (unsigned char *)p->probe + CT_DOCTOR_PROBE_BYTES - CT_DOCTOR_PROBE_TAIL,
                                  CT_DOCTOR_PROBE_TAIL, cudaMemcpyDeviceToHost, p->stream), err);
    return CT_OK;
}

/* C = A B, row-major, through cuBLAS's column-major SGEMM as C^T = B^T A^T, in plain fp32 (no
 * TF32: the check is against fp32 CPU arithmetic). */
static ct_status queue_gemm(gpu_probe *p, ct_err *err)
{
    const size_t bytes = (size_t)GEMM_N * GEMM_N * sizeof(float);
    fill_uniform(p->h_a, (size_t)GEMM_N * GEMM_N, 0xd0c70a01ULL);
    fill_uniform(p->h_b, (size_t)GEMM_N * GEMM_N, 0xd0c70b02ULL);
    CT_CUDA_CHECK(cudaMalloc((void **)&p->d_a, bytes), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&p->d_b, bytes), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&p->d_c, bytes), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->d_a, p->h_a, bytes, cudaMemcpyHostToDevice, p->stream), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->d_b, p->h_b, bytes, cudaMemcpyHostToDevice, p->stream), err);
    CT_CUDA_CHECK(cudaMemsetAsync(p->d_c, 0xFF, bytes, p->stream), err);  /* NaN until written */
    CT_CUBLAS_CHECK(cublasCreate(&p->blas), err);
    CT_CUBLAS_CHECK(cublasSetStream(p->blas, p->stream), err);
    CT_CUBLAS_CHECK(cublasSetMathMode(p->blas, CUBLAS_DEFAULT_MATH), err);
    const float one = 1.0f, zero = 0.0f;
    CT_CUBLAS_CHECK(cublasSgemm(p->blas, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, p->d_b, GEMM_N,
                                p->d_a, GEMM_N, &zero, p->d_c, GEMM_N), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->h_c, p->d_c, bytes, cudaMemcpyDeviceToHost, p->stream), err);
    return CT_OK;
}

/* y = conv(x, w) in NHWC fp32 through cuDNN's descriptor API, FMA arithmetic (no TF32), the
 * algorithm its heuristics rank first. */
static ct_status queue_conv(gpu_probe *p, ct_err *err)
{
    const size_t nx = (size_t)CONV_N * CONV_H * CONV_W * CONV_C, nw = (size_t)CONV_F * CONV_K * CONV_K * CONV_C,
                 ny = (size_t)CONV_N * CONV_H * CONV_W * CONV_F;
    fill_uniform(p->h_x, nx, 0xd0c7c0d1ULL);
    fill_uniform(p->h_w, nw, 0xd0c7c0d2ULL);
    CT_CUDA_CHECK(cudaMalloc((void **)&p->d_x, nx * sizeof(float)), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&p->d_w, nw * sizeof(float)), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&p->d_y, ny * sizeof(float)), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->d_x, p->h_x, nx * sizeof(float), cudaMemcpyHostToDevice, p->stream), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->d_w, p->h_w, nw * sizeof(float), cudaMemcpyHostToDevice, p->stream), err);
    CT_CUDA_CHECK(cudaMemsetAsync(p->d_y, 0xFF, ny * sizeof(float), p->stream), err);

    CT_CUDNN_CHECK(cudnnCreate(&p->dnn), err);
    CT_CUDNN_CHECK(cudnnSetStream(p->dnn, p->stream), err);
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x_desc), err);
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y_desc), err);
    CT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w_desc), err);
    CT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv_desc), err);
    CT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x_desc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, CONV_N, CONV_C,
                                              CONV_H, CONV_W), err);
    CT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, CONV_F, CONV_C,
                                              CONV_K, CONV_K), err);
    CT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv_desc, CONV_PAD, CONV_PAD, 1, 1, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), err);
    CT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv_desc, CUDNN_FMA_MATH), err);
    int on = 0, oc = 0, oh = 0, ow = 0;
    CT_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv_desc, p->x_desc, p->w_desc, &on, &oc, &oh, &ow),
                   err);
    if (on != CONV_N || oc != CONV_F || oh != CONV_H || ow != CONV_W)
        return ct_fail(err, CT_ERR_BACKEND, "cuDNN gives the test convolution an output of n=%d c=%d h=%d w=%d, "
                       "expected n=%d c=%d h=%d w=%d", on, oc, oh, ow, CONV_N, CONV_F, CONV_H, CONV_W);
    CT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y_desc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, CONV_N, CONV_F,
                                              CONV_H, CONV_W), err);

    cudnnConvolutionFwdAlgoPerf_t perf[16];
    int found = 0;
    CT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(p->dnn, p->x_desc, p->w_desc, p->conv_desc, p->y_desc,
                                                          (int)(sizeof perf / sizeof perf[0]), &found, perf), err);
    int pick = -1;
    for (int i = 0; i < found && pick < 0; i++)  /* the best ranked without tensor-core arithmetic */
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType != CUDNN_TENSOR_OP_MATH &&
            perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
            pick = i;
    for (int i = 0; i < found && pick < 0; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS)
            pick = i;
    if (pick < 0)
        return ct_fail(err, CT_ERR_BACKEND, "cuDNN offers no forward algorithm for the test convolution "
                       "(NHWC fp32, %dx%d, %d of them ranked)", CONV_K, CONV_K, found);
    cudnnConvolutionFwdAlgo_t algo = perf[pick].algo;
    CT_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv_desc, perf[pick].mathType), err);
    size_t workspace = 0;
    CT_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(p->dnn, p->x_desc, p->w_desc, p->conv_desc, p->y_desc,
                                                           algo, &workspace), err);
    if (workspace > 0)
        CT_CUDA_CHECK(cudaMalloc(&p->d_workspace, workspace), err);
    const float one = 1.0f, zero = 0.0f;
    CT_CUDNN_CHECK(cudnnConvolutionForward(p->dnn, &one, p->x_desc, p->d_x, p->w_desc, p->d_w, p->conv_desc, algo,
                                           p->d_workspace, workspace, &zero, p->y_desc, p->d_y), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->h_y, p->d_y, ny * sizeof(float), cudaMemcpyDeviceToHost, p->stream), err);
    return CT_OK;
}

static ct_status probe_run(gpu_probe *p, ct_doctor_gpu_result *out, ct_err *err)
{
    size_t total = 0;
    ct_status st = ct_cuda_device_name(p->device, out->name, sizeof out->name, &total, err);
    if (st != CT_OK)
        return st;
    out->total_mib = (double)total / 1048576.0;
    CT_CUDA_CHECK(cudaSetDevice(p->device), err);
    size_t free_bytes = 0, total_bytes = 0;
    CT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes), err);
    out->free_mib = (double)free_bytes / 1048576.0;
    out->total_mib = (double)total_bytes / 1048576.0;
    CT_CUDA_CHECK(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking), err);
    if ((st = probe_host(p, err)) != CT_OK)
        return st;

    /* memory, GEMM and convolution queued together, then checked */
    if ((st = queue_memory(p, err)) != CT_OK || (st = queue_gemm(p, err)) != CT_OK ||
        (st = queue_conv(p, err)) != CT_OK)
        return st;
    if ((st = ct_doctor_wait(p->stream, NULL, NULL, CT_DOCTOR_WAIT_S, &p->stuck, err)) != CT_OK)
        return st;
    for (int i = 0; i < CT_DOCTOR_PROBE_TAIL; i++)
        if (p->h_tail[i] != 0xA5)
            return ct_fail(err, CT_ERR_BACKEND, "the 64 MiB test allocation read back 0x%02x at byte %zu, "
                           "0xa5 was written", p->h_tail[i], CT_DOCTOR_PROBE_BYTES - CT_DOCTOR_PROBE_TAIL + i);
    CT_CUDA_CHECK(cudaFree(p->probe), err);
    p->probe = NULL;
    out->gemm_rel_err = gemm_error(p);
    if (!(out->gemm_rel_err < CT_DOCTOR_TOLERANCE))
        return ct_fail(err, CT_ERR_BACKEND, "cuBLAS SGEMM %dx%dx%d differs from the CPU: relative error %.2e "
                       "(limit %.0e)", GEMM_N, GEMM_N, GEMM_N, out->gemm_rel_err, CT_DOCTOR_TOLERANCE);
    out->conv_rel_err = conv_error(p);
    if (!(out->conv_rel_err < CT_DOCTOR_TOLERANCE))
        return ct_fail(err, CT_ERR_BACKEND, "cuDNN convolution differs from the CPU: relative error %.2e "
                       "(limit %.0e)", out->conv_rel_err, CT_DOCTOR_TOLERANCE);
    return CT_OK;
}

static ct_status probe_release(gpu_probe *p, ct_err *err)
{
    ct_release_log log = ct_release_start(err);
    CT_RELEASE(&log, CT_CUDA_STATUS, cudaSetDevice(p->device));
    if (p->stream && !p->stuck)
        CT_RELEASE(&log, CT_CUDA_STATUS, cudaStreamSynchronize(p->stream));
    if (p->conv_desc)
        CT_RELEASE(&log, CT_CUDNN_STATUS, cudnnDestroyConvolutionDescriptor(p->conv_desc));
    if (p->w_desc)
        CT_RELEASE(&log, CT_CUDNN_STATUS, cudnnDestroyFilterDescriptor(p->w_desc));
    if (p->y_desc)
        CT_RELEASE(&log, CT_CUDNN_STATUS, cudnnDestroyTensorDescriptor(p->y_desc));
    if (p->x_desc)
        CT_RELEASE(&log, CT_CUDNN_STATUS, cudnnDestroyTensorDescriptor(p->x_desc));
    if (p->dnn)
        CT_RELEASE(&log, CT_CUDNN_STATUS, cudnnDestroy(p->dnn));
    if (p->blas)
        CT_RELEASE(&log, CT_CUBLAS_STATUS, cublasDestroy(p->blas));
    void *device_memory[] = {p->probe, p->d_a, p->d_b, p->d_c, p->d_x, p->d_w, p->d_y, p->d_workspace};
    for (size_t i = 0; i < sizeof device_memory / sizeof device_memory[0]; i++)
        if (device_memory[i])
            CT_RELEASE(&log, CT_CUDA_STATUS, cudaFree(device_memory[i]));
    if (p->host)
        CT_RELEASE(&log, CT_CUDA_STATUS, cudaFreeHost(p->host));
    if (p->stream)
        CT_RELEASE(&log, CT_CUDA_STATUS, cudaStreamDestroy(p->stream));
    memset(p, 0, sizeof *p);
    return log.status;
}

void ct_doctor_check_gpu(int device, ct_doctor_gpu_result *out)
{
    memset(out, 0, sizeof *out);
    out->gemm_rel_err = out->conv_rel_err = -1.0;  /* not measured */
    ct_err_clear(&out->err);
    gpu_probe p;
    memset(&p, 0, sizeof p);
    p.device = device;
    ct_err release_err;
    ct_err_clear(&release_err);
    ct_status st = probe_run(&p, out, &out->err);
    ct_status released = probe_release(&p, &release_err);
    if (st == CT_OK && released != CT_OK) {
        st = released;
        out->err = release_err;
    }
    out->status = st;
}
