/* NVML (the NVIDIA Management Library behind nvidia-smi), loaded at run time with dlopen so that
 * cutrain neither builds nor links against it: a machine without the driver's libnvidia-ml.so.1
 * simply has no readings. Only the few calls the monitor (train/monitor.h) needs are declared. */
#ifndef CT_NVML_H
#define CT_NVML_H

typedef struct ct_nvml ct_nvml;

/* One device's readings; a figure NVML did not give is negative. */
typedef struct ct_gpu_reading {
    double util;         /* % of the last sample period in which a kernel ran */
    double mem_mib;      /* device memory in use, every process's, MiB */
    double power_w;      /* board power draw, W */
    double sm_clock_mhz; /* current SM clock, MHz */
} ct_gpu_reading;

/* Loads NVML and initialises it. `library` NULL: the environment's CT_NVML_LIBRARY when set (for
 * tests, which load a stand-in through this same path), else "libnvidia-ml.so.1". NULL when the
 * library is missing, lacks a needed symbol or fails to initialise; `why` (n bytes, may be NULL)
 * then says which. */
ct_nvml *ct_nvml_open(const char *library, char *why, int n);
/* Picks the NVML device of a CUDA device: by its PCI bus id ("0000:3b:00.0") when given, which
 * survives CUDA_VISIBLE_DEVICES, else by `index`. Returns a handle number >= 0, or -1. */
int ct_nvml_device(ct_nvml *nv, const char *pci_bus_id, int index);
/* Reads device `handle` (from ct_nvml_device). Returns 0 when NVML answered every call (a figure
 * the device does not support stays negative), else NVML's return code of the first call that
 * failed (the reading is then partial). */
int ct_nvml_read(ct_nvml *nv, int handle, ct_gpu_reading *out);
/* Shuts NVML down and unloads it. NULL is fine. */
void ct_nvml_close(ct_nvml *nv);

#endif
