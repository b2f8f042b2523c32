#include "train/buckets.h"

#include "base/clock.h"

typedef struct bucket_walk {
    const ct_bucket_reduce *b;
    size_t per_bucket;        /* elements that close a bucket */
    int lowest;               /* the first layer with parameters: it closes the last bucket */
    size_t hi;                /* the open bucket's end (elements) */
    int next;                 /* buckets launched */
    double mark;              /* the end of the last recorded event */
    double comm_s;
} bucket_walk;

static size_t elements_per_bucket(double mib)
{
    double n = mib * 1024.0 * 1024.0 / sizeof(float);
    return n < 1.0 ? 1 : (size_t)n;
}

static int lowest_layer_with_params(const ct_graph *g)
{
    for (int i = 0; i < g->n_layers; i++)
        if (g->layers[i].w_count + g->layers[i].b_count > 0)
            return i;
    return -1;
}

/* Whether layer i closes the open bucket: it has parameters, and the bucket has reached its size
 * or nothing earlier has any. */
static int closes_bucket(const ct_graph *g, int i, int lowest, size_t hi, size_t per_bucket)
{
    const ct_layer *l = &g->layers[i];
    return l->w_count + l->b_count > 0 && (hi - l->w_off >= per_bucket || i == lowest);
}

int ct_bucket_starts(const ct_graph *g, double bucket_mib, size_t *starts, int max)
{
    size_t per = elements_per_bucket(bucket_mib), hi = g->param_span;
    int lowest = lowest_layer_with_params(g), n = 0;
    for (int i = g->n_layers - 1; i >= 0; i--)
        if (closes_bucket(g, i, lowest, hi, per)) {
            if (n < max)
                starts[n] = g->layers[i].w_off;
            n++;
            hi = g->layers[i].w_off;
        }
    return n;
}

// grads: (param_span) fp32, the range [w_off of layer i, hi) reduced in place
static ct_status layer_done(void *p, int i, ct_err *err)
{
    bucket_walk *w = p;
    const ct_bucket_reduce *b = w->b;
    ct_graph *g = b->graph;
    int clocked = b->trace || b->timed;
    double now = clocked ? ct_clock_seconds() : 0.0;
    if (b->trace)
        ct_trace_add(b->trace, CT_TRACE_BACKWARD, i, 0, w->mark, now);
    w->mark = now;
    if (!closes_bucket(g, i, w->lowest, w->hi, w->per_bucket))
        return CT_OK;
    size_t lo = g->layers[i].w_off;
    ct_tensor bucket = ct_tensor_flat((float *)g->grads.data + lo, CT_DTYPE_F32, w->hi - lo);
    ct_status st = b->comm->ops->all_reduce_mean(b->comm, b->rank, g->be, &bucket, b->samples, err);
    now = clocked ? ct_clock_seconds() : 0.0;
    w->comm_s += now - w->mark;
    if (b->trace)
        ct_trace_add(b->trace, CT_TRACE_REDUCE, w->next, ct_tensor_bytes(&bucket), w->mark, now);
    w->mark = now;
    w->hi = lo;
    w->next++;
    return st;
}

ct_status ct_backward_reduced(const ct_bucket_reduce *b, double *comm_s, ct_err *err)
{
    bucket_walk w = {
        .b = b, .per_bucket = elements_per_bucket(b->bucket_mib), .lowest = lowest_layer_with_params(b->graph),
        .hi = b->graph->param_span, .mark = b->trace || b->timed ? ct_clock_seconds() : 0.0,
    };
    ct_status st = ct_graph_backward_each(b->graph, b->samples, layer_done, &w, err);
    *comm_s = w.comm_s;
    return st;
}
