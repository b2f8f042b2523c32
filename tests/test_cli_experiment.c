/* cutrain experiment as a user runs it, on the CPU with a few steps of a small network on a
 * Fashion-MNIST subset: the four files with the rungs that ran and the skipped ones named and
 * why; the chart drawn by the Python CTest names (CUTRAIN_PYTHON), or the how-to when that Python
 * has no matplotlib (a failure with CT_REQUIRE_PYTHON=ON) or does not exist; bad values refused
 * before anything trains, with no file written. */
#define _DEFAULT_SOURCE
#include <sys/stat.h>

#include "tests/cli_util.h"
#include "tests/json_check.h"

static char text[1 << 16];

static int exists(const char *name)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

/* Field `index` (0-based) of the CSV line starting at `line`, quotes removed, into buf. */
static void csv_field(const char *line, int index, char *buf, size_t n)
{
    size_t k = 0;
    int field = 0, quoted = 0;
    for (const char *p = line; *p && *p != '\n'; p++) {
        if (*p == '"') {
            if (quoted && p[1] == '"') {
                p++;
            } else {
                quoted = !quoted;
                continue;
            }
        } else if (*p == ',' && !quoted) {
            field++;
            continue;
        }
        if (field == index && k + 1 < n)
            buf[k++] = *p;
    }
    buf[k] = '\0';
}

/* The CSV line of rung k, NULL when absent. */
static const char *csv_row(const char *csv, int k)
{
    char prefix[8];
    snprintf(prefix, sizeof prefix, "\n%d,", k);
    const char *p = strstr(csv, prefix);
    return p ? p + 1 : NULL;
}

static const char *python(void)
{
    const char *p = getenv("CUTRAIN_PYTHON");
    return p && *p ? p : "python3";
}

static void write_net(void)
{
    char ini[2048];
    const char *d = ct_fmnist_dir();
    snprintf(ini, sizeof ini,
             "[data]\nformat = idx\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
             "test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n"
             "normalize = 0.2860, 0.3530\naugment = flip\ntrain_limit = 640\n"
             "[train]\nepochs = 3\nbatch = 64\nbatch_candidates = 32, 64\nbatch_search_seconds = 2\n"
             "min_steps_per_epoch = 10\n"
             "[flat]\ntype = flatten\n[hidden]\ntype = dense\nunits = 32\nactivation = relu\n"
             "[out]\ntype = dense\nunits = 10\n",
             d, d, d, d);
    write_file("net.ini", ini);
}

static void test_bad_values(void)
{
    struct {
        const char *args, *says;
        int code;
    } bad[] = {
        {"--out res --rungs 7", "unknown rung '7'", 2},
        {"--out res --rungs 0,x", "unknown rung 'x'", 2},
        {"--out res --rungs 3-1", "upwards", 2},
        {"--out res --rungs 0,", "','", 2},
        {"--out res --steps 0", "--steps needs a whole number from 1 to", 2},
        {"--out res --seconds 0", "--seconds needs a positive number", 2},
        {"--out res --steps 3 --seconds 2", "not both", 2},
        {"--out res --batch 64", "--batch (the rungs choose the batch) does not apply", 2},
        {"--out res --set train.bogus=1", "bogus", 2},
        /* a folder inside a file cannot be made, whoever runs the test */
        {"--out afile/res --steps 2", "--out afile/res: cannot create the folder", 1},
    };
    write_file("afile", "not a folder\n");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "experiment --config net.ini %s", bad[i].args);
        int rc = run(args);
        CHECK_MSG(rc == bad[i].code && ct_contains(out, bad[i].says), "%s: exit %d, got: %s", bad[i].args, rc, out);
        /* refused before any training: nothing ran, nothing was written */
        CHECK_MSG(!ct_contains(out, "rung 0") && !exists("res") && !exists("afile/res"), "%s: got: %s", bad[i].args,
                  out);
    }
    /* a folder that exists but cannot be written (not for root, whom permissions do not stop) */
    if (geteuid() != 0) {
        CHECK(sh("mkdir ro && chmod 555 ro") == 0);
        int rc = run("experiment --config net.ini --out ro --steps 2");
        CHECK_MSG(rc == 1 && ct_contains(out, "cannot write there") && !exists("ro/experiment.csv"), "exit %d: %s",
                  rc, out);
    }
}

