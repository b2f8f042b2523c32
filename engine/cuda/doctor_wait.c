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
        cudaError_t rc = cudaStreamQuery(stream);
        if (rc == cudaSuccess)
            return CT_OK;
        if (rc != cudaErrorNotReady)
            return ct_cuda_status_(rc, err, __FILE__, __LINE__, "cudaStreamQuery(stream)");
        if (cudaPeekAtLastError() == cudaErrorNotReady)  /* not an error: leave no trace of it */
            (void)cudaGetLastError();
        if (poll) {
            ct_status st = poll(ctx, stuck, err);
            if (st != CT_OK)
                return st;
        }
        if (ct_clock_seconds() - start > limit_s) {
            *stuck = 1;
            return ct_fail(err, CT_ERR_BACKEND, "the GPU work did not finish within %.0f s", limit_s);
        }
        struct timespec nap = {0, 200 * 1000};
        nanosleep(&nap, NULL);
    }
}
