/* NCCL's communicator (cuda/comm_nccl.h): one rank per local GPU, or one rank of a communicator
 * across processes.
 *
 * A rank's collectives run on its communication stream, forked from the compute stream by an
 * event and joined back by another, so that they are captured with the step. Before and after
 * each collective a one-thread kernel counts it in mapped host memory (entered, left): a watchdog
 * thread reads the counts, and a collective entered but not left for longer than timeout_s (a
 * peer that never came) aborts the communicator, as does an asynchronous error NCCL reports. The
 * communicators are non-blocking, so no NCCL call waits on the host without a bound either: a
 * blocking one would wait inside the call whenever NCCL talks to the peers on the host, which it
 * does not only at initialisation but also at the first collective of each algorithm (NCCL 2.22
 * and later connect the algorithms' channels there, NCCL_RUNTIME_CONNECT), where a peer that
 * never comes leaves the call waiting forever and NCCL allows no abort while a call is in
 * flight. After a failure every call fails with the message naming the rank that did not come. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/comm_nccl.h"

#ifdef CUTRAIN_HAVE_NCCL

#include <nccl.h>

#include "base/clock.h"
#include "cuda/cuda_internal.h"
#include "cuda/doctor_wait.h"

typedef struct nccl_rank {
    int rank;                    /* NCCL's rank */
    int device;
    pthread_mutex_t mu;          /* the rank's thread and the watchdog: comm is used or aborted under it */
    ncclComm_t comm;             /* NULL once aborted or destroyed */
    cudaStream_t stream;         /* the communication stream */
    cudaEvent_t ready, done;     /* compute -> comm, comm -> compute */
    int *d_total;                /* (1) the step's samples over every rank */
    unsigned *beat, *d_beat;     /* (2) mapped host memory: collectives entered, left; device alias */
    unsigned *vote, *d_vote;     /* (1) an agreement's value: pinned host copy, device */
    int counted, samples;        /* the step's total is reduced (at its first all-reduce), from samples */
    int pending;                 /* an all-reduce since the last join */
    unsigned seen_entered;       /* watchdog: the counts it last saw and when they last moved */
    double seen_at;
} nccl_rank;

typedef struct nccl_comm {
    int size, n;                 /* ranks in all, ranks held here */
    double timeout_s;
    nccl_rank *local;            /* (n) */
    pthread_mutex_t mu;          /* failed, why */
    int failed;                  /* 0, or 1 + the rank whose failure or absence ended everything */
    char why[400];
    pthread_t watchdog;
    int watching, stop;
    pthread_cond_t wake;
} nccl_comm;

static nccl_comm *impl(ct_comm *c) { return c->impl; }

static nccl_rank *find_rank(nccl_comm *m, int rank)
{
    for (int i = 0; i < m->n; i++)
        if (m->local[i].rank == rank)
            return &m->local[i];
    return NULL;
}

/* Aborts every local rank's communicator: NCCL's kernels then return, so nothing waits on them. */
static void abort_all(nccl_comm *m)
{
    for (int i = 0; i < m->n; i++) {
        nccl_rank *r = &m->local[i];
        pthread_mutex_lock(&r->mu);
        if (r->comm) {
            (void)ncclCommAbort(r->comm);  /* nothing more to do if aborting fails */
            r->comm = NULL;
        }
        pthread_mutex_unlock(&r->mu);
    }
}

/* Records the first failure (later ones are its consequences) and aborts. */
static void fail_all(nccl_comm *m, int rank, const char *why)
{
    pthread_mutex_lock(&m->mu);
    int first = !m->failed;
    if (first) {
        m->failed = rank + 1;
        snprintf(m->why, sizeof m->why, "%s", why);
    }
    pthread_mutex_unlock(&m->mu);
    if (first)
        abort_all(m);
}

static ct_status failure(nccl_comm *m, ct_err *err)
{
    pthread_mutex_lock(&m->mu);
    ct_status st = ct_fail(err, CT_ERR_BACKEND, "%s", m->why);
    pthread_mutex_unlock(&m->mu);
    return st;
}

static int has_failed(nccl_comm *m)
{
    pthread_mutex_lock(&m->mu);
    int f = m->failed;
    pthread_mutex_unlock(&m->mu);
    return f;
}

