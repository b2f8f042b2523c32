/* What a backend needs for a bound network, asked of its per-type ops; its note. */
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"

void ct_backend_add_note(ct_backend *be, const char *text)
{
    size_t used = strlen(be->note);
    if (used + 1 >= sizeof be->note)
        return;
    snprintf(be->note + used, sizeof be->note - used, "%s%s", used ? "; " : "", text);
}

void ct_backend_sizes(ct_backend *be, const ct_graph *g, int batch, size_t *workspace, size_t *scratch)
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
