/* `cutrain doctor` on the CUDA build: the versions of the driver and the libraries (compiled
 * against and loaded) with the mismatches that matter; then each visible GPU on its own, on its
 * own stream (memory, a cuBLAS SGEMM and a cuDNN convolution checked against plain CPU loops, a
 * one-rank NCCL all-reduce); then, with two GPUs or more, one NCCL all-reduce across all of them.
 *
 * A failed check fails its GPU with the message in its detail and the doctor moves on: nothing
 * here aborts, prints or exits, and everything made for a check is released on every path (the
 * first failure of a release is reported too). A collective that never finishes is aborted after
 * CT_DOCTOR_WAIT_S seconds instead of hanging the doctor. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include "base/rng.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_doctor.h"

#define CT_DOCTOR_PROBE_BYTES ((size_t)64 << 20)  /* the allocation check */
#define CT_DOCTOR_PROBE_TAIL 4096                 /* bytes of it read back */
#define CT_DOCTOR_TOLERANCE 1e-3                  /* GEMM and convolution against the CPU */
#define CT_DOCTOR_WAIT_S 60.0                     /* a GPU's queued work must finish within this */

enum { GEMM_N = 256 };  /* (GEMM_N x GEMM_N) times (GEMM_N x GEMM_N), row-major */
/* The convolution: NHWC fp32 input (CONV_N, CONV_H, CONV_W, CONV_C), CONV_F filters of
 * CONV_K x CONV_K x CONV_C, stride 1, zero padding CONV_PAD, so the output is CONV_H x CONV_W. */
enum { CONV_N = 2, CONV_H = 8, CONV_W = 8, CONV_C = 4, CONV_F = 8, CONV_K = 3, CONV_PAD = 1 };
enum { REDUCE_COUNT = 1 << 16 };  /* floats in each all-reduce */

