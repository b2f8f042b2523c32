/* Max and average pooling on the CUDA backend: the kernels of kernels/pool.cu over the layer's
 * window (ct_layer_window: pools read c channels and write as many). */
#include "cuda/layer_common.h"

// x: (n, h, w, c) fp32 -> y: (n, oh, ow, c); aux: (n, oh, ow, c) int32, the argmax for backward
static ct_status maxpool_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    if (st != CT_OK)
        return st;
    if (!l->aux || l->aux->dtype != CT_DTYPE_I32)
        return ct_fail(err, CT_ERR_INTERNAL, "maxpool needs an int32 argmax tensor");
    ct_window_geom g = ct_layer_window(l, n);
    CT_CUDA_CHECK(ct_launch_maxpool_forward(&g, ct_f32(l->x[0]), ct_f32(l->y), ct_i32(l->aux),
                                            ct_cuda_of(be)->compute), err);
    return CT_OK;
}

// dy, aux: (n, oh, ow, c) -> dx: (n, h, w, c) fp32, written or added to (l->dx_accumulate) at each argmax
static ct_status maxpool_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    if (!l->dx[0])
        return CT_OK;
    ct_window_geom g = ct_layer_window(l, n);
    CT_CUDA_CHECK(ct_launch_maxpool_backward(&g, ct_f32(l->dy), ct_i32(l->aux), ct_f32(l->dx[0]), l->dx_accumulate[0],
                                             ct_cuda_of(be)->compute), err);
    return CT_OK;
}

// x: (n, h, w, c) fp32 -> y: (n, oh, ow, c)
static ct_status avgpool_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    if (st != CT_OK)
        return st;
    ct_window_geom g = ct_layer_window(l, n);
    CT_CUDA_CHECK(ct_launch_avgpool_forward(&g, ct_f32(l->x[0]), ct_f32(l->y), ct_cuda_of(be)->compute), err);
    return CT_OK;
}

// dy: (n, oh, ow, c) -> dx: (n, h, w, c) fp32, written or added to (l->dx_accumulate)
static ct_status avgpool_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    if (!l->dx[0])
        return CT_OK;
    ct_window_geom g = ct_layer_window(l, n);
    CT_CUDA_CHECK(ct_launch_avgpool_backward(&g, ct_f32(l->dy), ct_f32(l->dx[0]), l->dx_accumulate[0],
                                             ct_cuda_of(be)->compute), err);
    return CT_OK;
}

const ct_layer_ops ct_cuda_maxpool_ops = {
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .workspace_bytes = NULL,
};

const ct_layer_ops ct_cuda_avgpool_ops = {
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .workspace_bytes = NULL,
};
