/* Communicators: how replicas agree. The step averages every replica's gradients before the
 * optimizer, and replica 0's initial parameters are broadcast to the others. One replica needs
 * neither (ct_comm_single); NCCL over GPUs and a shared-memory one for CPU replicas come with
 * mirrored data parallelism. */
#ifndef CT_COMM_H
#define CT_COMM_H

#include "backend.h"

typedef struct ct_comm ct_comm;

typedef struct ct_comm_ops {
    const char *name;
    /* Replaces t on replica `rank` (running on be) with the mean of t over all replicas,
     * enqueued in order on be's compute stream, without waiting: every rank calls it with the same
     * tensor in the same step. Inside a captured step. */
    ct_status (*all_reduce_mean)(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, ct_err *err);
    /* Replaces t on every rank with root's. */
    ct_status (*broadcast)(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int root, ct_err *err);
    void (*destroy)(ct_comm *c);
} ct_comm_ops;

struct ct_comm {
    const ct_comm_ops *ops;
    int size;                /* replicas */
    void *impl;
};

/* The communicator of a single replica: nothing to exchange. */
ct_status ct_comm_single_create(ct_comm **out, ct_err *err);

#endif