/* Copies src into dst (n bytes), cut short where it does not fit; always terminated. */
static void copy_text(char *dst, size_t n, const char *src)
{
    size_t len = strlen(src);
    if (len >= n)
        len = n - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* ---- versions ---- */

static void add_warning(ct_doctor_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_warning(ct_doctor_report *r, const char *fmt, ...)
{
    if (r->n_warnings >= CT_DOCTOR_MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->warnings[r->n_warnings], sizeof r->warnings[0], fmt, ap);
    va_end(ap);
    r->n_warnings++;
}

/* cuBLAS, cuDNN and NCCL encode versions as major*10000 + minor*100 + patch; cuDNN 8 and NCCL
 * before 2.9 used major*1000 + minor*100 + patch. */
static int lib_major(int v) { return v >= 10000 ? v / 10000 : v / 1000; }
static int lib_minor(int v) { return v >= 10000 ? v / 100 % 100 : v / 100 % 10; }
static long lib_order(int v) { return (long)lib_major(v) * 1000000L + (long)lib_minor(v) * 1000L + v % 100; }

static void lib_text(int v, char *buf, size_t n)
{
    if (v <= 0)
        snprintf(buf, n, "none");
    else
        snprintf(buf, n, "%d.%d.%d", lib_major(v), lib_minor(v), v % 100);
}

/* cuDNN and NCCL: another major version, or an older library than the headers, matters. */
static void check_library(ct_doctor_report *r, const char *name, int compiled, int loaded)
{
    if (compiled <= 0 || loaded <= 0)
        return;
    char c[24], l[24];
    lib_text(compiled, c, sizeof c);
    lib_text(loaded, l, sizeof l);
    if (lib_major(loaded) != lib_major(compiled))
        add_warning(r, "%s %s is loaded but this program was built against %s: another major version", name,
                    l, c);
    else if (lib_order(loaded) < lib_order(compiled))
        add_warning(r, "%s %s is loaded, older than the %s this program was built against", name, l, c);
}

static void read_versions(ct_doctor_report *r)
{
    ct_err err;
    ct_err_clear(&err);
    if (ct_cuda_versions(&r->driver_cuda, NULL, &err) != CT_OK)
        add_warning(r, "could not read the driver's CUDA version: %s", err.msg);
    if (ct_cuda_versions(NULL, &r->runtime_cuda, &err) != CT_OK)
        add_warning(r, "could not read the CUDA runtime version: %s", err.msg);

    r->cublas_compiled = CUBLAS_VERSION;
    int major = 0, minor = 0, patch = 0;
    ct_status st = CT_CUBLAS_STATUS(cublasGetProperty(MAJOR_VERSION, &major), &err);
    if (st == CT_OK)
        st = CT_CUBLAS_STATUS(cublasGetProperty(MINOR_VERSION, &minor), &err);
    if (st == CT_OK)
        st = CT_CUBLAS_STATUS(cublasGetProperty(PATCH_LEVEL, &patch), &err);
    if (st == CT_OK)
        r->cublas_loaded = major * 10000 + minor * 100 + patch;
    else
        add_warning(r, "could not read the loaded cuBLAS version: %s", err.msg);

    r->cudnn_compiled = CUDNN_VERSION;
    r->cudnn_loaded = (int)cudnnGetVersion();

    r->nccl_compiled = NCCL_VERSION_CODE;
    int nccl = 0;
    if (CT_NCCL_STATUS(ncclGetVersion(&nccl), &err) == CT_OK)
        r->nccl_loaded = nccl;
    else
        add_warning(r, "could not read the loaded NCCL version: %s", err.msg);

    if (r->driver_cuda > 0 && r->runtime_cuda > 0 && r->driver_cuda < r->runtime_cuda) {
        char d[16], rt[16];
        ct_cuda_version_format(r->driver_cuda, d, sizeof d);
        ct_cuda_version_format(r->runtime_cuda, rt, sizeof rt);
        if (r->driver_cuda / 1000 < r->runtime_cuda / 1000)
            add_warning(r, "the driver supports CUDA %s, older than the CUDA %s runtime: update the driver", d, rt);
        else
            add_warning(r, "the driver supports CUDA %s, older than the CUDA %s runtime: only minor-version "
                        "compatibility (no PTX JIT) lets it run", d, rt);
    }
    if (r->cublas_loaded > 0 && lib_major(r->cublas_loaded) != lib_major(r->cublas_compiled)) {
        char c[24], l[24];
        lib_text(r->cublas_compiled, c, sizeof c);
        lib_text(r->cublas_loaded, l, sizeof l);
        add_warning(r, "cuBLAS %s is loaded but this program was built against %s: another major version", l, c);
    }
    check_library(r, "cuDNN", r->cudnn_compiled, r->cudnn_loaded);
    check_library(r, "NCCL", r->nccl_compiled, r->nccl_loaded);
}

/* ---- waiting with a limit ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for everything queued on `stream`; with a communicator, also watches it for asynchronous
 * errors. After `limit_s` seconds it gives up and sets *stuck, so that the caller aborts the
 * communicator instead of waiting on it. */
static ct_status wait_stream(cudaStream_t stream, ncclComm_t comm, double limit_s, int *stuck, ct_err *err)
{
    double start = now_s();
    for (;;) {
        cudaError_t rc = cudaStreamQuery(stream);
        if (rc == cudaSuccess)
            return CT_OK;
        if (rc != cudaErrorNotReady)
            return ct_cuda_status_(rc, err, __FILE__, __LINE__, "cudaStreamQuery(stream)");
        if (cudaPeekAtLastError() == cudaErrorNotReady)  /* not an error: leave no trace of it */
            (void)cudaGetLastError();
        if (comm) {
            ncclResult_t async = ncclSuccess;
            CT_NCCL_CHECK(ncclCommGetAsyncError(comm, &async), err);
            if (async != ncclSuccess && async != ncclInProgress) {
                *stuck = 1;
                return ct_fail(err, CT_ERR_BACKEND, "NCCL reported an asynchronous error: %s (%s)",
                               ncclGetErrorString(async), ncclGetLastError(comm));
            }
        }
        if (now_s() - start > limit_s) {
            *stuck = 1;
            return ct_fail(err, CT_ERR_BACKEND, "the GPU work did not finish within %.0f s", limit_s);
        }
        struct timespec nap = {0, 200 * 1000};
        nanosleep(&nap, NULL);
    }
}

/* Keeps the first failure of a release sequence in *err; later ones go to a spare message. */
typedef struct release_log {
    ct_status status;
    ct_err *err;
    ct_err spare;
} release_log;

static ct_err *release_slot(release_log *log) { return log->status == CT_OK ? log->err : &log->spare; }

static void release_note(release_log *log, ct_status st)
{
    if (log->status == CT_OK)
        log->status = st;
}

#define RELEASE(log, form, call) release_note((log), form(call, release_slot(log)))

/* ---- one GPU on its own ---- */

typedef struct gpu_probe {
    int device;
    int stuck;                   /* its work did not finish: abort the communicator */
    cudaStream_t stream;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    ncclComm_t comm;
    void *probe;                 /* the 64 MiB allocation */
    float *d_a, *d_b, *d_c;      /* GEMM */
    float *d_x, *d_w, *d_y;      /* convolution */
    void *d_workspace;
    float *d_send, *d_recv;      /* all-reduce */
    void *host;                  /* one pinned block, cut into: */
    float *h_a, *h_b, *h_c, *h_x, *h_w, *h_y, *h_send, *h_recv;
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
    double worst = 0.0, scale = 0.0;
    for (int i = 0; i < GEMM_N; i++)
        for (int j = 0; j < GEMM_N; j++) {
            double ref = 0.0;
            for (int k = 0; k < GEMM_N; k++)
                ref += (double)p->h_a[i * GEMM_N + k] * p->h_b[k * GEMM_N + j];
            double got = p->h_c[i * GEMM_N + j];
            if (!isfinite(got))
                return INFINITY;
            worst = fmax(worst, fabs(got - ref));
            scale = fmax(scale, fabs(ref));
        }
    return worst / fmax(scale, 1e-30);
}

static double conv_error(const gpu_probe *p)
{
    double worst = 0.0, scale = 0.0;
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
                    scale = fmax(scale, fabs(ref));
                }
    return worst / fmax(scale, 1e-30);
}

static ct_status probe_host(gpu_probe *p, ct_err *err)
{
    const size_t gemm = (size_t)GEMM_N * GEMM_N;
    const size_t x = (size_t)CONV_N * CONV_H * CONV_W * CONV_C, w = (size_t)CONV_F * CONV_K * CONV_K * CONV_C,
                 y = (size_t)CONV_N * CONV_H * CONV_W * CONV_F;
    const size_t floats = 3 * gemm + x + w + y + 2 * (size_t)REDUCE_COUNT;
    CT_CUDA_CHECK(cudaMallocHost(&p->host, floats * sizeof(float) + CT_DOCTOR_PROBE_TAIL), err);
    float *f = p->host;
    p->h_a = f;
    p->h_b = p->h_a + gemm;
    p->h_c = p->h_b + gemm;
    p->h_x = p->h_c + gemm;
    p->h_w = p->h_x + x;
    p->h_y = p->h_w + w;
    p->h_send = p->h_y + y;
    p->h_recv = p->h_send + REDUCE_COUNT;
    p->h_tail = (unsigned char *)(p->h_recv + REDUCE_COUNT);
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

/* A one-rank communicator on this device, and a sum over it: the result must equal the input. */
static ct_status run_allreduce(gpu_probe *p, ct_err *err)
{
    const size_t bytes = (size_t)REDUCE_COUNT * sizeof(float);
    for (int i = 0; i < REDUCE_COUNT; i++)
        p->h_send[i] = (float)(i % 1000) - 500.0f;
    CT_NCCL_CHECK(ncclCommInitAll(&p->comm, 1, &p->device), err);
    CT_CUDA_CHECK(cudaSetDevice(p->device), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&p->d_send, bytes), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&p->d_recv, bytes), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->d_send, p->h_send, bytes, cudaMemcpyHostToDevice, p->stream), err);
    CT_CUDA_CHECK(cudaMemsetAsync(p->d_recv, 0xFF, bytes, p->stream), err);
    CT_NCCL_CHECK(ncclAllReduce(p->d_send, p->d_recv, REDUCE_COUNT, ncclFloat, ncclSum, p->comm, p->stream), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->h_recv, p->d_recv, bytes, cudaMemcpyDeviceToHost, p->stream), err);
    ct_status st = wait_stream(p->stream, p->comm, CT_DOCTOR_WAIT_S, &p->stuck, err);
    if (st != CT_OK)
        return st;
    for (int i = 0; i < REDUCE_COUNT; i++)
        if (p->h_recv[i] != p->h_send[i])
            return ct_fail(err, CT_ERR_BACKEND, "the one-rank NCCL all-reduce gave %g at element %d, expected %g",
                           (double)p->h_recv[i], i, (double)p->h_send[i]);
    return CT_OK;
}

