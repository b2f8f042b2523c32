/* Dense layers on the CUDA backend through cuBLASLt (matmul.c), in fp32 or with fp16 / bf16
 * inputs and fp32 accumulation (mixed precision: the layer's dtype, layer_common.h).
 *
 * Layout. Every buffer is row-major in PyTorch's layout: x (n, in), w (out, in), b (out),
 * y (n, out). cuBLASLt is column-major, and a row-major (r, c) buffer with leading dimension c is
 * the column-major (c, r) matrix with the same leading dimension: the buffer of A is read as A^T.
 * So, with X = x^T (in x n, ld in), W' = w^T (in x out, ld in), Y = y^T (out x n, ld out) the
 * column-major views of the buffers, each product is (D = op(A) op(B), m x n x k in cuBLASLt's
 * names; a layout describes the matrix as stored, before its op):
 *
 *   forward  y = x w^T        y^T (out x n)  = op(W') X            A = w,  T, stored (in, out), ld in
 *                             m = out, n = n, k = in               B = x,  N, stored (in, n),   ld in
 *                                                                  D = y,     (out, n),         ld out
 *   backward dx = dz w        dx^T (in x n)  = W' dz^T             A = w,  N, stored (in, out), ld in
 *                             m = in, n = n, k = out               B = dz, N, stored (out, n),  ld out
 *                                                                  D = dx,    (in, n),          ld in
 *   backward dw = dz^T x      dw^T (in x out) = X op(dz^T)         A = x,  N, stored (in, n),   ld in
 *                             m = in, n = out, k = n               B = dz, T, stored (out, n),  ld out
 *                                                                  D = dw,    (in, out),        ld in
 *
 * The forward's D has `out` rows, which is what the bias epilogues want: "Bias vector length must
 * match matrix D rows count" (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER), and the bias is
 * "broadcasted to all columns", i.e. to every sample. The backward products write (beta = 0):
 * dw has this layer as its one writer, dx when this layer is its first writer in backward order;
 * a later consumer of the same tensor adds (l->dx_accumulate: beta = 1, C == D with the same
 * layout, cuBLASLt's in-place form). db is a column sum of dz by a kernel, written. */
#include <stdint.h>

#include "cuda/layer_common.h"

/* Shape checks shared by forward and backward; *in, *out: the layer's widths. */
static ct_status dense_check(const ct_layer *l, int *in, int *out, ct_err *err)
{
    size_t width = ct_shape_size(l->in_shape);
    if (width == 0 || width > INT32_MAX || l->out.c <= 0)
        return ct_fail(err, CT_ERR_INTERNAL, "bad dense shape (%zu inputs, %d units)", width, l->out.c);
    if (!l->x[0] || !l->w || !l->y)
        return ct_fail(err, CT_ERR_INTERNAL, "dense tensors are not bound");
    *in = (int)width;
    *out = l->out.c;
    return CT_OK;
}

/* The weights and bias the layer computes with: the fp32 masters for an fp32 layer (the output
 * layer, a pinned one), the half copy for a half one, as the CPU's half path. */
static const void *dense_weights(const ct_layer *l) { return ct_dtype_is_half(l->dtype) ? l->w_half->data : l->w->data; }

static const void *dense_bias(const ct_layer *l)
{
    if (ct_dtype_is_half(l->dtype))
        return l->b_half ? l->b_half->data : NULL;
    return l->b ? l->b->data : NULL;
}

