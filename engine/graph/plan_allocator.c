/* The plan's allocator side: what the device's allocator counts beyond the bytes ct_graph_bind asks for.
 * Binding asks for each buffer on its own (graph.c, own), and the allocator rounds each up to
 * CT_TENSOR_ALIGN (a zero-byte one to one block), so the padding is summed over the same buffers
 * in the same order as ct_graph_bind makes them; test_memory_usage checks that the plan then
 * equals what the allocator counts, to the byte. */
#include "base/devmem.h"
#include "graph/graph_internal.h"

/* The allocator's rounding of one allocation of `bytes`. */
static size_t pad(size_t bytes) { return ct_devmem_block_bytes(bytes) - bytes; }

void ct_graph_plan_allocator(const ct_graph *g, ct_backend *be, int batch, ct_optimizer opt, ct_memory_plan *plan)
{
    size_t n = (size_t)batch, pbytes = param_bytes(g), padding = 0, workspace, scratch;
    size_t x_bytes = n * ct_shape_size(g->input) * ct_dtype_size(CT_DTYPE_F32);
    size_t y_bytes = n * ct_dtype_size(CT_DTYPE_I32);
    /* ct_graph_bind: params, grads, the moments, state, the half copy, x, labels */
    padding += pad(pbytes) * (size_t)(2 + has_m(opt) + has_v(opt));
    padding += pad(g->n_state * ct_dtype_size(CT_DTYPE_F32));
    if (g->compute_dtype != CT_DTYPE_F32)
        padding += pad(g->param_span * ct_dtype_size(g->compute_dtype));
    padding += pad(x_bytes) + pad(y_bytes);
    /* bind_layers: the activation gradients' block (shared where lifetimes allow), then each
     * layer's y, z and aux */
    padding += pad(plan->gradients);
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        size_t out = n * ct_shape_size(l->out) * ct_dtype_size(l->dtype);
        if (!aliases_input(l))
            padding += pad(out);
        if (ct_layer_keeps_preactivation(l))
            padding += pad(out);
        if (l->def->aux_count)
            padding += pad(aux_bytes(l, batch));
    }
    /* the backend's reserve */
    ct_graph_backend_sizes(g, be, batch, &workspace, &scratch);
    padding += pad(workspace) + pad(scratch);
    plan->padding = padding;
    plan->backend = be->ops->own_bytes ? be->ops->own_bytes(be, x_bytes, y_bytes) : 0;
    plan->total += plan->padding + plan->backend;
    plan->by_dtype[CT_DTYPE_U8] += plan->padding + plan->backend;
}