static void test_ladder(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s -c 'import matplotlib' >/dev/null 2>&1", python());
    int has_matplotlib = sh(cmd) == 0;
    int rc = run("experiment --config net.ini --out res --steps 3");
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    CHECK_MSG(ct_contains(out, "rung 0 naive") && ct_contains(out, "rung 3 + fp16") &&
              ct_contains(out, "rung 4 + CUDA graph   skipped: CUDA graphs need a GPU"), "got: %s", out);

    /* CSV: a header and the seven rungs, 0..3 ran with their images/s, 4..6 skipped with why */
    CHECK(read_scratch("res/experiment.csv", text, sizeof text) > 0);
    CHECK_MSG(count_of(text, "\n") == 8 && strncmp(text, "rung,name,adds,status,reason,", 29) == 0, "csv: %s", text);
    static const char *const want_precision[] = {"fp32", "fp32", "fp32", "fp16"};
    for (int k = 0; k < 7; k++) {
        const char *row = csv_row(text, k);
        char status[32] = "", reason[320] = "", batch[32] = "", precision[16] = "", ips[32] = "", steps[16] = "";
        CHECK_MSG(row != NULL, "no row for rung %d: %s", k, text);
        if (!row)
            continue;
        csv_field(row, 3, status, sizeof status);
        csv_field(row, 4, reason, sizeof reason);
        csv_field(row, 6, batch, sizeof batch);
        csv_field(row, 8, precision, sizeof precision);
        csv_field(row, 11, steps, sizeof steps);
        csv_field(row, 13, ips, sizeof ips);
        if (k <= 3) {
            CHECK_MSG(strcmp(status, "ran") == 0 && !reason[0] && atof(ips) > 0 && atoi(steps) == 3 &&
                      strcmp(precision, want_precision[k]) == 0, "rung %d: %s", k, row);
            /* the naive rungs train at 32; batch = auto picks among the candidates */
            CHECK_MSG(k < 2 ? atoi(batch) == 32 : (atoi(batch) == 32 || atoi(batch) == 64), "rung %d: %s", k, row);
        } else {
            CHECK_MSG(strcmp(status, "skipped") == 0 && reason[0] && !ips[0], "rung %d: %s", k, row);
        }
    }

    /* JSON: valid, the same rungs, figures unknown on the CPU as null */
    CHECK(read_scratch("res/experiment.json", text, sizeof text) > 0);
    CHECK_MSG(json_valid(text), "not JSON: %s", text);
    CHECK_MSG(count_of(text, "\"status\": \"ran\"") == 4 && count_of(text, "\"status\": \"skipped\"") == 3 &&
              count_of(text, "\"gpu_util\": null") == 7 && ct_contains(text, "\"steps_per_rung\": 3") &&
              ct_contains(text, "\"reason\": \"mirroring needs 2 or more GPUs"), "json: %s", text);

    /* Markdown: the table with a row per rung, the speed-ups, and the rungs not run */
    CHECK(read_scratch("res/experiment.md", text, sizeof text) > 0);
    CHECK_MSG(ct_contains(text, "| rung | adds | batch | precision | images/s | x prev | x 0 |") &&
              ct_contains(text, "| 0 naive | pipeline = sync") && ct_contains(text, "| 3 + fp16 | precision = fp16") &&
              ct_contains(text, " | 1.00x | ") && ct_contains(text, "| 6 + all GPUs | devices = all (mirrored) | | | skipped") &&
              ct_contains(text, "- rung 5 (+ GPU augment): skipped: "), "md: %s", text);

    /* the chart, or how to make it */
    if (has_matplotlib) {
        long n = read_scratch("res/experiment.png", text, sizeof text);
        CHECK_MSG(n > 1000 && memcmp(text, "\x89PNG\r\n\x1a\n", 8) == 0, "experiment.png: %ld bytes", n);
    } else {
        const char *require = getenv("CT_REQUIRE_PYTHON");
        CHECK_MSG(!(require && (strcmp(require, "ON") == 0 || strcmp(require, "1") == 0)),
                  "%s has no matplotlib and CUTRAIN_REQUIRE_PYTHON_TESTS is ON", python());
        CHECK_MSG(!exists("res/experiment.png") && ct_contains(out, "experiment.png not drawn") &&
                  ct_contains(out, "plot_experiment.py res/experiment.json res/experiment.png"), "got: %s", out);
    }
}

/* No Python at all: the three files, and the exact command that would draw the chart. */
static void test_no_python(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "CUTRAIN_PYTHON=/nonexistent/python3 %s experiment --config net.ini --out nopy --steps 2 "
             "--rungs 0 -q", cli());
    int rc = sh(cmd);
    CHECK_MSG(rc == 0 && ct_contains(out, "could not run '/nonexistent/python3'") &&
              ct_contains(out, "/nonexistent/python3 -m pip install matplotlib") &&
              ct_contains(out, "plot_experiment.py nopy/experiment.json nopy/experiment.png"), "exit %d: %s", rc, out);
    CHECK(exists("nopy/experiment.csv") && exists("nopy/experiment.json") && exists("nopy/experiment.md") &&
          !exists("nopy/experiment.png"));
    CHECK(read_scratch("nopy/experiment.json", text, sizeof text) > 0 && json_valid(text) &&
          count_of(text, "\"rung\": ") == 1);
}

int main(void)
{
    if (!make_scratch("ct_experiment"))
        return 1;
    write_net();
    test_bad_values();
    test_ladder();
    test_no_python();
    remove_scratch();
    return ct_test_done();
}
