/* The command's --tensorboard: a folder that cannot be written is refused before anything loads
 * or trains, with the folder named and a non-zero exit; misplaced on other commands; a run writes
 * its event file. The values in the files are checked by TensorBoard's reader
 * (tensorboard_check.py). */
#define _DEFAULT_SOURCE
#include <glob.h>

#include "tests/cli_util.h"

static const char *SMALL =
    "[data]\nformat = synthetic\nshape = 6, 6, 1\nclasses = 3\ncount = 300\ntest_count = 90\n"
    "[train]\nepochs = 2\nbatch = 30\nlearning_rate = 0.01\ndevices = cpu\n"
    "[flat]\ntype = flatten\n[hidden]\ntype = dense\nunits = 16\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 3\n";

static int count_event_files(const char *sub)
{
    char pattern[256];
    snprintf(pattern, sizeof pattern, "%s/%s/events.out.tfevents.*", dir, sub);
    glob_t g;
    int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n;
}

int main(void)
{
    if (!make_scratch("ct_clitb"))
        return 1;
    write_file("small.ini", SMALL);
    write_file("afile", "not a folder\n");

    /* under a file: refused before the data loads, the log never opened, nothing trained */
    int rc = run("--config small.ini --log log.jsonl --tensorboard afile/x");
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    CHECK_MSG(ct_contains(out, "TensorBoard folder afile/x"), "got: %s", out);
    CHECK_MSG(!ct_contains(out, "epoch"), "got: %s", out);
    CHECK(sh("test -e log.jsonl") != 0);
    /* a file where the folder should be */
    rc = run("--config small.ini --tensorboard afile");
    CHECK_MSG(rc == 1 && ct_contains(out, "TensorBoard folder afile") && !ct_contains(out, "epoch"), "exit %d: %s",
              rc, out);
    /* no value, and a command that does not train */
    CHECK_MSG(run("--config small.ini --tensorboard") == 2, "got: %s", out);
    CHECK_MSG(run("eval --config small.ini --tensorboard tb") == 2 && ct_contains(out, "--tensorboard does not apply"),
              "got: %s", out);
    CHECK(count_event_files("tb") == 0);

    /* a run: the folders are made, one event file, named where it is */
    CHECK_MSG(run("--config small.ini --tensorboard=runs/one") == 0, "got: %s", out);
    CHECK_MSG(ct_contains(out, "TensorBoard events in runs/one/events.out.tfevents."), "got: %s", out);
    CHECK(count_event_files("runs/one") == 1);
    /* a second run into the same folder adds a file, whatever the second */
    CHECK_MSG(run("--config small.ini --quiet --tensorboard runs/one") == 0, "got: %s", out);
    CHECK(count_event_files("runs/one") == 2);
    remove_scratch();
    return ct_test_done();
}