/* x (n, in) any dtype, w (out, in), b (out) or NULL -> y (n, out) = act(x w^T + b), z (n, out) =
 * x w^T + b when the layer keeps it; y, z, w, b in the layer's dtype (layer_common.h; an x of
 * another dtype is cast first).
 *   relu:           RELU_BIAS (or RELU) epilogue straight into y (z is y: the backward of relu
 *                   reads y).
 *   linear:         BIAS (or DEFAULT) into y (z is y).
 *   other:          BIAS (or DEFAULT) into z, then y = act(z) by a kernel, in place unless the
 *                   layer keeps z apart (gelu, whose gradient reads it).
 * Should no algorithm take the bias epilogue (a misaligned bias), the product runs plain and one
 * kernel adds the bias (and relu) in place.
 * Half layers: the product accumulates in fp32 and the epilogue adds the half bias in fp32 before
 * the one rounding to half, as the CPU; where the activation runs apart (not relu or linear) or
 * the epilogue falls back, z is rounded to half before the activation, one rounding more than the
 * CPU's fp32 op. */
static ct_status dense_forward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    int in = 0, out = 0;
    ct_status st = dense_check(l, &in, &out, err);
    if (st != CT_OK)
        return st;
    ct_cuda *cu = ct_cuda_of(be);
    const ct_dtype dt = l->dtype;
    if (ct_dtype_is_half(dt) && !l->w_half)
        return ct_fail(err, CT_ERR_INTERNAL, "a %s dense layer without the half copy of its weights", ct_dtype_name(dt));
    int relu = l->act == CT_ACT_RELU;
    int fused = relu || l->act == CT_ACT_LINEAR;   /* y comes straight from the epilogue */
    ct_tensor *dst_t = fused ? l->y : l->z;
    if (!dst_t)
        return ct_fail(err, CT_ERR_INTERNAL, "dense pre-activation tensor is not bound");
    void *dst = dst_t->data;
    ct_cuda_stage s;
    ct_cuda_stage_begin(cu, CT_CUBLASLT_WORKSPACE, &s);
    const void *x = NULL, *w = dense_weights(l), *bias = dense_bias(l);
    st = ct_cuda_input_as(be, l, 0, n, dt, &s, &x, err);
    if (st != CT_OK)
        return st;
    cublasLtEpilogue_t epilogue = relu ? (bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                                       : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);

    /* y^T (out x n) = op(w^T) x^T: A = w stored (in, out) transposed, B = x stored (in, n). */
    int done = 0;
    st = ct_cuda_matmul_dt(cu, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, w, in, x, in, dst, out, dt, dt, epilogue, bias, 0,
                           &done, err);
    if (st != CT_OK)
        return st;
    if (!done) {
        st = ct_cuda_matmul_dt(cu, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, w, in, x, in, dst, out, dt, dt,
                               CUBLASLT_EPILOGUE_DEFAULT, NULL, 0, &done, err);
        if (st != CT_OK)
            return st;
        CT_CUDA_CHECK(ct_launch_bias_activation_forward_dt(dst, bias, (long)n, out, relu ? CT_ACT_RELU : CT_ACT_LINEAR,
                                                           (int)dt, (int)dt, cu->compute),
                      err);
    }
    if (!fused)
        CT_CUDA_CHECK(ct_launch_activation_forward_dt(l->z->data, l->y->data, (long)n * out, (int)l->act, (int)dt,
                                                      cu->compute), err);
    return CT_OK;
}

/* dy (n, out) -> dz (n, out), the gradient at the pre-activation (act' applied), then
 *   dx (n, in)    = dz w      when the producer wants it (l->dx[0]; NULL for the data input),
 *                             += where an earlier writer has (l->dx_accumulate)
 *   dw (out, in)  = dz^T x
 *   db (out)      = column sums of dz
 * dy, dz and w in the layer's dtype; dw, db fp32 (the master gradients: a half layer's product
 * accumulates in fp32 and is stored in fp32, as the CPU's). dx in its producer's dtype: a half
 * layer writes an fp32 dx straight from the product; an fp32 layer computes a half dx in fp32 in
 * the workspace and rounds it once on the way (ct_launch_accumulate_dt). */