/* The ranks held here that have entered fewer collectives than `count`, as "1, 3"; "" if none. */
static void name_behind(nccl_comm *m, unsigned count, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < m->n && used < size; i++)
        if (m->local[i].beat && m->local[i].beat[0] < count) {
            int w = snprintf(out + used, size - used, "%s%d", used ? ", " : "", m->local[i].rank);
            used += w > 0 ? (size_t)w : 0;
        }
}

/* r waited more than the timeout in `what`: every rank fails, naming the local ranks behind r. */
static ct_status timed_out(nccl_comm *m, nccl_rank *r, const char *what, ct_err *err)
{
    char why[400], behind[128];
    name_behind(m, r->beat ? r->beat[0] + 1 : 0, behind, sizeof behind);
    snprintf(why, sizeof why, "NCCL rank %d (GPU %d) waited more than comm_timeout = %g s in %s for %s; "
             "raise comm_timeout if a step can take that long", r->rank, r->device, m->timeout_s, what,
             *behind ? behind : "a rank of another process");
    fail_all(m, r->rank, why);
    return failure(m, err);
}

/* Until NCCL's call on r settles: ncclInProgress polled through ncclCommGetAsyncError, bounded by
 * the timeout. Called with nothing locked; takes r->mu around each use of the communicator. */
static ct_status settle(nccl_comm *m, nccl_rank *r, ncclResult_t rc, const char *call, ct_err *err)
{
    double start = ct_clock_seconds();
    for (;;) {
        if (rc == ncclSuccess)
            return CT_OK;
        if (rc != ncclInProgress) {
            char why[400];
            pthread_mutex_lock(&r->mu);
            const char *last = r->comm ? ncclGetLastError(r->comm) : "";
            snprintf(why, sizeof why, "NCCL rank %d (GPU %d): %s failed: %s%s%s", r->rank, r->device, call,
                     ncclGetErrorString(rc), last && *last ? ": " : "", last ? last : "");
            pthread_mutex_unlock(&r->mu);
            fail_all(m, r->rank, why);
            return failure(m, err);
        }
        if (has_failed(m))
            return failure(m, err);
        double waited = ct_clock_seconds() - start;
        if (waited > m->timeout_s)
            return timed_out(m, r, call, err);
        /* NCCL's thread enqueues a collective within microseconds: yield at first, nap later */
        if (waited < 1e-3) {
            sched_yield();
        } else {
            struct timespec nap = {0, 100 * 1000};
            nanosleep(&nap, NULL);
        }
        pthread_mutex_lock(&r->mu);
        ncclResult_t q = r->comm ? ncclCommGetAsyncError(r->comm, &rc) : ncclInvalidUsage;
        pthread_mutex_unlock(&r->mu);
        if (q != ncclSuccess)
            rc = q;
    }
}

/* Runs an NCCL call on r's communicator under its lock, then settles it. */
#define NCCL_RUN(m, r, call, err) do { \
    pthread_mutex_lock(&(r)->mu); \
    ncclResult_t rc_ = (r)->comm ? (call) : ncclInvalidUsage; \
    pthread_mutex_unlock(&(r)->mu); \
    ct_status st_ = settle((m), (r), rc_, #call, (err)); \
    if (st_ != CT_OK) \
        return st_; \
} while (0)

/* ---- the watchdog ---- */

static void watch_once(nccl_comm *m)
{
    double now = ct_clock_seconds();
    for (int i = 0; i < m->n && !has_failed(m); i++) {
        nccl_rank *r = &m->local[i];
        ncclResult_t async = ncclSuccess;
        pthread_mutex_lock(&r->mu);
        if (r->comm)
            (void)ncclCommGetAsyncError(r->comm, &async);
        pthread_mutex_unlock(&r->mu);
        char why[400];
        if (async != ncclSuccess && async != ncclInProgress) {
            snprintf(why, sizeof why, "NCCL rank %d (GPU %d) reported an asynchronous error: %s", r->rank, r->device,
                     ncclGetErrorString(async));
            fail_all(m, r->rank, why);
            return;
        }
        unsigned entered = ((volatile unsigned *)r->beat)[0], left = ((volatile unsigned *)r->beat)[1];
        if (entered == left || entered != r->seen_entered) {
            r->seen_entered = entered;
            r->seen_at = now;
            continue;
        }
        if (now - r->seen_at > m->timeout_s) {
            char behind[128];
            name_behind(m, entered, behind, sizeof behind);
            snprintf(why, sizeof why, "NCCL rank %d (GPU %d) waited more than comm_timeout = %g s in collective %u "
                     "for %s%s; raise comm_timeout if a step can take that long", r->rank, r->device, m->timeout_s,
                     entered, *behind ? "rank " : "", *behind ? behind : "a rank of another process");
            fail_all(m, r->rank, why);
            return;
        }
    }
}

