/* The monitor and the time split on the first GPU: fmnist_cnn for two short epochs. The host's
 * shares add up to the loop's wall time within 5%; device_busy (CUDA events around each step)
 * is a share in (0, 1]; where the driver's NVML reports the GPU's utilization, memory and SM clock
 * (read here first, as the monitor reads them) the epochs' GPU figures are known (utilization
 * 0..100, memory in use, a clock), where NVML is missing they are unknown and training still runs,
 * and where it reports only some of them (a MIG slice) the figures are printed, not checked. Prints
 * the figures for the device check's note. Exits 77 without a GPU. */
#include "tests/e2e_common.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"
#include "tests/nvml_check.h"

typedef struct seen {
    int epochs, sums_ok, busy_ok, gpu_known, gpu_unknown;
} seen;

static int on_epoch(const ct_epoch_stats *s, void *user)
{
    seen *v = user;
    const ct_time_split *t = &s->time_split;
    double sum = t->input_wait + t->copy + t->compute + t->comm;
    gpu_report("  epoch %d: %.0f img/s, gpu_util %.1f%%, gpu_mem %.0f MiB, power %.1f W, sm clock %.0f MHz, "
               "cpu %.2f cores (machine %.1f%%); split input_wait %.3f copy %.3f compute %.3f comm %.3f "
               "device_busy %.3f; %s\n", s->epoch, s->images_per_s, s->gpu_util, s->gpu_mem_mib, s->power_w,
               s->sm_clock_mhz, s->cpu_util, s->cpu_util_machine, t->input_wait, t->copy, t->compute, t->comm,
               t->device_busy, s->time_verdict);
    v->epochs++;
    v->sums_ok += fabs(sum - 1.0) <= 0.05;
    v->busy_ok += t->device_busy > 0.0 && t->device_busy <= 1.0;
    v->gpu_known += s->gpu_util >= 0 && s->gpu_util <= 100 && s->gpu_mem_mib > 0 && s->sm_clock_mhz > 0;
    v->gpu_unknown += s->gpu_util < 0 && s->gpu_mem_mib < 0 && s->power_w < 0;
    return 0;
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    char why[256] = "", bus[32] = "";
    GPU_OK(cudaDeviceGetPCIBusId(bus, (int)sizeof bus, 0));
    ct_gpu_reading r;
    int have_nvml = nvml_check_read(bus, 0, &r, why, (int)sizeof why);
    int reports_all = have_nvml && r.util >= 0 && r.mem_mib > 0 && r.sm_clock_mhz > 0;
    gpu_report("NVML: %s\n", !have_nvml ? why : reports_all ? "reports utilization, memory and SM clock"
                                                            : "answers, but not every figure");

    static const char *const sets[] = {"data.train_limit", "8192", "train.epochs", "2", "train.batch", "256",
                                       NULL};
    ct_net *net = NULL;
    seen v = {0};
    ct_status st = e2e_open("fmnist_cnn.ini", "0", sets, &net);
    ct_callbacks cb = {.on_epoch = on_epoch, .user = &v};
    if (st == CT_OK)
        st = ct_fit(net, &cb);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    CHECK(strcmp(ct_backend_name(net), "cuda") == 0);
    ct_close(net);
    CHECK(v.epochs == 2);
    CHECK_MSG(v.sums_ok == 2, "the host's shares do not add up to the wall time");
    CHECK_MSG(v.busy_ok == 2, "device_busy is not a share");
    if (reports_all)
        CHECK_MSG(v.gpu_known == 2, "NVML reports the GPU's figures but the epochs' are unknown");
    else if (!have_nvml)
        CHECK_MSG(v.gpu_unknown == 2, "without NVML (%s) the epochs have GPU figures", why);
    return ct_test_done();
}
#else
#include "tests/no_cuda_main.h"
#endif
