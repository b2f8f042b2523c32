/* The CPU backend's one matrix product: oneDNN's sgemm where the build found oneDNN, else
 * OpenBLAS's where it found OpenBLAS, else a plain OpenMP loop nest (slower, no dependency: a
 * machine without either still builds and tests everything, as the GPU machine must).
 *
 * oneDNN's over OpenBLAS's, measured with a harness on the dense layers of the model zoo (2
 * threads, best of 8, the 2-core AVX-512 build machine, oneDNN 2.6.3 against OpenBLAS 0.3.21):
 * (batch 128, 3136 -> 1024) weight gradient 4.0 against 5.1 ms, input gradient 4.0 against 5.1,
 * forward 5.3 against 5.1; (256, 784 -> 256) 0.50 against 0.73 ms for the weight gradient, 0.65
 * against 0.88 forward. Either gives the same bits run after run on one thread count. */
#ifndef CT_CPU_GEMM_H
#define CT_CPU_GEMM_H

#include <stddef.h>

/* Row-major C (m, n) = alpha * op(A) op(B) + beta * C, op(X) = X or X^T as trans_x says; A is
 * (m, k) or, transposed, (k, m) with leading dimension lda; B is (k, n) or (n, k) with ldb.
 * With beta == 0, C is not read (it may hold anything, NaN included), as in BLAS. */
void ct_cpu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc);

/* C (m, n) = A B^T for A (m, k) and B (n, k), both row-major and dense: a layer's forward, x w^T.
 * With fewer than a quarter as many rows as columns, oneDNN's sgemm runs C^T = B A^T faster, so
 * that product goes into t and one pass transposes it into C (fc1 of fmnist_convnet, batch 64,
 * 64 x 1024 x 3136 on 2 threads: 2.1 against 3.0 ms; 128 x 1024: 3.9 against 4.7; no shape of the
 * zoo's dense layers was slower). OpenBLAS runs the swapped product slower (4.7 against 2.9 ms),
 * so without oneDNN, or when t holds fewer than ct_cpu_sgemm_nt_scratch(m, n) floats (t_floats), C
 * is computed directly. */
void ct_cpu_sgemm_nt(int m, int n, int k, const float *a, const float *b, float *c, float *t, size_t t_floats);
/* The floats ct_cpu_sgemm_nt's t takes at (m, n): 0 when it computes C directly. Not monotonic in
 * m: a workspace sized at one batch may be too small for a smaller one, which then runs direct. */
size_t ct_cpu_sgemm_nt_scratch(int m, int n);

/* The fallback itself, always built, so the tests compare it with OpenBLAS. */
void ct_cpu_sgemm_reference(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                            int lda, const float *b, int ldb, float beta, float *c, int ldc);

#endif