static void *watchdog_main(void *p)
{
    nccl_comm *m = p;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        struct timespec until;
        ct_clock_deadline(0.05, &until);
        (void)pthread_cond_timedwait(&m->wake, &m->mu, &until);
        if (m->stop || m->failed)
            continue;
        pthread_mutex_unlock(&m->mu);
        watch_once(m);
        pthread_mutex_lock(&m->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* ---- the ops ---- */

static ct_status rank_of(nccl_comm *m, int rank, nccl_rank **r, ct_err *err)
{
    *r = find_rank(m, rank);
    if (!*r)
        return ct_fail(err, CT_ERR_INTERNAL, "NCCL rank %d is not held by this process", rank);
    return has_failed(m) ? failure(m, err) : CT_OK;
}

/* The communication stream after everything enqueued so far on the compute stream. */
static ct_status fork_stream(nccl_rank *r, cudaStream_t compute, ct_err *err)
{
    CT_CUDA_CHECK(cudaEventRecord(r->ready, compute), err);
    CT_CUDA_CHECK(cudaStreamWaitEvent(r->stream, r->ready, 0), err);
    return CT_OK;
}

static ct_status join_stream(nccl_rank *r, cudaStream_t compute, ct_err *err)
{
    CT_CUDA_CHECK(cudaEventRecord(r->done, r->stream), err);
    CT_CUDA_CHECK(cudaStreamWaitEvent(compute, r->done, 0), err);
    return CT_OK;
}

/* t: (count) fp32. The first all-reduce of a step also reduces the step's sample total, which
 * weights every rank's share; the trainer passes one sample count for all of a step's calls. */
static ct_status nccl_all_reduce_mean(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int samples, ct_err *err)
{
    nccl_comm *m = impl(c);
    nccl_rank *r;
    ct_status st = rank_of(m, rank, &r, err);
    if (st != CT_OK)
        return st;
    if (t->dtype != CT_DTYPE_F32)
        return ct_fail(err, CT_ERR_INTERNAL, "NCCL's all-reduce takes fp32 tensors");
    if (r->counted && samples != r->samples)
        return ct_fail(err, CT_ERR_INTERNAL, "NCCL rank %d: %d samples in one all-reduce of a step, %d in another",
                       rank, samples, r->samples);
    st = fork_stream(r, ct_cuda_of(be)->compute, err);
    if (st != CT_OK)
        return st;
    int first = !r->counted;
    CT_CUDA_CHECK(ct_launch_comm_mark(&r->d_beat[0], first ? r->d_total : NULL, samples, r->stream), err);
    if (first)
        NCCL_RUN(m, r, ncclAllReduce(r->d_total, r->d_total, 1, ncclInt32, ncclSum, r->comm, r->stream), err);
    r->counted = 1;
    r->samples = samples;
    CT_CUDA_CHECK(ct_launch_comm_share(t->data, (long long)t->count, r->d_total, samples, m->size, r->stream), err);
    NCCL_RUN(m, r, ncclAllReduce(t->data, t->data, t->count, ncclFloat, ncclSum, r->comm, r->stream), err);
    CT_CUDA_CHECK(ct_launch_comm_mark(&r->d_beat[1], NULL, 0, r->stream), err);
    r->pending = 1;
    return CT_OK;
}

static ct_status nccl_join(ct_comm *c, int rank, ct_backend *be, ct_err *err)
{
    nccl_comm *m = impl(c);
    nccl_rank *r;
    ct_status st = rank_of(m, rank, &r, err);
    if (st != CT_OK || !r->pending)
        return st;
    r->pending = 0;
    r->counted = 0;
    return join_stream(r, ct_cuda_of(be)->compute, err);
}

/* On the communication stream too, so that all of a rank's NCCL work keeps one order. */
static ct_status nccl_broadcast(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int root, ct_err *err)
{
    nccl_comm *m = impl(c);
    nccl_rank *r;
    ct_status st = rank_of(m, rank, &r, err);
    if (st != CT_OK)
        return st;
    cudaStream_t compute = ct_cuda_of(be)->compute;
    size_t bytes = ct_tensor_bytes(t);
    if (bytes == 0)
        return CT_OK;
    st = fork_stream(r, compute, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_comm_mark(&r->d_beat[0], NULL, 0, r->stream), err);
    NCCL_RUN(m, r, ncclBroadcast(t->data, t->data, bytes, ncclUint8, root, r->comm, r->stream), err);
    CT_CUDA_CHECK(ct_launch_comm_mark(&r->d_beat[1], NULL, 0, r->stream), err);
    return join_stream(r, compute, err);
}

/* ct_doctor_wait's poll: the watchdog has ended everything. */
static ct_status poll_failed(void *ctx, int *stuck, ct_err *err)
{
    (void)stuck;
    nccl_comm *m = ctx;
    return has_failed(m) ? failure(m, err) : CT_OK;
}

/* The lowest rank that passed ok = 0 is the minimum over the ranks of (ok ? size : rank): one
 * all-reduce on the communication stream, counted like the others for the watchdog, then read
 * back. Never captured (the one place the communicator waits on the host for the device). */
static ct_status nccl_agree(ct_comm *c, int rank, ct_backend *be, int ok, int *first_not_ok, ct_err *err)
{
    (void)be;
    nccl_comm *m = impl(c);
    nccl_rank *r;
    ct_status st = rank_of(m, rank, &r, err);
    if (st != CT_OK)
        return st;
    *r->vote = ok ? (unsigned)m->size : (unsigned)rank;
    CT_CUDA_CHECK(cudaMemcpyAsync(r->d_vote, r->vote, sizeof *r->vote, cudaMemcpyHostToDevice, r->stream), err);
    CT_CUDA_CHECK(ct_launch_comm_mark(&r->d_beat[0], NULL, 0, r->stream), err);
    NCCL_RUN(m, r, ncclAllReduce(r->d_vote, r->d_vote, 1, ncclUint32, ncclMin, r->comm, r->stream), err);
    CT_CUDA_CHECK(ct_launch_comm_mark(&r->d_beat[1], NULL, 0, r->stream), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(r->vote, r->d_vote, sizeof *r->vote, cudaMemcpyDeviceToHost, r->stream), err);
    /* the watchdog ends the collective if peers never come (poll_failed then says so, naming
     * them), comm_timeout after it began; the longer limit here bounds the stream's other work.
     * A failure here ends every rank's wait too. */
    int stuck = 0;
    st = ct_doctor_wait(r->stream, poll_failed, m, 2.0 * m->timeout_s, &stuck, err);
    if (st != CT_OK && stuck)
        return timed_out(m, r, "the ranks' agreement", err);
    if (st != CT_OK) {
        char why[400];
        snprintf(why, sizeof why, "NCCL rank %d (GPU %d): %.340s", r->rank, r->device, err->msg);
        fail_all(m, r->rank, why);
        return failure(m, err);
    }
    *first_not_ok = *r->vote < (unsigned)m->size ? (int)*r->vote : -1;
    return CT_OK;
}

static void nccl_abort(ct_comm *c, int rank)
{
    char why[160];
    snprintf(why, sizeof why, "NCCL rank %d failed, so its collectives were aborted", rank);
    fail_all(impl(c), rank, why);
}

/* Teardown: failures are ignored, there is nothing left to do with them. A communicator whose
 * work cannot finish (after a failure) is aborted rather than waited for. */
static void release_rank(nccl_comm *m, nccl_rank *r)
{
    if (r->device >= 0)
        (void)cudaSetDevice(r->device);
    if (r->comm && !has_failed(m) && r->stream) {
        ct_err ignored;
        int stuck = 0;
        if (ct_doctor_wait(r->stream, NULL, NULL, m->timeout_s, &stuck, &ignored) == CT_OK &&
            settle(m, r, ncclCommDestroy(r->comm), "ncclCommDestroy", &ignored) == CT_OK)
            r->comm = NULL;
        (void)cudaGetLastError();  /* a failed query's error: teardown has nobody to tell */
    }
    if (r->comm)
        (void)ncclCommAbort(r->comm);
    r->comm = NULL;
    if (r->ready)
        (void)cudaEventDestroy(r->ready);
    if (r->done)
        (void)cudaEventDestroy(r->done);
    if (r->stream)
        (void)cudaStreamDestroy(r->stream);
    if (r->d_total)
        (void)cudaFree(r->d_total);
    if (r->beat)
        (void)cudaFreeHost(r->beat);
    if (r->d_vote)
        (void)cudaFree(r->d_vote);
    if (r->vote)
        (void)cudaFreeHost(r->vote);
    pthread_mutex_destroy(&r->mu);
}

static void nccl_destroy(ct_comm *c)
{
    nccl_comm *m = c ? impl(c) : NULL;
    if (m) {
        if (m->watching) {
            pthread_mutex_lock(&m->mu);
            m->stop = 1;
            pthread_cond_signal(&m->wake);
            pthread_mutex_unlock(&m->mu);
            pthread_join(m->watchdog, NULL);
        }
        int current = -1;
        (void)cudaGetDevice(&current);
        for (int i = 0; i < m->n; i++)
            release_rank(m, &m->local[i]);
        if (current >= 0)
            (void)cudaSetDevice(current);
        pthread_cond_destroy(&m->wake);
        pthread_mutex_destroy(&m->mu);
        free(m->local);
        free(m);
    }
    free(c);
}

static const ct_comm_ops nccl_ops = {
    .name = "nccl",
    .all_reduce_mean = nccl_all_reduce_mean,
    .join = nccl_join,
    .broadcast = nccl_broadcast,
    .agree = nccl_agree,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

/* ---- creation ---- */

static ct_status new_comm(ct_comm **out, int size, int n, double timeout_s, ct_err *err)
{
    ct_comm *c = calloc(1, sizeof *c);
    nccl_comm *m = calloc(1, sizeof *m);
    nccl_rank *local = calloc((size_t)n, sizeof *local);
    if (!c || !m || !local) {
        free(c);
        free(m);
        free(local);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for an NCCL communicator of %d ranks", size);
    }
    *m = (nccl_comm){.size = size, .n = n, .timeout_s = timeout_s, .local = local};
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&m->wake, &attr);
    pthread_condattr_destroy(&attr);
    for (int i = 0; i < n; i++) {
        local[i].device = -1;
        pthread_mutex_init(&local[i].mu, NULL);
    }
    *c = (ct_comm){.ops = &nccl_ops, .size = size, .impl = m};
    *out = c;
    return CT_OK;
}

/* The rank's stream, events and buffers on its device (current). */
static ct_status make_rank_resources(nccl_rank *r, ct_err *err)
{
    CT_CUDA_CHECK(cudaSetDevice(r->device), err);
    CT_CUDA_CHECK(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking), err);
    CT_CUDA_CHECK(cudaEventCreateWithFlags(&r->ready, cudaEventDisableTiming), err);
    CT_CUDA_CHECK(cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&r->d_total, sizeof *r->d_total), err);
    CT_CUDA_CHECK(cudaHostAlloc((void **)&r->beat, 2 * sizeof *r->beat, cudaHostAllocMapped | cudaHostAllocPortable),
                  err);
    r->beat[0] = r->beat[1] = 0;
    CT_CUDA_CHECK(cudaHostGetDevicePointer((void **)&r->d_beat, r->beat, 0), err);
    CT_CUDA_CHECK(cudaHostAlloc((void **)&r->vote, sizeof *r->vote, cudaHostAllocPortable), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&r->d_vote, sizeof *r->d_vote), err);
    return CT_OK;
}

