/* Layers without parameters whose output has their input's shape: dropout, activation, add. */
#include "graph/layer.h"

static ct_status same_shape_infer(ct_layer *l, const char *file, ct_err *err)
{
    (void)file; (void)err;
    l->out = l->in_shape;
    return CT_OK;
}

static double elementwise_flops(const ct_layer *l)
{
    return (double)ct_shape_size(l->out);
}

/* The keep mask, one byte per element. */
static size_t dropout_aux(const ct_layer *l, int n, ct_dtype *dtype)
{
    *dtype = CT_DTYPE_U8;
    return (size_t)n * ct_shape_size(l->out);
}

/* add: both inputs the same shape. */
static ct_status add_infer(ct_layer *l, const char *file, ct_err *err)
{
    const ct_layer_config *c = l->cfg;
    ct_shape a = l->in_shapes[0], b = l->in_shapes[1];
    if (a.h != b.h || a.w != b.w || a.c != b.c) {
        char ta[48], tb[48];
        ct_shape_text(a, ta, sizeof ta);
        ct_shape_text(b, tb, sizeof tb);
        return ct_fail_at(err, CT_ERR_CONFIG, file, c->inputs_line ? c->inputs_line : c->line,
                          "[%s] cannot add %s ('%s') and %s ('%s'): shapes differ", c->name, ta, c->inputs[0], tb,
                          c->inputs[1]);
    }
    l->out = a;
    return CT_OK;
}

const ct_layer_def ct_layer_def_dropout = {
    .min_inputs = 1, .max_inputs = 1, .infer = same_shape_infer, .flops = elementwise_flops,
    .aux_count = dropout_aux,
};
const ct_layer_def ct_layer_def_activation = {
    .min_inputs = 1, .max_inputs = 1, .infer = same_shape_infer, .flops = elementwise_flops,
};
const ct_layer_def ct_layer_def_add = {
    .min_inputs = 2, .max_inputs = 2, .fused_activation = 1, .infer = add_infer, .flops = elementwise_flops,
};
