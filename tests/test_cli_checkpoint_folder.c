/* A checkpoint folder belongs to one run, and is checked before the data loads: a second run into a
 * folder in use is refused naming the holder (a lock left by a dead process does not block); a
 * fresh run into a folder holding checkpoints is refused, says how to resume, and changes nothing;
 * resuming the folder's own run into it works; a --checkpoint that cannot be a writable folder (a
 * file, a path under a file, a folder without write permission when not root) is refused before
 * anything loads or trains. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "tests/cli_util.h"

static const char *SMALL =
    "[data]\nformat = synthetic\nshape = 6, 6, 1\nclasses = 3\ncount = 300\ntest_count = 90\n"
    "[train]\nepochs = 2\nbatch = 30\nlearning_rate = 0.01\nkeep = 5\ndevices = cpu\n"
    "[flat]\ntype = flatten\n[hidden]\ntype = dense\nunits = 16\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 3\n";

/* Long enough to be running while another run tries its folder. */
static const char *LONG =
    "[data]\nformat = synthetic\nshape = 28, 28, 1\nclasses = 10\ncount = 60000\ntest_count = 100\n"
    "[train]\nepochs = 50\nbatch = 64\ndevices = cpu\nthreads = 1\n"
    "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 10\n";

/* Training data that does not exist: a run that reached the data would fail on it. */
static const char *NO_DATA =
    "[data]\nformat = idx\ntrain = missing-images.gz\ntrain_labels = missing-labels.gz\n"
    "[train]\nepochs = 1\nbatch = 30\ndevices = cpu\n"
    "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 3\n";

static int exists(const char *name)
{
    char path[256];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0;
}

