/* Flatten on the CUDA backend: the same values under a flat shape. Its output aliases its input
 * (nothing to do) except where it reads the network's input batch, which it copies (as its own
 * dtype: the input is fp32, and so is a flatten that reads it). */
#include "cuda/layer_common.h"

// x: (n, h, w, c) -> y: (n, 1, 1, h * w * c) l->dtype
static ct_status flatten_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    if (st != CT_OK || l->y->data == l->x[0]->data)
        return st;
    CT_CUDA_CHECK(ct_launch_cast(l->x[0]->data, l->y->data, ct_cuda_out_count(l, n), (int)l->x[0]->dtype,
                                 (int)l->y->dtype, ct_cuda_of(be)->compute), err);
    return CT_OK;
}

// dy: (n, 1, 1, h * w * c) l->dtype -> dx = dy or dx += dy (l->dx_accumulate), in dx's dtype,
// unless dx is dy itself (aliased)
static ct_status flatten_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    if (!l->dx[0] || l->dx[0]->data == l->dy->data)
        return CT_OK;
    CT_CUDA_CHECK(ct_launch_accumulate_dt(l->dy->data, l->dx[0]->data, ct_cuda_out_count(l, n), l->dx_accumulate[0],
                                          (int)l->dy->dtype, (int)l->dx[0]->dtype, ct_cuda_of(be)->compute), err);
    return CT_OK;
}

const ct_layer_ops ct_cuda_flatten_ops = {
    .forward = flatten_forward,
    .backward = flatten_backward,
    .workspace_bytes = NULL,
};
const unsigned ct_cuda_flatten_dtypes = CT_CUDA_DTYPES_ALL;
