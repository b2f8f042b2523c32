/* What the backends decide on their own, tested without a GPU: the backend note that gathers what
 * a backend changed (ct_backend_add_note), and, in a CUDA build, the choice among cuDNN's
 * measured convolution algorithms (ct_cuda_conv_pick): the fastest usable one, the fastest
 * deterministic one with deterministic = on, and the fastest of all with a fallback flag where no
 * deterministic one is usable; results that failed, need too much workspace or leave fp32 never
 * run. */
#include <string.h>

#include "backend.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "cuda/cuda_internal.h"
#endif

static void test_note(void)
{
    ct_backend be;
    memset(&be, 0, sizeof be);
    ct_backend_add_note(&be, "first");
    CHECK_MSG(strcmp(be.note, "first") == 0, "'%s'", be.note);
    ct_backend_add_note(&be, "second");
    CHECK_MSG(strcmp(be.note, "first; second") == 0, "'%s'", be.note);
    /* a long note is cut to fit, terminated, and later ones add nothing */
    char longer[2 * sizeof be.note];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    ct_backend_add_note(&be, longer);
    CHECK(strlen(be.note) == sizeof be.note - 1);
    CHECK(strncmp(be.note, "first; second; xxx", 18) == 0);
    ct_backend_add_note(&be, "third");
    CHECK(strlen(be.note) == sizeof be.note - 1 && strstr(be.note, "third") == NULL);
}

#ifdef CUTRAIN_HAVE_CUDA
enum { MiB = 1 << 20 };

static ct_conv_algo_perf perf(int algo, float ms, size_t bytes, int deterministic)
{
    return (ct_conv_algo_perf){algo, CUDNN_STATUS_SUCCESS, ms, bytes,
                               deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC, CUDNN_FMA_MATH};
}

static void test_pick(void)
{
    int fell = -1;
    /* algo 0: fast, nondeterministic; 1: slower, deterministic; 2: slowest, deterministic */
    ct_conv_algo_perf p[6] = {perf(0, 1.0f, 0, 0), perf(1, 2.0f, MiB, 1), perf(2, 3.0f, 0, 1)};
    CHECK(ct_cuda_conv_pick(p, 3, 4 * MiB, 0, 0, &fell) == 0 && fell == 0);
    CHECK(ct_cuda_conv_pick(p, 3, 4 * MiB, 0, 1, &fell) == 1 && fell == 0);
    /* the limit rules out the faster deterministic one */
    CHECK(ct_cuda_conv_pick(p, 3, MiB - 1, 0, 1, &fell) == 2 && fell == 0);
    /* order does not matter: the fastest wins wherever it is */
    ct_conv_algo_perf q[3] = {p[2], p[1], p[0]};
    CHECK(ct_cuda_conv_pick(q, 3, 4 * MiB, 0, 0, &fell) == 2 && fell == 0);
    CHECK(ct_cuda_conv_pick(q, 3, 4 * MiB, 0, 1, &fell) == 1 && fell == 0);

    /* deterministic asked, none usable: the fastest of the rest, said so */
    ct_conv_algo_perf nd[3] = {perf(0, 5.0f, 0, 0), perf(1, 1.0f, 0, 0), perf(2, 0.5f, 8 * MiB, 1)};
    CHECK(ct_cuda_conv_pick(nd, 3, 4 * MiB, 0, 1, &fell) == 1 && fell == 1);
    CHECK(ct_cuda_conv_pick(nd, 3, 4 * MiB, 0, 0, &fell) == 1 && fell == 0);
    /* a deterministic one that failed to run does not count */
    nd[2].memory = 0;
    nd[2].status = CUDNN_STATUS_NOT_SUPPORTED;
    CHECK(ct_cuda_conv_pick(nd, 3, 4 * MiB, 0, 1, &fell) == 1 && fell == 1);

    /* math: TF32 tensor ops only when allowed, conversion to fp16 never */
    ct_conv_algo_perf m[3] = {perf(0, 1.0f, 0, 1), perf(1, 2.0f, 0, 1), perf(2, 3.0f, 0, 1)};
    m[0].math = CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    m[1].math = CUDNN_TENSOR_OP_MATH;
    m[2].math = CUDNN_DEFAULT_MATH;
    CHECK(ct_cuda_conv_pick(m, 3, 0, 0, 1, &fell) == 2 && fell == 0);
    CHECK(ct_cuda_conv_pick(m, 3, 0, 1, 1, &fell) == 1 && fell == 0);

    /* nothing usable: -1, and no fallback to report */
    ct_conv_algo_perf bad[2] = {perf(0, 1.0f, 2 * MiB, 1), perf(1, 1.0f, 0, 0)};
    bad[1].status = CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
    CHECK(ct_cuda_conv_pick(bad, 2, MiB, 1, 1, &fell) == -1 && fell == 0);
    CHECK(ct_cuda_conv_pick(bad, 0, MiB, 1, 1, &fell) == -1 && fell == 0);
}
#endif

int main(void)
{
    test_note();
#ifdef CUTRAIN_HAVE_CUDA
    test_pick();
#else
    printf("built without the CUDA backend: the algorithm choice is not tested\n");
#endif
    return ct_test_done();
}
