/* The command's checkpoints: --checkpoint DIR keeps the newest `keep` and best.ckpt, Ctrl-C and
 * SIGTERM save and exit 130 / 143, --resume DIR continues, eval and predict load --weights, and
 * wrong checkpoints are refused with the layer named. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>

#include "tests/cli_util.h"

static int count_files(const char *sub, const char *prefix)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

/* How many of the process's threads block SIGINT and SIGTERM (SigBlk in /proc/PID/task/T/status);
 * *threads: how many there are. A stop signal must never run a handler on a computing thread:
 * oneDNN's GEMM kernels (before 3.11.2) point rsp into the heap, where the frame would land. */
static int threads_blocking_stops(pid_t pid, int *threads)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    int blocking = 0;
    *threads = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char status[400], line[256];
        snprintf(status, sizeof status, "%s/%s/status", path, e->d_name);
        FILE *f = fopen(status, "r");
        if (!f)
            continue;   /* a thread that ended meanwhile */
        while (fgets(line, sizeof line, f)) {
            unsigned long long mask;
            if (sscanf(line, "SigBlk: %llx", &mask) == 1) {
                (*threads)++;
                unsigned long long stops = (1ull << (SIGINT - 1)) | (1ull << (SIGTERM - 1));
                blocking += (mask & stops) == stops;
            }
        }
        fclose(f);
    }
    if (d)
        closedir(d);
    return blocking;
}

/* Starts training, sends `sig` after `ms` milliseconds; returns the exit code. With `threads`,
 * first counts the threads and those that block the stop signals into threads[0] and [1]. */
static int interrupt_training(const char *config, const char *ckdir, int sig, int ms, int threads[2])
{
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0)
            _exit(99);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        execl(cli(), "cutrain", "--config", config, "--checkpoint", ckdir, (char *)NULL);
        _exit(98);
    }
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
    if (threads)
        threads[1] = threads_blocking_stops(pid, &threads[0]);
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static const char *SMALL =
    "[data]\nformat = synthetic\nshape = 6, 6, 1\nclasses = 3\ncount = 300\ntest_count = 90\n"
    "[train]\nepochs = 3\nbatch = 30\nlearning_rate = 0.01\nkeep = 2\ndevices = cpu\n"
    "[flat]\ntype = flatten\n[hidden]\ntype = dense\nunits = 16\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 3\n";

/* Slow enough (several seconds) to be interrupted. */
static const char *LONG =
    "[data]\nformat = synthetic\nshape = 28, 28, 1\nclasses = 10\ncount = 60000\ntest_count = 100\n"
    "[train]\nepochs = 50\nbatch = 64\ndevices = cpu\nthreads = 1\n"
    "[c]\ntype = conv2d\nfilters = 32\nsize = 3\nactivation = relu\n"
    "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 10\n";

int main(void)
{
    if (!make_scratch("ct_clickpt"))
        return 1;
    write_file("small.ini", SMALL);
    write_file("long.ini", LONG);

    CHECK_MSG(run("--config small.ini --checkpoint ck") == 0, "got: %s", out);
    CHECK(count_files("ck", "ckpt-") == 2); /* keep = 2 of 3 */
    CHECK(count_files("ck", "best.ckpt") == 1);
    CHECK(count_files("ck", "ckpt-000000000030.ckpt") == 1); /* epoch 3 = step 30 */

    CHECK_MSG(run("eval --config small.ini --weights ck/best.ckpt") == 0 && ct_contains(out, "weights ck/best.ckpt"),
              "got: %s", out);
    /* resuming a finished run trains nothing more and succeeds */
    CHECK_MSG(run("--config small.ini --resume ck") == 0 && ct_contains(out, "resumed from ck/ckpt-000000000030.ckpt"),
              "got: %s", out);

    /* predict on an IDX file of 5 images 6x6 */
    unsigned char idx[16 + 5 * 36] = {0, 0, 8, 3, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 6};
    for (int i = 16; i < (int)sizeof idx; i++)
        idx[i] = (unsigned char)(i * 13);
    char path[256];
    snprintf(path, sizeof path, "%s/five.idx", dir);
    FILE *f = fopen(path, "wb");
    fwrite(idx, 1, sizeof idx, f);
    fclose(f);
    CHECK_MSG(run("predict --config small.ini --weights ck/best.ckpt --images five.idx --out p.csv") == 0, "got: %s", out);
    CHECK(sh("cat p.csv") == 0 && ct_contains(out, "index,class,probability\n0,") && ct_contains(out, "\n4,"));
    CHECK(run("predict --config small.ini --weights ck/best.ckpt") == 2 && ct_contains(out, "--images"));

    /* refusals */
    CHECK(run("eval --config small.ini --checkpoint ck") == 2 && ct_contains(out, "does not apply"));
    CHECK_MSG(run("eval --config small.ini --weights ck/best.ckpt --set hidden.units=20") == 1 &&
              ct_contains(out, "[hidden]") && ct_contains(out, "best.ckpt"), "got: %s", out);
    CHECK(sh("mkdir -p empty") == 0);
    CHECK_MSG(run("--config small.ini --resume empty") == 1 && ct_contains(out, "no ckpt-"), "got: %s", out);

    /* a diverging run stops at the step that went non-finite, names it and the first layer whose
     * output is not finite, and the checkpoints saved before it stay loadable */
    CHECK_MSG(run("--config small.ini --checkpoint div --set train.optimizer=sgd --set train.learning_rate=1e30 "
                  "--set train.checkpoint_every=1") == 1 &&
              ct_contains(out, "not finite at step") && ct_contains(out, "first layer with a non-finite output is ["),
              "got: %s", out);
    CHECK(count_files("div", "ckpt-") >= 1);
    CHECK_MSG(run("eval --config small.ini --weights div/best.ckpt") == 1 || count_files("div", "best.ckpt") == 0,
              "no best.ckpt is expected before the first epoch ends: %s", out);
    CHECK_MSG(sh("f=$(ls div/ckpt-*.ckpt | tail -n 1); $CT_CLI eval --config small.ini --weights $f") == 0,
              "the last checkpoint before the divergence does not load: %s", out);

    /* Ctrl-C and SIGTERM: finish the step, save, exit 128 + signal; then resume */
    int rc = interrupt_training("long.ini", "int", SIGINT, 1500, NULL);
    CHECK_MSG(rc == 130, "SIGINT exit code %d", rc);
    CHECK(count_files("int", "ckpt-") == 1);
    int threads[2] = {0, 0};
    rc = interrupt_training("long.ini", "term", SIGTERM, 1500, threads);
    /* all but the one in sigwait (the kernel unblocks what a thread waits for while it waits); the
     * main thread and that one at least */
    CHECK_MSG(threads[0] >= 2 && threads[1] == threads[0] - 1, "%d of %d threads block SIGINT and SIGTERM",
              threads[1], threads[0]);
    CHECK_MSG(rc == 143, "SIGTERM exit code %d", rc);
    CHECK(count_files("term", "ckpt-") == 1);
    CHECK_MSG(run("--config long.ini --resume int --set train.epochs=1") == 0 &&
              ct_contains(out, "resumed from int/ckpt-") && ct_contains(out, "epoch 1/1"), "got: %s", out);

    remove_scratch();
    return ct_test_done();
}
