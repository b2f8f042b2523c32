/* Several GPUs, one replica each, reducing with NCCL: devices = 0,1 at global batch 100 against
 * devices = 0 at 100 after an epoch of 21 steps (the last a partial batch of 10, split 5 and 5):
 * parameters within 1e-4 relative (norm-wise; the sums run in another order), and the two
 * replicas bit-identical to each other (every replica applies the same reduced gradients).
 * Exits 77 below two GPUs: NCCL refuses two ranks on one GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"
#include "tests/gpu_replicas.h"

int main(void)
{
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2) {
        printf("skipped: %d CUDA device(s), the test needs two\n", gpus);
        return 77;
    }
    ct_net *one = gpu_mlp_fit("0", "auto");
    ct_net *two = gpu_mlp_fit("0,1", "auto");
    CHECK(two->run.n_replicas == 2 && strcmp(two->run.comm->ops->name, "nccl") == 0);
    CHECK(ct_batch_size(two) == 100);
    CHECK(ct_steps_done(two) == ct_steps_done(one));
    size_t n1 = 0, n0 = 0, nb = 0;
    float *p1 = gpu_params(one, 0, &n1), *p0 = gpu_params(two, 0, &n0), *pb = gpu_params(two, 1, &nb);
    CHECK(n1 == n0 && n0 == nb);
    int identical = n0 == nb && memcmp(p0, pb, n0 * sizeof *p0) == 0;
    double rel = gpu_relative_difference(p0, p1, n0 < n1 ? n0 : n1);
    gpu_report("NCCL 2 GPUs at batch 100 against 1: parameters %.3g relative; replicas %s; backend: %s\n", rel,
               identical ? "bit-identical" : "DIFFER", ct_backend_reason(two));
    CHECK_MSG(identical, "the two replicas' parameters differ");
    CHECK_MSG(rel <= 1e-4, "relative difference %.3g", rel);
    free(p1);
    free(p0);
    free(pb);
    ct_close(one);
    ct_close(two);
    return ct_test_done();
}

#else
#include "tests/no_cuda_main.h"
#endif
