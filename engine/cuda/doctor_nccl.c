/* The doctor's NCCL part: the versions, a one-rank all-reduce on each GPU and one all-reduce
 * across all of them. Everything made for a check is released on every path (the first failure
 * of a release is reported too); communicators whose work does not finish within
 * CT_DOCTOR_WAIT_S are aborted instead of waited on. Built without NCCL, the same entry points
 * say the checks were skipped, so the doctor itself needs no #ifdef. */
#include <string.h>

#include "cuda/doctor_nccl.h"

#ifdef CUTRAIN_HAVE_NCCL

#include <stdlib.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "cuda/cuda_check.h"
#include "cuda/doctor_release.h"
#include "cuda/doctor_wait.h"

enum { REDUCE_COUNT = 1 << 16 };  /* floats in each all-reduce */

int ct_doctor_nccl_compiled(void) { return NCCL_VERSION_CODE; }

ct_status ct_doctor_nccl_loaded(int *version, ct_err *err)
{
    *version = 0;
    CT_NCCL_CHECK(ncclGetVersion(version), err);
    return CT_OK;
}

/* ct_doctor_wait's poll: NCCL reports a failed peer or a broken transport only through this. */
static ct_status poll_comm(void *ctx, int *stuck, ct_err *err)
{
    ncclComm_t comm = ctx;
    ncclResult_t async = ncclSuccess;
    CT_NCCL_CHECK(ncclCommGetAsyncError(comm, &async), err);
    if (async != ncclSuccess && async != ncclInProgress) {
        *stuck = 1;
        return ct_fail(err, CT_ERR_BACKEND, "NCCL reported an asynchronous error: %s (%s)",
                       ncclGetErrorString(async), ncclGetLastError(comm));
    }
    return CT_OK;
}

/* ---- one rank on one GPU ---- */

typedef struct rank_probe {
    int device;
    int stuck;                   /* its work did not finish: abort the communicator */
    cudaStream_t stream;
    ncclComm_t comm;
    float *d_send, *d_recv;
    float *host;                 /* pinned, cut into: */
    float *h_send, *h_recv;
} rank_probe;

static ct_status rank_run(rank_probe *p, ct_err *err)
{
    const size_t bytes = (size_t)REDUCE_COUNT * sizeof(float);
    CT_CUDA_CHECK(cudaSetDevice(p->device), err);
    CT_CUDA_CHECK(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking), err);
    CT_CUDA_CHECK(cudaMallocHost((void **)&p->host, 2 * bytes), err);
    p->h_send = p->host;
    p->h_recv = p->host + REDUCE_COUNT;
    for (int i = 0; i < REDUCE_COUNT; i++)
        p->h_send[i] = (float)(i % 1000) - 500.0f;
    CT_NCCL_CHECK(ncclCommInitAll(&p->comm, 1, &p->device), err);
    CT_CUDA_CHECK(cudaSetDevice(p->device), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&p->d_send, bytes), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&p->d_recv, bytes), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->d_send, p->h_send, bytes, cudaMemcpyHostToDevice, p->stream), err);
    CT_CUDA_CHECK(cudaMemsetAsync(p->d_recv, 0xFF, bytes, p->stream), err);
    CT_NCCL_CHECK(ncclAllReduce(p->d_send, p->d_recv, REDUCE_COUNT, ncclFloat, ncclSum, p->comm, p->stream), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(p->h_recv, p->d_recv, bytes, cudaMemcpyDeviceToHost, p->stream), err);
    ct_status st = ct_doctor_wait(p->stream, poll_comm, p->comm, CT_DOCTOR_WAIT_S, &p->stuck, err);
    if (st != CT_OK)
        return st;
    for (int i = 0; i < REDUCE_COUNT; i++)
        if (p->h_recv[i] != p->h_send[i])
            return ct_fail(err, CT_ERR_BACKEND, "the one-rank NCCL all-reduce gave %g at element %d, expected %g",
                           (double)p->h_recv[i], i, (double)p->h_send[i]);
    return CT_OK;
}

