/* The memory plan: what binding a network allocates at a batch size, by purpose and by element
 * type, computed without allocating; and the largest batch whose plan fits a budget. */
#include "graph/graph_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- activation gradients: one block, shared where lifetimes allow ----
 *
 * The backward pass runs layers from last to first. Layer i's dy is first written by the backward
 * of its last consumer j (the loss, for the output layer) and last read by layer i's own backward,
 * so it lives over the layer indices [i, j]. Two gradients whose intervals do not meet never hold
 * values at the same time and may share bytes: a chain needs two buffers, not one per layer. Each
 * is written in full by its first writer before anything reads it (ct_layer.dx_accumulate), so
 * what a shared buffer held before does not matter. A gradient nothing writes (a layer whose
 * output nobody reads) is read as zeros, so it keeps bytes of its own, zeroed at allocation. */

typedef struct grad_buffer {
    int layer;
    int first, last;         /* lifetime, in layer indices */
    size_t bytes;
} grad_buffer;

static int larger_first(const void *a, const void *b)
{
    const grad_buffer *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->layer - y->layer;   /* a fixed order whatever qsort does with ties */
}

static int meet(const grad_buffer *a, const grad_buffer *b) { return a->first <= b->last && b->first <= a->last; }

/* A flatten's gradient is its producer's. */
static void alias_offsets(const ct_graph *g, size_t *offset)
{
    for (int i = 0; i < g->n_layers; i++)
        if (aliases_input(&g->layers[i]))
            offset[i] = offset[grad_owner(g, i)];
}

/* Without room to plan the sharing: one buffer each, end to end (offset may be NULL). */
static size_t end_to_end(const ct_graph *g, int n, size_t *offset)
{
    size_t total = 0;
    for (int i = 0; i < g->n_layers; i++) {
        if (offset)
            offset[i] = total;
        total += grad_span(&g->layers[i], n);
    }
    if (offset)
        alias_offsets(g, offset);
    return total;
}

/* The shared layout, with buf and last_writer (n_layers entries each) to work in. */
static size_t shared(const ct_graph *g, int n, size_t *offset, grad_buffer *buf, int *last_writer)
{
    const int count = g->n_layers;
    for (int i = 0; i < count; i++)
        last_writer[i] = -1;
    last_writer[grad_owner(g, count - 1)] = count;   /* the loss writes the output's gradient */
    for (int j = 0; j < count; j++) {
        const ct_layer *l = &g->layers[j];
        if (aliases_input(l))
            continue;
        for (int k = 0; k < l->n_in; k++)
            if (l->in[k] != CT_INPUT_NODE && j > last_writer[grad_owner(g, l->in[k])])
                last_writer[grad_owner(g, l->in[k])] = j;
    }
    int m = 0;
    for (int i = 0; i < count; i++) {
        if (aliases_input(&g->layers[i]))
            continue;
        int unwritten = last_writer[i] < 0;
        buf[m++] = (grad_buffer){.layer = i, .first = unwritten ? 0 : i, .last = unwritten ? count : last_writer[i],
                                 .bytes = grad_span(&g->layers[i], n)};
    }
    qsort(buf, (size_t)m, sizeof *buf, larger_first);
    /* largest first, each at the lowest offset clear of every placed buffer it meets */
    size_t total = 0;
    for (int a = 0; a < m; a++) {
        size_t at = 0;
        for (int moved = 1; moved;) {
            moved = 0;
            for (int b = 0; b < a; b++) {
                size_t b_at = offset[buf[b].layer];
                if (meet(&buf[a], &buf[b]) && at < b_at + buf[b].bytes && b_at < at + buf[a].bytes) {
                    at = b_at + buf[b].bytes;
                    moved = 1;
                }
            }
        }
        offset[buf[a].layer] = at;
        if (at + buf[a].bytes > total)
            total = at + buf[a].bytes;
    }
    alias_offsets(g, offset);
    return total;
}

size_t ct_graph_grad_layout(const ct_graph *g, int n, size_t *offset)
{
    size_t *own_offset = offset ? NULL : calloc((size_t)g->n_layers, sizeof *own_offset);
    grad_buffer *buf = calloc((size_t)g->n_layers, sizeof *buf);
    int *last_writer = calloc((size_t)g->n_layers, sizeof *last_writer);
    size_t *at = offset ? offset : own_offset;
    size_t total = buf && last_writer && at ? shared(g, n, at, buf, last_writer) : end_to_end(g, n, at);
    free(own_offset);
    free(buf);
    free(last_writer);
    return total;
}

/* ---- the plan ---- */

void ct_graph_plan(const ct_graph *g, ct_backend *be, int batch, ct_optimizer opt, ct_memory_plan *plan)
{
    size_t n = (size_t)batch, pbytes = param_bytes(g), workspace = 0, scratch = 0;
    size_t *by = plan->by_dtype;
    memset(plan, 0, sizeof *plan);
    plan->params = 2 * pbytes;
    plan->params_half = g->compute_dtype != CT_DTYPE_F32 ? g->param_span * ct_dtype_size(g->compute_dtype) : 0;
    plan->optimizer = (size_t)(has_m(opt) + has_v(opt)) * pbytes;
    plan->state = g->n_state * ct_dtype_size(CT_DTYPE_F32);
    plan->inputs = n * ct_shape_size(g->input) * ct_dtype_size(CT_DTYPE_F32) + n * ct_dtype_size(CT_DTYPE_I32);
    by[CT_DTYPE_F32] += plan->params + plan->optimizer + plan->state + n * ct_shape_size(g->input) * sizeof(float);
    by[CT_DTYPE_I32] += n * ct_dtype_size(CT_DTYPE_I32);
    by[g->compute_dtype] += plan->params_half;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        size_t out = n * ct_shape_size(l->out) * ct_dtype_size(l->dtype);
        size_t kept = (aliases_input(l) ? 0 : out) + (ct_layer_keeps_preactivation(l) ? out : 0);
        plan->activations += kept + aux_bytes(l, batch);
        by[l->dtype] += kept;
        if (l->def->aux_count) {
            ct_dtype aux_dtype;
            (void)l->def->aux_count(l, batch, &aux_dtype);
            by[aux_dtype] += aux_bytes(l, batch);
        }
    }
    /* the block is bytes that hold gradients of several dtypes in turn: counted as the
     * activations' type (the half type in a mixed-precision run) */
    plan->gradients = ct_graph_grad_layout(g, batch, NULL);
    by[g->compute_dtype] += plan->gradients;
    ct_graph_backend_sizes(g, be, batch, &workspace, &scratch);
    plan->workspace = workspace + scratch;
    by[CT_DTYPE_U8] += plan->workspace;
    plan->total = plan->params + plan->params_half + plan->optimizer + plan->state + plan->inputs + plan->activations +
                  plan->gradients + plan->workspace;
    ct_graph_plan_allocator(g, be, batch, opt, plan);
}

int ct_graph_max_batch(const ct_graph *g, ct_backend *be, ct_optimizer opt, size_t budget, int batch_max)
{
    /* the plan grows with the batch (every batch-sized buffer does; a workspace could shrink where
     * a convolution switches algorithm, so the answer is checked, not assumed) */
    int lo = 0, hi = batch_max / 8;   /* in units of 8: lo fits (0 trivially), hi + 1 is past the cap */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        ct_memory_plan p;
        ct_graph_plan(g, be, 8 * mid, opt, &p);
        if (p.total <= budget)
            lo = mid;
        else
            hi = mid - 1;
    }
    return 8 * lo;
}