static ncclConfig_t nonblocking(void)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    return cfg;
}

static ct_status start_watchdog(nccl_comm *m, ct_err *err)
{
    double now = ct_clock_seconds();
    for (int i = 0; i < m->n; i++)
        m->local[i].seen_at = now;
    if (pthread_create(&m->watchdog, NULL, watchdog_main, m) != 0)
        return ct_fail(err, CT_ERR_BACKEND, "cannot start the NCCL communicator's watchdog thread");
    m->watching = 1;
    return CT_OK;
}

/* Makes the n ranks' communicators (one per entry of ids' ranks), then their resources. */
static ct_status init_ranks(nccl_comm *m, const ncclUniqueId *id, ct_err *err)
{
    ncclConfig_t cfg = nonblocking();
    CT_NCCL_CHECK(ncclGroupStart(), err);
    ct_status st = CT_OK;
    for (int i = 0; i < m->n && st == CT_OK; i++) {
        st = CT_CUDA_STATUS(cudaSetDevice(m->local[i].device), err);
        if (st == CT_OK) {
            ncclResult_t rc = ncclCommInitRankConfig(&m->local[i].comm, m->size, *id, m->local[i].rank, &cfg);
            if (rc != ncclSuccess && rc != ncclInProgress)
                st = CT_NCCL_STATUS(rc, err);
        }
    }
    ncclResult_t ended = ncclGroupEnd();
    if (st != CT_OK)
        return st;
    if (ended != ncclSuccess && ended != ncclInProgress)
        return CT_NCCL_STATUS(ended, err);
    /* each rank's initialisation settles on its own, bounded by the timeout */
    for (int i = 0; i < m->n && st == CT_OK; i++)
        st = settle(m, &m->local[i], ncclInProgress, "ncclCommInitRankConfig", err);
    for (int i = 0; i < m->n && st == CT_OK; i++)
        st = make_rank_resources(&m->local[i], err);
    return st == CT_OK ? start_watchdog(m, err) : st;
}

