/* ct_doctor: the health check behind `cutrain doctor`. The CPU-only build has nothing to check
 * and says so; the CUDA build hands the work to engine/cuda/cuda_doctor.c. */
#include <stdio.h>
#include <string.h>

#include "cutrain.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "cuda/cuda_doctor.h"
#endif

ct_status ct_doctor(ct_doctor_report *report)
{
    if (!report)
        return CT_ERR_USAGE;
    memset(report, 0, sizeof *report);
    report->together = -1;
#ifdef CUTRAIN_HAVE_CUDA
    report->built_with_cuda = 1;
    return ct_cuda_doctor(report);
#else
    snprintf(report->no_gpu_reason, sizeof report->no_gpu_reason, "this build has no CUDA backend");
    return CT_OK;
#endif
}
