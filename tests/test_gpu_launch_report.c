/* The many-small-layers check on a real GPU: the report models the visible GPU (its name, SM
 * count as the runtime reports it, a plausible bandwidth), not the H100-class model, and training
 * tiny_layers.ini on it prints the warning right after the backend line. devices = all trains over
 * NCCL where several GPUs are visible; comm_timeout = 20 s lets the communicator's watchdog, not
 * ctest, name a stalled collective. Exits 77 (skipped) without a GPU. */
#define _DEFAULT_SOURCE
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/cli_util.h"
#include "tests/gpu_test.h"

static const char *const NET =
    "[data]\nformat = synthetic\nshape = 8, 8, 1\nclasses = 4\ncount = 512\ntest_count = 0\n"
    "[train]\nbatch = 64\ndevices = all\ncomm_timeout = 20\n"
    "[flat]\ntype = flatten\n"
    "[a]\ntype = dense\nunits = 32\nactivation = relu\n"
    "[b]\ntype = dense\nunits = 32\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 4\n";

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    ct_net *net = NULL;
    CHECK(ct_open_string(NET, "gpu_launch.ini", &net) == CT_OK);
    ct_launch_report r;
    CHECK_MSG(ct_launch_report_get(net, 0, &r, NULL, 0) == CT_OK, "%s", ct_errmsg(net));
    char name[96] = "";
    ct_err err;
    CHECK(ct_cuda_device_name(0, name, sizeof name, NULL, &err) == CT_OK);
    int sms = 0;
    GPU_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int report_sms = 0;
    double ghz = 0.0, tbps = 0.0;
    const char *figures = strstr(r.device, " (");
    CHECK_MSG(r.measured && ct_contains(r.device, name) && figures &&
              sscanf(figures, " (%d SMs at %lf GHz, %lf TB/s)", &report_sms, &ghz, &tbps) == 3,
              "device: %s", r.device);
    CHECK_MSG(report_sms == sms && ghz > 0.3 && ghz < 4.0 && tbps > 0.1 && tbps < 20.0, "device: %s", r.device);
    /* three 32-wide layers at batch 64 cannot fill any GPU */
    CHECK_MSG(r.warn && r.launch_bound == r.layers, "%d of %d: %s", r.launch_bound, r.layers, r.message);
    ct_close(net);

    /* training prints the warning among its first lines */
    if (!make_scratch("ct_gpu_launch"))
        return 1;
    write_file("net.ini", NET);
    CHECK_MSG(run("--config net.ini --set train.epochs=1") == 0 && ct_contains(out, "backend cuda") &&
              ct_contains(out, "cutrain: warning: 4 of 4 layers are launch-bound at batch 64"), "got: %s", out);
    remove_scratch();
    return ct_test_done();
}
#else
#include "tests/no_cuda_main.h"
#endif
