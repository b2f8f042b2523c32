/* peek_metrics on the CUDA backend while its snapshot is not ready, which a host function that
 * waits on a gate holds it to (so the "not ready" path runs every time, not by the luck of
 * timing):
 *   - it returns at once, with no snapshot (tag -1), and leaves no error behind: the query's
 *     "not ready" is no error, and the next launcher must not see it as its own;
 *   - an error already pending on the thread (a failed cudaMalloc, which the runtime records as
 *     the last error) is reported as peek_metrics' failure, not cleared along with "not ready";
 *   - once the gate opens, the snapshot requested before comes through with its tag.
 * Exits 77 (skipped) without a GPU. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"

/* Holds the stream until the test opens the gate; gives up after 20 s, so that a test that fails
 * before opening it still ends. No CUDA call is allowed in here. */
static void hold_stream(void *user)
{
    atomic_int *gate = user;
    for (int i = 0; i < 20000 && !atomic_load(gate); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    ct_err err = {0};
    ct_backend *be = NULL;
    ct_status st = ct_gpu_test_open(&be, &(ct_backend_options){.capture = 0}, &err);
    CHECK_MSG(st == CT_OK, "the CUDA backend: %s", err.msg);
    if (st != CT_OK)
        return ct_test_done();
    cudaStream_t stream = (cudaStream_t)ct_cuda_device_stream(be->dev);
    CHECK(stream != NULL);
    double loss = 0.0;
    long correct = 0, tag = -2;
    CHECK_MSG(be->ops->read_metrics(be, &loss, &correct, 1, &err) == CT_OK, "read_metrics: %s", err.msg);
    GPU_OK(cudaGetLastError());

    static atomic_int gate;
    atomic_store(&gate, 0);
    GPU_OK(cudaLaunchHostFunc(stream, hold_stream, &gate));

    /* the first call requests the snapshot (behind the held stream); none has completed */
    st = be->ops->peek_metrics(be, 1, &loss, &correct, &tag, &err);
    CHECK_MSG(st == CT_OK, "peek_metrics requesting a snapshot: %s", err.msg);
    CHECK_MSG(tag == -1, "a snapshot completed behind a held stream (tag %ld)", tag);

    /* the second finds it not ready: no result, no failure, and no error left pending */
    tag = -2;
    st = be->ops->peek_metrics(be, 2, &loss, &correct, &tag, &err);
    cudaError_t left = cudaPeekAtLastError();
    printf("not ready: status %d, tag %ld, last error after it %s\n", (int)st, tag, cudaGetErrorName(left));
    CHECK_MSG(st == CT_OK, "peek_metrics on a snapshot not ready: %s", err.msg);
    CHECK_MSG(tag == -1, "peek_metrics gave tag %ld while its snapshot was held", tag);
    CHECK_MSG(left == cudaSuccess, "peek_metrics left %s as the last error", cudaGetErrorName(left));

    /* an error pending before the call must come out of it, not be cleared with "not ready" */
    void *huge = NULL;
    cudaError_t failed = cudaMalloc(&huge, (size_t)1 << 62);
    cudaError_t pending = cudaPeekAtLastError();
    printf("injected: cudaMalloc of 4 EiB gave %s, pending %s\n", cudaGetErrorName(failed), cudaGetErrorName(pending));
    CHECK_MSG(failed != cudaSuccess && pending == failed,
              "the injected failure is not pending as the last error (%s, %s): the check below means nothing",
              cudaGetErrorName(failed), cudaGetErrorName(pending));
    memset(err.msg, 0, sizeof err.msg);
    st = be->ops->peek_metrics(be, 3, &loss, &correct, &tag, &err);
    left = cudaPeekAtLastError();
    printf("with an error pending: status %d (%s), last error after it %s\n", (int)st, err.msg, cudaGetErrorName(left));
    CHECK_MSG(st != CT_OK, "peek_metrics swallowed the pending %s", cudaGetErrorName(pending));
    CHECK_MSG(strstr(err.msg, cudaGetErrorName(pending)) != NULL, "the failure does not name %s: %s",
              cudaGetErrorName(pending), err.msg);
    CHECK_MSG(left == cudaSuccess, "the reported error is still pending (%s)", cudaGetErrorName(left));

    /* open the gate: the snapshot requested first (tag 1) comes through */
    atomic_store(&gate, 1);
    tag = -1;
    for (int i = 0; i < 400 && tag < 1; i++) {
        st = be->ops->peek_metrics(be, 4 + i, &loss, &correct, &tag, &err);
        CHECK_MSG(st == CT_OK, "peek_metrics after the gate opened: %s", err.msg);
        if (st != CT_OK)
            break;
        if (tag < 1)
            pause_ms(5);
    }
    printf("after the gate: tag %ld, loss %g, correct %ld\n", tag, loss, correct);
    CHECK_MSG(tag == 1, "the first snapshot did not come through in 2 s (tag %ld)", tag);
    CHECK(loss == 0.0 && correct == 0);
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
    ct_gpu_test_close(be);
    return ct_test_done();
}
#else
#include "tests/no_cuda_main.h"
#endif
