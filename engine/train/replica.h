/* A replica: one bound copy of the network on one device with its own backend, and the host
 * buffers it stages evaluation batches in. The trainer drives a list of them, one per device of
 * `devices` (mirrored data parallelism); every thread that drives one activates its device first. */
#ifndef CT_REPLICA_H
#define CT_REPLICA_H

#include "graph/graph.h"

enum { CT_STAGING_SLOTS = 2 };  /* evaluation assembles one batch while the other is copied */

typedef struct ct_replica {
    int rank;
    ct_device *dev;          /* owned */
    ct_backend *be;          /* owned */
    ct_graph graph;          /* bound on be */
    /* Host batches for evaluation and bench, in the device's host memory (pinned on a GPU). */
    float *host_x[CT_STAGING_SLOTS];          /* (batch, input) */
    int32_t *host_y[CT_STAGING_SLOTS];        /* (batch) */
    long ticket[CT_STAGING_SLOTS];            /* the copy that last read the slot */
    int next_slot;
    long feed_ticket;        /* the copy of the training batch it was last fed */
    long next_feed_ticket;   /* the batch being handed over, until the previous one is given back */
} ct_replica;

/* Takes dev and be (freed by ct_replica_close even on failure), builds the network from cfg and
 * binds it at `batch`, with host staging for whole batches. */
ct_status ct_replica_open(ct_replica *r, int rank, ct_device *dev, ct_backend *be, const ct_config *cfg,
                          ct_shape input, int classes, int batch, uint64_t seed, size_t limit, ct_err *err);
void ct_replica_close(ct_replica *r);
/* Builds the network from cfg and binds it at `batch` on the replica's device and backend, with
 * host staging for whole batches (ct_replica_open's second half). On failure the replica holds
 * nothing bound and may be bound again (the batch search retries smaller batches this way). */
ct_status ct_replica_bind(ct_replica *r, const ct_config *cfg, ct_shape input, int classes, int batch, uint64_t seed,
                          size_t limit, ct_err *err);
/* Frees what ct_replica_bind made, keeping the device and backend. */
void ct_replica_unbind(ct_replica *r);

/* A host slot to assemble the next batch in: waits only for the copy that last read it. */
ct_status ct_replica_host_slot(ct_replica *r, float **x, int32_t **y, int *slot, ct_err *err);
/* Submits n samples assembled in `slot` (fp32) into the network's input tensors. */
ct_status ct_replica_submit_slot(ct_replica *r, int slot, int n, ct_err *err);

#endif
