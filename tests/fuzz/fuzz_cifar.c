/* libFuzzer target for the CIFAR-10 reader. The reader takes paths, so each input is written to
 * one temporary file (created once per process, rewritten every run) and loaded from there,
 * once whole and once with a small limit. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"

static char dir_path[4096];
static char file_path[4200];

/* rmdir/unlink at exit, so repeated fuzz runs do not litter /tmp. */
static void cleanup(void)
{
    unlink(file_path);
    rmdir(dir_path);
}

/* Creates the private folder on the first call; mkdtemp keeps parallel fuzzers apart. */
static void setup_once(void)
{
    if (file_path[0])
        return;
    /* TMPDIR lets tools/fuzz.sh keep the folder inside build-fuzz/: a crash exits without
     * running atexit handlers, so the folder would otherwise stay behind in /tmp. */
    const char *tmp = getenv("TMPDIR");
    snprintf(dir_path, sizeof dir_path, "%s/cutrain-fuzz-cifar-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir_path)) {
        perror("mkdtemp");
        abort();   /* the fuzzer cannot do anything useful without its folder */
    }
    snprintf(file_path, sizeof file_path, "%s/batch.bin", dir_path);
    atexit(cleanup);
}

static void write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, size, fp) != size || fclose(fp) != 0) {
        perror(path);
        abort();
    }
}

static void load(long limit)
{
    ct_dataset ds;
    ct_err err = {0};
    if (ct_cifar10_load(&ds, file_path, 0, limit, &err) == CT_OK) {
        /* Every label must be in range: the reader promises 0..9. */
        for (long i = 0; i < ds.count; i++)
            if (ds.labels[i] >= ds.classes)
                abort();
    }
    ct_dataset_free(&ds);   /* the reader frees on failure; freeing again must be harmless */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup_once();
    write_file(file_path, data, size);
    load(0);
    load(1);
    return 0;
}