static ct_status probe_run(gpu_probe *p, ct_gpu_health *h, ct_err *err)
{
    size_t total = 0;
    ct_status st = ct_cuda_device_name(p->device, h->name, sizeof h->name, &total, err);
    if (st != CT_OK)
        return st;
    h->total_mib = (double)total / 1048576.0;
    CT_CUDA_CHECK(cudaSetDevice(p->device), err);
    size_t free_bytes = 0, total_bytes = 0;
    CT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes), err);
    h->free_mib = (double)free_bytes / 1048576.0;
    h->total_mib = (double)total_bytes / 1048576.0;
    CT_CUDA_CHECK(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking), err);
    if ((st = probe_host(p, err)) != CT_OK)
        return st;

    /* memory, GEMM and convolution queued together, then checked */
    if ((st = queue_memory(p, err)) != CT_OK || (st = queue_gemm(p, err)) != CT_OK ||
        (st = queue_conv(p, err)) != CT_OK)
        return st;
    if ((st = wait_stream(p->stream, NULL, CT_DOCTOR_WAIT_S, &p->stuck, err)) != CT_OK)
        return st;
    for (int i = 0; i < CT_DOCTOR_PROBE_TAIL; i++)
        if (p->h_tail[i] != 0xA5)
            return ct_fail(err, CT_ERR_BACKEND, "the 64 MiB test allocation read back 0x%02x at byte %zu, "
                           "0xa5 was written", p->h_tail[i], CT_DOCTOR_PROBE_BYTES - CT_DOCTOR_PROBE_TAIL + i);
    CT_CUDA_CHECK(cudaFree(p->probe), err);
    p->probe = NULL;
    h->gemm_rel_err = gemm_error(p);
    if (!(h->gemm_rel_err < CT_DOCTOR_TOLERANCE))
        return ct_fail(err, CT_ERR_BACKEND, "cuBLAS SGEMM %dx%dx%d differs from the CPU: relative error %.2e "
                       "(limit %.0e)", GEMM_N, GEMM_N, GEMM_N, h->gemm_rel_err, CT_DOCTOR_TOLERANCE);
    h->conv_rel_err = conv_error(p);
    if (!(h->conv_rel_err < CT_DOCTOR_TOLERANCE))
        return ct_fail(err, CT_ERR_BACKEND, "cuDNN convolution differs from the CPU: relative error %.2e "
                       "(limit %.0e)", h->conv_rel_err, CT_DOCTOR_TOLERANCE);

    return run_allreduce(p, err);
}