static ct_status dense_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    int in = 0, out = 0;
    ct_status st = dense_check(l, &in, &out, err);
    if (st != CT_OK)
        return st;
    const ct_dtype dt = l->dtype;
    if (ct_dtype_is_half(dt) && !l->w_half)
        return ct_fail(err, CT_ERR_INTERNAL, "a %s dense layer without the half copy of its weights", ct_dtype_name(dt));
    const void *dz = NULL;
    st = ct_cuda_preactivation_grad(be, l, n, &dz, err);
    if (st != CT_OK)
        return st;
    if (!dz)
        return ct_fail(err, CT_ERR_INTERNAL, "no gradient given to the dense backward");
    ct_cuda *cu = ct_cuda_of(be);
    ct_cuda_stage s;
    ct_cuda_stage_begin(cu, CT_CUBLASLT_WORKSPACE, &s);
    const void *w = dense_weights(l);
    int done = 0;
    if (l->dx[0]) {
        /* dx^T (in x n) (+)= w^T dz^T: A = w stored (in, out), B = dz stored (out, n). */
        ct_tensor *dxt = l->dx[0];
        void *dx = NULL;
        int accumulate = 0;
        ct_dtype dx_type = dt;
        if (ct_dtype_is_half(dt) && dxt->dtype == CT_DTYPE_F32) {
            dx = dxt->data;
            accumulate = l->dx_accumulate[0];
            dx_type = CT_DTYPE_F32;
        } else {
            st = ct_cuda_grad_begin(l, 0, n, dt, &s, &dx, &accumulate, err);
            if (st != CT_OK)
                return st;
        }
        st = ct_cuda_matmul_dt(cu, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, w, in, dz, out, dx, in, dt, dx_type,
                               CUBLASLT_EPILOGUE_DEFAULT, NULL, accumulate, &done, err);
        if (st == CT_OK && dx_type == dt)
            st = ct_cuda_grad_end(be, l, 0, n, dt, dx, err);
        if (st != CT_OK)
            return st;
    }
    if (l->dw) {
        /* dw^T (in x out) = x^T op(dz^T): A = x stored (in, n), B = dz stored (out, n) transposed. */
        const void *x = NULL;
        st = ct_cuda_input_as(be, l, 0, n, dt, &s, &x, err);
        if (st == CT_OK)
            st = ct_cuda_matmul_dt(cu, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, x, in, dz, out, l->dw->data, in, dt,
                                   CT_DTYPE_F32, CUBLASLT_EPILOGUE_DEFAULT, NULL, 0, &done, err);
        if (st != CT_OK)
            return st;
    }
    if (l->b && l->db)
        CT_CUDA_CHECK(ct_launch_column_sums_dt(dz, ct_f32(l->db), (long)n, out, (int)dt, cu->compute), err);
    return CT_OK;
}

// x: (n, in) any dtype -> y: (n, out) l->dtype; failures name the layer
static ct_status dense_forward_op(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    return st != CT_OK || n == 0 ? st : ct_cuda_named(l, dense_forward(be, l, n, err), err);
}

// dy: (n, out) l->dtype -> dx (n, in) its dtype, dw (out, in), db (out) fp32, written (dx added to where
// l->dx_accumulate says); failures name the layer
static ct_status dense_backward_op(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_status st = ct_cuda_check_layer(l, n, err);
    return st != CT_OK || n == 0 ? st : ct_cuda_named(l, dense_backward(be, l, n, err), err);
}

/* Every dense layer may use cuBLASLt's allowance, whatever its shape; then its dtype staging. */
static size_t dense_workspace(ct_backend *be, const ct_layer *l, int n)
{
    (void)be;
    return CT_CUBLASLT_WORKSPACE + ct_cuda_stage_need(l, n);
}

const ct_layer_ops ct_cuda_dense_ops = {
    .forward = dense_forward_op,
    .backward = dense_backward_op,
    .workspace_bytes = dense_workspace,
};
const unsigned ct_cuda_dense_dtypes = CT_CUDA_DTYPES_ALL;
