/* NCCL's communicator with one rank on one GPU (comm = nccl, devices = 0) trains exactly like the
 * single-device step (comm = auto): the same parameters bit for bit after an epoch of 21 steps,
 * the last a partial batch. With one rank the weight of its share is exactly 1 and the sum over
 * one rank is the value itself, so the only change is where the work runs (the communication
 * stream, forked and joined by events inside the captured step). Exits 77 without a GPU. */
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
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 1) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    ct_net *single = gpu_mlp_fit("0", "auto");
    CHECK(single->run.n_replicas == 1 && strcmp(single->run.comm->ops->name, "single") == 0);
    ct_net *nccl = gpu_mlp_fit("0", "nccl");
    CHECK(nccl->run.n_replicas == 1);
    CHECK_MSG(strcmp(nccl->run.comm->ops->name, "nccl") == 0, "comm = nccl made the %s communicator",
              nccl->run.comm->ops->name);
    CHECK(ct_steps_done(nccl) == ct_steps_done(single) && ct_steps_done(single) == 21);
    size_t n1 = 0, n2 = 0;
    float *a = gpu_params(single, 0, &n1), *b = gpu_params(nccl, 0, &n2);
    CHECK(n1 == n2);
    size_t differ = 0;
    for (size_t i = 0; i < n1 && n1 == n2; i++)
        differ += memcmp(&a[i], &b[i], sizeof *a) != 0;
    gpu_report("NCCL one rank against the single-device step: %zu of %zu parameters differ (relative %.3g); "
               "backend: %s\n", differ, n1, gpu_relative_difference(b, a, n1 < n2 ? n1 : n2),
               ct_backend_reason(nccl));
    CHECK_MSG(differ == 0, "%zu of %zu parameters differ", differ, n1);
    free(a);
    free(b);
    ct_close(single);
    ct_close(nccl);
    return ct_test_done();
}

#else
#include "tests/no_cuda_main.h"
#endif