static ct_status probe_release(gpu_probe *p, ct_err *err)
{
    release_log log = {CT_OK, err, {0}};
    RELEASE(&log, CT_CUDA_STATUS, cudaSetDevice(p->device));
    if (p->comm && p->stuck) {  /* abort first: what is stuck on the stream is NCCL's */
        RELEASE(&log, CT_NCCL_STATUS, ncclCommAbort(p->comm));
        p->comm = NULL;
    }
    if (p->stream && !p->stuck)
        RELEASE(&log, CT_CUDA_STATUS, cudaStreamSynchronize(p->stream));
    if (p->comm)
        RELEASE(&log, CT_NCCL_STATUS, ncclCommDestroy(p->comm));
    if (p->conv_desc)
        RELEASE(&log, CT_CUDNN_STATUS, cudnnDestroyConvolutionDescriptor(p->conv_desc));
    if (p->w_desc)
        RELEASE(&log, CT_CUDNN_STATUS, cudnnDestroyFilterDescriptor(p->w_desc));
    if (p->y_desc)
        RELEASE(&log, CT_CUDNN_STATUS, cudnnDestroyTensorDescriptor(p->y_desc));
    if (p->x_desc)
        RELEASE(&log, CT_CUDNN_STATUS, cudnnDestroyTensorDescriptor(p->x_desc));
    if (p->dnn)
        RELEASE(&log, CT_CUDNN_STATUS, cudnnDestroy(p->dnn));
    if (p->blas)
        RELEASE(&log, CT_CUBLAS_STATUS, cublasDestroy(p->blas));
    void *device_memory[] = {p->probe, p->d_a, p->d_b, p->d_c, p->d_x, p->d_w, p->d_y, p->d_workspace,
                             p->d_send, p->d_recv};
    for (size_t i = 0; i < sizeof device_memory / sizeof device_memory[0]; i++)
        if (device_memory[i])
            RELEASE(&log, CT_CUDA_STATUS, cudaFree(device_memory[i]));
    if (p->host)
        RELEASE(&log, CT_CUDA_STATUS, cudaFreeHost(p->host));
    if (p->stream)
        RELEASE(&log, CT_CUDA_STATUS, cudaStreamDestroy(p->stream));
    memset(p, 0, sizeof *p);
    return log.status;
}

