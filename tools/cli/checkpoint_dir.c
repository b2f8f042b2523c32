/* Checkpoint folders for the command: DIR/ckpt-<step, 12 digits>.ckpt so that names sort by step,
 * the newest `keep` of them kept, and DIR/best.ckpt for the best test accuracy so far. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define CKPT_PREFIX "ckpt-"
#define CKPT_SUFFIX ".ckpt"

static int is_step_checkpoint(const char *name)
{
    size_t n = strlen(name), p = strlen(CKPT_PREFIX), s = strlen(CKPT_SUFFIX);
    return n > p + s && strncmp(name, CKPT_PREFIX, p) == 0 && strcmp(name + n - s, CKPT_SUFFIX) == 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The folder's step checkpoints, sorted oldest first; *count = -1 when the folder cannot be read. */
static char **list_checkpoints(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    *count = -1;
    if (!d)
        return NULL;
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_step_checkpoint(e->d_name))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(names, (size_t)cap * sizeof *grown);
            if (!grown)
                break;
            names = grown;
        }
        if (!(names[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, (size_t)n, sizeof *names, compare_names);
    *count = n;
    return names;
}

static void free_names(char **names, int count)
{
    for (int i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

/* Keeps the newest `keep` step checkpoints. */
static void prune(const char *dir, int keep)
{
    int count;
    char **names = list_checkpoints(dir, &count);
    for (int i = 0; i < count - keep; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (unlink(path) != 0)
            fprintf(stderr, "cutrain: warning: could not remove old checkpoint %s: %s\n", path, strerror(errno));
    }
    free_names(names, count < 0 ? 0 : count);
}

int cli_checkpoint_save(ct_net *net, const char *dir, int keep, double test_accuracy, double *best)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "cutrain: cannot create checkpoint folder %s: %s\n", dir, strerror(errno));
        return CLI_FAILURE;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/" CKPT_PREFIX "%012ld" CKPT_SUFFIX, dir, ct_steps_done(net));
    ct_status st = ct_save(net, path);
    if (st == CT_OK && test_accuracy > *best) {
        char best_path[4096];
        snprintf(best_path, sizeof best_path, "%s/best" CKPT_SUFFIX, dir);
        st = ct_save(net, best_path);
        if (st == CT_OK)
            *best = test_accuracy;
    }
    if (st != CT_OK) {
        fprintf(stderr, "cutrain: %s\n", ct_errmsg(net));
        return cli_exit_code(st);
    }
    prune(dir, keep);
    return CLI_OK;
}

int cli_checkpoint_count(const char *dir, char *newest, size_t n)
{
    int count;
    char **names = list_checkpoints(dir, &count);
    if (count > 0 && n > 0)
        snprintf(newest, n, "%s", names[count - 1]);
    free_names(names, count < 0 ? 0 : count);
    return count;
}

double cli_checkpoint_best(ct_net *net, const char *dir)
{
    char path[4096];
    double accuracy = -1.0;
    snprintf(path, sizeof path, "%s/best" CKPT_SUFFIX, dir);
    if (access(path, F_OK) == 0 && ct_checkpoint_info(net, path, NULL, NULL, &accuracy) != CT_OK)
        fprintf(stderr, "cutrain: warning: %s will be replaced: %s\n", path, ct_errmsg(net));
    return accuracy;
}

int cli_checkpoint_resolve(const char *file_or_dir, char *path, size_t n)
{
    struct stat sb;
    if (stat(file_or_dir, &sb) != 0) {
        fprintf(stderr, "cutrain: cannot resume from %s: %s\n", file_or_dir, strerror(errno));
        return CLI_FAILURE;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(path, n, "%s", file_or_dir);
        return CLI_OK;
    }
    int count;
    char **names = list_checkpoints(file_or_dir, &count);
    if (count <= 0) {
        fprintf(stderr, "cutrain: %s holds no " CKPT_PREFIX "*" CKPT_SUFFIX " checkpoint to resume from\n",
                file_or_dir);
        free_names(names, count < 0 ? 0 : count);
        return CLI_FAILURE;
    }
    snprintf(path, n, "%s/%s", file_or_dir, names[count - 1]);
    free_names(names, count);
    return CLI_OK;
}

int cli_load_weights(ct_net *net, const char *weights)
{
    ct_status st = ct_load(net, weights);
    if (st != CT_OK) {
        fprintf(stderr, "cutrain: %s\n", ct_errmsg(net));
        return cli_exit_code(st);
    }
    return CLI_OK;
}
