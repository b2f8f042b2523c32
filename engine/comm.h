/* Communicators: how replicas agree. The step averages every replica's gradients before the
 * optimizer, and replica 0's initial parameters and batch-norm statistics are broadcast to the
 * others. One replica needs neither (ct_comm_single); CPU replicas share memory (ct_comm_local),
 * CPU processes exchange over MPI (ct_comm_mpi): those are the trainer's (train/comms.h). NCCL
 * over GPUs reduces on a stream of its own (the CUDA backend's, engine/cuda/comm_nccl.h, opened
 * through the registry). The interface stands with the backend's and the device's, below them. */
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

#endif
