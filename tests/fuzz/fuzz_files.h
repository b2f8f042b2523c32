/* Scratch files for fuzz targets whose code under test reads paths: one private folder per
 * process (mkdtemp keeps parallel fuzzers apart), under $TMPDIR when set (tools/fuzz.sh points it
 * into build-fuzz/: a crash skips atexit, so a folder in /tmp would stay behind). */
#ifndef CT_FUZZ_FILES_H
#define CT_FUZZ_FILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define FUZZ_MAX_FILES 2

static char fuzz_dir[4096];
static char fuzz_paths[FUZZ_MAX_FILES][4200];

/* rmdir/unlink at exit, so repeated fuzz runs do not litter the folder. */
static void fuzz_cleanup(void)
{
    for (int i = 0; i < FUZZ_MAX_FILES; i++)
        if (fuzz_paths[i][0])
            unlink(fuzz_paths[i]);
    rmdir(fuzz_dir);
}

/* On the first call creates the folder and names files `names` (up to FUZZ_MAX_FILES) in it. */
static void fuzz_setup_once(const char *target, const char *const *names, int count)
{
    if (fuzz_dir[0])
        return;
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/cutrain-fuzz-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", target);
    if (!mkdtemp(fuzz_dir)) {
        perror("mkdtemp");
        abort(); /* the fuzzer cannot do anything useful without its folder */
    }
    for (int i = 0; i < count && i < FUZZ_MAX_FILES; i++)
        snprintf(fuzz_paths[i], sizeof fuzz_paths[i], "%s/%s", fuzz_dir, names[i]);
    atexit(fuzz_cleanup);
}

static void fuzz_write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0) {
        perror(path);
        abort();
    }
}

#endif
