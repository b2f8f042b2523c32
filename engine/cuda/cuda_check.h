/* Error checks for the CUDA backend's host code: every CUDA, cuBLAS(Lt), cuDNN and NCCL return
 * code goes through one of these, so a failure leaves "file:line: call failed: reason" in the
 * caller's ct_err and the status travels up.
 *
 * Two forms per library:
 *   CT_CUDA_CHECK(cudaMalloc(&p, bytes), err);            returns the status from the enclosing
 *                                                          function (which returns ct_status)
 *   ct_status st = CT_CUDA_STATUS(cudaFree(p), err);       an expression, for paths that must
 *                                                          release resources before returning
 * Out-of-memory failures map to CT_ERR_NOMEM (the batch-size search backs off on it), the rest
 * to CT_ERR_BACKEND. The source position is written into the message, not into err->line, which
 * names config lines only.
 *
 * The cuDNN and NCCL forms are plain macros that name cudnn.h / nccl.h functions only where they
 * are used, so this header needs neither library. */
#ifndef CT_CUDA_CHECK_H
#define CT_CUDA_CHECK_H

#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "base/status.h"

/* The file's last path component: CMake passes absolute paths, which say nothing more. */
static inline const char *ct_src_name_(const char *file)
{
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

static inline ct_status ct_gpu_fail_(ct_err *err, ct_status status, const char *file, int line,
                                     const char *call, const char *why, const char *name, int code)
{
    if (name)
        return ct_fail(err, status, "%s:%d: %s failed: %s (%s)", ct_src_name_(file), line, call,
                       why ? why : "unknown error", name);
    return ct_fail(err, status, "%s:%d: %s failed: %s (status %d)", ct_src_name_(file), line, call,
                   why ? why : "unknown error", code);
}

static inline ct_status ct_cuda_status_(cudaError_t rc, ct_err *err, const char *file, int line,
                                        const char *call)
{
    if (rc == cudaSuccess)
        return CT_OK;
    return ct_gpu_fail_(err, rc == cudaErrorMemoryAllocation ? CT_ERR_NOMEM : CT_ERR_BACKEND, file, line,
                        call, cudaGetErrorString(rc), cudaGetErrorName(rc), (int)rc);
}

static inline ct_status ct_cublas_status_(cublasStatus_t rc, ct_err *err, const char *file, int line,
                                          const char *call)
{
    if (rc == CUBLAS_STATUS_SUCCESS)
        return CT_OK;
    return ct_gpu_fail_(err, rc == CUBLAS_STATUS_ALLOC_FAILED ? CT_ERR_NOMEM : CT_ERR_BACKEND, file, line,
                        call, cublasGetStatusString(rc), cublasGetStatusName(rc), (int)rc);
}

/* CUDA runtime calls, and the kernel launchers of kernels/kernels.h (their int is a cudaError_t). */
#define CT_CUDA_STATUS(call, err) ct_cuda_status_((cudaError_t)(call), (err), __FILE__, __LINE__, #call)
#define CT_CUDA_CHECK(call, err) do { \
    ct_status ct_st_ = CT_CUDA_STATUS(call, err); \
    if (ct_st_ != CT_OK) return ct_st_; \
} while (0)

/* Polling GPU work without waiting for it: *done = 1 once everything before `event` has run (or
 * everything queued on `stream`), 0 while it runs. "Not ready" is no error, but the runtime may
 * keep it as the thread's last error, which the next kernel launcher's cudaGetLastError would
 * report as its own failure: it is cleared, and only when it is what the last error holds. An
 * error an earlier call of the thread left pending is reported first, so that the query cannot
 * overwrite it nor the clearing drop it.
 *   ct_status st = CT_CUDA_EVENT_DONE(event, &done, err);
 *   ct_status st = CT_CUDA_STREAM_DONE(stream, &done, err); */
static inline ct_status ct_cuda_done_(cudaEvent_t event, cudaStream_t stream, int *done, ct_err *err,
                                      const char *file, int line)
{
    *done = 0;
    cudaError_t pending = cudaPeekAtLastError();
    if (pending != cudaSuccess) {
        (void)cudaGetLastError();
        if (pending != cudaErrorNotReady)  /* another query's "not ready" is no error either */
            return ct_cuda_status_(pending, err, file, line, "an earlier CUDA call");
    }
    cudaError_t rc = event ? cudaEventQuery(event) : cudaStreamQuery(stream);
    if (rc == cudaErrorNotReady) {
        if (cudaPeekAtLastError() == cudaErrorNotReady)
            (void)cudaGetLastError();
        return CT_OK;
    }
    *done = rc == cudaSuccess;
    return ct_cuda_status_(rc, err, file, line, event ? "cudaEventQuery(event)" : "cudaStreamQuery(stream)");
}
#define CT_CUDA_EVENT_DONE(event, done, err) ct_cuda_done_((event), NULL, (done), (err), __FILE__, __LINE__)
#define CT_CUDA_STREAM_DONE(stream, done, err) ct_cuda_done_(NULL, (stream), (done), (err), __FILE__, __LINE__)

