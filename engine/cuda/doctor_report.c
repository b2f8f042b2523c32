/* The doctor's report: versions, warnings, and the text of each GPU's line and the all-GPUs
 * line. What each line says is decided here, so that a build without NCCL reads "skipped" where
 * the NCCL checks would have been, never a silent pass. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "cuda/cuda_check.h"
#include "cuda/cuda_device.h"
#include "cuda/doctor_report.h"

/* Copies src into dst (n bytes), cut short where it does not fit; always terminated. */
static void copy_text(char *dst, size_t n, const char *src)
{
    size_t len = strlen(src);
    if (len >= n)
        len = n - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

void ct_doctor_warn(ct_doctor_report *r, const char *fmt, ...)
{
    if (r->n_warnings >= CT_DOCTOR_MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->warnings[r->n_warnings], sizeof r->warnings[0], fmt, ap);
    va_end(ap);
    r->n_warnings++;
}

/* ---- versions ---- */

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
        ct_doctor_warn(r, "%s %s is loaded but this program was built against %s: another major version", name,
                       l, c);
    else if (lib_order(loaded) < lib_order(compiled))
        ct_doctor_warn(r, "%s %s is loaded, older than the %s this program was built against", name, l, c);
}

void ct_doctor_report_versions(ct_doctor_report *r)
{
    ct_err err;
    ct_err_clear(&err);
    if (ct_cuda_versions(&r->driver_cuda, NULL, &err) != CT_OK)
        ct_doctor_warn(r, "could not read the driver's CUDA version: %s", err.msg);
    if (ct_cuda_versions(NULL, &r->runtime_cuda, &err) != CT_OK)
        ct_doctor_warn(r, "could not read the CUDA runtime version: %s", err.msg);

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
        ct_doctor_warn(r, "could not read the loaded cuBLAS version: %s", err.msg);

    r->cudnn_compiled = CUDNN_VERSION;
    r->cudnn_loaded = (int)cudnnGetVersion();

    r->nccl_compiled = ct_doctor_nccl_compiled();
    int nccl = 0;
    if (r->nccl_compiled <= 0)  /* both stay 0: "absent" in the report */
        ct_doctor_warn(r, "NCCL all-reduce checks skipped: built without NCCL (no data parallelism across GPUs)");
    else if (ct_doctor_nccl_loaded(&nccl, &err) == CT_OK)
        r->nccl_loaded = nccl;
    else
        ct_doctor_warn(r, "could not read the loaded NCCL version: %s", err.msg);

    if (r->driver_cuda > 0 && r->runtime_cuda > 0 && r->driver_cuda < r->runtime_cuda) {
        char d[16], rt[16];
        ct_cuda_version_format(r->driver_cuda, d, sizeof d);
        ct_cuda_version_format(r->runtime_cuda, rt, sizeof rt);
        if (r->driver_cuda / 1000 < r->runtime_cuda / 1000)
            ct_doctor_warn(r, "the driver supports CUDA %s, older than the CUDA %s runtime: update the driver", d, rt);
        else
            ct_doctor_warn(r, "the driver supports CUDA %s, older than the CUDA %s runtime: only minor-version "
                        "compatibility (no PTX JIT) lets it run", d, rt);
    }
    if (r->cublas_loaded > 0 && lib_major(r->cublas_loaded) != lib_major(r->cublas_compiled)) {
        char c[24], l[24];
        lib_text(r->cublas_compiled, c, sizeof c);
        lib_text(r->cublas_loaded, l, sizeof l);
        ct_doctor_warn(r, "cuBLAS %s is loaded but this program was built against %s: another major version", l, c);
    }
    check_library(r, "cuDNN", r->cudnn_compiled, r->cudnn_loaded);
    check_library(r, "NCCL", r->nccl_compiled, r->nccl_loaded);
}

/* ---- one GPU, all GPUs ---- */

