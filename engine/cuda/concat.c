/* concat on the CUDA backend: each input is one strided copy into its column block of the output
 * (cudaMemcpy2DAsync, rows of c_k elements of the layer's dtype at a pitch of the output's
 * channels; an input of another dtype is cast into the workspace first). Backward copies each
 * block straight into the producer's gradient where this layer writes it first and the dtypes
 * agree, else gathers it into the scratch (the size of the largest layer output in fp32, so of any
 * block) and writes or adds it to dx[k] in dx[k]'s dtype (l->dx_accumulate). */
#include "cuda/layer_common.h"

// x[k]: (n, h, w, c_k) any dtype -> y: (n, h, w, sum c_k) l->dtype
static ct_status concat_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    const size_t elem = ct_dtype_size(l->dtype);
    const size_t rows = (size_t)n * l->out.h * l->out.w, pitch = (size_t)l->out.c * elem;
    char *y = l->y ? l->y->data : NULL;
    ct_cuda_stage s;
    ct_cuda_stage_begin(ct_cuda_of(be), 0, &s);
    size_t offset = 0;
    for (int k = 0; k < l->n_in && st == CT_OK; k++) {
        const size_t bytes = (size_t)l->in_shapes[k].c * elem;
        const void *x = NULL;
        st = ct_cuda_input_as(be, l, k, n, l->dtype, &s, &x, err);
        if (st == CT_OK && rows > 0)
            st = CT_CUDA_STATUS(cudaMemcpy2DAsync(y + offset, pitch, x, bytes, bytes, rows, cudaMemcpyDeviceToDevice,
                                                  ct_cuda_of(be)->compute), err);
        offset += bytes;
    }
    return ct_cuda_named(l, st, err);
}

// dy: (n, h, w, sum c_k) l->dtype -> dx[k]: (n, h, w, c_k) its dtype = (accumulate ? dx[k] : 0) + dy's block k
static ct_status concat_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cb = ct_cuda_of(be);
    const size_t elem = ct_dtype_size(l->dtype);
    const size_t rows = (size_t)n * l->out.h * l->out.w, pitch = (size_t)l->out.c * elem;
    const char *dy = l->dy->data;
    ct_status st = CT_OK;
    size_t offset = 0;
    for (int k = 0; k < l->n_in && st == CT_OK; k++) {
        const size_t c = (size_t)l->in_shapes[k].c, bytes = c * elem;
        ct_tensor *dx = l->dx[k];
        if (dx && rows > 0 && !l->dx_accumulate[k] && dx->dtype == l->dtype) {
            st = CT_CUDA_STATUS(cudaMemcpy2DAsync(dx->data, bytes, dy + offset, pitch, bytes, rows,
                                                  cudaMemcpyDeviceToDevice, cb->compute), err);
        } else if (dx && rows > 0) {
            if (rows * bytes > cb->scratch_size)
                return ct_fail(err, CT_ERR_INTERNAL, "[%s] concat: a %zu-byte gradient block exceeds the %zu-byte "
                               "scratch", l->cfg->name, rows * bytes, cb->scratch_size);
            st = CT_CUDA_STATUS(cudaMemcpy2DAsync(cb->scratch, bytes, dy + offset, pitch, bytes, rows,
                                                  cudaMemcpyDeviceToDevice, cb->compute), err);
            if (st == CT_OK)
                st = CT_CUDA_STATUS(ct_launch_accumulate_dt(cb->scratch, dx->data, (long)(rows * c),
                                                            l->dx_accumulate[k], (int)l->dtype, (int)dx->dtype,
                                                            cb->compute), err);
        }
        offset += bytes;
    }
    return ct_cuda_named(l, st, err);
}

const ct_layer_ops ct_cuda_concat_ops = {
    .forward = concat_forward,
    .backward = concat_backward,
    .workspace_bytes = ct_cuda_stage_workspace,
};
const unsigned ct_cuda_concat_dtypes = CT_CUDA_DTYPES_ALL;
