/* Layers without parameters whose output has their input's shape: dropout, activation, add. */
#include <stddef.h>

#include "config/table.h"
#include "graph/layer.h"

static const ct_key_spec dropout_rows[] = {
    {.name = "rate", .kind = CT_KEY_FLOAT, .offset = offsetof(ct_layer_config, rate),
     .flags = CT_KEY_REQUIRED | CT_KEY_HAS_MIN | CT_KEY_HAS_MAX | CT_KEY_MAX_OPEN, .min = 0, .max = 1},
};
static const ct_key_table dropout_keys = CT_KEY_TABLE(dropout_rows);

/* the activation layer's own activation has no default (a fused one is linear unless set) */
static const ct_key_spec activation_rows[] = {
    {.name = "activation", .kind = CT_KEY_ENUM, .offset = offsetof(ct_layer_config, activation),
     .flags = CT_KEY_REQUIRED, .names = ct_activation_names, .label = "activation"},
};
static const ct_key_table activation_keys = CT_KEY_TABLE(activation_rows);

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
    .min_inputs = 1, .max_inputs = 1, .keys = (const ct_key_table *const[]){&dropout_keys, NULL},
    .infer = same_shape_infer, .flops = elementwise_flops, .aux_count = dropout_aux,
};
const ct_layer_def ct_layer_def_activation = {
    .min_inputs = 1, .max_inputs = 1, .keys = (const ct_key_table *const[]){&activation_keys, NULL},
    .infer = same_shape_infer, .flops = elementwise_flops,
};
const ct_layer_def ct_layer_def_add = {
    .min_inputs = 2, .max_inputs = 2, .fused_activation = 1, .infer = add_infer, .flops = elementwise_flops,
};