static ct_status rank_release(rank_probe *p, ct_err *err)
{
    ct_release_log log = ct_release_start(err);
    CT_RELEASE(&log, CT_CUDA_STATUS, cudaSetDevice(p->device));
    if (p->comm && p->stuck) {  /* abort first: what is stuck on the stream is NCCL's */
        CT_RELEASE(&log, CT_NCCL_STATUS, ncclCommAbort(p->comm));
        p->comm = NULL;
    }
    if (p->stream && !p->stuck)
        CT_RELEASE(&log, CT_CUDA_STATUS, cudaStreamSynchronize(p->stream));
    if (p->comm)
        CT_RELEASE(&log, CT_NCCL_STATUS, ncclCommDestroy(p->comm));
    if (p->d_send)
        CT_RELEASE(&log, CT_CUDA_STATUS, cudaFree(p->d_send));
    if (p->d_recv)
        CT_RELEASE(&log, CT_CUDA_STATUS, cudaFree(p->d_recv));
    if (p->host)
        CT_RELEASE(&log, CT_CUDA_STATUS, cudaFreeHost(p->host));
    if (p->stream)
        CT_RELEASE(&log, CT_CUDA_STATUS, cudaStreamDestroy(p->stream));
    memset(p, 0, sizeof *p);
    return log.status;
}

void ct_doctor_allreduce_one(int device, ct_doctor_reduce_result *out)
{
    memset(out, 0, sizeof *out);
    out->ran = 1;
    ct_err_clear(&out->err);
    rank_probe p;
    memset(&p, 0, sizeof p);
    p.device = device;
    ct_err release_err;
    ct_err_clear(&release_err);
    ct_status st = rank_run(&p, &out->err);
    ct_status released = rank_release(&p, &release_err);
    if (st == CT_OK && released != CT_OK) {
        st = released;
        out->err = release_err;
    }
    out->status = st;
}

/* ---- all GPUs together ---- */

typedef struct group_probe {
    int n;
    int devices[CT_DOCTOR_MAX_GPUS];
    int comms_made, stuck;
    ncclComm_t comms[CT_DOCTOR_MAX_GPUS];
    cudaStream_t streams[CT_DOCTOR_MAX_GPUS];
    float *send[CT_DOCTOR_MAX_GPUS], *recv[CT_DOCTOR_MAX_GPUS];
    float *big[CT_DOCTOR_MAX_GPUS];           /* the timed all-reduce's buffer, in place */
    cudaEvent_t start[CT_DOCTOR_MAX_GPUS], end[CT_DOCTOR_MAX_GPUS];
    float *host;
} group_probe;

enum { BW_WARMUP = 2, BW_ITERS = 10 };

/* All ranks' in-place all-reduces of CT_DOCTOR_BW_BYTES, warmed up, then BW_ITERS timed by events
 * on every rank's stream; the time of one is the slowest rank's mean. */
/* One all-reduce (sum) of count floats per GPU, from send[r] into recv[r], as one NCCL group. On
 * failure part of the collective may be queued: the probe is marked stuck, to be aborted rather
 * than waited for. */
static ct_status group_all_reduce(group_probe *g, float *const *send, float *const *recv, size_t count, ct_err *err)
{
    CT_NCCL_CHECK(ncclGroupStart(), err);
    ct_status st = CT_OK;
    for (int r = 0; r < g->n && st == CT_OK; r++)
        st = CT_NCCL_STATUS(ncclAllReduce(send[r], recv[r], count, ncclFloat, ncclSum, g->comms[r], g->streams[r]),
                            err);
    ct_err spare;
    ct_status ended = CT_NCCL_STATUS(ncclGroupEnd(), st == CT_OK ? err : &spare);
    if (st == CT_OK)
        st = ended;
    if (st != CT_OK)
        g->stuck = 1;
    return st;
}

