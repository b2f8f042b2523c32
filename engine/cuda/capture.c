/* Step capture and replay: the first run of a key (a batch shape) is direct, so that cuDNN's
 * algorithm search and cuBLASLt's plans happen outside any capture; the second is captured as a
 * CUDA graph on the compute stream, and every later one replays it with one launch. The captured
 * kernels read this step's scalars (learning rate, dropout seed) from device memory that set_step
 * rewrites before each launch, and its inputs from the network's fixed input tensors. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_internal.h"

enum { GRAPH_ENTRIES = 8 };  /* full batch, last partial batch, a few more shapes */

typedef struct graph_entry {
    int key;
    int runs;                /* times seen: 1 = ran directly once */
    long used;               /* recency, for eviction */
    cudaGraphExec_t exec;
} graph_entry;

struct ct_graph_cache {
    graph_entry entries[GRAPH_ENTRIES];
    int count;
    long clock;
};

ct_status ct_cuda_graph_init(ct_cuda *cu, ct_err *err)
{
    cu->graph = calloc(1, sizeof *cu->graph);
    if (!cu->graph)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the CUDA graph cache");
    return CT_OK;
}

/* Teardown: nothing useful to do with a failure while releasing. */
void ct_cuda_graph_reset(ct_cuda *cu)
{
    if (!cu->graph)
        return;
    for (int i = 0; i < cu->graph->count; i++)
        if (cu->graph->entries[i].exec)
            cudaGraphExecDestroy(cu->graph->entries[i].exec);
    *cu->graph = (ct_graph_cache){0};
}

void ct_cuda_graph_free(ct_cuda *cu)
{
    ct_cuda_graph_reset(cu);
    free(cu->graph);
    cu->graph = NULL;
}

/* The entry for key, made (evicting the least recently used) when absent. */
static graph_entry *entry_for(ct_graph_cache *gc, int key)
{
    graph_entry *e = NULL;
    for (int i = 0; i < gc->count; i++)
        if (gc->entries[i].key == key)
            e = &gc->entries[i];
    if (!e && gc->count < GRAPH_ENTRIES) {
        e = &gc->entries[gc->count++];
    } else if (!e) {
        e = &gc->entries[0];
        for (int i = 1; i < GRAPH_ENTRIES; i++)
            if (gc->entries[i].used < e->used)
                e = &gc->entries[i];
        if (e->exec)
            cudaGraphExecDestroy(e->exec);
    }
    if (e->key != key)
        *e = (graph_entry){.key = key};
    e->used = ++gc->clock;
    return e;
}

/* Captures fn's work into e->exec. On failure nothing ran: the caller may run fn directly. */
static ct_status capture(ct_cuda *cu, graph_entry *e, ct_step_fn fn, void *ctx, ct_err *err)
{
    cudaGraph_t graph = NULL;
    /* thread-local: the input pipeline's threads keep calling CUDA while this thread captures */
    cudaError_t begin = cudaStreamBeginCapture(cu->compute, cudaStreamCaptureModeThreadLocal);
    if (begin != cudaSuccess) {
        (void)cudaGetLastError();  /* the caller runs fn directly next: its first launch must not see this */
        return CT_CUDA_STATUS(begin, err);
    }
    ct_status st = fn(ctx, err);
    cudaError_t end = cudaStreamEndCapture(cu->compute, &graph);
    if (st == CT_OK)
        st = CT_CUDA_STATUS(end, err);
    if (st == CT_OK)
        st = CT_CUDA_STATUS(cudaGraphInstantiate(&e->exec, graph, 0), err);
    if (graph)
        cudaGraphDestroy(graph);
    if (st != CT_OK) {
        e->exec = NULL;
        (void)cudaGetLastError();  /* a failed capture must not surface at the next launch */
    }
    return st;
}

ct_status ct_cuda_run_step(ct_backend *be, int key, ct_step_fn fn, void *ctx, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    if (!be->graphs)
        return fn(ctx, err);
    graph_entry *e = entry_for(cu->graph, key);
    if (!e->exec && e->runs++ == 0)
        return fn(ctx, err);
    if (!e->exec) {
        ct_err why = {0};
        if (capture(cu, e, fn, ctx, &why) != CT_OK) {
            /* keep training without graphs rather than stop: say why, once */
            be->graphs = 0;
            snprintf(be->note, sizeof be->note, "CUDA graph capture failed, running without graphs: %.190s", why.msg);
            return fn(ctx, err);
        }
    }
    CT_CUDA_CHECK(cudaGraphLaunch(e->exec, cu->compute), err);
    return CT_OK;
}
