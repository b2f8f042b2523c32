/* Fully connected layer: y = x w^T + b, with w stored (out, in) as PyTorch's Linear. */
#include "cpu/gemm.h"

#include "cpu/cpu_ops.h"

// x: (n, k); w: (m, k); b: (m) or NULL; y: (n, m)
void ct_cpu_dense_forward(const float *x, const float *w, const float *b, float *y, int n, int k, int m)
{
    ct_cpu_sgemm(0, 1, n, m, k, 1.0f, x, k, w, k, 0.0f, y, m);
    if (b) ct_cpu_add_bias(y, b, (size_t)n, m);
}

// x: (n, k); w: (m, k); dy: (n, m); dx: (n, k), dw: (m, k), db: (m), each may be NULL
void ct_cpu_dense_backward(const float *x, const float *w, const float *dy, float *dx, float *dw,
                           float *db, int n, int k, int m)
{
    /* beta = 1: gradients accumulate across the layers that read this one */
    if (dw) ct_cpu_sgemm(1, 0, m, k, n, 1.0f, dy, m, x, k, 1.0f, dw, k);
    if (dx) ct_cpu_sgemm(0, 0, n, k, m, 1.0f, dy, m, w, k, 1.0f, dx, k);
    if (db) ct_cpu_add_column_sums(dy, db, (size_t)n, m);
}