int main(void)
{
    if (!make_scratch("ct_ckfolder"))
        return 1;
    write_file("small.ini", SMALL);
    write_file("long.ini", LONG);
    write_file("nodata.ini", NO_DATA);
    int tried = 0;

    /* a run holds the folder only while it runs */
    CHECK_MSG(run("--config small.ini --checkpoint ck") == 0, "got: %s", out);
    CHECK(exists("ck/ckpt-000000000020.ckpt") && exists("ck/best.ckpt"));
    CHECK_MSG(!exists("ck/cutrain.lock"), "the lock file stays after the run");
    CHECK(sh("ls ck > before.txt && cksum ck/* > sums-before.txt") == 0);

    /* a fresh run into it: refused, how to resume said, nothing changed (best.ckpt stays the first
     * run's), whatever the new run's seed */
    CHECK_MSG(run("--config small.ini --checkpoint ck --set train.seed=7") == 2 &&
              ct_contains(out, "checkpoint folder ck already holds the checkpoints of an earlier run") &&
              ct_contains(out, "ckpt-000000000020.ckpt and best.ckpt") && ct_contains(out, "--resume ck") &&
              ct_contains(out, "choose another --checkpoint folder") && !ct_contains(out, "epoch 1/"),
              "got: %s", out);
    tried++;
    CHECK(sh("cksum ck/* > sums-after.txt && cmp sums-before.txt sums-after.txt && ls ck | cmp - before.txt") == 0);
    /* a folder holding only best.ckpt is another run's too */
    CHECK(sh("mkdir bestonly && cp ck/best.ckpt bestonly/") == 0);
    CHECK_MSG(run("--config small.ini --checkpoint bestonly") == 2 && ct_contains(out, "(best.ckpt)"), "got: %s", out);
    tried++;
    /* resuming another folder's run into it: refused too */
    CHECK(sh("cp -r ck other") == 0);
    CHECK_MSG(run("--config small.ini --checkpoint ck --resume other --set train.epochs=3") == 2 &&
              ct_contains(out, "already holds another run's checkpoints") &&
              ct_contains(out, "this run resumes from other/ckpt-000000000020.ckpt"), "got: %s", out);
    tried++;
    /* resuming the folder's own run (the folder, or a file in it) continues there */
    CHECK_MSG(run("--config small.ini --checkpoint ck --resume ck --set train.epochs=3") == 0 &&
              ct_contains(out, "resumed from ck/ckpt-000000000020.ckpt") && exists("ck/ckpt-000000000030.ckpt"),
              "got: %s", out);
    CHECK_MSG(run("--config small.ini --checkpoint ck --resume ck/ckpt-000000000030.ckpt --set train.epochs=4") == 0 &&
              exists("ck/ckpt-000000000040.ckpt"), "got: %s", out);
    /* a resumed run into a new folder is that folder's run */
    CHECK_MSG(run("--config small.ini --checkpoint fresh --resume ck --set train.epochs=5") == 0 &&
              exists("fresh/ckpt-000000000050.ckpt") && exists("fresh/best.ckpt"), "got: %s", out);

    /* two runs at once: the second is refused naming the first, which trains on undisturbed */
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0)
            _exit(99);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execl(cli(), "cutrain", "--config", "long.ini", "--checkpoint", "busy", (char *)NULL);
        _exit(98);
    }
    char holder[256] = "";
    for (int i = 0; i < 600 && read_scratch("busy/cutrain.lock", holder, sizeof holder) <= 0; i++) {
        struct timespec t = {0, 50000000L};
        nanosleep(&t, NULL);
    }
    char pid_text[64];
    snprintf(pid_text, sizeof pid_text, "pid %ld on ", (long)pid);
    CHECK_MSG(ct_contains(holder, pid_text), "the lock file says '%s', not %s", holder, pid_text);
    CHECK_MSG(run("--config small.ini --checkpoint busy") == 2 &&
              ct_contains(out, "checkpoint folder busy is in use by another run") && ct_contains(out, pid_text),
              "got: %s", out);
    tried++;
    /* resuming into it is no exception */
    CHECK_MSG(run("--config small.ini --checkpoint busy --resume ck") == 2 && ct_contains(out, "in use by another run"),
              "got: %s", out);
    tried++;
    CHECK_MSG(kill(pid, 0) == 0, "the first run ended when the second was refused");
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 143, "the first run exited %d", WEXITSTATUS(status));
    CHECK(!exists("busy/cutrain.lock"));

    /* a lock file left by a process that died holds nothing: the kernel dropped its lock */
    CHECK(sh("mkdir stale && echo 'pid 999999 on elsewhere since 2020-01-01 00:00:00 UTC' > stale/cutrain.lock") == 0);
    CHECK_MSG(run("--config small.ini --checkpoint stale") == 0 && exists("stale/best.ckpt"), "got: %s", out);

    /* a folder that cannot be written: refused before the data loads (nodata.ini's missing data would
     * be the error otherwise), exit 1, nothing made */
    CHECK(sh("echo not a folder > afile") == 0);
    CHECK_MSG(run("--config nodata.ini --checkpoint afile") == 1 && ct_contains(out, "--checkpoint afile is not a folder") &&
              !ct_contains(out, "missing-images"), "got: %s", out);
    tried++;
    CHECK_MSG(run("--config nodata.ini --checkpoint afile/sub") == 1 &&
              ct_contains(out, "cannot create checkpoint folder afile/sub: Not a directory") &&
              !ct_contains(out, "missing-images"), "got: %s", out);
    tried++;
    CHECK_MSG(run("--config nodata.ini --checkpoint nowhere/sub") == 1 &&
              ct_contains(out, "cannot create checkpoint folder nowhere/sub: No such file or directory"), "got: %s", out);
    tried++;
    CHECK(sh("mkdir ro && chmod 555 ro") == 0);
    if (geteuid() != 0) { /* root writes into a read-only folder anyway */
        CHECK_MSG(run("--config nodata.ini --checkpoint ro") == 1 &&
                  ct_contains(out, "cannot write in checkpoint folder ro: Permission denied") &&
                  !ct_contains(out, "missing-images"), "got: %s", out);
        tried++;
    }
    /* the same checks pass for a good folder, and a run refused later (its data) leaves no folder */
    CHECK_MSG(run("--config nodata.ini --checkpoint made") == 1 && ct_contains(out, "missing-images"), "got: %s", out);
    CHECK_MSG(!exists("made"), "a run that saved nothing left its checkpoint folder");
    printf("refused %d bad checkpoint folders\n", tried);

    sh("chmod 755 ro");
    remove_scratch();
    return ct_test_done();
}
