/* CPU replicas in one process, one host thread each: collectives over shared memory.
 *
 * A collective is three steps between barriers: every rank posts its tensor's address; each
 * rank computes its share of the elements of the result into a shared buffer, every element
 * summed over the ranks in rank order and then divided (so the result does not depend on which
 * thread came first, nor on how the elements are shared out); every rank copies the result into
 * its own tensor. The last barrier keeps the shared buffer until every rank has its copy.
 *
 * Every wait is bounded by the timeout; a rank that fails elsewhere calls abort, which ends the
 * others' waits with an error instead of a hang. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "train/comms.h"

typedef struct local_comm {
    int size;
    double timeout_s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;              /* ranks waiting at the current barrier */
    unsigned long generation; /* barriers passed */
    unsigned char *here;      /* (size) 1: the rank has reached the current barrier */
    int failed;               /* 0, or 1 + the rank whose failure ended every wait */
    int timed_out;            /* the failure is a timeout (failed names the rank that saw it) */
    char missing[128];        /* the ranks a timeout waited for */
    void **data;              /* (size) each rank's tensor in the current collective */
    size_t *bytes;            /* (size) */
    int *samples;             /* (size) */
    int *votes;               /* (size) each rank's flag in the current agreement */
    float *result;            /* the mean, shared */
    size_t result_cap;        /* elements */
} local_comm;

static local_comm *impl(ct_comm *c) { return c->impl; }

/* Why a wait ended without the others, as every rank reports it. */
static ct_status failure(local_comm *l, int rank, ct_err *err)
{
    if (l->timed_out)
        return ct_fail(err, CT_ERR_BACKEND,
                       "CPU replica %d waited more than comm_timeout = %g s for replica%s %s in a collective; "
                       "raise comm_timeout if a step can take that long",
                       l->failed - 1, l->timeout_s, strchr(l->missing, ',') ? "s" : "", l->missing);
    return ct_fail(err, CT_ERR_BACKEND, "CPU replica %d stopped because replica %d failed", rank, l->failed - 1);
}

/* Lists the ranks not at the barrier into l->missing. Called with the lock held. */
static void name_missing(local_comm *l)
{
    size_t used = 0;
    l->missing[0] = '\0';
    for (int r = 0; r < l->size && used < sizeof l->missing; r++)
        if (!l->here[r]) {
            int w = snprintf(l->missing + used, sizeof l->missing - used, "%s%d", used ? ", " : "", r);
            used += w > 0 ? (size_t)w : 0;
        }
}

/* Waits until every rank has arrived (or one failed, or the timeout passed). */
static ct_status barrier(local_comm *l, int rank, ct_err *err)
{
    pthread_mutex_lock(&l->mu);
    if (l->failed) {
        ct_status st = failure(l, rank, err);
        pthread_mutex_unlock(&l->mu);
        return st;
    }
    unsigned long gen = l->generation;
    l->here[rank] = 1;
    if (++l->arrived == l->size) {
        l->arrived = 0;
        memset(l->here, 0, (size_t)l->size);
        l->generation++;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        return CT_OK;
    }
    struct timespec deadline;
    ct_clock_deadline(l->timeout_s, &deadline);
    while (gen == l->generation && !l->failed) {
        int rc = pthread_cond_timedwait(&l->cv, &l->mu, &deadline);
        if (rc == ETIMEDOUT && gen == l->generation && !l->failed) {
            name_missing(l);
            l->failed = rank + 1;
            l->timed_out = 1;
            pthread_cond_broadcast(&l->cv);
        }
    }
    ct_status st = gen == l->generation ? failure(l, rank, err) : CT_OK;
    pthread_mutex_unlock(&l->mu);
    return st;
}

/* Posts rank's tensor for the collective; the shared result grows to `elements` when asked. */
static ct_status post(local_comm *l, int rank, ct_tensor *t, int samples, size_t elements, ct_err *err)
{
    ct_status st = CT_OK;
    pthread_mutex_lock(&l->mu);
    l->data[rank] = t->data;
    l->bytes[rank] = ct_tensor_bytes(t);
    l->samples[rank] = samples;
    /* nobody reads the shared buffer between a collective's last barrier and the next's first */
    if (elements > l->result_cap) {
        float *grown = realloc(l->result, elements * sizeof *grown);
        if (grown) {
            l->result = grown;
            l->result_cap = elements;
        } else {
            st = ct_fail(err, CT_ERR_NOMEM, "out of memory for the replicas' all-reduce (%zu values)", elements);
            if (!l->failed)
                l->failed = rank + 1;
            pthread_cond_broadcast(&l->cv);
        }
    }
    pthread_mutex_unlock(&l->mu);
    return st;
}

/* Every rank must pass tensors of one size: a mismatch is the trainer's bug. */
static ct_status check_sizes(local_comm *l, ct_err *err)
{
    for (int r = 1; r < l->size; r++)
        if (l->bytes[r] != l->bytes[0])
            return ct_fail(err, CT_ERR_INTERNAL, "replicas %d and 0 passed %zu and %zu bytes to one collective", r,
                           l->bytes[r], l->bytes[0]);
    return CT_OK;
}

