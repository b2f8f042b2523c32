/* Max and average pooling on the CUDA backend: the kernels of kernels/pool.cu over the layer's
 * window (ct_layer_window: pools read c channels and write as many), in the layer's dtype. */
#include "cuda/layer_common.h"

// x: (n, h, w, c) any dtype -> y: (n, oh, ow, c) l->dtype; aux: (n, oh, ow, c) int32, the argmax for backward
static ct_status maxpool_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    if (!l->aux || l->aux->dtype != CT_DTYPE_I32)
        return ct_fail(err, CT_ERR_INTERNAL, "maxpool needs an int32 argmax tensor");
    const void *x = NULL;
    ct_status st = ct_cuda_forward_input(be, l, n, &x, err);
    if (st != CT_OK)
        return st;
    ct_window_geom g = ct_layer_window(l, n);
    CT_CUDA_CHECK(ct_launch_maxpool_forward_dt(&g, x, l->y->data, ct_i32(l->aux), (int)l->dtype,
                                               ct_cuda_of(be)->compute), err);
    return CT_OK;
}

// dy (l->dtype), aux: (n, oh, ow, c) -> dx: (n, h, w, c) its dtype, written or added to
// (l->dx_accumulate) at each argmax
static ct_status maxpool_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    if (!l->dx[0])
        return CT_OK;
    void *dx = NULL;
    int accumulate = 0;
    ct_status st = ct_cuda_backward_grad(be, l, n, &dx, &accumulate, err);
    if (st != CT_OK)
        return st;
    ct_window_geom g = ct_layer_window(l, n);
    CT_CUDA_CHECK(ct_launch_maxpool_backward_dt(&g, l->dy->data, ct_i32(l->aux), dx, accumulate, (int)l->dtype,
                                                ct_cuda_of(be)->compute), err);
    return ct_cuda_grad_end(be, l, 0, n, l->dtype, dx, err);
}

// x: (n, h, w, c) any dtype -> y: (n, oh, ow, c) l->dtype
static ct_status avgpool_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    const void *x = NULL;
    ct_status st = ct_cuda_forward_input(be, l, n, &x, err);
    if (st != CT_OK)
        return st;
    ct_window_geom g = ct_layer_window(l, n);
    CT_CUDA_CHECK(ct_launch_avgpool_forward_dt(&g, x, l->y->data, (int)l->dtype, ct_cuda_of(be)->compute), err);
    return CT_OK;
}

// dy: (n, oh, ow, c) l->dtype -> dx: (n, h, w, c) its dtype, written or added to (l->dx_accumulate)
static ct_status avgpool_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    if (!l->dx[0])
        return CT_OK;
    void *dx = NULL;
    int accumulate = 0;
    ct_status st = ct_cuda_backward_grad(be, l, n, &dx, &accumulate, err);
    if (st != CT_OK)
        return st;
    ct_window_geom g = ct_layer_window(l, n);
    CT_CUDA_CHECK(ct_launch_avgpool_backward_dt(&g, l->dy->data, dx, accumulate, (int)l->dtype,
                                                ct_cuda_of(be)->compute), err);
    return ct_cuda_grad_end(be, l, 0, n, l->dtype, dx, err);
}

const ct_layer_ops ct_cuda_maxpool_ops = {
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .workspace_bytes = ct_cuda_stage_workspace,
};
const unsigned ct_cuda_maxpool_dtypes = CT_CUDA_DTYPES_ALL;

const ct_layer_ops ct_cuda_avgpool_ops = {
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .workspace_bytes = ct_cuda_stage_workspace,
};
const unsigned ct_cuda_avgpool_dtypes = CT_CUDA_DTYPES_ALL;
