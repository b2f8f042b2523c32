/* `cutrain doctor` on the CUDA build (cuda_doctor.c, with its checks in doctor_checks.c and
 * doctor_nccl.c and its report in doctor_report.c): ct_doctor (api/doctor.c) calls it through the
 * registry (cuda/registry.c). Declared without CUDA types; built only with the CUDA backend
 * (CUTRAIN_HAVE_CUDA). */
#ifndef CT_CUDA_DOCTOR_H
#define CT_CUDA_DOCTOR_H

#include "cutrain.h"

/* Fills *report, which the caller has zeroed (together = -1, built_with_cuda = 1): the versions
 * of the driver, the runtime, cuBLAS, cuDNN and NCCL, compiled against and loaded, with a warning
 * for each mismatch that matters; each visible GPU on its own (memory, a cuBLAS GEMM and a cuDNN
 * convolution checked against the CPU, a one-rank NCCL all-reduce); then, with two GPUs or more,
 * one NCCL all-reduce across them. Built without NCCL, the NCCL versions are 0, a warning says
 * so, and the all-reduce checks read "skipped: built without NCCL" (they neither fail nor pass).
 * Returns CT_OK whenever the checks could run, whatever they found (no GPU: n_gpus 0 and
 * no_gpu_reason); CT_ERR_USAGE for a NULL report. Prints nothing, leaves the calling thread's
 * current device as it found it. */
ct_status ct_cuda_doctor(ct_doctor_report *report);

/* 1 when this library was built with NCCL, so that the doctor's all-reduce checks run; 0 when
 * they are skipped. */
int ct_cuda_doctor_has_nccl(void);

#endif
