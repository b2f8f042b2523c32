/* Communicators: how replicas agree. The step averages every replica's gradients before the
 * optimizer, and replica 0's initial parameters and batch-norm statistics are broadcast to the
 * others. One replica needs neither (ct_comm_single); CPU replicas share memory (ct_comm_local);
 * NCCL over GPUs (ct_comm_nccl) reduces on a stream of its own. */
#ifndef CT_COMM_H
#define CT_COMM_H

#include "backend.h"

typedef struct ct_comm ct_comm;

typedef struct ct_comm_ops {
    const char *name;
    /* Replaces t (flat fp32) on replica `rank` (running on be) with the mean of t over all
     * replicas, enqueued in order on be's compute stream, without waiting: every rank calls it
     * with the same tensor in the same step. `samples` is how many samples the rank's t was
     * averaged over: when the ranks' counts differ (a last batch that does not split evenly, a
     * rank with none), the mean is weighted by them, so the result is the mean over the global
     * batch; when they agree it is the plain mean. Inside a captured step. */
    ct_status (*all_reduce_mean)(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int samples, ct_err *err);
    /* Makes be's compute stream wait for every all_reduce_mean this rank enqueued since the last
     * call: a communicator that reduces on a stream of its own (NCCL, overlapping backward) joins
     * it here, before the update reads the gradients. NULL: the reductions already run in order
     * on the compute stream. Inside a captured step, without waiting on the host. */
    ct_status (*join)(ct_comm *c, int rank, ct_backend *be, ct_err *err);
    /* Replaces t on every rank with root's. */
    ct_status (*broadcast)(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int root, ct_err *err);
    /* Every rank passes ok (0 or 1); *first_not_ok becomes, on every rank, the lowest rank that
     * passed 0, or -1 when all passed 1. For what the ranks must decide together, rarely: it
     * waits on the host, so never inside a captured step (once per capture, whether every rank's
     * capture of a step succeeded). Bounded like the collectives. NULL in a communicator that
     * never has more than one rank. */
    ct_status (*agree)(ct_comm *c, int rank, ct_backend *be, int ok, int *first_not_ok, ct_err *err);
    /* A rank that failed outside a collective says so, so that the others' waits in the current
     * or next collective end with an error instead of waiting for it (NULL: nothing waits). */
    void (*abort)(ct_comm *c, int rank);
    void (*destroy)(ct_comm *c);
} ct_comm_ops;

struct ct_comm {
    const ct_comm_ops *ops;
    int size;                /* replicas */
    long step;               /* the optimizer step the collectives serve, for messages (0: before training) */
    void *impl;
};

/* The mean every CPU communicator computes, elements [lo, hi) of out: each element summed over
 * the ranks' in[r] in rank order, then divided by the rank count, or, when the ranks' samples
 * differ, each weighted by its samples and divided by their total. One function, so that CPU
 * replicas in one process and in several give the same bits. in and out (elements) may not
 * overlap. */
void ct_comm_mean_in_rank_order(const float *const *in, const int *samples, int size, float *out, size_t lo,
                                size_t hi);

/* The communicator of a single replica: nothing to exchange. */
ct_status ct_comm_single_create(ct_comm **out, ct_err *err);

/* `size` CPU replicas in one process, one host thread each, over shared memory. Every element
 * of a mean is summed in rank order, then divided: the result never depends on which thread
 * arrives first. A wait longer than timeout_s seconds fails, naming the ranks that never came. */
ct_status ct_comm_local_create(ct_comm **out, int size, double timeout_s, ct_err *err);

struct ct_world;
/* One CPU replica per process of an MPI world (train/world.h): every rank receives every other's
 * tensor and computes ct_comm_mean_in_rank_order over all, so P processes give the bits of
 * devices = cpu:P in one; every exchange is bounded by the world's comm_timeout. */
ct_status ct_comm_mpi_create(ct_comm **out, struct ct_world *world, ct_err *err);

#endif
