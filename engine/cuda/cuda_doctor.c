/* `cutrain doctor` on the CUDA build: the order of the checks and what they run on. The versions
 * first (doctor_report.c); then each visible GPU on its own (doctor_checks.c: memory, GEMM,
 * convolution; doctor_nccl.c: a one-rank all-reduce); then, with two GPUs or more, one
 * all-reduce across those that passed. A failed check fails its GPU with the message in its
 * detail and the doctor moves on: nothing here aborts, prints or exits. */
#include <stdio.h>

#include <cuda_runtime.h>

#include "cuda/cuda_check.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_doctor.h"
#include "cuda/doctor_report.h"

static void check_gpu(int ordinal, ct_gpu_health *h)
{
    ct_doctor_gpu_result gpu;
    ct_doctor_reduce_result reduce;
    ct_doctor_check_gpu(ordinal, &gpu);
    if (gpu.status == CT_OK)
        ct_doctor_allreduce_one(ordinal, &reduce);
    ct_doctor_report_gpu(h, ordinal, &gpu, gpu.status == CT_OK ? &reduce : NULL);
}

static void check_together(ct_doctor_report *r)
{
    int devices[CT_DOCTOR_MAX_GPUS], n = 0;
    for (int i = 0; i < r->n_gpus; i++)
        if (r->gpus[i].pass)
            devices[n++] = r->gpus[i].ordinal;
    /* without NCCL it runs whatever passed, to be told "skipped" rather than "not run" */
    int run = r->n_gpus >= 2 && (n >= 2 || ct_doctor_nccl_compiled() <= 0);
    ct_doctor_reduce_result reduce;
    if (run)
        ct_doctor_allreduce_all(devices, n, &reduce);
    ct_doctor_report_together(r, run ? &reduce : NULL);
}

int ct_cuda_doctor_has_nccl(void) { return ct_doctor_nccl_compiled() > 0; }

ct_status ct_cuda_doctor(ct_doctor_report *r)
{
    if (!r)
        return CT_ERR_USAGE;
    r->built_with_cuda = 1;
    ct_doctor_report_versions(r);

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
        ct_doctor_warn(r, "%d GPUs are visible; only the first %d were checked", count, CT_DOCTOR_MAX_GPUS);
        count = CT_DOCTOR_MAX_GPUS;
    }

    ct_err err;
    ct_err_clear(&err);
    int previous = -1;
    if (CT_CUDA_STATUS(cudaGetDevice(&previous), &err) != CT_OK) {
        ct_doctor_warn(r, "could not read the current device: %s", err.msg);
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
        ct_doctor_warn(r, "could not restore the current device %d: %s", previous, err.msg);
    return CT_OK;
}
