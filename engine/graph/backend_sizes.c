/* What a backend reserves for a network (its reserve): the workspace its layer ops ask for and the
 * scratch, for the binding (graph.c) and the plan (plan.c, plan_allocator.c). The network's to
 * ask, since it walks the layers; the backend answers per layer (workspace_bytes). */
#include "graph/graph.h"

void ct_graph_backend_sizes(const ct_graph *g, ct_backend *be, int batch, size_t *workspace, size_t *scratch)
{
    *workspace = *scratch = 0;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        const ct_layer_ops *ops = be->ops->layers[l->type];
        /* in fp32 whatever the layer's dtype: a half layer's gradient before its fused activation
         * is computed in fp32 on the CPU (its half path), and fp32 is the wider */
        size_t out = (size_t)batch * ct_shape_size(l->out) * ct_dtype_size(CT_DTYPE_F32);
        size_t ws = ops->workspace_bytes ? ops->workspace_bytes(be, l, batch) : 0;
        if (ws > *workspace)
            *workspace = ws;
        if (out > *scratch)
            *scratch = out;
    }
}
