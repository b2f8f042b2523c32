/* Layers without parameters whose output shape follows from the input: dropout, flatten,
 * activation, add. */
#include <stdint.h>

#include "graph/layer.h"

static ct_status same_shape_infer(ct_layer *l, const char *file, ct_err *err)
{
    (void)file; (void)err;
    l->out = l->in_shape;
    return CT_OK;
}

static ct_status flatten_infer(ct_layer *l, const char *file, ct_err *err)
{
    (void)file; (void)err;
    l->out = (ct_shape){1, 1, (int)ct_shape_size(l->in_shape)};
    return CT_OK;
}

static double elementwise_flops(const ct_layer *l)
{
    return (double)ct_shape_size(l->out);
}

static double no_flops(const ct_layer *l)
{
    (void)l;
    return 0.0;
}

static size_t dropout_aux(const ct_layer *l, int n)
{
    return (size_t)n * ct_shape_size(l->out) * sizeof(uint8_t);
}

const ct_layer_kind ct_dropout_kind = {same_shape_infer, elementwise_flops, dropout_aux, NULL};
const ct_layer_kind ct_flatten_kind = {flatten_infer, no_flops, NULL, NULL};
const ct_layer_kind ct_activation_kind = {same_shape_infer, elementwise_flops, NULL, NULL};
/* add's second input is checked against the first by the network builder. */
const ct_layer_kind ct_add_kind = {same_shape_infer, elementwise_flops, NULL, NULL};
