/* cutrain experiment on a GPU (skipped without one): rungs 0 to 5 of fmnist_cnn run on the GPU,
 * a few steps each, with the GPU's utilization in the JSON wherever the driver's NVML reports it
 * (read here first; NVML comes with the driver, but a machine may lack it, and then every rung's
 * gpu_util is null) and rung 6 either run or skipped with its reason; the table is printed for the
 * device check's notes. comm_timeout = 20 s: where several GPUs make rung 6 run over NCCL, the
 * communicator's watchdog, not ctest, names a stalled collective. */
#define _DEFAULT_SOURCE
#include "tests/cli_util.h"
#include "cutrain.h"
#include "tests/json_check.h"
#include "tests/nvml_check.h"

static char text[1 << 16];

int main(void)
{
    (void)write_file; /* cli_util.h's, not needed here */
    static ct_doctor_report doc;
    if (ct_doctor(&doc) != CT_OK) {
        printf("FAIL: cutrain's doctor could not count the GPUs\n");
        return 1;
    }
    if (doc.n_gpus < 1) {
        printf("skipped: no GPU (%s)\n", doc.no_gpu_reason);
        return 77;
    }
    char why[256] = "";
    ct_gpu_reading r;
    int util_known = nvml_check_read(NULL, 0, &r, why, (int)sizeof why) && r.util >= 0;
    if (!make_scratch("ct_gpu_experiment"))
        return 1;
    char args[2048];
    const char *d = ct_fmnist_dir();
    snprintf(args, sizeof args,
             "experiment --config %s/models/fmnist_cnn.ini --out res --steps 50 --rungs all "
             "--set data.train=%s/train-images-idx3-ubyte.gz --set data.train_labels=%s/train-labels-idx1-ubyte.gz "
             "--set data.test=%s/t10k-images-idx3-ubyte.gz --set data.test_labels=%s/t10k-labels-idx1-ubyte.gz "
             "--set data.train_limit=30000 --set train.batch_search_seconds=5 --set train.batch_max=4096 "
             "--set train.comm_timeout=20",
             CT_SOURCE_DIR, d, d, d, d);
    int rc = run(args);
    printf("%s", out);
    CHECK_MSG(rc == 0, "exit %d", rc);
    CHECK(read_scratch("res/experiment.json", text, sizeof text) > 0 && json_valid(text));
    int ran = count_of(text, "\"status\": \"ran\""), skipped = count_of(text, "\"status\": \"skipped\"");
    /* 0..5 run on one GPU; 6 runs with two or more once mirroring is built, else says why not */
    CHECK_MSG(ran + skipped == 7 && ran >= 6 && count_of(text, "\"backend\": \"cuda\"") == ran, "%s", text);
    CHECK_MSG(count_of(text, "\"gpu_util\": null") == skipped + (util_known ? 0 : ran) &&
                  count_of(text, "\"device_busy\": null") == 0,
              "NVML utilization %s: %s", util_known ? "known" : "unknown", text);
    CHECK_MSG(ct_contains(text, "\"precision\": \"fp16\"") && ct_contains(text, "\"batch_mode\": \"auto\""), "%s",
              text);
    if (read_scratch("res/experiment.md", text, sizeof text) > 0)
        printf("%s", text);
    remove_scratch();
    return ct_test_done();
}