static void check_gpu(int ordinal, ct_gpu_health *h)
{
    memset(h, 0, sizeof *h);
    h->ordinal = ordinal;
    h->gemm_rel_err = h->conv_rel_err = -1.0;  /* not measured */
    gpu_probe p;
    memset(&p, 0, sizeof p);
    p.device = ordinal;
    ct_err err, release_err;
    ct_err_clear(&err);
    ct_err_clear(&release_err);
    ct_status st = probe_run(&p, h, &err);
    ct_status released = probe_release(&p, &release_err);
    if (st == CT_OK && released != CT_OK) {
        st = released;
        err = release_err;
    }
    h->pass = st == CT_OK;
    if (h->pass)
        snprintf(h->detail, sizeof h->detail, "64 MiB allocated; SGEMM %dx%dx%d and %dx%d convolution match "
                 "the CPU; one-rank NCCL all-reduce correct", GEMM_N, GEMM_N, GEMM_N, CONV_K, CONV_K);
    else
        copy_text(h->detail, sizeof h->detail, err.msg[0] ? err.msg : "failed without a message");
}

/* ---- all GPUs together ---- */

typedef struct group_probe {
    int n;
    int devices[CT_DOCTOR_MAX_GPUS];
    int comms_made, stuck;
    ncclComm_t comms[CT_DOCTOR_MAX_GPUS];
    cudaStream_t streams[CT_DOCTOR_MAX_GPUS];
    float *send[CT_DOCTOR_MAX_GPUS], *recv[CT_DOCTOR_MAX_GPUS];
    float *host;
} group_probe;

