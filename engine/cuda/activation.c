/* The activation layer on the CUDA backend (the activations fused into dense, conv2d and add
 * are theirs), in the layer's dtype (layer_common.h: an input of another dtype is cast first). */
#include "cuda/layer_common.h"

// x: (n, out) any dtype; y: (n, out) l->dtype; y = act(x)
static ct_status activation_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    const void *x = NULL;
    ct_status st = ct_cuda_forward_input(be, l, n, &x, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_activation_forward_dt(x, l->y->data, ct_cuda_out_count(l, n), (int)l->act,
                                                  (int)l->dtype, ct_cuda_of(be)->compute), err);
    return CT_OK;
}

// x: (n, out) any dtype; y, dy: (n, out) l->dtype -> dx = act'(x) dy, or += (l->dx_accumulate)
static ct_status activation_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    if (!l->dx[0])
        return CT_OK;
    ct_cuda_stage s;
    ct_cuda_stage_begin(ct_cuda_of(be), 0, &s);
    const void *x = NULL;
    void *dx = NULL;
    int accumulate = 0;
    ct_status st = ct_cuda_input_as(be, l, 0, n, l->dtype, &s, &x, err);
    if (st == CT_OK)
        st = ct_cuda_grad_begin(l, 0, n, l->dtype, &s, &dx, &accumulate, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_activation_backward_dt(x, l->y->data, l->dy->data, dx, ct_cuda_out_count(l, n),
                                                   (int)l->act, accumulate, (int)l->dtype, ct_cuda_of(be)->compute),
                  err);
    return ct_cuda_grad_end(be, l, 0, n, l->dtype, dx, err);
}

const ct_layer_ops ct_cuda_activation_ops = {
    .forward = activation_forward,
    .backward = activation_backward,
    .workspace_bytes = ct_cuda_stage_workspace,
};
const unsigned ct_cuda_activation_dtypes = CT_CUDA_DTYPES_ALL;
