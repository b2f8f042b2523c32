/* The memory plan: what binding a network allocates at a batch size, by purpose and by element
 * type, computed without allocating; and the largest batch whose plan fits a budget. */
#include "graph/graph_internal.h"

#include <string.h>

void ct_graph_plan(const ct_graph *g, ct_backend *be, int batch, ct_optimizer opt, ct_memory_plan *plan)
{
    size_t n = (size_t)batch, pbytes = param_bytes(g), workspace = 0, scratch = 0;
    size_t *by = plan->by_dtype;
    memset(plan, 0, sizeof *plan);
    plan->params = 2 * pbytes;
    plan->params_half = g->half != CT_DTYPE_F32 ? g->param_span * ct_dtype_size(g->half) : 0;
    plan->optimizer = (size_t)(has_m(opt) + has_v(opt)) * pbytes;
    plan->state = g->n_state * ct_dtype_size(CT_DTYPE_F32);
    plan->inputs = n * ct_shape_size(g->input) * ct_dtype_size(CT_DTYPE_F32) + n * ct_dtype_size(CT_DTYPE_I32);
    by[CT_DTYPE_F32] += plan->params + plan->optimizer + plan->state + n * ct_shape_size(g->input) * sizeof(float);
    by[CT_DTYPE_I32] += n * ct_dtype_size(CT_DTYPE_I32);
    by[g->half] += plan->params_half;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        size_t out = n * ct_shape_size(l->out) * ct_dtype_size(l->dtype);
        size_t kept = (aliases_input(l) ? 0 : out) + (ct_layer_keeps_preactivation(l) ? out : 0);
        plan->activations += kept + aux_bytes(l, batch);
        plan->gradients += grad_span(l, batch);
        by[l->dtype] += kept + grad_span(l, batch);
        if (l->def->aux_count) {
            ct_dtype aux_dtype;
            (void)l->def->aux_count(l, batch, &aux_dtype);
            by[aux_dtype] += aux_bytes(l, batch);
        }
    }
    ct_backend_sizes(be, g, batch, &workspace, &scratch);
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