static ct_status group_bandwidth(group_probe *g, ct_doctor_reduce_result *out, ct_err *err)
{
    const size_t count = CT_DOCTOR_BW_BYTES / sizeof(float);
    for (int r = 0; r < g->n; r++) {
        CT_CUDA_CHECK(cudaSetDevice(g->devices[r]), err);
        CT_CUDA_CHECK(cudaMalloc((void **)&g->big[r], CT_DOCTOR_BW_BYTES), err);
        CT_CUDA_CHECK(cudaMemsetAsync(g->big[r], 0, CT_DOCTOR_BW_BYTES, g->streams[r]), err);
        CT_CUDA_CHECK(cudaEventCreate(&g->start[r]), err);
        CT_CUDA_CHECK(cudaEventCreate(&g->end[r]), err);
    }
    for (int it = 0; it < BW_WARMUP + BW_ITERS; it++) {
        if (it == BW_WARMUP)
            for (int r = 0; r < g->n; r++)
                CT_CUDA_CHECK(cudaEventRecord(g->start[r], g->streams[r]), err);
        ct_status st = group_all_reduce(g, g->big, g->big, count, err);
        if (st != CT_OK)
            return st;
    }
    for (int r = 0; r < g->n; r++)
        CT_CUDA_CHECK(cudaEventRecord(g->end[r], g->streams[r]), err);
    float slowest = 0.0f;
    for (int r = 0; r < g->n; r++) {
        ct_status st = ct_doctor_wait(g->streams[r], poll_comm, g->comms[r], CT_DOCTOR_WAIT_S, &g->stuck, err);
        if (st != CT_OK)
            return st;
        float ms = 0.0f;
        CT_CUDA_CHECK(cudaEventElapsedTime(&ms, g->start[r], g->end[r]), err);
        slowest = ms > slowest ? ms : slowest;
    }
    out->bytes = (double)CT_DOCTOR_BW_BYTES;
    out->seconds = (double)slowest * 1e-3 / BW_ITERS;
    if (out->seconds > 0) {
        out->algbw_gbs = out->bytes / out->seconds * 1e-9;
        out->busbw_gbs = out->algbw_gbs * 2.0 * (g->n - 1) / g->n;
    }
    return CT_OK;
}

/* Rank r contributes (i % 97) + r at element i, so the sum is n (i % 97) + n (n - 1) / 2. */
static ct_status group_run(group_probe *g, ct_err *err)
{
    const size_t bytes = (size_t)REDUCE_COUNT * sizeof(float);
    g->host = malloc(bytes);
    if (!g->host)
        return ct_fail(err, CT_ERR_NOMEM, "out of host memory for the all-GPU check");
    CT_NCCL_CHECK(ncclCommInitAll(g->comms, g->n, g->devices), err);
    g->comms_made = 1;
    for (int r = 0; r < g->n; r++) {
        CT_CUDA_CHECK(cudaSetDevice(g->devices[r]), err);
        CT_CUDA_CHECK(cudaStreamCreateWithFlags(&g->streams[r], cudaStreamNonBlocking), err);
        CT_CUDA_CHECK(cudaMalloc((void **)&g->send[r], bytes), err);
        CT_CUDA_CHECK(cudaMalloc((void **)&g->recv[r], bytes), err);
        for (int i = 0; i < REDUCE_COUNT; i++)
            g->host[i] = (float)(i % 97 + r);
        /* from pageable memory: returns once the host buffer is staged, so it can be refilled */
        CT_CUDA_CHECK(cudaMemcpyAsync(g->send[r], g->host, bytes, cudaMemcpyHostToDevice, g->streams[r]), err);
        CT_CUDA_CHECK(cudaMemsetAsync(g->recv[r], 0xFF, bytes, g->streams[r]), err);
    }
    ct_status st = group_all_reduce(g, g->send, g->recv, REDUCE_COUNT, err);
    if (st != CT_OK)
        return st;
    for (int r = 0; r < g->n; r++) {
        st = ct_doctor_wait(g->streams[r], poll_comm, g->comms[r], CT_DOCTOR_WAIT_S, &g->stuck, err);
        if (st != CT_OK)
            return st;
    }
    for (int r = 0; r < g->n; r++) {
        CT_CUDA_CHECK(cudaSetDevice(g->devices[r]), err);
        CT_CUDA_CHECK(cudaMemcpyAsync(g->host, g->recv[r], bytes, cudaMemcpyDeviceToHost, g->streams[r]), err);
        CT_CUDA_CHECK(cudaStreamSynchronize(g->streams[r]), err);
        for (int i = 0; i < REDUCE_COUNT; i++) {
            float want = (float)(g->n * (i % 97) + g->n * (g->n - 1) / 2);
            if (g->host[i] != want)
                return ct_fail(err, CT_ERR_BACKEND, "the all-reduce across %d GPUs gave %g at element %d on GPU %d, "
                               "expected %g", g->n, (double)g->host[i], i, g->devices[r], (double)want);
        }
    }
    return CT_OK;
}

