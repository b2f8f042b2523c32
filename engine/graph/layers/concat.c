/* concat: the channels of its inputs joined in the order listed (`inputs = a, b, c`); every input
 * has the same height and width. */
#include "graph/layer.h"

static ct_status concat_infer(ct_layer *l, const char *file, ct_err *err)
{
    const ct_layer_config *c = l->cfg;
    ct_shape first = l->in_shapes[0];
    int channels = 0;
    for (int k = 0; k < l->n_in; k++) {
        ct_shape s = l->in_shapes[k];
        if (s.h != first.h || s.w != first.w) {
            char ta[48], tb[48];
            ct_shape_text(first, ta, sizeof ta);
            ct_shape_text(s, tb, sizeof tb);
            return ct_fail_at(err, CT_ERR_CONFIG, file, c->inputs_line ? c->inputs_line : c->line,
                              "[%s] cannot concatenate %s ('%s') and %s ('%s'): heights and widths differ",
                              c->name, ta, c->inputs[0], tb, c->inputs[k]);
        }
        channels += s.c;
    }
    l->out = (ct_shape){first.h, first.w, channels};
    return CT_OK;
}

/* Copies only. */
static double concat_flops(const ct_layer *l)
{
    (void)l;
    return 0.0;
}

const ct_layer_def ct_layer_def_concat = {
    .min_inputs = 2, .max_inputs = CT_MAX_INPUTS, .infer = concat_infer, .flops = concat_flops,
};
