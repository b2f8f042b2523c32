/* Dense layers on the CUDA backend through cuBLASLt (matmul.c), fp32 throughout.
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

/* x (n, in), w (out, in), b (out) or NULL -> y (n, out) = act(x w^T + b), z (n, out) = x w^T + b
 * when the layer keeps it.
 *   relu:           RELU_BIAS (or RELU) epilogue straight into y (z is y: the backward of relu
 *                   reads y).
 *   linear:         BIAS (or DEFAULT) into y (z is y).
 *   other:          BIAS (or DEFAULT) into z, then y = act(z) by a kernel, in place unless the
 *                   layer keeps z apart (gelu, whose gradient reads it).
 * Should no algorithm take the bias epilogue (a misaligned bias), the product runs plain and one
 * kernel adds the bias (and relu) in place. */
static ct_status dense_forward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    int in = 0, out = 0;
    ct_status st = dense_check(l, &in, &out, err);
    if (st != CT_OK)
        return st;
    ct_cuda *cu = ct_cuda_of(be);
    int relu = l->act == CT_ACT_RELU;
    int fused = relu || l->act == CT_ACT_LINEAR;   /* y comes straight from the epilogue */
    float *dst = ct_f32(fused ? l->y : l->z);
    if (!dst)
        return ct_fail(err, CT_ERR_INTERNAL, "dense pre-activation tensor is not bound");
    const float *x = ct_f32(l->x[0]), *w = ct_f32(l->w), *bias = ct_f32(l->b);
    cublasLtEpilogue_t epilogue = relu ? (bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                                       : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);

    /* y^T (out x n) = op(w^T) x^T: A = w stored (in, out) transposed, B = x stored (in, n). */
    int done = 0;
    st = ct_cuda_matmul(cu, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, w, in, x, in, dst, out, epilogue, bias, 0, &done,
                        err);
    if (st != CT_OK)
        return st;
    if (!done) {
        st = ct_cuda_matmul(cu, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, w, in, x, in, dst, out,
                            CUBLASLT_EPILOGUE_DEFAULT, NULL, 0, &done, err);
        if (st != CT_OK)
            return st;
        CT_CUDA_CHECK(ct_launch_bias_activation_forward(dst, bias, (long)n, out, relu ? CT_ACT_RELU : CT_ACT_LINEAR,
                                                        cu->compute),
                      err);
    }
    if (!fused)
        CT_CUDA_CHECK(ct_launch_activation_forward(ct_f32(l->z), ct_f32(l->y), (long)n * out, (int)l->act,
                                                   cu->compute), err);
    return CT_OK;
}

/* dy (n, out) -> dz (n, out), the gradient at the pre-activation (act' applied), then
 *   dx (n, in)    = dz w      when the producer wants it (l->dx[0]; NULL for the data input),
 *                             += where an earlier writer has (l->dx_accumulate)
 *   dw (out, in)  = dz^T x
 *   db (out)      = column sums of dz */
static ct_status dense_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    int in = 0, out = 0;
    ct_status st = dense_check(l, &in, &out, err);
    if (st != CT_OK)
        return st;
    const float *dz = NULL;
    st = ct_cuda_preactivation_grad(be, l, n, &dz, err);
    if (st != CT_OK)
        return st;
    if (!dz)
        return ct_fail(err, CT_ERR_INTERNAL, "no gradient given to the dense backward");
    ct_cuda *cu = ct_cuda_of(be);
    const float *x = ct_f32(l->x[0]), *w = ct_f32(l->w);
    int done = 0;
    if (l->dx[0]) {
        /* dx^T (in x n) (+)= w^T dz^T: A = w stored (in, out), B = dz stored (out, n). */
        st = ct_cuda_matmul(cu, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, w, in, dz, out, ct_f32(l->dx[0]), in,
                            CUBLASLT_EPILOGUE_DEFAULT, NULL, l->dx_accumulate[0], &done, err);
        if (st != CT_OK)
            return st;
    }
    if (l->dw) {
        /* dw^T (in x out) = x^T op(dz^T): A = x stored (in, n), B = dz stored (out, n) transposed. */
        st = ct_cuda_matmul(cu, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, x, in, dz, out, ct_f32(l->dw), in,
                            CUBLASLT_EPILOGUE_DEFAULT, NULL, 0, &done, err);
        if (st != CT_OK)
            return st;
    }
    if (l->b && l->db)
        CT_CUDA_CHECK(ct_launch_column_sums(dz, ct_f32(l->db), (long)n, out, cu->compute), err);
    return CT_OK;
}

// x: (n, in) fp32 -> y: (n, out); failures name the layer
static ct_status dense_forward_op(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    return st != CT_OK || n == 0 ? st : ct_cuda_named(l, dense_forward(be, l, n, err), err);
}

// dy: (n, out) fp32 -> dx (n, in), dw (out, in), db (out), written (dx added to where
// l->dx_accumulate says); failures name the layer
static ct_status dense_backward_op(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_status st = ct_cuda_check_layer(l, n, err);
    return st != CT_OK || n == 0 ? st : ct_cuda_named(l, dense_backward(be, l, n, err), err);
}

/* Every dense layer may use cuBLASLt's allowance, whatever its shape. */
static size_t dense_workspace(ct_backend *be, const ct_layer *l, int n)
{
    (void)be;
    (void)l;
    (void)n;
    return CT_CUBLASLT_WORKSPACE;
}

const ct_layer_ops ct_cuda_dense_ops = {
    .forward = dense_forward_op,
    .backward = dense_backward_op,
    .workspace_bytes = dense_workspace,
};
