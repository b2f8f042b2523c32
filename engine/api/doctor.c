/* ct_doctor: the health check behind `cutrain doctor`. A build without a GPU backend has nothing
 * to check and says so; otherwise the GPU backend's row in the registry does the work (the CUDA
 * backend's: engine/cuda/cuda_doctor.c). */
#include <stdio.h>
#include <string.h>

#include "registry.h"

ct_status ct_doctor(ct_doctor_report *report)
{
    if (!report)
        return CT_ERR_USAGE;
    memset(report, 0, sizeof *report);
    report->together = -1;
    const ct_gpu_backend *gpu = ct_registry_gpu();
    if (!gpu) {
        snprintf(report->no_gpu_reason, sizeof report->no_gpu_reason, "this build has no CUDA backend");
        return CT_OK;
    }
    report->built_with_cuda = 1;
    return gpu->doctor(report);
}
