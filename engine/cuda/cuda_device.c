/* CUDA device discovery: counts, names and versions, with "no GPU here" kept apart from real
 * failures so that CPU-only machines run everything else and skip the GPU tests. */
#include <stdio.h>

#include <cuda_runtime.h>

#include "cuda/cuda_check.h"
#include "base/types.h"
#include "cuda/cuda_device.h"

ct_status ct_cuda_devices(int *count, char *reason, size_t reason_size)
{
    char scratch[8];
    if (!reason || reason_size == 0) {  /* the caller may not want the reason: write it nowhere */
        reason = scratch;
        reason_size = sizeof scratch;
    }
    reason[0] = '\0';
    if (!count) {
        snprintf(reason, reason_size, "ct_cuda_devices: count is NULL");
        return CT_ERR_USAGE;
    }
    *count = 0;
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    /* The runtime also records a failure as the last error; clear it so that the next unrelated
     * cudaGetLastError (the kernel launchers' check) does not report it. */
    if (rc != cudaSuccess)
        (void)cudaGetLastError();
    if (rc == cudaErrorInsufficientDriver) {
        /* The runtime says "insufficient driver" also when there is no driver at all. */
        int driver = 0, runtime = 0;
        if (cudaDriverGetVersion(&driver) != cudaSuccess || cudaRuntimeGetVersion(&runtime) != cudaSuccess)
            driver = runtime = 0;
        if (driver == 0)
            snprintf(reason, reason_size, "no CUDA driver is installed");
        else
            snprintf(reason, reason_size, "the driver supports CUDA %d.%d, this program needs %d.%d",
                     driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
        return CT_OK;
    }
    if (rc == cudaErrorNoDevice) {
        snprintf(reason, reason_size, "%s (cudaErrorNoDevice)", cudaGetErrorString(rc));
        return CT_OK;
    }
    if (rc != cudaSuccess) {
        snprintf(reason, reason_size, "cudaGetDeviceCount failed: %s (%s)", cudaGetErrorString(rc),
                 cudaGetErrorName(rc));
        return CT_ERR_BACKEND;
    }
    *count = n;
    if (n == 0)
        snprintf(reason, reason_size, "no CUDA device is visible");
    return CT_OK;
}

ct_status ct_cuda_pci_bus_id(int ordinal, char *buf, int n, ct_err *err)
{
    if (!buf || n <= 0)
        return ct_fail(err, CT_ERR_USAGE, "ct_cuda_pci_bus_id: no buffer");
    buf[0] = '\0';
    CT_CUDA_CHECK(cudaDeviceGetPCIBusId(buf, n, ordinal), err);
    return CT_OK;
}

ct_status ct_cuda_device_name(int ordinal, char *buf, size_t n, size_t *total_mem, ct_err *err)
{
    if (!buf || n == 0)
        return ct_fail(err, CT_ERR_USAGE, "ct_cuda_device_name: no buffer");
    buf[0] = '\0';
    if (total_mem)
        *total_mem = 0;
    int count = 0;
    CT_CUDA_CHECK(cudaGetDeviceCount(&count), err);
    if (ordinal < 0 || ordinal >= count)
        return ct_fail(err, CT_ERR_USAGE, "CUDA device %d does not exist (%d visible)", ordinal, count);
    struct cudaDeviceProp prop;
    CT_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal), err);
    snprintf(buf, n, "%s", prop.name);
    if (total_mem)
        *total_mem = prop.totalGlobalMem;
    return CT_OK;
}

ct_status ct_cuda_versions(int *driver, int *runtime, ct_err *err)
{
    if (driver) {
        *driver = 0;
        CT_CUDA_CHECK(cudaDriverGetVersion(driver), err);
    }
    if (runtime) {
        *runtime = 0;
        CT_CUDA_CHECK(cudaRuntimeGetVersion(runtime), err);
    }
    return CT_OK;
}

void ct_cuda_version_format(int version, char *buf, size_t n)
{
    if (!buf || n == 0)
        return;
    if (version <= 0)
        snprintf(buf, n, "none");
    else
        snprintf(buf, n, "%d.%d", version / 1000, version % 1000 / 10);
}

ct_status ct_cuda_device_capability(int ordinal, int *major, int *minor, ct_err *err)
{
    *major = *minor = 0;
    CT_CUDA_CHECK(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, ordinal), err);
    CT_CUDA_CHECK(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, ordinal), err);
    return CT_OK;
}

ct_status ct_cuda_device_figures_get(int ordinal, ct_gpu_figures *out, ct_err *err)
{
    *out = (ct_gpu_figures){0};
    /* attributes, not cudaDeviceProp: CUDA 13 dropped the clock fields from the latter */
    const struct {
        enum cudaDeviceAttr attr;
        int *value;
    } ask[] = {
        {cudaDevAttrMultiProcessorCount, &out->sms},     {cudaDevAttrClockRate, &out->clock_khz},
        {cudaDevAttrMemoryClockRate, &out->mem_clock_khz}, {cudaDevAttrGlobalMemoryBusWidth, &out->bus_bits},
        {cudaDevAttrComputeCapabilityMajor, &out->major}, {cudaDevAttrComputeCapabilityMinor, &out->minor},
    };
    for (size_t i = 0; i < sizeof ask / sizeof ask[0]; i++)
        CT_CUDA_CHECK(cudaDeviceGetAttribute(ask[i].value, ask[i].attr, ordinal), err);
    return ct_cuda_device_name(ordinal, out->name, sizeof out->name, NULL, err);
}

const char *ct_cuda_precision_needs(int precision, int major, int minor)
{
    (void)minor;
    if (precision == CT_PREC_FP16 && major < 7)
        return "7.0";
    if (precision == CT_PREC_BF16 && major < 8)
        return "8.0";
    return NULL;
}