ct_status ct_comm_nccl_create(ct_comm **out, ct_backend *const *bes, int n, double timeout_s, ct_err *err)
{
    *out = NULL;
    if (n < 1)
        return ct_fail(err, CT_ERR_INTERNAL, "an NCCL communicator needs a rank");
    ncclUniqueId id;
    CT_NCCL_CHECK(ncclGetUniqueId(&id), err);
    ct_comm *c = NULL;
    ct_status st = new_comm(&c, n, n, timeout_s, err);
    if (st != CT_OK)
        return st;
    nccl_comm *m = impl(c);
    for (int i = 0; i < n; i++) {
        m->local[i].rank = i;
        m->local[i].device = bes[i]->dev->ordinal;
    }
    int current = -1;
    (void)cudaGetDevice(&current);
    st = init_ranks(m, &id, err);
    if (current >= 0 && st == CT_OK)
        st = CT_CUDA_STATUS(cudaSetDevice(current), err);
    if (st != CT_OK) {
        nccl_destroy(c);
        return st;
    }
    *out = c;
    return CT_OK;
}

ct_status ct_comm_nccl_unique_id(unsigned char id[CT_NCCL_ID_BYTES], ct_err *err)
{
    ncclUniqueId u;
    _Static_assert(sizeof u == CT_NCCL_ID_BYTES, "CT_NCCL_ID_BYTES is sizeof (ncclUniqueId)");
    CT_NCCL_CHECK(ncclGetUniqueId(&u), err);
    memcpy(id, &u, sizeof u);
    return CT_OK;
}

