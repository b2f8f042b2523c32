/* Inverted dropout on the CUDA backend: the CPU backend's masks exactly, drawn from the seed of
 * the step's scalars in device memory (so that a replayed step draws this step's masks), in the
 * layer's dtype. */
#include "cuda/layer_common.h"

// x: (n, out) any dtype; y: (n, out) l->dtype; aux: (n, out) uint8 mask, written in training
static ct_status dropout_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    ct_status st = ct_cuda_check_layer(l, n, err);
    if (st != CT_OK)
        return st;
    ct_cuda *cu = ct_cuda_of(be);
    if (!training) {
        /* a copy of the bits, or the cast a half layer's read of an fp32 input is */
        CT_CUDA_CHECK(ct_launch_cast(l->x[0]->data, l->y->data, ct_cuda_out_count(l, n), (int)l->x[0]->dtype,
                                     (int)l->y->dtype, cu->compute), err);
        return CT_OK;
    }
    if (!l->aux || l->aux->dtype != CT_DTYPE_U8)
        return ct_fail(err, CT_ERR_INTERNAL, "dropout needs a uint8 mask tensor");
    ct_cuda_stage s;
    ct_cuda_stage_begin(cu, 0, &s);
    const void *x = NULL;
    st = ct_cuda_input_as(be, l, 0, n, l->dtype, &s, &x, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_dropout_forward_dt(x, l->y->data, (unsigned char *)l->aux->data, ct_cuda_out_count(l, n),
                                               l->cfg->rate, cu->step, (unsigned long long)l->index,
                                               (long)ct_cuda_out_count(l, 1), (int)l->dtype, cu->compute), err);
    return CT_OK;
}

// dy: (n, out) l->dtype, aux: the forward's mask -> dx (its dtype), written or added to (l->dx_accumulate)
static ct_status dropout_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    if (!l->dx[0])
        return CT_OK;
    void *dx = NULL;
    int accumulate = 0;
    ct_status st = ct_cuda_backward_grad(be, l, n, &dx, &accumulate, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_dropout_backward_dt(l->dy->data, (const unsigned char *)l->aux->data, dx,
                                                ct_cuda_out_count(l, n), l->cfg->rate, accumulate, (int)l->dtype,
                                                ct_cuda_of(be)->compute), err);
    return ct_cuda_grad_end(be, l, 0, n, l->dtype, dx, err);
}

const ct_layer_ops ct_cuda_dropout_ops = {
    .forward = dropout_forward,
    .backward = dropout_backward,
    .workspace_bytes = ct_cuda_stage_workspace,
};
const unsigned ct_cuda_dropout_dtypes = CT_CUDA_DTYPES_ALL;
