/* Column-major matrix products through cuBLASLt (fp32, or fp16 / bf16 inputs with fp32 compute) (dense.c says how the layers'
 * row-major tensors map onto them).
 *
 * Plans. Building a matmul (descriptor, three layouts, heuristic query) is host work that must
 * not happen inside a CUDA graph capture and should not happen every step, so each distinct
 * product is planned once and kept: the key holds everything the heuristic saw (transposes,
 * sizes, leading dimensions, epilogue, beta, the pointers' alignments, the workspace allowance).
 * The first run of a step is never captured (run_step), so every plan exists before a capture.
 * Plans are shared by layers of the same shape; the bias pointer, the one per-layer attribute of
 * the descriptor, is set before each call.
 *
 * Precision: CUBLAS_COMPUTE_32F with fp32 scale, A, B, C, D and bias: full fp32 products, as
 * PyTorch's default (it allows TF32 in matmuls only when asked), and the heuristic is told to
 * leave out any algorithm that rounds its inputs to TF32, fp16 or bf16. Mixed precision (half A and
 * B, one type, and C / D of that type or fp32; a bias of D's type, cuBLASLt's default for
 * CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE): still CUBLAS_COMPUTE_32F with an fp32 scale type, the
 * products accumulated in fp32 and rounded once on store, tensor cores allowed. cuBLASLt's GELU
 * epilogues are the tanh approximation, not the erf form of CT_ACT_GELU, so only relu is fused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"

/* ---- plan cache ---- */

/* Everything that decides the algorithm the heuristic returns. Alignments are those of the
 * pointers the plan was built for (the heuristic assumes 256 bytes unless told otherwise): the
 * network's parameters, gradients and activation gradients all start at CT_TENSOR_ALIGN (256)
 * bytes, but a caller may pass any pointer, so each is measured rather than assumed. */
typedef struct lt_key {
    int32_t transa, transb;      /* cublasOperation_t */
    int64_t m, n, k;
    int64_t lda, ldb, ldc;       /* ldc is D's too: C == D */
    uint32_t epilogue;           /* cublasLtEpilogue_t */
    int beta_one;                /* 0: D = op(A) op(B); 1: D += op(A) op(B) */
    uint32_t align_a, align_b, align_c, align_bias;  /* bytes; align_bias 0 without a bias */
    uint64_t workspace;          /* bytes the algorithm may use */
    int32_t ab_type, d_type;     /* ct_dtype of A and B (one type), of C and D (and a bias) */
} lt_key;

typedef struct lt_plan {
    lt_key key;
    int supported;               /* 0: the heuristic found no algorithm (kept, so not asked again) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;  /* c describes D as well */
    cublasLtMatmulAlgo_t algo;
} lt_plan;

/* Plans are allocated one by one so that a pointer to one stays valid while others are added. */
struct ct_lt_plans {
    lt_plan **items;
    int count, cap;
};

static int key_equal(const lt_key *a, const lt_key *b)
{
    return a->transa == b->transa && a->transb == b->transb && a->m == b->m && a->n == b->n &&
           a->k == b->k && a->lda == b->lda && a->ldb == b->ldb && a->ldc == b->ldc &&
           a->epilogue == b->epilogue && a->beta_one == b->beta_one && a->align_a == b->align_a &&
           a->align_b == b->align_b && a->align_c == b->align_c && a->align_bias == b->align_bias &&
           a->workspace == b->workspace && a->ab_type == b->ab_type && a->d_type == b->d_type;
}

/* Teardown: a destroy call that fails leaves nothing useful to do, so its status is dropped. */
static void plan_release(lt_plan *p)
{
    if (p->c)
        (void)cublasLtMatrixLayoutDestroy(p->c);
    if (p->b)
        (void)cublasLtMatrixLayoutDestroy(p->b);
    if (p->a)
        (void)cublasLtMatrixLayoutDestroy(p->a);
    if (p->desc)
        (void)cublasLtMatmulDescDestroy(p->desc);
    p->a = p->b = p->c = NULL;
    p->desc = NULL;
}