static ct_status group_release(group_probe *g, ct_err *err)
{
    ct_release_log log = ct_release_start(err);
    if (g->comms_made && g->stuck)
        for (int r = 0; r < g->n; r++)
            CT_RELEASE(&log, CT_NCCL_STATUS, ncclCommAbort(g->comms[r]));
    for (int r = 0; r < g->n; r++)
        if (g->streams[r] && !g->stuck) {
            CT_RELEASE(&log, CT_CUDA_STATUS, cudaSetDevice(g->devices[r]));
            CT_RELEASE(&log, CT_CUDA_STATUS, cudaStreamSynchronize(g->streams[r]));
        }
    /* Destroying the ranks of one process one after another is fine: NCCL frees the shared
     * resources when the last of them is destroyed. */
    if (g->comms_made && !g->stuck)
        for (int r = 0; r < g->n; r++)
            CT_RELEASE(&log, CT_NCCL_STATUS, ncclCommDestroy(g->comms[r]));
    for (int r = 0; r < g->n; r++) {
        if (!g->streams[r] && !g->send[r] && !g->recv[r] && !g->big[r] && !g->start[r] && !g->end[r])
            continue;
        CT_RELEASE(&log, CT_CUDA_STATUS, cudaSetDevice(g->devices[r]));
        if (g->send[r])
            CT_RELEASE(&log, CT_CUDA_STATUS, cudaFree(g->send[r]));
        if (g->recv[r])
            CT_RELEASE(&log, CT_CUDA_STATUS, cudaFree(g->recv[r]));
        if (g->big[r])
            CT_RELEASE(&log, CT_CUDA_STATUS, cudaFree(g->big[r]));
        if (g->start[r])
            CT_RELEASE(&log, CT_CUDA_STATUS, cudaEventDestroy(g->start[r]));
        if (g->end[r])
            CT_RELEASE(&log, CT_CUDA_STATUS, cudaEventDestroy(g->end[r]));
        if (g->streams[r])
            CT_RELEASE(&log, CT_CUDA_STATUS, cudaStreamDestroy(g->streams[r]));
    }
    free(g->host);
    memset(g, 0, sizeof *g);
    return log.status;
}

void ct_doctor_allreduce_all(const int *devices, int n, ct_doctor_reduce_result *out)
{
    memset(out, 0, sizeof *out);
    out->ran = 1;
    ct_err_clear(&out->err);
    if (n < 2 || n > CT_DOCTOR_MAX_GPUS) {
        out->status = ct_fail(&out->err, CT_ERR_USAGE, "an all-reduce across GPUs needs 2 to %d of them, not %d",
                              CT_DOCTOR_MAX_GPUS, n);
        return;
    }
    group_probe g;
    memset(&g, 0, sizeof g);
    g.n = n;
    memcpy(g.devices, devices, (size_t)n * sizeof *devices);
    ct_err release_err;
    ct_err_clear(&release_err);
    ct_status st = group_run(&g, &out->err);
    if (st == CT_OK)
        st = group_bandwidth(&g, out, &out->err);
    ct_status released = group_release(&g, &release_err);
    if (st == CT_OK && released != CT_OK) {
        st = released;
        out->err = release_err;
    }
    out->status = st;
}

#else /* no NCCL: the checks are skipped, never failed nor passed in silence */

#include <stdio.h>

static void skipped(ct_doctor_reduce_result *out)
{
    memset(out, 0, sizeof *out);
    out->ran = 0;
    out->status = CT_OK;
    ct_err_clear(&out->err);
    snprintf(out->err.msg, sizeof out->err.msg, "built without NCCL");
}

int ct_doctor_nccl_compiled(void) { return 0; }

ct_status ct_doctor_nccl_loaded(int *version, ct_err *err)
{
    (void)err;
    *version = 0;
    return CT_OK;
}

void ct_doctor_allreduce_one(int device, ct_doctor_reduce_result *out)
{
    (void)device;
    skipped(out);
}

void ct_doctor_allreduce_all(const int *devices, int n, ct_doctor_reduce_result *out)
{
    (void)devices;
    (void)n;
    skipped(out);
}

#endif
