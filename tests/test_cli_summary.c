/* cutrain summary as a user runs it: the table with activation memory at the batch, the plan's
 * total, --batch, --json (valid JSON that says what the table says) and the many-small-layers
 * warning on the model zoo's tiny_layers.ini and fmnist_mlp_wide.ini (on the model GPU:
 * devices = cpu). */
#define _DEFAULT_SOURCE
#include "tests/cli_util.h"
#include "cutrain.h"
#include "tests/json_check.h"

static const char *NET =
    "[data]\nformat = synthetic\nshape = 6, 6, 1\nclasses = 3\ncount = 300\ntest_count = 90\n"
    "[train]\nepochs = 2\nbatch = 256\nlearning_rate = 0.01\ndevices = cpu\n"
    "[flat]\ntype = flatten\n"
    "[hidden]\ntype = dense\nunits = 16\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 3\n";

/* The integer after `"key": ` at its n-th (0-based) occurrence in text; -1 when absent. */
static long long json_int(const char *text, const char *key, int n)
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *p = text;
    for (int i = 0; p && i <= n; i++)
        if ((p = strstr(p, pattern)))
            p += strlen(pattern);
    return p ? strtoll(p, NULL, 10) : -1;
}

static void test_json_check(void)
{
    /* the checker itself: it must refuse what is not JSON */
    CHECK(json_valid("{\"a\": [1, -2.5e3, true, null, \"x\\\"\\u00e9\"], \"b\": {}}\n"));
    CHECK(!json_valid("{\"a\": 1,}") && !json_valid("{\"a\" 1}") && !json_valid("[1 2]") &&
          !json_valid("{} {}") && !json_valid("[nan]") && !json_valid("[01]") && !json_valid("\"a\tb\"") &&
          !json_valid("{\"a\": 1") && !json_valid(""));
}

static void test_synthetic(void)
{
    write_file("net.ini", NET);
    CHECK_MSG(run("summary --config net.ini") == 0 && ct_contains(out, "act at 256") &&
              ct_contains(out, "643"), "got: %s", out);
    /* hidden keeps 16 fp32 values a sample: 16 KiB at 256 */
    CHECK_MSG(ct_contains(out, "16.0 KiB"), "got: %s", out);
    CHECK_MSG(ct_contains(out, "largest batch that fits: "), "got: %s", out);
    const char *total = strstr(out, "MiB (");
    long long text_total = total ? strtoll(total + 5, NULL, 10) : -1;
    CHECK_MSG(text_total > 0 && ct_contains(out, " bytes) = "), "got: %s", out);

    CHECK(run("summary --config net.ini --json") == 0);
    CHECK_MSG(json_valid(out), "not JSON: %s", out);
    CHECK_MSG(json_int(out, "total_bytes", 0) == text_total, "text %lld, JSON %lld", text_total,
              json_int(out, "total_bytes", 0));
    CHECK(json_int(out, "batch", 0) == 256 && ct_contains(out, "\"layers\": [") && ct_contains(out, "\"warnings\": [") &&
          ct_contains(out, "\"max_batch\": ") && ct_contains(out, "\"by_dtype\": {"));
    /* layers: flat, hidden, out, in order, with their activation bytes at the batch */
    long long act256[3];
    for (int i = 0; i < 3; i++)
        act256[i] = json_int(out, "activation_bytes", i);
    CHECK_MSG(act256[1] == 16 * 4 * 256 && act256[2] == 3 * 4 * 256, "%lld %lld", act256[1], act256[2]);

    /* --batch 512: every layer's activation bytes double; the plan's total grows */
    CHECK(run("summary --config net.ini --json --batch 512") == 0 && json_valid(out));
    CHECK(json_int(out, "batch", 0) == 512);
    for (int i = 0; i < 3; i++)
        CHECK_MSG(json_int(out, "activation_bytes", i) == 2 * act256[i], "layer %d: %lld at 512, %lld at 256", i,
                  json_int(out, "activation_bytes", i), act256[i]);
    CHECK(json_int(out, "total_bytes", 0) > text_total);
    CHECK_MSG(run("summary --config net.ini --batch 512") == 0 && ct_contains(out, "act at 512") &&
              ct_contains(out, "32.0 KiB") && ct_contains(out, "memory at batch 512"), "got: %s", out);

    /* bad batches are refused before anything runs; --json belongs to summary alone */
    CHECK_MSG(run("summary --config net.ini --batch x") == 2 && ct_contains(out, "--batch needs a whole number") &&
              ct_contains(out, "'x'"), "got: %s", out);
    CHECK(run("summary --config net.ini --batch 0") == 2 && ct_contains(out, "--batch"));
    CHECK(run("summary --config net.ini --batch -8") == 2);
    CHECK_MSG(run("eval --config net.ini --json") == 2 && ct_contains(out, "--json does not apply to 'eval'"),
              "got: %s", out);

    /* the data-parallel estimate: in the text and the JSON; --bus-gbps changes it, and is checked */
    CHECK_MSG(run("summary --config net.ini") == 0 && ct_contains(out, "data parallelism (predicted)") &&
                  ct_contains(out, "450 GB/s bus bandwidth") && ct_contains(out, "  4 GPUs: 64 each"),
              "got: %s", out);
    CHECK(run("summary --config net.ini --json --bus-gbps 20") == 0 && json_valid(out) &&
          ct_contains(out, "\"scaling\": {") && ct_contains(out, "\"bus_gbps\": 20.0"));
    CHECK_MSG(run("summary --config net.ini --bus-gbps fast") == 2 && ct_contains(out, "--bus-gbps needs a positive"),
              "got: %s", out);
    CHECK(run("summary --config net.ini --bus-gbps 0") == 2);
    CHECK_MSG(run("eval --config net.ini --bus-gbps 20") == 2 && ct_contains(out, "--bus-gbps does not apply"),
              "got: %s", out);
}