static void plan_destroy(lt_plan *p)
{
    if (!p)
        return;
    plan_release(p);
    free(p);
}

static int epilogue_has_bias(uint32_t epilogue)
{
    return epilogue == (uint32_t)CUBLASLT_EPILOGUE_BIAS || epilogue == (uint32_t)CUBLASLT_EPILOGUE_RELU_BIAS;
}

/* Largest power of two, up to 256, that divides the address (the preference attributes'
 * range: their default, 256, is the strictest). */
static uint32_t alignment_of(const void *p)
{
    uintptr_t addr = (uintptr_t)p;
    uint32_t align = 256;
    while (align > 1 && addr % align != 0)
        align /= 2;
    return align;
}

static cudaDataType_t lt_type(int32_t dtype)
{
    return dtype == CT_DTYPE_F16 ? CUDA_R_16F : dtype == CT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Builds the plan for key (host work only). bias: the pointer the heuristic sees for a bias
 * epilogue (it reads the pointer's alignment from the descriptor), else NULL. */
static ct_status plan_build(ct_cuda *cu, const lt_key *key, const void *bias, lt_plan **out, ct_err *err)
{
    *out = NULL;
    /* A plan built inside a capture would mean fn enqueued different work than on its direct
     * first run: refuse rather than run host-side setup while the stream records. */
    enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CT_CUDA_CHECK(cudaStreamIsCapturing(cu->compute, &capture), err);
    if (capture != cudaStreamCaptureStatusNone)
        return ct_fail(err, CT_ERR_INTERNAL,
                       "a new matrix product (%lld x %lld x %lld) appeared inside a CUDA graph capture; "
                       "plans are built on the uncaptured first run of a step",
                       (long long)key->m, (long long)key->n, (long long)key->k);

    lt_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ct_fail(err, CT_ERR_NOMEM, "out of host memory for a cuBLASLt plan");
    p->key = *key;

    cublasLtMatmulPreference_t pref = NULL;
    ct_status st = CT_OK;
#define LT_TRY(call) do { st = CT_CUBLAS_STATUS(call, err); if (st != CT_OK) goto fail; } while (0)

    /* Full fp32: COMPUTE_32F (not _FAST_TF32), alpha and beta as host floats (the default
     * pointer mode is host, so they are read at enqueue time and a captured call keeps them). */
    LT_TRY(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t ta = key->transa, tb = key->transb;
    uint32_t epilogue = key->epilogue;
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    if (epilogue_has_bias(epilogue)) {
        /* The bias type defaults to D's (fp32); its pointer is set again before every call. */
        LT_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }

    /* Layouts as stored: op(A) is m x k, so a transposed A is stored k x m; likewise B. */
    int a_t = key->transa == CUBLAS_OP_T, b_t = key->transb == CUBLAS_OP_T;
    const cudaDataType_t ab = lt_type(key->ab_type), cd = lt_type(key->d_type);
    LT_TRY(cublasLtMatrixLayoutCreate(&p->a, ab, (uint64_t)(a_t ? key->k : key->m),
                                      (uint64_t)(a_t ? key->m : key->k), key->lda));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->b, ab, (uint64_t)(b_t ? key->n : key->k),
                                      (uint64_t)(b_t ? key->k : key->n), key->ldb));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->c, cd, (uint64_t)key->m, (uint64_t)key->n, key->ldc));

    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t workspace = key->workspace;
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                sizeof workspace));
    uint32_t align_a = key->align_a, align_b = key->align_b, align_c = key->align_c;
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                sizeof align_a));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                sizeof align_b));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                                sizeof align_c));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                                sizeof align_c));
    /* COMPUTE_32F already excludes TF32; the mask says the same to the heuristic, so that no
     * algorithm that rounds fp32 inputs down (TF32, fp16, bf16) can be picked. */
    if (key->ab_type == CT_DTYPE_F32) {
        uint64_t impl = ~(uint64_t)(CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_TF32 | CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16F |
                                    CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16BF);
        LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_IMPL_MASK, &impl, sizeof impl));
    }

    cublasLtMatmulHeuristicResult_t result;
    memset(&result, 0, sizeof result);
    int found = 0;
    cublasStatus_t rc = cublasLtMatmulAlgoGetHeuristic(cu->lt, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result,
                                                       &found);
    /* NOT_SUPPORTED ("no heuristic function available for current configuration") or no usable
     * result: nothing runs this configuration (for a bias epilogue, possibly the bias pointer's
     * alignment); the caller may fall back to a plain product. Any other failure is an error,
     * checked here by hand because NOT_SUPPORTED is an answer, not one. */
    if (rc != CUBLAS_STATUS_SUCCESS && rc != CUBLAS_STATUS_NOT_SUPPORTED) {
        st = ct_cublas_status_(rc, err, __FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic");
        goto fail;
    }
    p->supported = rc == CUBLAS_STATUS_SUCCESS && found >= 1 && result.state == CUBLAS_STATUS_SUCCESS;
    if (p->supported)
        p->algo = result.algo;
    else
        plan_release(p);  /* only the key is kept, so the question is not asked again */
    st = CT_CUBLAS_STATUS(cublasLtMatmulPreferenceDestroy(pref), err);
    pref = NULL;
    if (st != CT_OK)
        goto fail;
#undef LT_TRY

    ct_lt_plans *plans = cu->plans;
    if (plans->count == plans->cap) {
        int cap = plans->cap ? plans->cap * 2 : 16;
        lt_plan **items = realloc(plans->items, (size_t)cap * sizeof *items);
        if (!items) {
            plan_destroy(p);
            return ct_fail(err, CT_ERR_NOMEM, "out of host memory for the cuBLASLt plan cache");
        }
        plans->items = items;
        plans->cap = cap;
    }
    plans->items[plans->count++] = p;
    *out = p;
    return CT_OK;

fail:
    if (pref)
        (void)cublasLtMatmulPreferenceDestroy(pref);
    plan_destroy(p);
    return st;
}

