#include "cuda/step_timer.h"

#include <stdlib.h>

#include "cuda/cuda_check.h"

/* More steps than the device can be behind the host: the input ring and the metrics reads keep it
 * within a few, so a pair is done by the time the ring comes back to it. */
enum { PAIRS = 64 };

struct ct_step_timer {
    cudaStream_t stream;
    cudaEvent_t start[PAIRS], end[PAIRS];
    int pending[PAIRS];      /* recorded, not read yet */
    long next;               /* steps begun */
    double seconds;          /* of the pairs read */
};

/* Reads pair i into the total: waiting for it when `wait`, else only if it has finished. */
static ct_status harvest(ct_step_timer *t, int i, int wait, ct_err *err)
{
    if (!t->pending[i])
        return CT_OK;
    if (wait) {
        CT_CUDA_CHECK(cudaEventSynchronize(t->end[i]), err);
    } else {
        int done = 0;
        ct_status st = CT_CUDA_EVENT_DONE(t->end[i], &done, err);
        if (st != CT_OK || !done)  /* not done: the step is still running */
            return st;
    }
    float ms = 0.0f;
    CT_CUDA_CHECK(cudaEventElapsedTime(&ms, t->start[i], t->end[i]), err);
    t->seconds += 1e-3 * ms;
    t->pending[i] = 0;
    return CT_OK;
}

ct_status ct_step_timer_create(void *stream, ct_step_timer **out, ct_err *err)
{
    *out = NULL;
    ct_step_timer *t = calloc(1, sizeof *t);
    if (!t)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the step timer");
    t->stream = (cudaStream_t)stream;
    ct_status st = t->stream ? CT_OK : ct_fail(err, CT_ERR_USAGE, "the step timer needs a CUDA device's stream");
    int made = 0;           /* pairs created */
    while (st == CT_OK && made < PAIRS) {
        st = CT_CUDA_STATUS(cudaEventCreate(&t->start[made]), err);
        if (st == CT_OK && (st = CT_CUDA_STATUS(cudaEventCreate(&t->end[made]), err)) != CT_OK)
            cudaEventDestroy(t->start[made]);
        made += st == CT_OK;
    }
    if (st != CT_OK) {
        for (int i = 0; i < made; i++) {
            cudaEventDestroy(t->start[i]);
            cudaEventDestroy(t->end[i]);
        }
        free(t);
        return st;
    }
    *out = t;
    return CT_OK;
}

ct_status ct_step_timer_begin(ct_step_timer *t, ct_err *err)
{
    int i = (int)(t->next % PAIRS);
    /* the ring has come round: this pair's step is long done, or the wait is what it costs */
    ct_status st = harvest(t, i, 1, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(cudaEventRecord(t->start[i], t->stream), err);
    return CT_OK;
}

ct_status ct_step_timer_end(ct_step_timer *t, ct_err *err)
{
    int i = (int)(t->next % PAIRS);
    CT_CUDA_CHECK(cudaEventRecord(t->end[i], t->stream), err);
    t->pending[i] = 1;
    t->next++;
    /* read what has finished, so that the epoch's end has little left */
    return harvest(t, (int)((t->next + PAIRS / 2) % PAIRS), 0, err);
}

ct_status ct_step_timer_total(ct_step_timer *t, double *seconds, ct_err *err)
{
    for (int i = 0; i < PAIRS; i++) {
        ct_status st = harvest(t, i, 1, err);
        if (st != CT_OK)
            return st;
    }
    *seconds = t->seconds;
    return CT_OK;
}

void ct_step_timer_destroy(ct_step_timer *t)
{
    if (!t)
        return;
    for (int i = 0; i < PAIRS; i++) {
        cudaEventDestroy(t->start[i]);
        cudaEventDestroy(t->end[i]);
    }
    free(t);
}
