/* Inverted dropout on the CUDA backend: the CPU backend's masks exactly, drawn from the seed of
 * the step's scalars in device memory (so that a replayed step draws this step's masks). */
#include "cuda/layer_common.h"

// x, y: (n, out) fp32; aux: (n, out) uint8 mask, written in training
static ct_status dropout_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    ct_status st = ct_cuda_check_layer(l, n, err);
    if (st != CT_OK)
        return st;
    ct_cuda *cu = ct_cuda_of(be);
    if (!training) {
        CT_CUDA_CHECK(cudaMemcpyAsync(l->y->data, l->x[0]->data, ct_tensor_rows_bytes(l->y, n),
                                      cudaMemcpyDeviceToDevice, cu->compute), err);
        return CT_OK;
    }
    if (!l->aux || l->aux->dtype != CT_DTYPE_U8)
        return ct_fail(err, CT_ERR_INTERNAL, "dropout needs a uint8 mask tensor");
    CT_CUDA_CHECK(ct_launch_dropout_forward(ct_f32(l->x[0]), ct_f32(l->y), (unsigned char *)l->aux->data,
                                            ct_cuda_out_count(l, n), l->cfg->rate, cu->step,
                                            (unsigned long long)l->index, cu->compute), err);
    return CT_OK;
}

// dy: (n, out) fp32, aux: the forward's mask -> dx, written or added to (l->dx_accumulate)
static ct_status dropout_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    if (!l->dx[0])
        return CT_OK;
    CT_CUDA_CHECK(ct_launch_dropout_backward(ct_f32(l->dy), (const unsigned char *)l->aux->data, ct_f32(l->dx[0]),
                                             ct_cuda_out_count(l, n), l->cfg->rate, l->dx_accumulate[0],
                                             ct_cuda_of(be)->compute), err);
    return CT_OK;
}

const ct_layer_ops ct_cuda_dropout_ops = {
    .forward = dropout_forward,
    .backward = dropout_backward,
    .workspace_bytes = NULL,
};
