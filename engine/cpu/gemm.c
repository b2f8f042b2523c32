/* ct_cpu_sgemm: oneDNN's sgemm when the build has it, else OpenBLAS's, else the loop nest below. */
#include <stddef.h>

#ifdef CUTRAIN_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef CUTRAIN_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "cpu/gemm.h"

// a: (m, k) or (k, m) transposed, row-major with lda
static inline float a_at(const float *a, int lda, int trans, int i, int p)
{
    return trans ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
}

// C (m, n) = alpha op(A) op(B) + beta C, row-major; each thread owns whole rows of C, so the
// result does not depend on the thread count
void ct_cpu_sgemm_reference(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                            int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        if (trans_b) {
            /* B^T: row j of B is contiguous, so each C element is one dot product */
            for (int j = 0; j < n; j++) {
                const float *bj = b + (size_t)j * ldb;
                float s = 0.0f;
                for (int p = 0; p < k; p++)
                    s += a_at(a, lda, trans_a, i, p) * bj[p];
                ci[j] = beta == 0.0f ? alpha * s : alpha * s + beta * ci[j];
            }
        } else {
            /* B: rows of B stream into the row of C, which stays in cache */
            for (int j = 0; j < n; j++)
                ci[j] = beta == 0.0f ? 0.0f : beta * ci[j];
            for (int p = 0; p < k; p++) {
                const float av = alpha * a_at(a, lda, trans_a, i, p);
                const float *bp = b + (size_t)p * ldb;
                for (int j = 0; j < n; j++)
                    ci[j] += av * bp[j];
            }
        }
    }
}

void ct_cpu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc)
{
#ifdef CUTRAIN_HAVE_ONEDNN
    /* Row-major, as ours. On the dense layers' shapes it took 0.6-0.8 of OpenBLAS's time for the
     * gradients and most forwards (gemm.h); it fails only on arguments no caller passes, and then
     * the next product below answers instead. */
    if (dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) ==
        dnnl_success)
        return;
#endif
#ifdef CUTRAIN_HAVE_OPENBLAS
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                alpha, a, lda, b, ldb, beta, c, ldc);
#else
    ct_cpu_sgemm_reference(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

size_t ct_cpu_sgemm_nt_scratch(int m, int n)
{
#ifdef CUTRAIN_HAVE_ONEDNN
    if ((size_t)m * 4 <= (size_t)n)
        return (size_t)m * n;
#endif
    (void)m; (void)n;
    return 0;
}

// t: (n, m); c: (m, n) = t^T, in column tiles so the rows of t each tile reads stay in cache
static void transpose_into(const float *t, float *c, int m, int n)
{
    enum { TILE = 32 };
#pragma omp parallel for schedule(static) if ((size_t)m * n > 32768)
    for (int j0 = 0; j0 < n; j0 += TILE) {
        const int j1 = j0 + TILE < n ? j0 + TILE : n;
        for (int i = 0; i < m; i++)
            for (int j = j0; j < j1; j++)
                c[(size_t)i * n + j] = t[(size_t)j * m + i];
    }
}

// a: (m, k); b: (n, k); c: (m, n); t: t_floats floats or NULL
void ct_cpu_sgemm_nt(int m, int n, int k, const float *a, const float *b, float *c, float *t, size_t t_floats)
{
    const size_t need = ct_cpu_sgemm_nt_scratch(m, n);
    if (t && need && need <= t_floats) {
        ct_cpu_sgemm(0, 1, n, m, k, 1.0f, b, k, a, k, 0.0f, t, m);
        transpose_into(t, c, m, n);
        return;
    }
    ct_cpu_sgemm(0, 1, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
}
