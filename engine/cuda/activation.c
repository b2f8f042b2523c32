/* The activation layer on the CUDA backend (the activations fused into dense, conv2d and add
 * are theirs). */
#include "cuda/layer_common.h"

// x, y: (n, out) fp32; y = act(x)
static ct_status activation_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_activation_forward(ct_f32(l->x[0]), ct_f32(l->y), ct_cuda_out_count(l, n), (int)l->act,
                                               ct_cuda_of(be)->compute), err);
    return CT_OK;
}

// x, y, dy: (n, out) fp32 -> dx = act'(x) dy, or += (l->dx_accumulate)
static ct_status activation_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    if (!l->dx[0])
        return CT_OK;
    CT_CUDA_CHECK(ct_launch_activation_backward(ct_f32(l->x[0]), ct_f32(l->y), ct_f32(l->dy), ct_f32(l->dx[0]),
                                                ct_cuda_out_count(l, n), (int)l->act, l->dx_accumulate[0],
                                                ct_cuda_of(be)->compute),
                  err);
    return CT_OK;
}

const ct_layer_ops ct_cuda_activation_ops = {
    .forward = activation_forward,
    .backward = activation_backward,
    .workspace_bytes = NULL,
};