void ct_doctor_report_gpu(ct_gpu_health *h, int ordinal, const ct_doctor_gpu_result *gpu,
                          const ct_doctor_reduce_result *reduce)
{
    memset(h, 0, sizeof *h);
    h->ordinal = ordinal;
    copy_text(h->name, sizeof h->name, gpu->name);
    h->total_mib = gpu->total_mib;
    h->free_mib = gpu->free_mib;
    h->gemm_rel_err = gpu->gemm_rel_err;
    h->conv_rel_err = gpu->conv_rel_err;
    const ct_err *failed = gpu->status != CT_OK ? &gpu->err
                           : reduce && reduce->status != CT_OK ? &reduce->err : NULL;
    h->pass = !failed && reduce != NULL;
    if (failed)
        copy_text(h->detail, sizeof h->detail, failed->msg[0] ? failed->msg : "failed without a message");
    else if (!reduce)
        copy_text(h->detail, sizeof h->detail, "the one-rank all-reduce was not run");
    else if (!reduce->ran)
        snprintf(h->detail, sizeof h->detail, "64 MiB allocated; SGEMM %dx%dx%d and %dx%d convolution match the "
                 "CPU; one-rank all-reduce skipped: %.200s", CT_DOCTOR_GEMM_N, CT_DOCTOR_GEMM_N, CT_DOCTOR_GEMM_N,
                 CT_DOCTOR_CONV_K, CT_DOCTOR_CONV_K, reduce->err.msg);
    else
        snprintf(h->detail, sizeof h->detail, "64 MiB allocated; SGEMM %dx%dx%d and %dx%d convolution match the "
                 "CPU; one-rank NCCL all-reduce correct", CT_DOCTOR_GEMM_N, CT_DOCTOR_GEMM_N, CT_DOCTOR_GEMM_N,
                 CT_DOCTOR_CONV_K, CT_DOCTOR_CONV_K);
}

void ct_doctor_report_together(ct_doctor_report *r, const ct_doctor_reduce_result *reduce)
{
    if (r->n_gpus < 2) {
        r->together = -1;
        snprintf(r->together_detail, sizeof r->together_detail, "one GPU: nothing to check together (bus "
                 "bandwidth not measured: an all-reduce across GPUs needs two)");
        return;
    }
    if (reduce && !reduce->ran) {
        r->together = -1;
        snprintf(r->together_detail, sizeof r->together_detail, "all-reduce across GPUs skipped: %.280s",
                 reduce->err.msg);
        return;
    }
    char left_out[120] = "";
    size_t used = 0;
    int n = 0;
    for (int i = 0; i < r->n_gpus; i++) {
        if (r->gpus[i].pass)
            n++;
        else if (used < sizeof left_out)
            used += (size_t)snprintf(left_out + used, sizeof left_out - used, "%s%d", used ? ", " : "",
                                     r->gpus[i].ordinal);
    }
    if (!reduce) {
        r->together = 0;
        snprintf(r->together_detail, sizeof r->together_detail,
                 "not run: fewer than two GPUs passed on their own (failed: %s)", left_out);
        return;
    }
    r->together = reduce->status == CT_OK ? 1 : 0;
    char bw[128] = "";
    if (reduce->seconds > 0)
        snprintf(bw, sizeof bw, "; %.0f MiB all-reduce %.3f ms: algbw %.1f GB/s, busbw %.1f GB/s",
                 reduce->bytes / (1024.0 * 1024.0), reduce->seconds * 1e3, reduce->algbw_gbs, reduce->busbw_gbs);
    if (reduce->status != CT_OK)
        copy_text(r->together_detail, sizeof r->together_detail,
                  reduce->err.msg[0] ? reduce->err.msg : "failed without a message");
    else if (left_out[0])
        snprintf(r->together_detail, sizeof r->together_detail,
                 "NCCL all-reduce across %d GPUs correct%s (left out, failed on their own: %s)", n, bw, left_out);
    else
        snprintf(r->together_detail, sizeof r->together_detail, "NCCL all-reduce across %d GPUs correct%s", n, bw);
}
