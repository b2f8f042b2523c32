/* Releasing what a doctor check made: every release call is checked and the sequence goes on
 * after a failure, so one failed release frees the rest and still fails the check. The first
 * failure's message goes to the caller's ct_err, later ones to a spare.
 *
 *   ct_release_log log = ct_release_start(err);
 *   CT_RELEASE(&log, CT_CUDA_STATUS, cudaFree(p));
 *   return log.status;
 */
#ifndef CT_DOCTOR_RELEASE_H
#define CT_DOCTOR_RELEASE_H

#include "base/status.h"

typedef struct ct_release_log {
    ct_status status;  /* the first failure, CT_OK when none */
    ct_err *err;
    ct_err spare;
} ct_release_log;

static inline ct_release_log ct_release_start(ct_err *err)
{
    ct_release_log log = {CT_OK, err, {0}};
    return log;
}

static inline ct_err *ct_release_slot_(ct_release_log *log) { return log->status == CT_OK ? log->err : &log->spare; }

static inline void ct_release_note_(ct_release_log *log, ct_status st)
{
    if (log->status == CT_OK)
        log->status = st;
}

/* form: one of cuda_check.h's expression forms (CT_CUDA_STATUS, CT_CUDNN_STATUS, ...) */
#define CT_RELEASE(log, form, call) ct_release_note_((log), form(call, ct_release_slot_(log)))

#endif
