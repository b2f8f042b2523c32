/* What graph.c (binding) and plan.c (the memory plan) both size: one definition of each buffer,
 * so the plan and the allocation cannot disagree. Internal to engine/graph. */
#ifndef CT_GRAPH_INTERNAL_H
#define CT_GRAPH_INTERNAL_H

#include "graph/graph.h"

/* flatten only reinterprets its input, so it shares the producer's buffers */
static inline int aliases_input(const ct_layer *l)
{
    return l->def->aliases_input && l->in[0] != CT_INPUT_NODE;
}

/* Bytes of a layer's activation gradient (in its dtype) in the act_grads block at batch n, padded
 * so that the next one starts aligned; 0 for an aliasing layer, which has none of its own. */
static inline size_t grad_span(const ct_layer *l, int n)
{
    if (aliases_input(l))
        return 0;
    return ct_align_count((size_t)n * ct_shape_size(l->out), l->dtype) * ct_dtype_size(l->dtype);
}

static inline size_t aux_bytes(const ct_layer *l, int n)
{
    if (!l->def->aux_count)
        return 0;
    ct_dtype dtype;
    size_t count = l->def->aux_count(l, n, &dtype);
    return count * ct_dtype_size(dtype);
}

/* The layer whose activation-gradient buffer layer i's dy is: i itself, or for an aliasing layer
 * (flatten) its producer's owner. */
static inline int grad_owner(const ct_graph *g, int i)
{
    while (aliases_input(&g->layers[i]))
        i = g->layers[i].in[0];
    return i;
}

/* Where each layer's activation gradient lives in the act_grads block at batch n (plan.c): bytes
 * from the block's start into offset[i] (layers that alias their input share their owner's); the
 * block's size is returned. Buffers whose lifetimes in the backward pass do not overlap share
 * memory. */
size_t ct_graph_grad_layout(const ct_graph *g, int n, size_t *offset);

static inline int has_m(ct_optimizer opt) { return opt != CT_OPT_SGD; }
static inline int has_v(ct_optimizer opt) { return opt == CT_OPT_ADAM || opt == CT_OPT_ADAMW; }

/* Parameters, their gradients and the optimizer's moments are fp32 whatever the activations are. */
static inline size_t param_bytes(const ct_graph *g) { return g->param_span * ct_dtype_size(CT_DTYPE_F32); }

#endif
