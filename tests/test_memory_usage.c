/* The plan and the allocator agree: after ct_prepare on the CPU, the device allocator counts in use
 * exactly the plan's total (ct_memory_info_get), in fp32 and fp16, for the CNN and the MLP of the
 * model zoo, at the config's batch and at an odd one (whose buffers the allocator rounds up); training
 * allocates nothing more; a cap refuses with the plan's breakdown and trains at the plan's size;
 * an allocation failure names the device, the batch and the plan, and suggests batch = max. */
#include "tests/e2e_common.h"

static ct_net *open_model(const char *model, const char *precision, const char *batch)
{
    const char *sets[] = {"data.train_limit", "256", "data.test_limit", "64", "train.precision", precision,
                          "train.epochs", "1", batch ? "train.batch" : NULL, batch, NULL};
    ct_net *net = NULL;
    if (e2e_open(model, "cpu", sets, &net) != CT_OK) {
        fprintf(stderr, "%s: %s\n", model, ct_errmsg(net));
        exit(1);
    }
    return net;
}

static void plan_equals_usage(const char *model, const char *precision, const char *batch)
{
    ct_net *net = open_model(model, precision, batch);
    ct_memory_info before;
    CHECK(ct_memory_info_get(net, 0, &before) == CT_OK);
    ct_memory_usage u;
    CHECK(ct_memory_usage_get(net, &u) == CT_ERR_USAGE);   /* nothing allocated yet */
    if (ct_prepare(net) != CT_OK) {
        CHECK_MSG(0, "%s %s: %s", model, precision, ct_errmsg(net));
        ct_close(net);
        return;
    }
    ct_memory_info info;
    CHECK(ct_memory_info_get(net, 0, &info) == CT_OK);
    CHECK(ct_memory_usage_get(net, &u) == CT_OK);
    CHECK_MSG(info.total == u.in_use, "%s %s batch %d: the plan says %lld bytes, the allocator counts %lld in use",
              model, precision, info.batch, info.total, u.in_use);
    CHECK(before.total == info.total);   /* the CPU backend plans the same before and after */
    CHECK(info.padding > 0 && info.backend == 0 && u.cap == 0);
    CHECK(u.peak == u.in_use && u.reserved == u.in_use);
    /* the input staging's host memory is apart from the device's */
    CHECK(u.pinned_in_use >= 2LL * info.batch * 28 * 28 * 4 && u.pinned_peak >= u.pinned_in_use);
    /* a training epoch allocates nothing on the device: it all was planned */
    CHECK_MSG(ct_fit(net, NULL) == CT_OK, "%s", ct_errmsg(net));
    ct_memory_usage after;
    CHECK(ct_memory_usage_get(net, &after) == CT_OK);
    CHECK_MSG(after.in_use == u.in_use && after.peak == u.in_use, "%s %s: %lld in use after training (peak %lld), %lld "
              "before", model, precision, after.in_use, after.peak, u.in_use);
    ct_close(net);
}

static void limit_refuses_then_trains(void)
{
    ct_net *net = open_model("fmnist_cnn.ini", "fp32", "512");
    ct_memory_info info;
    CHECK(ct_memory_info_get(net, 0, &info) == CT_OK);   /* builds the network: keys are set before */
    ct_close(net);
    long mib = (long)(info.total >> 20);   /* just under the plan */
    char cap[32];
    net = open_model("fmnist_cnn.ini", "fp32", "512");
    snprintf(cap, sizeof cap, "limit:%ld", mib);
    CHECK(ct_set(net, "train.memory", cap) == CT_OK);
    CHECK(ct_prepare(net) == CT_ERR_NOMEM);
    const char *msg = ct_errmsg(net);
    CHECK_MSG(ct_contains(msg, "is too small") && ct_contains(msg, "batch 512 needs") && ct_contains(msg, "the CPU") &&
              ct_contains(msg, "activations") && ct_contains(msg, "batch = max"), "got: %s", msg);
    ct_close(net);

    net = open_model("fmnist_cnn.ini", "fp32", "512");
    snprintf(cap, sizeof cap, "limit:%ld", mib + 1);
    CHECK(ct_set(net, "train.memory", cap) == CT_OK);
    CHECK_MSG(ct_prepare(net) == CT_OK, "%s", ct_errmsg(net));
    ct_memory_usage u;
    CHECK(ct_memory_usage_get(net, &u) == CT_OK);
    CHECK(u.cap == (long long)(mib + 1) << 20 && u.in_use == info.total && u.in_use <= u.cap);
    ct_close(net);

    /* preallocate is grow on the CPU, and says so */
    net = open_model("fmnist_mlp.ini", "fp32", NULL);
    CHECK(ct_set(net, "train.memory", "preallocate") == CT_OK);
    CHECK_MSG(ct_prepare(net) == CT_OK, "%s", ct_errmsg(net));
    CHECK(ct_contains(ct_backend_note(net), "preallocate acts as grow"));
    CHECK(ct_memory_usage_get(net, &u) == CT_OK && ct_memory_info_get(net, 0, &info) == CT_OK);
    CHECK(u.in_use == info.total && u.reserved == u.in_use);
    ct_close(net);
}

/* An allocation that fails while preparing, first or in the middle of the layers: a message that
 * names the device, the batch and the plan, and nothing leaks (run under AddressSanitizer). */
static void allocation_failure(long skip)
{
    ct_net *net = open_model("fmnist_cnn.ini", "fp32", "96");
    CHECK(ct_inject_alloc_failures(net, skip, 1) == CT_OK);
    CHECK(ct_prepare(net) == CT_ERR_NOMEM);
    const char *msg = ct_errmsg(net);
    CHECK_MSG(ct_contains(msg, "out of memory on the CPU at batch 96") && ct_contains(msg, "the plan needs") &&
              ct_contains(msg, "MiB") && ct_contains(msg, "batch = max"), "skip %ld: %s", skip, msg);
    ct_memory_usage u;
    CHECK(ct_memory_usage_get(net, &u) == CT_ERR_USAGE);   /* the failed prepare released the device */
    ct_close(net);
}

int main(void)
{
    const char *models[] = {"fmnist_cnn.ini", "fmnist_mlp.ini"};
    const char *precisions[] = {"fp32", "fp16"};
    for (int m = 0; m < 2; m++)
        for (int p = 0; p < 2; p++) {
            plan_equals_usage(models[m], precisions[p], NULL);
            plan_equals_usage(models[m], precisions[p], "37");
        }
    limit_refuses_then_trains();
    allocation_failure(0);
    allocation_failure(9);
    return ct_test_done();
}
