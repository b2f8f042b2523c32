/* The doctor's NCCL checks and versions, the only part of the doctor that needs NCCL. A build
 * without it (CUTRAIN_HAVE_NCCL undefined) compiles doctor_nccl.c to stubs that report the
 * checks as skipped. Declared without CUDA or NCCL types. */
#ifndef CT_DOCTOR_NCCL_H
#define CT_DOCTOR_NCCL_H

#include "base/status.h"

#define CT_DOCTOR_BW_BYTES ((size_t)256 << 20)  /* the timed all-reduce, per rank (nccl-tests' -e 256M) */

/* What an all-reduce check found. */
typedef struct ct_doctor_reduce_result {
    int ran;           /* 0: skipped, this build has no NCCL (err says so); 1: it ran */
    ct_status status;  /* CT_OK when it ran and the sums were right (or it was skipped) */
    ct_err err;        /* the first failure, or why it was skipped */
    /* the all-GPU check's timed all-reduce of `bytes` per rank (0 when not timed), as nccl-tests
     * reports it: algbw = bytes / time, busbw = algbw * 2 (n - 1) / n, in GB/s (1e9 bytes) */
    double bytes, seconds, algbw_gbs, busbw_gbs;
} ct_doctor_reduce_result;

/* NCCL_VERSION_CODE this library was compiled against (e.g. 22809 = 2.28.9); 0 in a build
 * without NCCL, which is how the rest of the doctor (and its test) tell the two builds apart. */
int ct_doctor_nccl_compiled(void);

/* The version of the NCCL library loaded at run time into *version. Without NCCL: 0, CT_OK. */
ct_status ct_doctor_nccl_loaded(int *version, ct_err *err);

/* A one-rank communicator on `device` and a sum over it, which must equal its input. Releases
 * everything it made; leaves `device` current. */
void ct_doctor_allreduce_one(int device, ct_doctor_reduce_result *out);

/* One all-reduce across the n devices together (n >= 2), checked on every rank, then a large one
 * (CT_DOCTOR_BW_BYTES per rank) timed for its bus bandwidth. A collective that
 * does not finish within CT_DOCTOR_WAIT_S aborts its communicators rather than hanging. */
void ct_doctor_allreduce_all(const int *devices, int n, ct_doctor_reduce_result *out);

#endif
