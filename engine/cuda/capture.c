/* Step capture and replay: the first run of a key (step function, network, batch size) is
 * direct, so that cuDNN's algorithm search and cuBLASLt's plans happen outside any capture; the
 * second is captured as a CUDA graph on the compute stream, and every later one replays it with
 * one launch. The captured kernels read this step's scalars (learning rate, dropout seed) from
 * device memory that set_step rewrites before each launch, and its inputs from the network's
 * fixed input tensors. Which key gets what, and which captures go when a network's buffers do,
 * is step_cache.c's bookkeeping; this file makes, launches and destroys the captures. With one
 * rank a failed capture falls back to direct launches; ranks that step together agree on every
 * capture before launching it (ct_capture_agree). */
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_internal.h"
#include "step_cache.h"

struct ct_capture_cache {
    ct_step_cache steps;
};

ct_status ct_cuda_capture_init(ct_cuda *cu, ct_err *err)
{
    cu->captures = calloc(1, sizeof *cu->captures);
    if (!cu->captures)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the CUDA graph cache");
    return CT_OK;
}

/* Teardown: nothing useful to do with a failure while releasing. A capture still in flight is
 * freed when it completes (cudaGraphExecDestroy does not wait for it). */
static void release_exec(void *exec)
{
    (void)cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

void ct_cuda_capture_reset(ct_cuda *cu)
{
    if (cu->captures)
        ct_step_cache_forget(&cu->captures->steps, NULL, release_exec);
}

void ct_cuda_capture_forget(ct_backend *be, const void *net)
{
    ct_cuda *cu = ct_cuda_of(be);
    if (cu && cu->captures)
        ct_step_cache_forget(&cu->captures->steps, net, release_exec);
}

void ct_cuda_capture_free(ct_cuda *cu)
{
    ct_cuda_capture_reset(cu);
    free(cu->captures);
    cu->captures = NULL;
}

/* Captures key->fn's work into e->exec. On failure nothing ran: the caller may run it directly. */
static ct_status capture(ct_cuda *cu, ct_step_entry *e, void *ctx, ct_err *err)
{
    cudaGraph_t recorded = NULL;
    cudaGraphExec_t exec = NULL;
    /* thread-local: the input pipeline's threads keep calling CUDA while this thread captures */
    cudaError_t begin = cudaStreamBeginCapture(cu->compute, cudaStreamCaptureModeThreadLocal);
    if (begin != cudaSuccess) {
        (void)cudaGetLastError();  /* the caller runs fn directly next: its first launch must not see this */
        return CT_CUDA_STATUS(begin, err);
    }
    ct_status st = e->key.fn(ctx, err);
    cudaError_t end = cudaStreamEndCapture(cu->compute, &recorded);
    if (st == CT_OK)
        st = CT_CUDA_STATUS(end, err);
    if (st == CT_OK)
        st = CT_CUDA_STATUS(cudaGraphInstantiate(&exec, recorded, 0), err);
    if (recorded)
        (void)cudaGraphDestroy(recorded);  /* the instantiated exec no longer needs it */
    if (st != CT_OK) {
        exec = NULL;
        (void)cudaGetLastError();  /* a failed capture must not surface at the next launch */
    }
    e->exec = exec;
    return st;
}

ct_status ct_cuda_run_step(ct_backend *be, const ct_step_key *key, void *ctx, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    if (!be->capture)
        return key->fn(ctx, err);
    ct_step_entry *e = NULL;
    ct_step_action action = ct_step_cache_next(&cu->captures->steps, key, &e, release_exec);
    if (action == CT_STEP_DIRECT)
        return key->fn(ctx, err);
    if (action == CT_STEP_CAPTURE) {
        ct_err why = {0};
        int captured = capture(cu, e, ctx, &why) == CT_OK;
        if (be->capture_agree.agree) {
            /* with other ranks: launched on all of them, or an error on all */
            ct_status st = be->capture_agree.agree(be->capture_agree.ctx, captured, captured ? NULL : why.msg, err);
            if (st != CT_OK)
                return st;
        } else if (!captured) {
            /* keep training without graphs rather than stop: say why, once */
            be->capture = 0;
            snprintf(be->note, sizeof be->note, "CUDA graph capture failed, running without graphs: %.190s", why.msg);
            return key->fn(ctx, err);
        }
    }
    CT_CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)e->exec, cu->compute), err);
    return CT_OK;
}
