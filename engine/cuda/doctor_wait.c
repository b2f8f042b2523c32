/* Polling rather than cudaStreamSynchronize: a synchronize has no time limit. */
#include <time.h>

#include "cuda/cuda_check.h"
#include "cuda/doctor_wait.h"

#include "base/clock.h"

ct_status ct_doctor_wait(cudaStream_t stream, ct_doctor_poll_fn poll, void *ctx, double limit_s, int *stuck,
                         ct_err *err)
{
    double start = ct_clock_seconds();
    for (;;) {
        int done = 0;
        ct_status st = CT_CUDA_STREAM_DONE(stream, &done, err);
        if (st != CT_OK || done)
            return st;
        if (poll && (st = poll(ctx, stuck, err)) != CT_OK)
            return st;
        if (ct_clock_seconds() - start > limit_s) {
            *stuck = 1;
            return ct_fail(err, CT_ERR_BACKEND, "the GPU work did not finish within %.0f s", limit_s);
        }
        struct timespec nap = {0, 200 * 1000};
        nanosleep(&nap, NULL);
    }
}
