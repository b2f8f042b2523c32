/* Waiting for a doctor check's GPU work with a limit, so that a GPU (or a collective) that never
 * finishes fails its check instead of hanging `cutrain doctor`; NCCL's communicator waits for its
 * agreements (comm_nccl.c) and its teardown so too. */
#ifndef CT_DOCTOR_WAIT_H
#define CT_DOCTOR_WAIT_H

#include <cuda_runtime.h>

#include "base/status.h"

#define CT_DOCTOR_WAIT_S 60.0  /* a GPU's queued work must finish within this */

/* Called between polls of the stream, to watch what the stream alone cannot show (NCCL's
 * asynchronous errors). Sets *stuck and fails when the work can no longer finish. */
typedef ct_status (*ct_doctor_poll_fn)(void *ctx, int *stuck, ct_err *err);

/* Waits for everything queued on `stream`, calling poll(ctx, ...) between looks when poll is not
 * NULL. After limit_s seconds it gives up and sets *stuck, so that the caller aborts what is
 * stuck (a communicator) instead of synchronising on it. */
ct_status ct_doctor_wait(cudaStream_t stream, ct_doctor_poll_fn poll, void *ctx, double limit_s, int *stuck,
                         ct_err *err);

#endif