/* The cached plan for key, built on first use. */
static ct_status plan_get(ct_cuda *cu, const lt_key *key, const void *bias, lt_plan **out, ct_err *err)
{
    const ct_lt_plans *plans = cu->plans;
    for (int i = 0; i < plans->count; i++)
        if (key_equal(&plans->items[i]->key, key)) {
            *out = plans->items[i];
            return CT_OK;
        }
    return plan_build(cu, key, bias, out, err);
}

/* Bytes of the shared workspace cuBLASLt may use: it wants a 256-byte aligned pointer
 * (cudaMalloc's are), and CT_CUBLASLT_WORKSPACE at most, the amount dense layers ask reserve for. */
static size_t lt_workspace(const ct_cuda *cu)
{
    if (!cu->workspace || (uintptr_t)cu->workspace % 256 != 0)
        return 0;
    return cu->workspace_size < CT_CUBLASLT_WORKSPACE ? cu->workspace_size : CT_CUBLASLT_WORKSPACE;
}

// A, B, D: column-major fp32 as the key's sizes and leading dimensions say; bias: (m) or NULL
ct_status ct_cuda_matmul(ct_cuda *cu, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                         const float *A, int lda, const float *B, int ldb, float *D, int ldd,
                         cublasLtEpilogue_t epilogue, const float *bias, int beta_one, int *done, ct_err *err)
{
    return ct_cuda_matmul_dt(cu, transa, transb, m, n, k, A, lda, B, ldb, D, ldd, CT_DTYPE_F32, CT_DTYPE_F32,
                             epilogue, bias, beta_one, done, err);
}

