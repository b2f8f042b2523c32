/* What the driver's NVML reports for one GPU, read the way the monitor reads it (engine/base/nvml.h),
 * for the GPU tests that check the monitor's figures: NVML comes with the driver, but a machine
 * may lack libnvidia-ml.so.1 and a device may not report every figure (a MIG slice has no
 * utilization), and then the monitor's figures are rightly unknown. */
#ifndef CT_NVML_CHECK_H
#define CT_NVML_CHECK_H

#include <stdio.h>

#include "base/nvml.h"

/* 1 when NVML loads and answers for the GPU of PCI bus id `pci_bus_id` (or NVML's `index` when
 * that is NULL or unknown), its figures in *r (a figure it does not report is negative); else 0,
 * *r all negative, and why (n bytes) says what failed. Printed either way, for the log. */
static inline int nvml_check_read(const char *pci_bus_id, int index, ct_gpu_reading *r, char *why, int n)
{
    *r = (ct_gpu_reading){-1.0, -1.0, -1.0, -1.0};
    ct_nvml *nv = ct_nvml_open(NULL, why, n);
    int handle = nv ? ct_nvml_device(nv, pci_bus_id, index) : -1;
    int rc = handle >= 0 ? ct_nvml_read(nv, handle, r) : -1;
    if (nv && handle < 0)
        snprintf(why, (size_t)n, "NVML has no device for bus id %s, index %d", pci_bus_id ? pci_bus_id : "-", index);
    else if (nv && rc != 0)
        snprintf(why, (size_t)n, "NVML failed to read the device (error %d)", rc);
    ct_nvml_close(nv);
    int ok = rc == 0;
    if (!ok)
        *r = (ct_gpu_reading){-1.0, -1.0, -1.0, -1.0};
    printf("NVML: %s; utilization %.0f%%, memory %.0f MiB, power %.1f W, SM clock %.0f MHz\n", ok ? "answers" : why,
           r->util, r->mem_mib, r->power_w, r->sm_clock_mhz);
    return ok;
}

#endif
