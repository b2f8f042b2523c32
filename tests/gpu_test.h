/* What the GPU tests share: skipping (exit 77) where no GPU is visible, setup calls that abort
 * the program when they fail (nothing after them would mean anything), host allocation that
 * cannot fail silently, and a backend with its own device. Include inside #ifdef
 * CUTRAIN_HAVE_CUDA. */
#ifndef CT_GPU_TEST_H
#define CT_GPU_TEST_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "backend.h"
#include "cuda/cuda_device.h"

#define GPU_OK(call) do { \
    cudaError_t rc_ = (cudaError_t)(call); \
    if (rc_ != cudaSuccess) { \
        fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, \
                cudaGetErrorString(rc_), cudaGetErrorName(rc_)); \
        exit(1); \
    } \
} while (0)

static inline void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return p;
}

/* ||a - b|| / ||b|| over count values, in double (||a - b|| when b is all zeros); INFINITY when
 * either side holds a NaN or an inf. */
static inline double gpu_relative_difference(const float *a, const float *b, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i]))
            return INFINITY;
        diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        norm += (double)b[i] * b[i];
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

/* A figure for the device check's table: printed, and appended to the file $CT_GPU_REPORT names
 * when set (ctest keeps a passing test's output only with -V; tools/device_check.sh sets it). */
static inline void gpu_report(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fputs(line, stdout);
    fflush(stdout);
    const char *path = getenv("CT_GPU_REPORT");
    FILE *f = path && path[0] ? fopen(path, "a") : NULL;
    if (f) {
        fputs(line, f);
        fclose(f);
    }
}

/* 0 when a CUDA device is visible; else prints why and returns the exit code: 77 (skipped)
 * without a device, 1 when the devices could not even be counted. */
static inline int ct_gpu_test_absent(void)
{
    int count = 0;
    char why[256] = "";
    if (ct_cuda_devices(&count, why, sizeof why) != CT_OK) {
        fprintf(stderr, "cannot count CUDA devices: %s\n", why);
        return 1;
    }
    if (count == 0) {
        printf("skipped: %s\n", why[0] ? why : "no CUDA device");
        return 77;
    }
    return 0;
}

/* A backend on a fresh device, both or neither: the CUDA device 0 with opt, or the CPU device
 * when opt is NULL. Release with ct_gpu_test_close. */
static inline ct_status ct_gpu_test_open(ct_backend **be, const ct_backend_options *opt, ct_err *err)
{
    ct_device *dev = NULL;
    *be = NULL;
    ct_status st = opt ? ct_cuda_device_create(&dev, 0, err) : ct_cpu_device_create(&dev, err);
    if (st == CT_OK)
        st = opt ? ct_cuda_backend_create(be, dev, opt, err) : ct_cpu_backend_create(be, dev, NULL, err);
    if (st != CT_OK && dev)
        dev->ops->destroy(dev);
    return st;
}

/* The backend, then the device it ran on (which outlives it). */
static inline void ct_gpu_test_close(ct_backend *be)
{
    if (!be)
        return;
    ct_device *dev = be->dev;
    be->ops->destroy(be);
    dev->ops->destroy(dev);
}

#endif
