/* The cutrain command as a user runs it: exit codes (0 ok, 1 runtime failure, 2 bad usage or
 * config), messages naming file and line, the JSON-lines log, eval, summary and bench. */
#define _DEFAULT_SOURCE
#include "tests/cli_util.h"
#include "tests/json_check.h"

static const char *NET =
    "[data]\nformat = synthetic\nshape = 6, 6, 1\nclasses = 3\ncount = 300\ntest_count = 90\n"
    "[train]\nepochs = 2\nbatch = 30\nlearning_rate = 0.01\n"
    "[flat]\ntype = flatten\n"
    "[hidden]\ntype = dense\nunits = 16\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 3\n";

int main(void)
{
    if (!make_scratch("ct_cli"))
        return 1;
    write_file("net.ini", NET);

    CHECK(run("--version") == 0 && ct_contains(out, "cutrain 0."));
    CHECK(run("--help") == 0 && ct_contains(out, "usage:") && ct_contains(out, "exit status"));
    CHECK(run("") == 2 && ct_contains(out, "--config"));
    CHECK(run("--config net.ini --bogus") == 2 && ct_contains(out, "unknown option '--bogus'"));
    CHECK(run("frobnicate --config net.ini") == 2 && ct_contains(out, "unknown command"));
    CHECK(run("--config net.ini --set") == 2 && ct_contains(out, "needs a value"));
    CHECK(run("--config net.ini --set train.epochs") == 2 && ct_contains(out, "SECTION.KEY=VALUE"));
    CHECK(run("--config missing.ini") == 1 && ct_contains(out, "missing.ini"));

    /* config errors: exit 2, FILE:LINE, suggestion */
    write_file("typo.ini", "[data]\nformat = synthetic\n[train]\nepohcs = 3\n[out]\ntype = dense\nunits = 10\n");
    CHECK_MSG(run("--config typo.ini") == 2 && ct_contains(out, "cutrain: typo.ini:4:") &&
              ct_contains(out, "did you mean 'epochs'"), "got: %s", out);
    CHECK_MSG(run("--config net.ini --set train.optimizer=adma") == 2 && ct_contains(out, "--set train.optimizer") &&
              ct_contains(out, "did you mean 'adam'"), "got: %s", out);
    write_file("shape.ini", "[data]\nformat = synthetic\n[c]\ntype = conv2d\nfilters = 2\nsize = 40\n"
                            "[f]\ntype = flatten\n[out]\ntype = dense\nunits = 10\n");
    CHECK_MSG(run("summary --config shape.ini") == 2 && ct_contains(out, "shape.ini:3:") &&
              ct_contains(out, "does not fit"), "got: %s", out);

    /* a data file that is missing: runtime failure, exit 1, names the file */
    write_file("nodata.ini", "[data]\ntrain = nothere.gz\ntrain_labels = nolabels.gz\n"
                             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 10\n");
    CHECK_MSG(run("--config nodata.ini") == 1 && ct_contains(out, "nothere.gz"), "got: %s", out);

    /* training with a JSON-lines log, one record per epoch */
    CHECK_MSG(run("--config net.ini --set train.devices=cpu --log log.jsonl") == 0 &&
              ct_contains(out, "backend cpu") && ct_contains(out, "epoch 2/2"), "got: %s", out);
    char log_path[256];
    snprintf(log_path, sizeof log_path, "%s/log.jsonl", dir);
    FILE *f = fopen(log_path, "r");
    CHECK(f != NULL);
    int records = 0;
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        records++;
        /* the monitor's figures: null where unknown (no GPU trains here), the CPU's known, and
         * the time split with its verdict */
        CHECK_MSG(json_valid(line) && ct_contains(line, "\"gpu_util\": null") &&
                  ct_contains(line, "\"gpu_mem_mib\": null") && ct_contains(line, "\"power_w\": null") &&
                  ct_contains(line, "\"cpu_util\": ") &&
                  ct_contains(line, "\"cpu_util_machine\": ") &&
                  ct_contains(line, "\"time_split\": {\"input_wait\": 0.") && ct_contains(line, "\"comm\": 0.") &&
                  ct_contains(line, "\"device_busy\": null}") &&
                  (ct_contains(line, "\"time_verdict\": \"compute-bound: ") ||
                   ct_contains(line, "\"time_verdict\": \"copy-bound: ") ||
                   ct_contains(line, "\"time_verdict\": \"input-bound: ")), "got: %s", line);
        CHECK(ct_contains(line, "\"epoch\": ") && ct_contains(line, "\"loss\": ") &&
              ct_contains(line, "\"train_accuracy\": ") && ct_contains(line, "\"test_accuracy\": 0.") &&
              ct_contains(line, "\"images_per_s\": ") && ct_contains(line, "\"seconds\": ") &&
              ct_contains(line, "\"input_wait_share\": 0.") && ct_contains(line, "input-bound\"") &&
              ct_contains(line, "\"input_workers\": "));
    }
    if (f)
        fclose(f);
    CHECK(records == 2);
    CHECK(run("train --config net.ini --quiet") == 0 && !ct_contains(out, "epoch 1/2") &&
          ct_contains(out, "epoch 2/2"));

    CHECK_MSG(run("eval --config net.ini") == 0 && ct_contains(out, "test: loss") &&
              ct_contains(out, "(90 images"), "got: %s", out);
    CHECK_MSG(run("summary --config net.ini") == 0 && ct_contains(out, "hidden") &&
              ct_contains(out, "total") && ct_contains(out, "643"), "got: %s", out); /* 36*16+16 + 16*3+3 */

    /* bench: one JSON line with the timed figures; its flags belong to it alone */
    CHECK_MSG(run("bench --config net.ini --devices cpu --steps 7 --warmup 2 --batch 20") == 0 &&
              ct_contains(out, "\"backend\": \"cpu\"") && ct_contains(out, "\"batch\": 20") &&
              ct_contains(out, "\"steps\": 7") && ct_contains(out, "\"images_per_s\": ") &&
              !ct_contains(out, "\"images_per_s\": 0,"), "got: %s", out);
    CHECK_MSG(ct_contains(out, "\"precision\": \"fp32\"") && ct_contains(out, "\"loss_scale\": null"),
              "got: %s", out);
    /* the precision from --set or --precision, named in the line; fp16 with its loss scaler */
    CHECK_MSG(run("bench --config net.ini --devices cpu --steps 4 --warmup 1 --set train.precision=bf16") == 0 &&
              ct_contains(out, "\"precision\": \"bf16\"") && ct_contains(out, "\"skipped_steps\": null"),
              "got: %s", out);
    CHECK_MSG(run("bench --config net.ini --devices cpu --steps 4 --warmup 1 --precision fp16") == 0 &&
              ct_contains(out, "\"precision\": \"fp16\"") && ct_contains(out, "\"loss_scale\": ") &&
              !ct_contains(out, "\"loss_scale\": null") && ct_contains(out, "\"skipped_steps\": "),
              "got: %s", out);
    CHECK_MSG(run("bench --config net.ini --precision fp8") == 2 && ct_contains(out, "precision"), "got: %s", out);
    CHECK_MSG(run("bench --config net.ini --steps 0") == 2 && ct_contains(out, "--steps needs a whole number"),
              "got: %s", out);
    CHECK_MSG(run("bench --config net.ini --batch many") == 2 && ct_contains(out, "--batch"), "got: %s", out);
    CHECK_MSG(run("eval --config net.ini --steps 3") == 2 && ct_contains(out, "--steps does not apply to 'eval'"),
              "got: %s", out);
    CHECK_MSG(run("bench --input-only --config net.ini --steps 5 --set data.workers=2") == 0 &&
              ct_contains(out, "\"input_only\": true") && ct_contains(out, "\"workers\": 2") &&
              ct_contains(out, "\"batches\": 5") && ct_contains(out, "\"images_per_cpu_s\": ") &&
              ct_contains(out, "\"input_bytes\": 0, \"mb_per_s\": 0.00}"), "got: %s", out);
    CHECK_MSG(run("bench --input-only --config net.ini --steps 5 --set data.pipeline=sync") == 0 &&
              ct_contains(out, "\"pipeline\": \"sync\"") && ct_contains(out, "\"workers\": 0"), "got: %s", out);
    CHECK_MSG(run("train --config net.ini --input-only") == 2 && ct_contains(out, "--input-only does not apply"),
              "got: %s", out);
    CHECK_MSG(run("doctor --config net.ini") == 2 && ct_contains(out, "doctor takes no config"), "got: %s", out);

    remove_scratch();

    return ct_test_done();
}
