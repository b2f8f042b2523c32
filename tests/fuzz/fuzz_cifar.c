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
#include "tests/fuzz/fuzz_files.h"

static const char *const names[] = {"batch.bin"};
#define file_path fuzz_paths[0]

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
    fuzz_setup_once("cifar", names, 1);
    fuzz_write_file(file_path, data, size);
    load(0);
    load(1);
    return 0;
}
