/* The memory policies on the first GPU with fmnist_cnn.ini: with memory = grow, the device allocator
 * counts exactly the plan once prepared and again after training, its peak stays within 10% of the
 * plan (what the allocator hands out beyond the plan lives only for an algorithm search), and the device
 * memory taken around the run (cudaMemGetInfo) is the allocator's reservation plus the CUDA libraries'
 * own memory, which is bounded by LIBRARIES_BOUND and reported; memory = limit:N refuses a batch
 * whose plan is over the cap, with the plan's breakdown, and trains one under it without passing
 * it; memory = preallocate reserves the free memory up front and trains. Measures the whole GPU:
 * nothing else may run on it meanwhile. Exits 77 without a GPU. */
#include "tests/e2e_common.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"

static double mib(long long bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* The device memory the run takes besides the allocator's, which no plan counts and no batch changes:
 * the code of the kernels loaded on first use (cuDNN's and cuBLASLt's engines, the project's own;
 * all of cuDNN's and cuBLASLt's at their load where CUDA_MODULE_LOADING=EAGER, several hundred MiB),
 * the local memory the driver sizes for the deepest per-thread stack among the loaded kernels times
 * every thread the GPU holds (an H200's 132 SMs x 2048 threads: 264 MiB per KiB of stack), the
 * handles' own buffers, the instantiated step graphs, and the driver's rounding of each of the
 * allocations to its page. 2 GiB holds all of that with room (about 1.4% of an H200): it
 * is there to catch memory that grows with the run or a large buffer allocated beside the allocator,
 * and the figure is reported for the device check's table. Below zero (the allocator's reservation not
 * all visible as taken) only by the driver serving a few small allocations from pages the context
 * held already: LIBRARIES_BELOW. */
#define LIBRARIES_BOUND (2048LL << 20)
#define LIBRARIES_BELOW (16LL << 20)

static size_t free_memory(void)
{
    size_t avail = 0, total = 0;
    GPU_OK(cudaSetDevice(0));
    GPU_OK(cudaDeviceSynchronize());
    GPU_OK(cudaMemGetInfo(&avail, &total));
    return avail;
}

static ct_net *open_cnn(const char *memory, const char *batch)
{
    const char *sets[] = {"data.train_limit", "2048", "data.test_limit", "256", "train.epochs", "1",
                          "train.memory", memory, "train.batch", batch, NULL};
    ct_net *net = NULL;
    if (e2e_open("fmnist_cnn.ini", "0", sets, &net) != CT_OK) {
        fprintf(stderr, "fmnist_cnn.ini: %s\n", ct_errmsg(net));
        exit(1);
    }
    return net;
}

/* grow: returns the plan's total at batch 64 on the GPU */
static long long test_grow(void)
{
    size_t free_before = free_memory();
    ct_net *net = open_cnn("grow", "64");
    /* what summary says before anything is prepared: planned with the GPU's backend (cuDNN's
     * workspace), so it is what training will allocate */
    ct_memory_info predicted = {0};
    CHECK_MSG(ct_memory_info_get(net, 0, &predicted) == CT_OK, "%s", ct_errmsg(net));
    CHECK_MSG(predicted.planned_with && strcmp(predicted.planned_with, "cuda") == 0, "planned with %s",
              predicted.planned_with ? predicted.planned_with : "nothing");
    if (ct_prepare(net) != CT_OK) {
        CHECK_MSG(0, "prepare: %s", ct_errmsg(net));
        ct_close(net);
        return 0;
    }
    CHECK(strcmp(ct_backend_name(net), "cuda") == 0);
    ct_memory_info plan;
    ct_memory_usage u;
    CHECK(ct_memory_info_get(net, 0, &plan) == CT_OK && ct_memory_usage_get(net, &u) == CT_OK);
    /* the plan comes from the CUDA backend: cuDNN's workspace, input staging, the step scalars */
    CHECK(plan.backend > 0 && plan.workspace > 0);
    CHECK_MSG(predicted.total == plan.total, "summary before prepare %lld bytes, the plan after %lld",
              predicted.total, plan.total);
    CHECK_MSG(u.in_use == plan.total, "prepared: the plan says %lld bytes, the allocator counts %lld", plan.total,
              u.in_use);
    CHECK_MSG(ct_fit(net, NULL) == CT_OK, "%s", ct_errmsg(net));
    CHECK(ct_memory_usage_get(net, &u) == CT_OK);
    size_t free_after = free_memory();
    long long measured = (long long)free_before - (long long)free_after;
    long long libraries = measured - u.reserved;
    gpu_report("grow, batch 64: plan %.1f MiB; allocator in use %.1f, peak %.1f, reserved %.1f MiB; "
           "device memory taken %.1f MiB (cudaMemGetInfo), of which the CUDA libraries' own %.1f MiB "
           "(bound %.0f); pinned host %.1f MiB\n",
           mib(plan.total), mib(u.in_use), mib(u.peak), mib(u.reserved), mib(measured), mib(libraries),
           mib(LIBRARIES_BOUND), mib(u.pinned_in_use));
    CHECK_MSG(u.in_use == plan.total, "after training: %lld in use, the plan %lld", u.in_use, plan.total);
    CHECK_MSG(u.peak >= plan.total && u.peak <= plan.total + plan.total / 10, "peak %.1f MiB, plan %.1f MiB",
              mib(u.peak), mib(plan.total));
    CHECK(u.reserved >= u.in_use);
    CHECK_MSG(libraries >= -LIBRARIES_BELOW && libraries <= LIBRARIES_BOUND,
              "device memory taken %.1f MiB, the allocator's reservation %.1f MiB: the CUDA libraries' own %.1f MiB is "
              "outside [-%.0f, %.0f] MiB", mib(measured), mib(u.reserved), mib(libraries), mib(LIBRARIES_BELOW),
              mib(LIBRARIES_BOUND));
    ct_close(net);
    return plan.total;
}

static void test_limit(long long plan64)
{
    long cap_mib = (long)(plan64 >> 20) + 2;
    char cap[32];
    snprintf(cap, sizeof cap, "limit:%ld", cap_mib);
    ct_net *net = open_cnn(cap, "4096");
    CHECK(ct_prepare(net) == CT_ERR_NOMEM);
    const char *msg = ct_errmsg(net);
    CHECK_MSG(ct_contains(msg, "is too small") && ct_contains(msg, "batch 4096 needs") &&
              ct_contains(msg, "CUDA device 0") && ct_contains(msg, "workspace") && ct_contains(msg, "batch = max"),
              "got: %s", msg);
    ct_close(net);

    net = open_cnn(cap, "64");
    CHECK_MSG(ct_fit(net, NULL) == CT_OK, "%s: %s", cap, ct_errmsg(net));
    ct_memory_usage u;
    CHECK(ct_memory_usage_get(net, &u) == CT_OK);
    CHECK_MSG(u.cap == (long long)cap_mib << 20 && u.peak <= u.cap && u.in_use == plan64,
              "cap %.1f MiB, peak %.1f, in use %.1f, plan %.1f", mib(u.cap), mib(u.peak), mib(u.in_use), mib(plan64));
    ct_close(net);
}

static void test_preallocate(long long plan64)
{
    size_t free_before = free_memory();
    ct_net *net = open_cnn("preallocate", "64");
    CHECK_MSG(ct_fit(net, NULL) == CT_OK, "%s", ct_errmsg(net));
    ct_memory_usage u;
    CHECK(ct_memory_usage_get(net, &u) == CT_OK);
    size_t free_during = free_memory();
    gpu_report("preallocate: reserved %.1f MiB of %.1f MiB free; in use %.1f, peak %.1f MiB\n", mib(u.reserved),
           mib((long long)free_before), mib(u.in_use), mib(u.peak));
    /* the arena is the free memory less the libraries' slack (1 GiB + 5% of the GPU) */
    CHECK(u.reserved > (long long)free_before / 2 && u.reserved < (long long)free_before);
    CHECK(u.in_use == plan64 && u.peak >= plan64);
    ct_close(net);
    /* and goes back at close */
    CHECK(free_memory() > free_during + (size_t)u.reserved / 2);
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    GPU_OK(cudaSetDevice(0));
    GPU_OK(cudaFree(NULL));   /* the context first: its own memory is not cutrain's */
    long long plan64 = test_grow();
    if (plan64 > 0) {
        test_limit(plan64);
        test_preallocate(plan64);
    }
    return ct_test_done();
}
#else
#include "tests/no_cuda_main.h"
#endif
