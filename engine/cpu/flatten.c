/* Flatten: (h, w, c) read as one vector. NHWC data is already in that order, so the layer aliases
 * its producer's output and gradient and does nothing; only when it reads the data input (whose
 * gradient nobody keeps) does it have buffers of its own, and copy. */
#include <string.h>

#include "cpu/cpu_backend.h"

// x, y: (n, h*w*c) fp32
static ct_status flatten_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)be; (void)training; (void)err;
    if (l->y->data != l->x[0]->data)
        memcpy(l->y->data, l->x[0]->data, ct_tensor_rows_bytes(l->x[0], n));
    return CT_OK;
}

// dy, dx: (n, h*w*c) fp32; dx written or added to (l->dx_accumulate)
static ct_status flatten_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    (void)be; (void)err;
    if (l->dx[0] && l->dx[0]->data != l->dy->data)
        ct_cpu_accumulate(ct_f32(l->dy), ct_f32(l->dx[0]), ct_cpu_out_count(l, n), l->dx_accumulate[0]);
    return CT_OK;
}

const ct_layer_ops ct_cpu_flatten_ops = {
    .forward = flatten_forward,
    .backward = flatten_backward,
    .workspace_bytes = NULL,
};