/* cuBLAS and cuBLASLt (both return cublasStatus_t). */
#define CT_CUBLAS_STATUS(call, err) ct_cublas_status_((call), (err), __FILE__, __LINE__, #call)
#define CT_CUBLAS_CHECK(call, err) do { \
    ct_status ct_st_ = CT_CUBLAS_STATUS(call, err); \
    if (ct_st_ != CT_OK) return ct_st_; \
} while (0)

/* cuDNN: include cudnn.h where this is used. cuDNN 9 reports running out of memory as
 * CUDNN_STATUS_INTERNAL_ERROR_{DEVICE,HOST}_ALLOCATION_FAILED (CUDNN_STATUS_ALLOC_FAILED is a
 * deprecated alias of the host one). The expression form, CT_CUDNN_STATUS, needs cudnn.h included
 * before this header (cuda_internal.h does so): its helper is defined below, outside the guard. */
#define CT_CUDNN_CHECK(call, err) do { \
    cudnnStatus_t ct_rc_ = (call); \
    if (ct_rc_ != CUDNN_STATUS_SUCCESS) \
        return ct_gpu_fail_((err), \
                            ct_rc_ == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED || \
                                    ct_rc_ == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED \
                                ? CT_ERR_NOMEM : CT_ERR_BACKEND, \
                            __FILE__, __LINE__, #call, cudnnGetErrorString(ct_rc_), NULL, (int)ct_rc_); \
} while (0)
#define CT_CUDNN_STATUS(call, err) ct_cudnn_status_((call), (err), __FILE__, __LINE__, #call)

/* nvJPEG, loaded with dlopen: include base/nvjpeg_api.h where this is used (the calls go through
 * its ct_nvjpeg_lib's pointers). Its allocator failure maps to CT_ERR_NOMEM. */
#define CT_NVJPEG_STATUS(call, err) \
    ct_nvjpeg_status_((call), (err), __FILE__, __LINE__, #call)
#define CT_NVJPEG_CHECK(call, err) do { \
    ct_status ct_st_ = CT_NVJPEG_STATUS(call, err); \
    if (ct_st_ != CT_OK) return ct_st_; \
} while (0)

/* NCCL: include nccl.h where this is used. */
#define CT_NCCL_CHECK(call, err) do { \
    ncclResult_t ct_rc_ = (call); \
    if (ct_rc_ != ncclSuccess) \
        return ct_gpu_fail_((err), CT_ERR_BACKEND, __FILE__, __LINE__, #call, \
                            ncclGetErrorString(ct_rc_), NULL, (int)ct_rc_); \
} while (0)

#endif

/* CT_CUDNN_STATUS's helper, defined wherever cudnn.h came first (CUDNN_MAJOR is its version
 * macro), with its own guard so that the include order of other files does not matter. */
#if defined(CUDNN_MAJOR) && !defined(CT_CUDNN_STATUS_HELPER_)
#define CT_CUDNN_STATUS_HELPER_
static inline ct_status ct_cudnn_status_(cudnnStatus_t rc, ct_err *err, const char *file, int line,
                                         const char *call)
{
    if (rc == CUDNN_STATUS_SUCCESS)
        return CT_OK;
    int oom = rc == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
              rc == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    return ct_gpu_fail_(err, oom ? CT_ERR_NOMEM : CT_ERR_BACKEND, file, line, call, cudnnGetErrorString(rc),
                        NULL, (int)rc);
}
#endif

/* CT_NVJPEG_STATUS's helper, defined wherever base/nvjpeg_api.h came first. */
#if defined(CT_NVJPEG_API_H) && !defined(CT_NVJPEG_STATUS_HELPER_)
#define CT_NVJPEG_STATUS_HELPER_
static inline ct_status ct_nvjpeg_status_(ct_nvj_status rc, ct_err *err, const char *file, int line, const char *call)
{
    if (rc == CT_NVJ_SUCCESS)
        return CT_OK;
    return ct_gpu_fail_(err, rc == CT_NVJ_ALLOCATOR_FAILURE ? CT_ERR_NOMEM : CT_ERR_BACKEND, file, line, call,
                        ct_nvjpeg_status_name(rc), NULL, (int)rc);
}
#endif

/* CT_NCCL_STATUS, the NCCL expression form: defined, like CT_CUDNN_STATUS's helper, wherever
 * nccl.h came first (NCCL_MAJOR is its version macro), and only if no other definition exists.
 *   ct_status st = CT_NCCL_STATUS(ncclCommDestroy(comm), err); */
#if defined(NCCL_MAJOR) && !defined(CT_NCCL_STATUS)
static inline ct_status ct_nccl_status_expr_(ncclResult_t rc, ct_err *err, const char *file, int line,
                                             const char *call)
{
    if (rc == ncclSuccess)
        return CT_OK;
    return ct_gpu_fail_(err, CT_ERR_BACKEND, file, line, call, ncclGetErrorString(rc), NULL, (int)rc);
}
#define CT_NCCL_STATUS(call, err) ct_nccl_status_expr_((call), (err), __FILE__, __LINE__, #call)
#endif
