/* What a hostile but realistic user tries (issue 25), one class of failure at a time, each refused
 * with a message and an exit code, nothing lost:
 *   - memory over the budget under memory = grow: exit 1 with the figures, before allocating;
 *   - endless files (/dev/zero, an endless pipe) as checkpoint, config and data: refused, or read
 *     within a bound;
 *   - a data file from a pipe (read twice): refused with the reason; a FIFO named like an image;
 *   - an open blocked on a FIFO, interrupted: exit 130 / 143; a second Ctrl-C says so;
 *   - predict --out to a full disk (a small tmpfs, and a file size limit): the old file unchanged,
 *     no temporary left;
 *   - messages that point at the cause (--set values, a folder as config, a stray label, an IDX
 *     header larger than its file, --steps' bound, resuming with nothing left or another
 *     optimizer, a command's --help).
 * `bad` counts the bad inputs tried; the total is printed. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "tests/cli_util.h"

static int bad;   /* bad inputs tried */

static const char *SMALL =
    "[data]\nformat = synthetic\nshape = 6, 6, 1\nclasses = 3\ncount = 300\ntest_count = 90\n"
    "[train]\nepochs = 2\nbatch = 30\nlearning_rate = 0.01\nkeep = 2\ndevices = cpu\n"
    "[flat]\ntype = flatten\n[hidden]\ntype = dense\nunits = 16\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 3\n";

/* Steps long enough (a large batch on one thread) that a second signal lands while one runs. */
static const char *SLOW =
    "[data]\nformat = synthetic\nshape = 28, 28, 1\nclasses = 10\ncount = 20000\ntest_count = 100\n"
    "[train]\nepochs = 50\nbatch = 1024\ndevices = cpu\nthreads = 1\n"
    "[c]\ntype = conv2d\nfilters = 32\nsize = 3\nactivation = relu\n"
    "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 10\n";

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Starts `cutrain` with argv (NULL-terminated) in the scratch folder, stdout and stderr into
 * DIR/child.out; returns the pid. */
static pid_t start(char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) != 0)
            _exit(99);
        int fd = open("child.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(cli(), argv);
        _exit(98);
    }
    return pid;
}

/* The exit code, or 128 + the signal that ended it (as a shell reports it). */
static int wait_code(pid_t pid)
{
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

/* A FIFO config or checkpoint that no one writes: the open blocks until `sig` comes. */
static void blocked_open(const char *what, int sig, int code)
{
    CHECK(sh("rm -f fifo && mkfifo fifo") == 0);
    char *const config_argv[] = {"cutrain", "--config", "fifo", NULL};
    char *const resume_argv[] = {"cutrain", "--config", "small.ini", "--resume", "fifo", NULL};
    pid_t pid = start(strcmp(what, "config") == 0 ? config_argv : resume_argv);
    sleep_ms(700);
    kill(pid, sig);
    int rc = wait_code(pid);
    read_scratch("child.out", out, sizeof out);
    bad++;
    CHECK_MSG(rc == code && ct_contains(out, "waiting to open it") &&
                  ct_contains(out, sig == SIGTERM ? "terminated before training" : "interrupted before training"),
              "%s from a FIFO, signal %d: exit %d (expected %d): %s", what, sig, rc, code, out);
}

/* A second Ctrl-C while a step runs: the process ends at once (by the signal) and says so. Tried
 * up to three times, since the first signal's step may end before the second comes; never passes
 * without seeing it. */
static void second_interrupt(void)
{
    int seen = 0;
    for (int attempt = 0; attempt < 3 && !seen; attempt++) {
        char *const argv[] = {"cutrain", "--config", "slow.ini", NULL};
        pid_t pid = start(argv);
        sleep_ms(1500);
        kill(pid, SIGINT);
        for (int i = 0; i < 100; i++) {   /* until the first signal's line is out */
            read_scratch("child.out", out, sizeof out);
            if (ct_contains(out, "stopping as soon as it is safe"))
                break;
            sleep_ms(10);
        }
        kill(pid, SIGINT);
        int rc = wait_code(pid);
        read_scratch("child.out", out, sizeof out);
        seen = rc == 130 && ct_contains(out, "second signal: ending at once, nothing saved") &&
               !ct_contains(out, "cutrain: interrupted after step");
        if (!seen)
            fprintf(stderr, "second Ctrl-C, attempt %d: exit %d: %s\n", attempt + 1, rc, out);
    }
    bad++;
    CHECK_MSG(seen, "a second Ctrl-C did not end the run at once with its line");
}

/* An IDX file: images (n, 6, 6) from header `n_claimed`, holding n_real images; or labels. */
static void write_idx(const char *name, int labels, unsigned n_claimed, int n_real, const unsigned char *label_values)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    unsigned char head[16] = {0, 0, 8, labels ? 1 : 3,
                              (unsigned char)(n_claimed >> 24), (unsigned char)(n_claimed >> 16),
                              (unsigned char)(n_claimed >> 8), (unsigned char)n_claimed,
                              0, 0, 0, 6, 0, 0, 0, 6};
    fwrite(head, 1, labels ? 8 : 16, f);
    for (int i = 0; i < n_real; i++) {
        if (labels) {
            fputc(label_values[i], f);
        } else {
            for (int p = 0; p < 36; p++)
                fputc((i * 37 + p * 11) & 0xff, f);
        }
    }
    fclose(f);
}

