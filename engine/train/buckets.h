/* Backward with the gradients averaged over the replicas in buckets, each sent as soon as
 * backward has produced it (DDP's buckets): the last layers' gradients are final first, so their
 * all-reduce can run while the earlier layers' backward does. A bucket is a contiguous range of
 * the flat gradient tensor, layers taken last to first until it holds bucket_mib; every replica
 * cuts the same buckets and reduces them in the same order. */
#ifndef CT_BUCKETS_H
#define CT_BUCKETS_H

#include "graph/graph.h"
#include "comm.h"
#include "train/trace.h"

typedef struct ct_bucket_reduce {
    ct_comm *comm;
    int rank;
    ct_graph *graph;          /* bound on the rank's backend */
    int samples;              /* the rank's share of the batch */
    double bucket_mib;
    ct_trace_rank *trace;     /* NULL: not traced */
    int timed;                /* 1: time the reductions' calls (the host clock is read only then,
                               * or when traced) */
} ct_bucket_reduce;

/* Runs backward over b->samples samples and all-reduces every bucket as it completes; *comm_s
 * gets the host time spent in the reductions' calls when b->timed (else 0). */
ct_status ct_backward_reduced(const ct_bucket_reduce *b, double *comm_s, ct_err *err);

/* Where the buckets of g start, in launch order, for tests and summaries: up to max element
 * offsets (each bucket runs from its start to the previous one's, the first to the end); returns
 * the number of buckets. */
int ct_bucket_starts(const ct_graph *g, double bucket_mib, size_t *starts, int max);

#endif
