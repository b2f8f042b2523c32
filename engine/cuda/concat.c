/* concat on the CUDA backend: each input is one strided copy into its column block of the output
 * (cudaMemcpy2DAsync, rows of c_k floats at a pitch of the output's channels). Backward copies each
 * block straight into the producer's gradient where this layer writes it first, else gathers it
 * into the scratch (the size of the largest layer output, so of any block) and adds it to what
 * another consumer wrote (l->dx_accumulate). */
#include "cuda/layer_common.h"

// x[k]: (n, h, w, c_k) fp32 -> y: (n, h, w, sum c_k)
static ct_status concat_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    const size_t rows = (size_t)n * l->out.h * l->out.w, pitch = (size_t)l->out.c * sizeof(float);
    float *y = ct_f32(l->y);
    size_t offset = 0;
    for (int k = 0; k < l->n_in && st == CT_OK; k++) {
        const size_t bytes = (size_t)l->in_shapes[k].c * sizeof(float);
        if (rows > 0)
            st = CT_CUDA_STATUS(cudaMemcpy2DAsync(y + offset, pitch, l->x[k]->data, bytes, bytes, rows,
                                                  cudaMemcpyDeviceToDevice, ct_cuda_of(be)->compute), err);
        offset += (size_t)l->in_shapes[k].c;
    }
    return ct_cuda_named(l, st, err);
}

// dy: (n, h, w, sum c_k) fp32 -> dx[k]: (n, h, w, c_k) = (accumulate ? dx[k] : 0) + dy's block k
static ct_status concat_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cb = ct_cuda_of(be);
    const size_t rows = (size_t)n * l->out.h * l->out.w, pitch = (size_t)l->out.c * sizeof(float);
    const float *dy = ct_f32(l->dy);
    ct_status st = CT_OK;
    size_t offset = 0;
    for (int k = 0; k < l->n_in && st == CT_OK; k++) {
        const size_t c = (size_t)l->in_shapes[k].c, bytes = c * sizeof(float);
        if (l->dx[k] && rows > 0 && !l->dx_accumulate[k]) {
            st = CT_CUDA_STATUS(cudaMemcpy2DAsync(l->dx[k]->data, bytes, dy + offset, pitch, bytes, rows,
                                                  cudaMemcpyDeviceToDevice, cb->compute), err);
        } else if (l->dx[k] && rows > 0) {
            if (rows * bytes > cb->scratch_size)
                return ct_fail(err, CT_ERR_INTERNAL, "[%s] concat: a %zu-byte gradient block exceeds the %zu-byte "
                               "scratch", l->cfg->name, rows * bytes, cb->scratch_size);
            st = CT_CUDA_STATUS(cudaMemcpy2DAsync(cb->scratch, bytes, dy + offset, pitch, bytes, rows,
                                                  cudaMemcpyDeviceToDevice, cb->compute), err);
            if (st == CT_OK)
                st = CT_CUDA_STATUS(ct_launch_accumulate(cb->scratch, ct_f32(l->dx[k]), (long)(rows * c), 1,
                                                         cb->compute), err);
        }
        offset += c;
    }
    return ct_cuda_named(l, st, err);
}

const ct_layer_ops ct_cuda_concat_ops = {
    .forward = concat_forward,
    .backward = concat_backward,
    .workspace_bytes = NULL,
};