/* predict --out onto a disk that fills (`command` runs it and then prints out/p.csv's content and
 * how many temporary files are left): exit 1, the file already there unchanged, none left. */
static void full_disk(const char *how, const char *command)
{
    bad++;
    sh(command);
    CHECK_MSG(ct_contains(out, "RC=1") && ct_contains(out, "cannot write") &&
                  ct_contains(out, "the file there is unchanged"), "predict --out with %s: %s", how, out);
    CHECK_MSG(ct_contains(out, "OLD=old predictions") && ct_contains(out, "LEFT=0"),
              "predict --out with %s left the file changed or a temporary behind: %s", how, out);
}

int main(void)
{
    if (!make_scratch("ct_hostile"))
        return 1;
    write_file("small.ini", SMALL);
    write_file("slow.ini", SLOW);
    CHECK_MSG(run("--config small.ini --checkpoint ck") == 0, "got: %s", out);

    /* ---- memory over the budget under grow: twice the available memory, refused before any
     * allocation (a ulimit below the plan makes a check that failed to run fail on malloc with
     * another message instead of the kernel's kill) ---- */
    long long avail_kib = 0;
    FILE *mi = fopen("/proc/meminfo", "r");
    char line[256];
    while (mi && fgets(line, sizeof line, mi))
        if (sscanf(line, "MemAvailable: %lld kB", &avail_kib) == 1)
            break;
    if (mi)
        fclose(mi);
    CHECK(avail_kib > 0);
    /* a 784 -> units dense layer under adam: weights, gradients and two moments, 16 bytes a weight */
    long long units = avail_kib * 1024 * 2 / (784 * 16) + 1;
    char config[1024], cmd[2048];
    snprintf(config, sizeof config,
             "[data]\nformat = synthetic\nshape = 28, 28, 1\nclasses = 10\ncount = 64\n"
             "[train]\nepochs = 1\nbatch = 32\ndevices = cpu\nmemory = grow\n"
             "[flat]\ntype = flatten\n[fc1]\ntype = dense\nunits = %lld\n[out]\ntype = dense\nunits = 10\n",
             units);
    write_file("huge.ini", config);
    /* a sanitizer's shadow memory needs more address space than any such limit allows */
#ifdef __SANITIZE_ADDRESS__
    char limit[64] = "";
#else
    char limit[64];
    snprintf(limit, sizeof limit, "ulimit -v %lld; ", avail_kib);
#endif
    snprintf(cmd, sizeof cmd, "%s%s --config huge.ini", limit, cli());
    bad++;
    int rc = sh(cmd);
    CHECK_MSG(rc == 1 && ct_contains(out, "does not fit in memory") && ct_contains(out, "MiB free") &&
                  ct_contains(out, "nothing was allocated"),
              "plan over the budget: exit %d: %s", rc, out);
    bad++;
    snprintf(cmd, sizeof cmd, "%s%s eval --config huge.ini", limit, cli());
    CHECK_MSG((rc = sh(cmd)) == 1 && ct_contains(out, "does not fit in memory"),
              "eval, plan over the budget: exit %d: %s", rc, out);

    /* ---- endless files ---- */
    bad++;
    CHECK_MSG(run("--config small.ini --resume /dev/zero") == 1 &&
                  ct_contains(out, "/dev/zero: a character device, not a cutrain checkpoint"), "got: %s", out);
    bad++;
    CHECK_MSG(run("eval --config small.ini --weights /dev/zero") == 1 &&
                  ct_contains(out, "/dev/zero: a character device, not a cutrain checkpoint"), "got: %s", out);
    bad++;
    CHECK_MSG(run("summary --config /dev/zero") == 1 &&
                  ct_contains(out, "/dev/zero: a character device, not a config file"), "got: %s", out);
    /* an endless pipe stops at the bound the network (or the config's size limit) sets */
    bad++;
    snprintf(cmd, sizeof cmd, "cat /dev/zero | %s eval --config small.ini --weights /dev/stdin", cli());
    CHECK_MSG(sh(cmd) == 1 && ct_contains(out, "bytes: not a cutrain checkpoint of this network"), "got: %s", out);
    bad++;
    snprintf(cmd, sizeof cmd, "cat /dev/zero | %s summary --config /dev/stdin", cli());
    CHECK_MSG(sh(cmd) == 2 && ct_contains(out, "too large for a config file"), "got: %s", out);
    /* a config is read once: from a pipe it works */
    snprintf(cmd, sizeof cmd, "cat small.ini | %s summary --config /dev/stdin", cli());
    CHECK_MSG(sh(cmd) == 0 && ct_contains(out, "hidden           dense"), "a config from a pipe: %s", out);
    write_idx("img.idx", 0, 5, 5, NULL);
    const unsigned char fine_labels[5] = {0, 1, 2, 1, 0};
    write_idx("lab.idx", 1, 5, 5, fine_labels);
    const char *idx_cfg = "[data]\nformat = idx\ntrain = img.idx\ntrain_labels = lab.idx\n"
                          "[train]\nepochs = 1\nbatch = 5\ndevices = cpu\n"
                          "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 3\n";
    write_file("idx.ini", idx_cfg);
    CHECK_MSG(run("--config idx.ini") == 0, "the IDX files themselves: %s", out);
    bad++;
    CHECK_MSG(run("--config idx.ini --set data.train=/dev/zero") == 1 &&
                  ct_contains(out, "/dev/zero: a character device, not an IDX image file"), "got: %s", out);
    bad++;
    CHECK_MSG(run("--config idx.ini --set data.train_labels=/dev/zero") == 1 &&
                  ct_contains(out, "/dev/zero: a character device, not an IDX label file"), "got: %s", out);
    write_file("cifar.ini", "[data]\nformat = cifar10\ntrain = /dev/zero\n"
                            "[train]\nepochs = 1\nbatch = 8\ndevices = cpu\n"
                            "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 10\n");
    bad++;
    CHECK_MSG(run("--config cifar.ini") == 1 && ct_contains(out, "/dev/zero: a device, not a CIFAR-10 file"),
              "got: %s", out);
    /* valid IDX data through a pipe is refused as a pipe, not as a bad magic */
    bad++;
    snprintf(cmd, sizeof cmd, "cat img.idx | %s --config idx.ini --set data.train=/dev/stdin", cli());
    CHECK_MSG(sh(cmd) == 1 && ct_contains(out, "a FIFO or pipe, not an IDX image file: it is read more than once") &&
                  !ct_contains(out, "magic"), "got: %s", out);
    /* a FIFO named like an image never blocks predict */
    bad++;
    snprintf(cmd, sizeof cmd,
             "mkfifo pic.png && timeout 20 %s predict --config small.ini --weights ck/best.ckpt pic.png", cli());
    CHECK_MSG((rc = sh(cmd)) == 1 && ct_contains(out, "pic.png: a FIFO or pipe, not an image file"), "exit %d: %s", rc, out);

    /* ---- an open blocked on a FIFO, interrupted; a second Ctrl-C ---- */
    blocked_open("config", SIGINT, 130);
    blocked_open("config", SIGTERM, 143);
    blocked_open("checkpoint", SIGINT, 130);
    second_interrupt();

    /* ---- predict --out to a full disk ---- */
    unsigned many = 3000;
    write_idx("many.idx", 0, many, (int)many, NULL);
    const char *check_after = "; echo RC=$?; echo OLD=$(cat out/p.csv); echo LEFT=$(ls out | grep -c tmp)";
    int methods = 0;
    /* a 4 KiB tmpfs in a mount namespace of its own (root, or an unprivileged user namespace) */
    if (sh("mkdir -p out && unshare -rm sh -c 'mount -t tmpfs -o size=4k tmpfs out' 2>/dev/null") == 0) {
        snprintf(cmd, sizeof cmd,
                 "unshare -rm sh -c 'mount -t tmpfs -o size=4k tmpfs out && echo old predictions > out/p.csv && "
                 "%s predict --config small.ini --weights ck/best.ckpt --images many.idx --out out/p.csv 2>&1%s'",
                 cli(), check_after);
        full_disk("a full 4 KiB tmpfs", cmd);
        methods++;
        printf("full disk: a 4 KiB tmpfs (unshare -rm) ran\n");
    }
    /* a file size limit: writes past 8 KiB fail with EFBIG (SIGXFSZ ignored, as a shell's trap) */
    CHECK(sh("rm -rf out && mkdir out && echo old predictions > out/p.csv") == 0);
    snprintf(cmd, sizeof cmd,
             "(trap '' XFSZ; ulimit -f 16; %s predict --config small.ini --weights ck/best.ckpt --images many.idx "
             "--out out/p.csv) 2>&1%s",
             cli(), check_after);
    full_disk("ulimit -f", cmd);
    methods++;
    printf("full disk: a file size limit (ulimit -f) ran\n");
    /* without a limit the same command writes the file whole */
    CHECK_MSG(run("predict --config small.ini --weights ck/best.ckpt --images many.idx --out out/p.csv") == 0 &&
                  sh("wc -l < out/p.csv") == 0 && atoi(out) == (int)many + 1,
              "predict --out without a limit: %s", out);
    if (methods == 0) {
        remove_scratch();
        return 77;
    }

    /* ---- messages that point at the cause ---- */
    bad++;
    CHECK_MSG(run("predict --config small.ini --batch max --weights ck/best.ckpt --images img.idx") == 2 &&
                  ct_contains(out, "--set train.batch: [train] batch = max"), "got: %s", out);
    bad++;
    CHECK_MSG(run("--config small.ini --set hidden.units=10000 --set train.memory=limit:1") == 2 &&
                  ct_contains(out, "--set train.memory: [train] memory = limit:1 MiB"), "got: %s", out);
    bad++;
    CHECK_MSG(run("--config /tmp") == 1 && ct_contains(out, "/tmp: a folder, not a config file"), "got: %s", out);
    const unsigned char stray[5] = {0, 1, 2, 255, 1};
    write_idx("stray.idx", 1, 5, 5, stray);
    bad++;
    CHECK_MSG(run("--config idx.ini --set data.train_labels=stray.idx") == 2 &&
                  ct_contains(out, "but the data has 256 classes (from the labels: label 255 at index 3 of ") &&
                  ct_contains(out, "stray.idx, the largest"), "got: %s", out);
    write_idx("claims.idx", 0, 2147483647u, 5, NULL);
    bad++;
    CHECK_MSG(run("--config idx.ini --set data.train=claims.idx --set data.train_limit=5") == 1 &&
                  ct_contains(out, "claims.idx: the header claims 2147483647 images of 6x6x1") &&
                  ct_contains(out, "but the file has 180 bytes"), "got: %s", out);
    write_idx("short_labels.idx", 1, 1000000, 5, fine_labels);
    bad++;
    CHECK_MSG(run("--config idx.ini --set data.train_labels=short_labels.idx") == 1 &&
                  ct_contains(out, "the header claims 1000000 labels"), "got: %s", out);
    bad++;
    CHECK_MSG(run("bench --config small.ini --steps 2000000000") == 2 &&
                  ct_contains(out, "--steps needs a whole number from 1 to 100000000"), "got: %s", out);
    bad++;
    CHECK_MSG(run("--config small.ini --resume ck") == 0 &&
                  ct_contains(out, "is at epoch 2 and [train] epochs = 2: nothing is left to train"), "got: %s", out);
    bad++;
    CHECK_MSG(run("--config small.ini --resume ck --set train.epochs=3 --set train.optimizer=sgd") == 0 &&
                  ct_contains(out, "was trained with optimizer = adam and this config trains with sgd: the "
                                   "checkpoint's optimizer state is dropped") &&
                  ct_contains(out, "epoch 3/3"), "got: %s", out);
    CHECK_MSG(run("predict --help") == 0 && strncmp(out, "usage: cutrain predict", 22) == 0 &&
                  ct_contains(out, "--out CSV") && !ct_contains(out, "--checkpoint") && !ct_contains(out, "experiment"),
              "got: %s", out);
    CHECK_MSG(run("eval --help") == 0 && strncmp(out, "usage: cutrain eval", 19) == 0 && ct_contains(out, "--weights"),
              "got: %s", out);
    CHECK_MSG(run("--help") == 0 && ct_contains(out, "commands:"), "got: %s", out);

    printf("bad inputs tried: %d\n", bad);
    remove_scratch();
    return ct_test_done();
}
