/* The doctor's checks of one GPU on its own: 64 MiB of device memory, a cuBLAS SGEMM and a cuDNN
 * convolution, each checked against plain CPU loops. They measure and judge; turning what they
 * found into the report is doctor_report.c's job. Declared without CUDA types. */
#ifndef CT_DOCTOR_CHECKS_H
#define CT_DOCTOR_CHECKS_H

#include "base/status.h"

#define CT_DOCTOR_TOLERANCE 1e-3  /* GEMM and convolution against the CPU */

/* The sizes the checks use, for messages: a CT_DOCTOR_GEMM_N cube of SGEMM, a CT_DOCTOR_CONV_K
 * square convolution. */
enum { CT_DOCTOR_GEMM_N = 256, CT_DOCTOR_CONV_K = 3 };

typedef struct ct_doctor_gpu_result {
    ct_status status;                   /* CT_OK when every check passed */
    ct_err err;                         /* the first failure otherwise */
    char name[96];
    double total_mib, free_mib;
    double gemm_rel_err, conv_rel_err;  /* normwise against the CPU; -1 when not measured */
} ct_doctor_gpu_result;

/* Runs the checks on `device` on a stream of its own and releases everything it made, on every
 * path (a failed release fails the checks). Leaves `device` current. */
void ct_doctor_check_gpu(int device, ct_doctor_gpu_result *out);

#endif
