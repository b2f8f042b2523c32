/* A checkpoint folder belongs to one run. Before the data loads, train claims its --checkpoint
 * folder: made if missing (its parent must exist), locked (DIR/cutrain.lock, held with flock for
 * as long as the run writes there and naming the holder), and refused when it already holds
 * checkpoints that the run does not resume from (they are another run's: saving among them would
 * overwrite some, keep the later ones, and compare best.ckpt with another run's accuracy).
 * Taking the lock is also the test that the folder can be written. The kernel drops a lock with
 * its process, so a run that was killed leaves a file that blocks nobody. */
#define _DEFAULT_SOURCE /* flock, realpath */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define LOCK_NAME "cutrain.lock"

struct cli_claimed_folder {
    char lock_path[4096];
    char dir[4096];
    int fd;
    int made;      /* the folder was made by this run: removed again if nothing was saved */
};

/* What the lock file says of its holder, into buf. */
static void read_holder(int fd, char *buf, size_t n)
{
    ssize_t got = pread(fd, buf, n - 1, 0);
    buf[got > 0 ? got : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    if (!buf[0])
        snprintf(buf, n, "a process that has not yet said which");
}

/* Opens and locks DIR/cutrain.lock. A file that another run unlinked between our open and our
 * lock is not the lock any more: opened again. */
static int take_lock(cli_claimed_folder *c)
{
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(c->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "cutrain: cannot write in checkpoint folder %s: %s (choose a folder this user can "
                    "write)\n", c->dir, strerror(errno));
            return CLI_FAILURE;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            char holder[256];
            int why = errno;
            read_holder(fd, holder, sizeof holder);
            close(fd);
            if (why == EWOULDBLOCK) {
                fprintf(stderr, "cutrain: checkpoint folder %s is in use by another run (%s, holding %s): two runs "
                        "in one folder would delete each other's checkpoints; wait for it to end, or choose another "
                        "--checkpoint folder\n", c->dir, holder, c->lock_path);
                return CLI_USAGE;
            }
            fprintf(stderr, "cutrain: cannot lock %s: %s\n", c->lock_path, strerror(why));
            return CLI_FAILURE;
        }
        struct stat held, named;
        if (fstat(fd, &held) == 0 && stat(c->lock_path, &named) == 0 && held.st_ino == named.st_ino &&
            held.st_dev == named.st_dev) {
            char host[256] = "?", line[512];
            gethostname(host, sizeof host - 1);
            time_t now = time(NULL);
            struct tm tm;
            char when[32] = "";
            if (gmtime_r(&now, &tm))
                strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
            int len = snprintf(line, sizeof line, "pid %ld on %s since %s\n", (long)getpid(), host, when);
            if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len) {
                fprintf(stderr, "cutrain: cannot write in checkpoint folder %s: %s\n", c->dir, strerror(errno));
                close(fd);
                return CLI_FAILURE;
            }
            c->fd = fd;
            return CLI_OK;
        }
        close(fd);
    }
    fprintf(stderr, "cutrain: cannot lock %s: it keeps being replaced\n", c->lock_path);
    return CLI_FAILURE;
}

/* 1 when path (a checkpoint file) lies in folder dir. */
static int lies_in(const char *path, const char *dir)
{
    char file_real[PATH_MAX], dir_real[PATH_MAX];
    if (!realpath(path, file_real) || !realpath(dir, dir_real))
        return 0;
    char *slash = strrchr(file_real, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    return strcmp(file_real[0] ? file_real : "/", dir_real) == 0;
}

/* Refuses a folder that holds checkpoints the run does not resume from. */
static int check_owner(const cli_claimed_folder *c, const char *resume_path)
{
    char newest[256] = "", best[4096 + 16];
    int count = cli_checkpoint_count(c->dir, newest, sizeof newest);
    snprintf(best, sizeof best, "%s/best.ckpt", c->dir);
    int has_best = access(best, F_OK) == 0;
    if (count <= 0 && !has_best)
        return CLI_OK;
    if (resume_path && lies_in(resume_path, c->dir))
        return CLI_OK;
    char held[512];
    if (count > 0)
        snprintf(held, sizeof held, "%d step checkpoint%s up to %s%s", count, count == 1 ? "" : "s", newest,
                 has_best ? " and best.ckpt" : "");
    else
        snprintf(held, sizeof held, "best.ckpt");
    if (resume_path)
        fprintf(stderr, "cutrain: checkpoint folder %s already holds another run's checkpoints (%s), and this run "
                "resumes from %s: continue the folder's own run with --resume %s, or choose another --checkpoint "
                "folder\n", c->dir, held, resume_path, c->dir);
    else
        fprintf(stderr, "cutrain: checkpoint folder %s already holds the checkpoints of an earlier run (%s): "
                "continue that run with --resume %s, or choose another --checkpoint folder\n", c->dir, held, c->dir);
    return CLI_USAGE;
}

int cli_checkpoint_claim(const char *dir, const char *resume_path, cli_claimed_folder **out)
{
    *out = NULL;
    cli_claimed_folder *c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "cutrain: out of memory\n");
        return CLI_FAILURE;
    }
    c->fd = -1;
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    snprintf(c->lock_path, sizeof c->lock_path, "%s/" LOCK_NAME, dir);
    struct stat sb;
    if (mkdir(dir, 0777) == 0) {
        c->made = 1;
    } else if (errno != EEXIST) {
        fprintf(stderr, "cutrain: cannot create checkpoint folder %s: %s\n", dir, strerror(errno));
        free(c);
        return CLI_FAILURE;
    } else if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "cutrain: --checkpoint %s is not a folder\n", dir);
        free(c);
        return CLI_FAILURE;
    }
    int rc = take_lock(c);
    if (rc == CLI_OK)
        rc = check_owner(c, resume_path);
    if (rc != CLI_OK) {
        cli_checkpoint_release(c);
        return rc;
    }
    *out = c;
    return CLI_OK;
}

void cli_checkpoint_release(cli_claimed_folder *c)
{
    if (!c)
        return;
    if (c->fd >= 0) {
        /* unlinked while still held, so that no other run can lock this file after we let go */
        unlink(c->lock_path);
        close(c->fd);
    }
    if (c->made)
        rmdir(c->dir); /* only when empty: nothing was saved */
    free(c);
}
