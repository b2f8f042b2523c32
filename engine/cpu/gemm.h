/* The CPU backend's one matrix product: OpenBLAS's sgemm where the build found OpenBLAS, else a
 * plain OpenMP loop nest (slower, no dependency: a machine without OpenBLAS still builds and
 * tests everything, as the GPU machine must). */
#ifndef CT_CPU_GEMM_H
#define CT_CPU_GEMM_H

/* Row-major C (m, n) = alpha * op(A) op(B) + beta * C, op(X) = X or X^T as trans_x says; A is
 * (m, k) or, transposed, (k, m) with leading dimension lda; B is (k, n) or (n, k) with ldb.
 * With beta == 0, C is not read (it may hold anything, NaN included), as in BLAS. */
void ct_cpu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc);

/* The fallback itself, always built, so the tests compare it with OpenBLAS. */
void ct_cpu_sgemm_reference(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                            int lda, const float *b, int ldb, float beta, float *c, int ldc);

#endif