/* Rank r contributes (i % 97) + r at element i, so the sum is n (i % 97) + n (n - 1) / 2. */
static ct_status group_run(group_probe *g, ct_err *err)
{
    const size_t bytes = (size_t)REDUCE_COUNT * sizeof(float);
    g->host = malloc(bytes);
    if (!g->host)
        return ct_fail(err, CT_ERR_NOMEM, "out of host memory for the all-GPU check");
    CT_NCCL_CHECK(ncclCommInitAll(g->comms, g->n, g->devices), err);
    g->comms_made = 1;
    for (int r = 0; r < g->n; r++) {
        CT_CUDA_CHECK(cudaSetDevice(g->devices[r]), err);
        CT_CUDA_CHECK(cudaStreamCreateWithFlags(&g->streams[r], cudaStreamNonBlocking), err);
        CT_CUDA_CHECK(cudaMalloc((void **)&g->send[r], bytes), err);
        CT_CUDA_CHECK(cudaMalloc((void **)&g->recv[r], bytes), err);
        for (int i = 0; i < REDUCE_COUNT; i++)
            g->host[i] = (float)(i % 97 + r);
        /* from pageable memory: returns once the host buffer is staged, so it can be refilled */
        CT_CUDA_CHECK(cudaMemcpyAsync(g->send[r], g->host, bytes, cudaMemcpyHostToDevice, g->streams[r]), err);
        CT_CUDA_CHECK(cudaMemsetAsync(g->recv[r], 0xFF, bytes, g->streams[r]), err);
    }
    CT_NCCL_CHECK(ncclGroupStart(), err);
    ct_status st = CT_OK;
    for (int r = 0; r < g->n && st == CT_OK; r++)
        st = CT_NCCL_STATUS(ncclAllReduce(g->send[r], g->recv[r], REDUCE_COUNT, ncclFloat, ncclSum, g->comms[r],
                                          g->streams[r]), err);
    ct_err spare;
    ct_status ended = CT_NCCL_STATUS(ncclGroupEnd(), st == CT_OK ? err : &spare);
    if (st == CT_OK)
        st = ended;
    if (st != CT_OK) {
        g->stuck = 1;  /* part of a collective may be queued: abort rather than wait */
        return st;
    }
    for (int r = 0; r < g->n; r++)
        if ((st = wait_stream(g->streams[r], g->comms[r], CT_DOCTOR_WAIT_S, &g->stuck, err)) != CT_OK)
            return st;
    for (int r = 0; r < g->n; r++) {
        CT_CUDA_CHECK(cudaSetDevice(g->devices[r]), err);
        CT_CUDA_CHECK(cudaMemcpyAsync(g->host, g->recv[r], bytes, cudaMemcpyDeviceToHost, g->streams[r]), err);
        CT_CUDA_CHECK(cudaStreamSynchronize(g->streams[r]), err);
        for (int i = 0; i < REDUCE_COUNT; i++) {
            float want = (float)(g->n * (i % 97) + g->n * (g->n - 1) / 2);
            if (g->host[i] != want)
                return ct_fail(err, CT_ERR_BACKEND, "the all-reduce across %d GPUs gave %g at element %d on GPU %d, "
                               "expected %g", g->n, (double)g->host[i], i, g->devices[r], (double)want);
        }
    }
    return CT_OK;
}

static ct_status group_release(group_probe *g, ct_err *err)
{
    release_log log = {CT_OK, err, {0}};
    if (g->comms_made && g->stuck)
        for (int r = 0; r < g->n; r++)
            RELEASE(&log, CT_NCCL_STATUS, ncclCommAbort(g->comms[r]));
    for (int r = 0; r < g->n; r++)
        if (g->streams[r] && !g->stuck) {
            RELEASE(&log, CT_CUDA_STATUS, cudaSetDevice(g->devices[r]));
            RELEASE(&log, CT_CUDA_STATUS, cudaStreamSynchronize(g->streams[r]));
        }
    /* Destroying the ranks of one process one after another is fine: NCCL frees the shared
     * resources when the last of them is destroyed. */
    if (g->comms_made && !g->stuck)
        for (int r = 0; r < g->n; r++)
            RELEASE(&log, CT_NCCL_STATUS, ncclCommDestroy(g->comms[r]));
    for (int r = 0; r < g->n; r++) {
        if (!g->streams[r] && !g->send[r] && !g->recv[r])
            continue;
        RELEASE(&log, CT_CUDA_STATUS, cudaSetDevice(g->devices[r]));
        if (g->send[r])
            RELEASE(&log, CT_CUDA_STATUS, cudaFree(g->send[r]));
        if (g->recv[r])
            RELEASE(&log, CT_CUDA_STATUS, cudaFree(g->recv[r]));
        if (g->streams[r])
            RELEASE(&log, CT_CUDA_STATUS, cudaStreamDestroy(g->streams[r]));
    }
    free(g->host);
    memset(g, 0, sizeof *g);
    return log.status;
}

