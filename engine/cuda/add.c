/* The residual add on the CUDA backend, with its fused activation, in the layer's dtype. */
#include "cuda/layer_common.h"

// x[0], x[1]: (n, out) any dtype -> z = x[0] + x[1], y = act(z): (n, out) l->dtype
static ct_status add_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    if (st != CT_OK)
        return st;
    ct_cuda_stage s;
    ct_cuda_stage_begin(ct_cuda_of(be), 0, &s);
    const void *a = NULL, *b = NULL;
    st = ct_cuda_input_as(be, l, 0, n, l->dtype, &s, &a, err);
    if (st == CT_OK)
        st = ct_cuda_input_as(be, l, 1, n, l->dtype, &s, &b, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_add_dt(a, b, l->z->data, ct_cuda_out_count(l, n), (int)l->dtype,
                                   ct_cuda_of(be)->compute), err);
    return ct_cuda_apply_activation(be, l, n, err);
}

// dy: (n, out) l->dtype -> dz = act'(z) dy; dx[0], dx[1] (their producers' dtypes) = dz or += dz
// (l->dx_accumulate), in order, so that add(a, a) writes a's gradient through dx[0] and adds the
// second share through dx[1]
static ct_status add_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    const void *dz = NULL;
    ct_status st = ct_cuda_preactivation_grad(be, l, n, &dz, err);
    for (int i = 0; i < l->n_in && st == CT_OK; i++)
        if (l->dx[i])
            st = CT_CUDA_STATUS(ct_launch_accumulate_dt(dz, l->dx[i]->data, ct_cuda_out_count(l, n),
                                                        l->dx_accumulate[i], (int)l->dtype, (int)l->dx[i]->dtype,
                                                        ct_cuda_of(be)->compute), err);
    return st;
}

const ct_layer_ops ct_cuda_add_ops = {
    .forward = add_forward,
    .backward = add_backward,
    .workspace_bytes = ct_cuda_stage_workspace,
};
const unsigned ct_cuda_add_dtypes = CT_CUDA_DTYPES_ALL;
