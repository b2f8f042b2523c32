/* Fully connected layer: y = x w^T + b, with w stored (out, in) as PyTorch's Linear. */
#include "cpu/cpu_backend.h"
#include "cpu/gemm.h"

// x: (n, k); w: (m, k); b: (m) or NULL; y: (n, m); ws: ws_floats floats or NULL
void ct_cpu_dense_forward(const float *x, const float *w, const float *b, float *y, int n, int k, int m, float *ws,
                          size_t ws_floats)
{
    ct_cpu_sgemm_nt(n, m, k, x, w, y, ws, ws_floats);
    if (b) ct_cpu_add_bias(y, b, (size_t)n, m);
}

size_t ct_cpu_dense_workspace(int n, int m)
{
    return ct_cpu_sgemm_nt_scratch(n, m);
}

// x: (n, k); w: (m, k); dy: (n, m); dx: (n, k), dw: (m, k), db: (m), each may be NULL
void ct_cpu_dense_backward(const float *x, const float *w, const float *dy, float *dx, float *dw,
                           float *db, int n, int k, int m, int accumulate)
{
    /* beta = 0 writes (this layer is dw's one writer, and dx's first unless accumulating) */
    if (dw) ct_cpu_sgemm(1, 0, m, k, n, 1.0f, dy, m, x, k, 0.0f, dw, k);
    if (dx) ct_cpu_sgemm(0, 0, n, k, m, 1.0f, dy, m, w, k, accumulate ? 1.0f : 0.0f, dx, k);
    if (db) ct_cpu_column_sums(dy, db, (size_t)n, m);
}

// x: (n, in) fp32; z, y: (n, units)
static ct_status dense_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training; (void)err;
    /* the bias with the activation, in one pass over the product */
    ct_cpu_dense_forward(ct_f32(l->x[0]), ct_f32(l->w), NULL, ct_f32(l->z), n, (int)ct_shape_size(l->in_shape),
                         l->out.c, ct_cpu_of(be)->workspace, ct_cpu_of(be)->workspace_bytes / sizeof(float));
    ct_cpu_fused_activation_forward(l, n, ct_f32(l->b));
    return CT_OK;
}

// dy: (n, units) fp32; dx: (n, in) or NULL, written or added to (l->dx_accumulate)
static ct_status dense_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    (void)err;
    const float *dz = ct_cpu_preactivation_grad(be, l, n);
    ct_cpu_dense_backward(ct_f32(l->x[0]), ct_f32(l->w), dz, ct_f32(l->dx[0]), ct_f32(l->dw), ct_f32(l->db), n,
                          (int)ct_shape_size(l->in_shape), l->out.c, l->dx_accumulate[0]);
    return CT_OK;
}

static size_t dense_workspace_bytes(ct_backend *be, const ct_layer *l, int n)
{
    (void)be;
    return ct_cpu_dense_workspace(n, l->out.c) * sizeof(float);
}

const ct_layer_ops ct_cpu_dense_ops = {
    .forward = dense_forward,
    .backward = dense_backward,
    .workspace_bytes = dense_workspace_bytes,
};