ct_status ct_comm_nccl_create_rank(ct_comm **out, int nranks, int rank, const unsigned char id[CT_NCCL_ID_BYTES],
                                   ct_backend *be, double timeout_s, ct_err *err)
{
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return ct_fail(err, CT_ERR_INTERNAL, "NCCL rank %d of %d ranks", rank, nranks);
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ct_comm *c = NULL;
    ct_status st = new_comm(&c, nranks, 1, timeout_s, err);
    if (st != CT_OK)
        return st;
    nccl_comm *m = impl(c);
    m->local[0].rank = rank;
    m->local[0].device = be->dev->ordinal;
    st = init_ranks(m, &u, err);
    if (st != CT_OK) {
        nccl_destroy(c);
        return st;
    }
    *out = c;
    return CT_OK;
}

#else /* CUDA without NCCL: the entry points say so */

static ct_status no_nccl(ct_err *err)
{
    return ct_fail(err, CT_ERR_USAGE, "this build has no NCCL (configure with -DCUTRAIN_NCCL=ON where NCCL 2 is "
                                      "installed): GPUs cannot reduce together");
}

ct_status ct_comm_nccl_create(ct_comm **out, ct_backend *const *bes, int n, double timeout_s, ct_err *err)
{
    (void)bes, (void)n, (void)timeout_s;
    *out = NULL;
    return no_nccl(err);
}

ct_status ct_comm_nccl_unique_id(unsigned char id[CT_NCCL_ID_BYTES], ct_err *err)
{
    memset(id, 0, CT_NCCL_ID_BYTES);
    return no_nccl(err);
}

ct_status ct_comm_nccl_create_rank(ct_comm **out, int nranks, int rank, const unsigned char id[CT_NCCL_ID_BYTES],
                                   ct_backend *be, double timeout_s, ct_err *err)
{
    (void)nranks, (void)rank, (void)id, (void)be, (void)timeout_s;
    *out = NULL;
    return no_nccl(err);
}

#endif