// A, B: column-major ab_type; D: d_type; bias: (m) d_type or NULL
ct_status ct_cuda_matmul_dt(ct_cuda *cu, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            const void *A, int lda, const void *B, int ldb, void *D, int ldd, ct_dtype ab_type,
                            ct_dtype d_type, cublasLtEpilogue_t epilogue, const void *bias, int beta_one, int *done,
                            ct_err *err)
{
    if (ab_type != CT_DTYPE_F32 && ab_type != CT_DTYPE_F16 && ab_type != CT_DTYPE_BF16)
        return ct_fail(err, CT_ERR_INTERNAL, "cuBLASLt products take fp32, fp16 or bf16 inputs");
    if (d_type != CT_DTYPE_F32 && d_type != ab_type)
        return ct_fail(err, CT_ERR_INTERNAL, "a %s product writes fp32 or %s", ct_dtype_name(ab_type),
                       ct_dtype_name(ab_type));
    size_t workspace = lt_workspace(cu);
    lt_key key;
    memset(&key, 0, sizeof key);
    key.transa = (int32_t)transa;
    key.transb = (int32_t)transb;
    key.m = m;
    key.n = n;
    key.k = k;
    key.lda = lda;
    key.ldb = ldb;
    key.ldc = ldd;
    key.epilogue = (uint32_t)epilogue;
    key.beta_one = beta_one;
    key.align_a = alignment_of(A);
    key.align_b = alignment_of(B);
    key.align_c = alignment_of(D);
    key.align_bias = epilogue_has_bias(key.epilogue) ? alignment_of(bias) : 0;
    key.workspace = workspace;
    key.ab_type = (int32_t)ab_type;
    key.d_type = (int32_t)d_type;

    *done = 0;
    lt_plan *p = NULL;
    ct_status st = plan_get(cu, &key, bias, &p, err);
    if (st != CT_OK)
        return st;
    if (!p->supported) {
        if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
            return CT_OK;
        return ct_fail(err, CT_ERR_BACKEND,
                       "cuBLASLt has no %s -> %s algorithm for %c%c %d x %d x %d (lda %d, ldb %d, ldc %d, "
                       "alignments %u/%u/%u bytes)",
                       ct_dtype_name(ab_type), ct_dtype_name(d_type), transa == CUBLAS_OP_T ? 'T' : 'N', transb == CUBLAS_OP_T ? 'T' : 'N', m, n, k, lda, ldb, ldd,
                       key.align_a, key.align_b, key.align_c);
    }
    if (epilogue_has_bias(key.epilogue)) {
        /* plans are shared by layers of one shape: point this call at this layer's bias */
        const void *ptr = bias;
        CT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof ptr),
                        err);
    }
    const float alpha = 1.0f, beta = beta_one ? 1.0f : 0.0f;
    /* C == D with one layout: in place, which beta = 1 accumulates into; with beta = 0 C is
     * not read. The workspace is passed per call, which keeps the call capturable. */
    CT_CUBLAS_CHECK(cublasLtMatmul(cu->lt, p->desc, &alpha, A, p->a, B, p->b, &beta, D, p->c, D, p->c, &p->algo,
                                   workspace ? cu->workspace : NULL, workspace, cu->compute),
                    err);
    *done = 1;
    return CT_OK;
}

/* ---- setup ---- */

ct_status ct_cuda_matmul_init(ct_cuda *cu, ct_err *err)
{
    cu->lt = NULL;
    cu->plans = NULL;
    cublasLtHandle_t lt = NULL;
    CT_CUBLAS_CHECK(cublasLtCreate(&lt), err);
    ct_lt_plans *plans = calloc(1, sizeof *plans);
    if (!plans) {
        (void)cublasLtDestroy(lt);
        return ct_fail(err, CT_ERR_NOMEM, "out of host memory for the cuBLASLt plan cache");
    }
    cu->lt = lt;
    cu->plans = plans;
    return CT_OK;
}

void ct_cuda_matmul_free(ct_cuda *cu)
{
    if (!cu)
        return;
    if (cu->plans) {
        for (int i = 0; i < cu->plans->count; i++)
            plan_destroy(cu->plans->items[i]);
        free(cu->plans->items);
        free(cu->plans);
        cu->plans = NULL;
    }
    if (cu->lt) {
        (void)cublasLtDestroy(cu->lt);  /* teardown: nothing to do with a failure */
        cu->lt = NULL;
    }
}
