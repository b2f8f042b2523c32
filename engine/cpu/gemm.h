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

/* Row-major C (m, n) = alpha * op(A) op(B) + beta * C, op(X) = X or X^T as trans_x says; A is
 * (m, k) or, transposed, (k, m) with leading dimension lda; B is (k, n) or (n, k) with ldb.
 * With beta == 0, C is not read (it may hold anything, NaN included), as in BLAS. */
void ct_cpu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc);

/* The fallback itself, always built, so the tests compare it with OpenBLAS. */
void ct_cpu_sgemm_reference(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                            int lda, const float *b, int ldb, float beta, float *c, int ldc);

#endif
