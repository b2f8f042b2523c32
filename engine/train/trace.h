/* A trace of one training step: each layer's forward and backward, the loss, each gradient
 * bucket's all-reduce and the optimizer's update, per replica, with start and end times, written
 * as Chrome trace JSON (chrome://tracing, Perfetto). It shows where a step's time goes and
 * whether reductions overlap backward. Times are the host clock: on the CPU they are
 * the work itself; on a GPU they are when the work was enqueued, not when it ran. */
#ifndef CT_TRACE_H
#define CT_TRACE_H

#include <stddef.h>

#include "graph/graph.h"

typedef enum ct_trace_kind { CT_TRACE_BACKWARD, CT_TRACE_REDUCE, CT_TRACE_FORWARD, CT_TRACE_LOSS, CT_TRACE_UPDATE } ct_trace_kind;

typedef struct ct_trace_event {
    ct_trace_kind kind;
    int index;               /* the layer, or the bucket (0 = the first launched); 0 for the loss
                              * and the update */
    size_t bytes;            /* a bucket's gradient bytes */
    double start_s, end_s;   /* ct_clock_seconds */
} ct_trace_event;

/* Each replica records into its own list, so the replicas' threads never share one. */
typedef struct ct_trace_rank {
    ct_trace_event *events;
    int n, cap;
} ct_trace_rank;

typedef struct ct_trace {
    int ranks;
    ct_trace_rank *rank;     /* (ranks) */
    const ct_graph *graph;   /* names the layers of forward and backward events */
} ct_trace;

/* Room for `per_rank` events on each of `ranks` replicas of network g. */
ct_status ct_trace_open(ct_trace *t, const ct_graph *g, int ranks, int per_rank, ct_err *err);
void ct_trace_close(ct_trace *t);
/* Records an event; one beyond the room is dropped (the room is sized for one step). */
void ct_trace_add(ct_trace_rank *r, ct_trace_kind kind, int index, size_t bytes, double start_s, double end_s);
/* Writes the events as Chrome trace JSON, times in microseconds from the earliest event, one
 * thread row per replica. */
ct_status ct_trace_write(const ct_trace *t, const char *path, ct_err *err);

#endif
