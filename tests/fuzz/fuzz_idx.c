/* libFuzzer target for the IDX reader (raw and gzip).
 *
 * Input layout: FLAGS_LEN (2 bytes, big-endian) IMAGES... LABELS...: the low 15 bits give the
 * length of the images file, clamped to what is there; the rest is the labels file. With the top
 * bit set the labels file is not passed at all (labels_path NULL: images to predict). The reader
 * takes paths, so both parts are written to two temporary files (created once per process,
 * rewritten every run), then probed and loaded whole and with a small limit. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "tests/fuzz/fuzz_files.h"

static const char *const names[] = {"images.idx", "labels.idx"};
#define images_path fuzz_paths[0]
#define labels_path fuzz_paths[1]

/* zlib is not instrumented, so a gzip input runs the same code in idx.c as its raw twin and
 * libFuzzer drops the gzip seeds as adding nothing new; corrupt gzip streams are then almost
 * never tried. These markers give "this part was gzip, and it loaded / failed" edges of their
 * own. noinline keeps each a separate function, hence a separate coverage edge. */
static volatile int sink;
__attribute__((noinline)) static void gzip_images_ok(void) { sink = 1; }
__attribute__((noinline)) static void gzip_images_bad(void) { sink = 2; }
__attribute__((noinline)) static void gzip_labels_ok(void) { sink = 3; }
__attribute__((noinline)) static void gzip_labels_bad(void) { sink = 4; }

static int is_gzip(const uint8_t *p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

static void mark_gzip(int images_gz, int labels_gz, ct_status st)
{
    if (images_gz)
        st == CT_OK ? gzip_images_ok() : gzip_images_bad();
    if (labels_gz)
        st == CT_OK ? gzip_labels_ok() : gzip_labels_bad();
}

/* Loads both files; on success checks what the reader promises about the result. */
static ct_status load(const char *labels, long limit, const ct_shape *probed)
{
    ct_dataset ds;
    ct_err err = {0};
    ct_status st = ct_idx_load(&ds, images_path, labels, limit, &err);
    if (st == CT_OK) {
        /* Without a labels file every label is 0 and classes is 0; with one, 1..256. */
        int lo = labels ? 1 : 0, hi = labels ? 256 : 0;
        if (ds.count <= 0 || (limit > 0 && ds.count > limit) || ds.classes < lo || ds.classes > hi)
            abort();
        if (probed->h != ds.shape.h || probed->w != ds.shape.w || probed->c != ds.shape.c)
            abort();   /* the probe must agree with the load */
        for (long i = 0; i < ds.count; i++)
            if (ds.labels[i] >= (labels ? ds.classes : 1))
                abort();
        /* Touch the last pixel: ASan flags it if the buffer is shorter than count * shape. */
        volatile uint8_t last = ds.images[(size_t)ds.count * ct_shape_size(ds.shape) - 1];
        (void)last;
    }
    ct_dataset_free(&ds);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return -1;
    fuzz_setup_once("idx", names, 2);
    const char *labels = data[0] & 0x80 ? NULL : labels_path;
    size_t split = (size_t)(data[0] & 0x7f) << 8 | data[1];
    data += 2;
    size -= 2;
    if (split > size)
        split = size;
    fuzz_write_file(images_path, data, split);
    fuzz_write_file(labels_path, data + split, size - split);
    int images_gz = is_gzip(data, split), labels_gz = labels && is_gzip(data + split, size - split);

    ct_shape shape = {0, 0, 0};
    ct_err err = {0};
    if (ct_idx_probe(images_path, &shape, &err) != CT_OK) {
        /* A failed probe means the image header is bad, so the load must fail too. */
        ct_dataset ds;
        if (ct_idx_load(&ds, images_path, labels, 0, &err) == CT_OK)
            abort();
        mark_gzip(images_gz, 0, CT_ERR_DATA);
        return 0;
    }
    mark_gzip(images_gz, labels_gz, load(labels, 0, &shape));
    load(labels, 2, &shape);
    return 0;
}
