/* The residual add on the CUDA backend, with its fused activation. */
#include "cuda/layer_common.h"

// x[0], x[1]: (n, out) fp32 -> z = x[0] + x[1], y = act(z)
static ct_status add_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_add(ct_f32(l->x[0]), ct_f32(l->x[1]), ct_f32(l->z), ct_cuda_out_count(l, n),
                                ct_cuda_of(be)->compute), err);
    return ct_cuda_apply_activation(be, l, n, err);
}

// dy: (n, out) fp32 -> dz = act'(z) dy; dx[0], dx[1] = dz or += dz (l->dx_accumulate), in order, so that
// add(a, a) writes a's gradient through dx[0] and adds the second share through dx[1]
static ct_status add_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    const float *dz = NULL;
    ct_status st = ct_cuda_preactivation_grad(be, l, n, &dz, err);
    for (int i = 0; i < l->n_in && st == CT_OK; i++)
        if (l->dx[i])
            st = CT_CUDA_STATUS(ct_launch_accumulate(dz, ct_f32(l->dx[i]), ct_cuda_out_count(l, n),
                                                     l->dx_accumulate[i], ct_cuda_of(be)->compute), err);
    return st;
}

const ct_layer_ops ct_cuda_add_ops = {
    .forward = add_forward,
    .backward = add_backward,
    .workspace_bytes = NULL,
};
