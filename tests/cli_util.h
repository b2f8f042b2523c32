/* Running the cutrain command from a test: a scratch folder, the command's output and exit code.
 * CT_CLI (set by CTest) names the binary. Include after defining _DEFAULT_SOURCE. */
#ifndef CT_CLI_UTIL_H
#define CT_CLI_UTIL_H

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test_util.h"

static char dir[64];         /* the scratch folder commands run in */
static char out[1 << 16];    /* stdout and stderr of the last command */

static const char *cli(void)
{
    const char *c = getenv("CT_CLI");
    return c ? c : "cutrain";
}

/* Runs a shell command in the scratch folder, output into `out`; returns the exit code. */
static int sh(const char *command)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd %s && %s 2>&1", dir, command);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Runs `cutrain ARGS`. */
static int run(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s", cli(), args);
    return sh(cmd);
}

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* The file DIR/name into buf (cap bytes, NUL-terminated); its size, -1 when it cannot be read. */
static inline long read_scratch(const char *name, char *buf, size_t cap)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* How many times needle occurs in hay, without overlaps. */
static inline int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Creates the scratch folder; 0 on failure. */
static int make_scratch(const char *name)
{
    snprintf(dir, sizeof dir, "/tmp/%s_XXXXXX", name);
    return mkdtemp(dir) != NULL;
}

static void remove_scratch(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

#endif
