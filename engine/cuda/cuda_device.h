/* The CUDA backend's entry points: its device and backend, device discovery (for the registry's
 * row, cuda/registry.c, `cutrain doctor` and the GPU tests), and a device's compute stream for the
 * tests. Declared without CUDA types, so callers need no CUDA headers; built only with the CUDA
 * backend (CUTRAIN_HAVE_CUDA). Above the backends, the registry (registry.h) is the way in. */
#ifndef CT_CUDA_DEVICE_H
#define CT_CUDA_DEVICE_H

#include <stddef.h>

#include "base/status.h"
#include "registry.h"

/* CUDA device `ordinal` (among the visible ones). */
ct_status ct_cuda_device_create(ct_device **out, int ordinal, ct_err *err);
/* The CUDA backend on dev, which must be a CUDA device (ct_cuda_device_create). */
ct_status ct_cuda_backend_create(ct_backend **out, ct_device *dev, const ct_backend_options *opt, ct_err *err);

/* Number of visible devices (CUDA_VISIBLE_DEVICES respected) into *count. A machine without a
 * GPU, or without a driver recent enough for this runtime, is not an error: CT_OK, *count = 0,
 * and `reason` says why ("no CUDA driver is installed"). Any other failure returns
 * CT_ERR_BACKEND, *count = 0, and the message in `reason`. `reason` (reason_size bytes, always
 * terminated) may be NULL. */
ct_status ct_cuda_devices(int *count, char *reason, size_t reason_size);

/* Name of device `ordinal` into buf (n bytes, always terminated); its global memory in bytes
 * into *total_mem when not NULL. */
ct_status ct_cuda_device_name(int ordinal, char *buf, size_t n, size_t *total_mem, ct_err *err);

/* PCI bus id of device `ordinal` ("0000:3b:00.0") into buf (n bytes, always terminated): how
 * the monitor finds the same GPU in NVML whatever CUDA_VISIBLE_DEVICES says. */
ct_status ct_cuda_pci_bus_id(int ordinal, char *buf, int n, ct_err *err);

/* Compute capability of device `ordinal` (7.0 Volta: fp16 tensor cores; 8.0 Ampere: bf16). */
ct_status ct_cuda_device_capability(int ordinal, int *major, int *minor, ct_err *err);

/* What the launch-cost model (graph/launch_cost.h) needs of device `ordinal` (registry.h). */
ct_status ct_cuda_device_figures_get(int ordinal, ct_gpu_figures *out, ct_err *err);

/* Whether a GPU of compute capability major.minor runs `precision` (fp16 from 7.0, bf16 from 8.0:
 * the tensor cores the half convolutions and products are chosen for): NULL when it does, else
 * the lowest capability it needs, as "7.0" or "8.0". Pure, so that its test needs no GPU. */
const char *ct_cuda_precision_needs(int precision, int major, int minor);

/* Versions as CUDA encodes them (1000 * major + 10 * minor: 13000 is 13.0). *driver is the
 * newest CUDA the installed driver supports, 0 when no driver is installed; *runtime the cudart
 * this program was linked with. Either pointer may be NULL. */
ct_status ct_cuda_versions(int *driver, int *runtime, ct_err *err);

/* "13.0" for 13000, "none" for 0, into buf (n bytes, always terminated). */
void ct_cuda_version_format(int version, char *buf, size_t n);

/* The compute stream of a CUDA device (its cudaStream_t), NULL for any other device: for the GPU
 * tests, which order work of their own with the backend's (to hold the stream, for one). */
void *ct_cuda_device_stream(ct_device *d);

#endif
