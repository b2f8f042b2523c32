/* flatten: (h, w, c) read as one vector of h*w*c; it reinterprets its producer's buffers. */
#include "graph/layer.h"

static ct_status flatten_infer(ct_layer *l, const char *file, ct_err *err)
{
    (void)file; (void)err;
    l->out = (ct_shape){1, 1, (int)ct_shape_size(l->in_shape)};
    return CT_OK;
}

static double no_flops(const ct_layer *l)
{
    (void)l;
    return 0.0;
}

const ct_layer_def ct_layer_def_flatten = {
    .min_inputs = 1, .max_inputs = 1, .aliases_input = 1, .infer = flatten_infer, .flops = no_flops,
};