void ct_comm_mean_in_rank_order(const float *const *in, const int *samples, int size, float *out, size_t lo,
                                size_t hi)
{
    int equal = 1;
    long total = 0;
    for (int r = 0; r < size; r++) {
        equal &= samples[r] == samples[0];
        total += samples[r];
    }
    if (equal || total == 0) {
        float n = (float)size;
#pragma omp parallel for schedule(static)
        for (size_t i = lo; i < hi; i++) {
            float s = in[0][i];
            for (int r = 1; r < size; r++)
                s += in[r][i];
            out[i] = s / n;
        }
    } else {
        /* each rank's mean weighted by its samples: the mean over the global batch */
        float n = (float)total;
#pragma omp parallel for schedule(static)
        for (size_t i = lo; i < hi; i++) {
            float s = in[0][i] * (float)samples[0];
            for (int r = 1; r < size; r++)
                s += in[r][i] * (float)samples[r];
            out[i] = s / n;
        }
    }
}

// this rank's share [lo, hi) of the elements of (count)
static void reduce_share(local_comm *l, int rank, size_t count)
{
    size_t lo = count * (size_t)rank / (size_t)l->size, hi = count * (size_t)(rank + 1) / (size_t)l->size;
    ct_comm_mean_in_rank_order((const float *const *)l->data, l->samples, l->size, l->result, lo, hi);
}

static ct_status local_all_reduce_mean(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int samples, ct_err *err)
{
    (void)be;
    local_comm *l = impl(c);
    if (t->dtype != CT_DTYPE_F32)
        return ct_fail(err, CT_ERR_INTERNAL, "the CPU all-reduce takes fp32 tensors");
    ct_status st = post(l, rank, t, samples, t->count, err);
    if (st == CT_OK)
        st = barrier(l, rank, err);
    if (st == CT_OK)
        st = check_sizes(l, err);
    if (st == CT_OK) {
        reduce_share(l, rank, t->count);
        st = barrier(l, rank, err);
    }
    if (st == CT_OK) {
        memcpy(t->data, l->result, ct_tensor_bytes(t));
        st = barrier(l, rank, err);
    }
    return st;
}

static ct_status local_broadcast(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int root, ct_err *err)
{
    (void)be;
    local_comm *l = impl(c);
    ct_status st = post(l, rank, t, 0, 0, err);
    if (st == CT_OK)
        st = barrier(l, rank, err);
    if (st == CT_OK)
        st = check_sizes(l, err);
    if (st == CT_OK && rank != root && ct_tensor_bytes(t) > 0)
        memcpy(t->data, l->data[root], ct_tensor_bytes(t));
    /* root's tensor stays put until every copy is made */
    return st == CT_OK ? barrier(l, rank, err) : st;
}

static ct_status local_agree(ct_comm *c, int rank, ct_backend *be, int ok, int *first_not_ok, ct_err *err)
{
    (void)be;
    local_comm *l = impl(c);
    pthread_mutex_lock(&l->mu);
    l->votes[rank] = ok;
    pthread_mutex_unlock(&l->mu);
    ct_status st = barrier(l, rank, err);
    if (st != CT_OK)
        return st;
    *first_not_ok = -1;
    for (int r = 0; r < l->size && *first_not_ok < 0; r++)
        if (!l->votes[r])
            *first_not_ok = r;
    /* the votes stay until every rank has read them */
    return barrier(l, rank, err);
}

static void local_abort(ct_comm *c, int rank)
{
    local_comm *l = impl(c);
    pthread_mutex_lock(&l->mu);
    if (!l->failed)
        l->failed = rank + 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

static void local_destroy(ct_comm *c)
{
    local_comm *l = impl(c);
    if (l) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        free(l->here);
        free(l->data);
        free(l->bytes);
        free(l->samples);
        free(l->votes);
        free(l->result);
        free(l);
    }
    free(c);
}

static const ct_comm_ops local_ops = {
    .name = "local",
    .all_reduce_mean = local_all_reduce_mean,
    .broadcast = local_broadcast,
    .agree = local_agree,
    .abort = local_abort,
    .destroy = local_destroy,
};

ct_status ct_comm_local_create(ct_comm **out, int size, double timeout_s, ct_err *err)
{
    *out = NULL;
    ct_comm *c = calloc(1, sizeof *c);
    local_comm *l = calloc(1, sizeof *l);
    if (c)
        *c = (ct_comm){.ops = &local_ops, .size = size, .impl = l};
    if (l) {
        l->size = size;
        l->timeout_s = timeout_s;
        l->here = calloc((size_t)size, 1);
        l->data = calloc((size_t)size, sizeof *l->data);
        l->bytes = calloc((size_t)size, sizeof *l->bytes);
        l->samples = calloc((size_t)size, sizeof *l->samples);
        l->votes = calloc((size_t)size, sizeof *l->votes);
    }
    if (!c || !l || !l->here || !l->data || !l->bytes || !l->samples || !l->votes) {
        if (l) {
            free(l->here);
            free(l->data);
            free(l->bytes);
            free(l->samples);
            free(l->votes);
        }
        free(l);
        free(c);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating a communicator for %d replicas", size);
    }
    /* the timeout is measured on the monotonic clock: a clock change neither ends nor stretches it */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&l->mu, NULL);
    *out = c;
    return CT_OK;
}