static void check_together(ct_doctor_report *r)
{
    if (r->n_gpus < 2) {
        r->together = -1;
        snprintf(r->together_detail, sizeof r->together_detail, "one GPU: nothing to check together");
        return;
    }
    group_probe g;
    memset(&g, 0, sizeof g);
    char left_out[120] = "";
    size_t used = 0;
    for (int i = 0; i < r->n_gpus; i++) {
        if (r->gpus[i].pass)
            g.devices[g.n++] = r->gpus[i].ordinal;
        else if (used < sizeof left_out)
            used += (size_t)snprintf(left_out + used, sizeof left_out - used, "%s%d", used ? ", " : "",
                                     r->gpus[i].ordinal);
    }
    if (g.n < 2) {
        r->together = 0;
        snprintf(r->together_detail, sizeof r->together_detail,
                 "not run: fewer than two GPUs passed on their own (failed: %s)", left_out);
        return;
    }
    ct_err err, release_err;
    ct_err_clear(&err);
    ct_err_clear(&release_err);
    ct_status st = group_run(&g, &err);
    int n = g.n;
    ct_status released = group_release(&g, &release_err);
    if (st == CT_OK && released != CT_OK) {
        st = released;
        err = release_err;
    }
    r->together = st == CT_OK ? 1 : 0;
    if (st != CT_OK)
        copy_text(r->together_detail, sizeof r->together_detail, err.msg[0] ? err.msg : "failed without a message");
    else if (left_out[0])
        snprintf(r->together_detail, sizeof r->together_detail,
                 "NCCL all-reduce across %d GPUs correct (left out, failed on their own: %s)", n, left_out);
    else
        snprintf(r->together_detail, sizeof r->together_detail, "NCCL all-reduce across %d GPUs correct", n);
}

/* ---- the whole check ---- */

ct_status ct_cuda_doctor(ct_doctor_report *r)
{
    if (!r)
        return CT_ERR_USAGE;
    r->built_with_cuda = 1;
    read_versions(r);

    int count = 0;
    ct_status st = ct_cuda_devices(&count, r->no_gpu_reason, sizeof r->no_gpu_reason);
    if (st != CT_OK || count <= 0) {
        /* no GPU, or none that can be counted: the reason says which; the doctor itself ran */
        r->n_gpus = 0;
        r->together = -1;
        if (!r->no_gpu_reason[0])
            snprintf(r->no_gpu_reason, sizeof r->no_gpu_reason, "no CUDA device is visible");
        r->pass = 0;
        return CT_OK;
    }
    r->no_gpu_reason[0] = '\0';
    if (count > CT_DOCTOR_MAX_GPUS) {
        add_warning(r, "%d GPUs are visible; only the first %d were checked", count, CT_DOCTOR_MAX_GPUS);
        count = CT_DOCTOR_MAX_GPUS;
    }

    ct_err err;
    ct_err_clear(&err);
    int previous = -1;
    if (CT_CUDA_STATUS(cudaGetDevice(&previous), &err) != CT_OK) {
        add_warning(r, "could not read the current device: %s", err.msg);
        previous = -1;
    }

    r->n_gpus = count;
    int all_pass = 1;
    for (int i = 0; i < count; i++) {
        check_gpu(i, &r->gpus[i]);
        all_pass &= r->gpus[i].pass;
    }
    check_together(r);
    r->pass = r->n_gpus > 0 && all_pass && r->together != 0;

    if (previous >= 0 && CT_CUDA_STATUS(cudaSetDevice(previous), &err) != CT_OK)
        add_warning(r, "could not restore the current device %d: %s", previous, err.msg);
    return CT_OK;
}