/* `--set data.KEY=CT_FMNIST_DIR/FILE` for the model zoo's four data keys, into buf */
static const char *data_sets(char *buf, size_t n)
{
    const char *d = ct_fmnist_dir();
    snprintf(buf, n,
             "--devices cpu --set data.train=%s/train-images-idx3-ubyte.gz "
             "--set data.train_labels=%s/train-labels-idx1-ubyte.gz --set data.test=%s/t10k-images-idx3-ubyte.gz "
             "--set data.test_labels=%s/t10k-labels-idx1-ubyte.gz",
             d, d, d, d);
    return buf;
}

static void test_models(void)
{
    char sets[2048], args[4096];
    data_sets(sets, sizeof sets);
    /* tiny_layers.ini at its batch of 256: the warning, in the text and in the JSON's warnings */
    snprintf(args, sizeof args, "summary --config %s/models/tiny_layers.ini %s", CT_SOURCE_DIR, sets);
    CHECK_MSG(run(args) == 0 && ct_contains(out, "warning: 19 of 19 layers are launch-bound at batch 256") &&
              ct_contains(out, "launch cost on an H100-class GPU"), "got: %s", out);
    snprintf(args, sizeof args, "summary --config %s/models/tiny_layers.ini %s --json", CT_SOURCE_DIR, sets);
    CHECK(run(args) == 0);
    CHECK_MSG(json_valid(out), "not JSON: %s", out);
    CHECK_MSG(ct_contains(out, "\"warnings\": [\"19 of 19 layers are launch-bound at batch 256: the step is about "),
              "got: %s", out);
    CHECK(ct_contains(out, "\"launch_bound\": true") && ct_contains(out, "\"warn\": true"));

    /* fmnist_mlp_wide.ini at 4096: no warning */
    snprintf(args, sizeof args, "summary --config %s/models/fmnist_mlp_wide.ini %s --batch 4096", CT_SOURCE_DIR, sets);
    CHECK_MSG(run(args) == 0 && ct_contains(out, "0 of 5 layers launch-bound") && !ct_contains(out, "warning:"),
              "got: %s", out);
    snprintf(args, sizeof args, "summary --config %s/models/fmnist_mlp_wide.ini %s --batch 4096 --json", CT_SOURCE_DIR,
             sets);
    CHECK(run(args) == 0 && json_valid(out) && ct_contains(out, "\"warnings\": []") &&
          !ct_contains(out, "\"launch_bound\": true"));
}

/* What summary --json says the run takes is what the device's allocator holds once the same
 * config is prepared (fp32 and fp16): the acceptance's "summary equals what the backend
 * allocates". */
static void test_json_equals_allocation(void)
{
    static const char *const precisions[] = {"fp32", "fp16"};
    for (int p = 0; p < 2; p++) {
        char args[256];
        write_file("net.ini", NET);
        snprintf(args, sizeof args, "summary --config net.ini --json --precision %s", precisions[p]);
        CHECK(run(args) == 0 && json_valid(out));
        long long planned = json_int(out, "total_bytes", 0);
        char path[128];
        snprintf(path, sizeof path, "%s/net.ini", dir);
        ct_net *net = NULL;
        ct_status st = ct_open_file(path, &net);
        if (st == CT_OK)
            st = ct_set(net, "train.precision", precisions[p]);
        if (st == CT_OK)
            st = ct_prepare(net);
        ct_memory_usage u = {0};
        if (st == CT_OK)
            st = ct_memory_usage_get(net, &u);
        CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
        CHECK_MSG(planned > 0 && u.in_use == planned, "%s: summary --json %lld bytes, allocated %lld",
                  precisions[p], planned, u.in_use);
        ct_close(net);
    }
}

int main(void)
{
    if (!make_scratch("ct_cli_summary"))
        return 1;
    test_json_check();
    test_synthetic();
    test_json_equals_allocation();
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte.gz", ct_fmnist_dir());
    if (access(probe, R_OK) != 0)
        printf("skipped the model zoo's checks: %s is missing (set CT_FMNIST_DIR)\n", probe);
    else
        test_models();
    remove_scratch();
    return ct_test_done();
}
