/* Filling ct_doctor_report: the versions and the mismatches that matter, the warning list, and
 * each check's result turned into its line of the report. Runs no check itself (cuda_doctor.c
 * does); reading the versions is its only call into the libraries. */
#ifndef CT_DOCTOR_REPORT_H
#define CT_DOCTOR_REPORT_H

#include "cuda/doctor_checks.h"
#include "cuda/doctor_nccl.h"
#include "cutrain.h"

/* Adds a warning; beyond CT_DOCTOR_MAX_WARNINGS the rest are dropped. */
void ct_doctor_warn(ct_doctor_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The driver, runtime, cuBLAS, cuDNN and NCCL versions, compiled against and loaded, with a
 * warning for each mismatch that matters (and one when this build has no NCCL). */
void ct_doctor_report_versions(ct_doctor_report *r);

/* GPU `ordinal`'s line from its own checks and its one-rank all-reduce (reduce: NULL when the
 * own checks failed and it did not run). */
void ct_doctor_report_gpu(ct_gpu_health *h, int ordinal, const ct_doctor_gpu_result *gpu,
                          const ct_doctor_reduce_result *reduce);

/* The all-GPUs line, from r's GPU lines and the all-reduce across the GPUs that passed alone
 * (reduce: NULL when it was not run, fewer than two having passed). */
void ct_doctor_report_together(ct_doctor_report *r, const ct_doctor_reduce_result *reduce);

#endif
