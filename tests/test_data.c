/* Data loading and batching: real Fashion-MNIST, broken files, CIFAR-10 records, synthetic data,
 * the batcher's augmentation against an independent implementation, and shuffling. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE   /* mkdtemp */
#endif
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/format.h"
#include "base/rng.h"
#include "test_util.h"

static char tmp_root[] = "/tmp/ct_test_data_XXXXXX";

/* ---- helpers ---- */

static void tmp_path(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", tmp_root, name);
}

static void fmnist_path(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", ct_fmnist_dir(), name);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    CHECK_MSG(fp != NULL, "cannot create %s", path);
    if (!fp)
        return;
    CHECK(fwrite(data, 1, n, fp) == n);
    fclose(fp);
}

static void write_gz(const char *path, const void *data, size_t n)
{
    gzFile gz = gzopen(path, "wb");
    CHECK_MSG(gz != NULL, "cannot create %s", path);
    if (!gz)
        return;
    CHECK(gzwrite(gz, data, (unsigned)n) == (int)n);
    gzclose(gz);
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    *n = 0;
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
    if (buf)
        *n = fread(buf, 1, (size_t)size, fp);
    fclose(fp);
    return buf;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* A raw IDX image file: header says `n_header` images of rows x cols, `n_data` are written;
 * pixel j of image i is (i * 31 + j) & 255. */
static void write_idx_images(const char *path, uint32_t n_header, uint32_t n_data, uint32_t rows, uint32_t cols)
{
    size_t size = 16 + (size_t)n_data * rows * cols;
    uint8_t *buf = malloc(size);
    put32(buf, 0x803);
    put32(buf + 4, n_header);
    put32(buf + 8, rows);
    put32(buf + 12, cols);
    for (size_t i = 0; i < n_data; i++)
        for (size_t j = 0; j < (size_t)rows * cols; j++)
            buf[16 + i * rows * cols + j] = (uint8_t)((i * 31 + j) & 255);
    write_file(path, buf, size);
    free(buf);
}

static void write_idx_labels(const char *path, const uint8_t *labels, uint32_t n)
{
    uint8_t *buf = malloc(8 + (size_t)n);
    put32(buf, 0x801);
    put32(buf + 4, n);
    memcpy(buf + 8, labels, n);
    write_file(path, buf, 8 + (size_t)n);
    free(buf);
}

static int is_zeroed(const ct_dataset *ds)
{
    return ds->images == NULL && ds->labels == NULL && ds->count == 0 && ds->classes == 0 &&
           ds->shape.h == 0 && ds->shape.w == 0 && ds->shape.c == 0;
}

/* Asserts a failed idx load: status, dataset left zeroed, and the message names `file` and
 * contains `what`. */
static void expect_idx_fail(const char *images, const char *labels, ct_status want, const char *file,
                            const char *what)
{
    ct_dataset ds;
    ct_err err;
    ct_err_clear(&err);
    ct_status st = ct_idx_load(&ds, images, labels, 0, &err);
    CHECK_MSG(st == want, "status %d, expected %d: %s", (int)st, (int)want, err.msg);
    CHECK_MSG(ct_contains(err.msg, file), "message does not name %s: %s", file, err.msg);
    CHECK_MSG(ct_contains(err.msg, what), "message lacks \"%s\": %s", what, err.msg);
    CHECK(is_zeroed(&ds));
    ct_dataset_free(&ds);
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            remove_tree(sub);
        }
        closedir(d);
        rmdir(path);
    } else {
        remove(path);
    }
}

/* ---- real Fashion-MNIST ---- */

/* The sum of image `index`'s pixels, read straight from the file with zlib (no cutrain code). */
static long independent_pixel_sum(const char *path, long index)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return -1;
    uint8_t buf[784];
    long sum = -1;
    if (gzseek(gz, 16 + index * 784, SEEK_SET) >= 0 && gzread(gz, buf, sizeof buf) == (int)sizeof buf) {
        sum = 0;
        for (int i = 0; i < 784; i++)
            sum += buf[i];
    }
    gzclose(gz);
    return sum;
}

static void check_class_counts(const ct_dataset *ds, long per_class)
{
    long counts[256] = {0};
    for (long i = 0; i < ds->count; i++)
        counts[ds->labels[i]]++;
    for (int k = 0; k < 10; k++)
        CHECK_MSG(counts[k] == per_class, "class %d has %ld samples, expected %ld", k, counts[k], per_class);
}

static void test_fmnist(void)
{
    char ti[1024], tl[1024], vi[1024], vl[1024];
    fmnist_path(ti, sizeof ti, "train-images-idx3-ubyte.gz");
    fmnist_path(tl, sizeof tl, "train-labels-idx1-ubyte.gz");
    fmnist_path(vi, sizeof vi, "t10k-images-idx3-ubyte.gz");
    fmnist_path(vl, sizeof vl, "t10k-labels-idx1-ubyte.gz");
    ct_data_settings dc = {0};
    dc.format = CT_DATA_IDX;
    dc.train = ti;
    dc.train_labels = tl;
    dc.test = vi;
    dc.test_labels = vl;
    ct_dataset train, test;
    ct_err err;
    ct_err_clear(&err);
    ct_status st = ct_data_load(&dc, 1, &train, &test, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    if (st != CT_OK)
        return;
    CHECK(train.count == 60000 && test.count == 10000);
    CHECK(train.shape.h == 28 && train.shape.w == 28 && train.shape.c == 1);
    CHECK(test.shape.h == 28 && test.shape.w == 28 && test.shape.c == 1);
    CHECK(train.classes == 10 && test.classes == 10);
    check_class_counts(&train, 6000);
    check_class_counts(&test, 1000);

    long sums[3] = {0, 0, 0}, at[3] = {0, 12345, 59999};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 784; i++)
            sums[k] += train.images[at[k] * 784 + i];
        long want = independent_pixel_sum(ti, at[k]);
        CHECK_MSG(sums[k] == want && want > 0, "image %ld: sum %ld, file says %ld", at[k], sums[k], want);
    }
    long tsum = 0;
    for (int i = 0; i < 784; i++)
        tsum += test.images[9999L * 784 + i];
    CHECK(tsum == independent_pixel_sum(vi, 9999));

    /* Labels against an independent read of the first 100. */
    gzFile gz = gzopen(tl, "rb");
    uint8_t head[8], lab[100];
    CHECK(gz && gzread(gz, head, 8) == 8 && gzread(gz, lab, 100) == 100);
    if (gz)
        gzclose(gz);
    CHECK(memcmp(lab, train.labels, 100) == 0);

    /* limit keeps the first samples; classes still describe the whole label file. */
    ct_dataset small;
    st = ct_idx_load(&small, ti, tl, 100, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    CHECK(small.count == 100 && small.classes == 10);
    CHECK(st == CT_OK && memcmp(small.images, train.images, 100 * 784) == 0);
    CHECK(st == CT_OK && memcmp(small.labels, train.labels, 100) == 0);
    ct_dataset_free(&small);
    CHECK(is_zeroed(&small));

    ct_shape shape = {0, 0, 0};
    CHECK(ct_idx_probe(ti, &shape, &err) == CT_OK);
    CHECK(shape.h == 28 && shape.w == 28 && shape.c == 1);
    int classes = 0;
    shape = (ct_shape){0, 0, 0};
    CHECK(ct_data_probe(&dc, &shape, &classes, &err) == CT_OK);
    CHECK(shape.h == 28 && shape.w == 28 && shape.c == 1 && classes == 10);

    ct_dataset_free(&train);
    ct_dataset_free(&test);
}

/* ---- broken and unusual IDX files ---- */

static void test_idx_files(void)
{
    char vi[1024], vl[1024], tl[1024], p[1024], q[1024];
    fmnist_path(vi, sizeof vi, "t10k-images-idx3-ubyte.gz");
    fmnist_path(vl, sizeof vl, "t10k-labels-idx1-ubyte.gz");
    fmnist_path(tl, sizeof tl, "train-labels-idx1-ubyte.gz");
    ct_dataset ds;
    ct_err err;
    ct_err_clear(&err);

    /* Raw (not gzip) IDX: read as is. */
    char ri[1024], rl[1024];
    tmp_path(ri, sizeof ri, "raw-images");
    tmp_path(rl, sizeof rl, "raw-labels");
    write_idx_images(ri, 3, 3, 4, 5);
    const uint8_t labels3[3] = {2, 0, 7};
    write_idx_labels(rl, labels3, 3);
    ct_status st = ct_idx_load(&ds, ri, rl, 0, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    CHECK(ds.count == 3 && ds.shape.h == 4 && ds.shape.w == 5 && ds.shape.c == 1 && ds.classes == 8);
    int same = st == CT_OK;
    for (int i = 0; i < 3 && same; i++) {
        same &= ds.labels[i] == labels3[i];
        for (int j = 0; j < 20; j++)
            same &= ds.images[i * 20 + j] == (uint8_t)((i * 31 + j) & 255);
    }
    CHECK(same);
    ct_dataset_free(&ds);

    /* A gzip of the same raw file reads the same. */
    size_t n = 0;
    uint8_t *raw = read_file(ri, &n);
    tmp_path(p, sizeof p, "raw-images.gz");
    write_gz(p, raw, n);
    free(raw);
    st = ct_idx_load(&ds, p, rl, 2, &err);
    CHECK_MSG(st == CT_OK && ds.count == 2 && ds.images[20] == 31, "%s", err.msg);
    ct_dataset_free(&ds);

    /* Four dimensions: (n, h, w, c). */
    uint8_t four[20 + 24];
    put32(four, 0x804);
    put32(four + 4, 2);    /* n */
    put32(four + 8, 2);    /* h */
    put32(four + 12, 3);   /* w */
    put32(four + 16, 2);   /* c */
    for (int i = 0; i < 24; i++)
        four[20 + i] = (uint8_t)i;
    tmp_path(p, sizeof p, "four-dims");
    write_file(p, four, sizeof four);
    const uint8_t labels2[2] = {1, 1};
    tmp_path(q, sizeof q, "two-labels");
    write_idx_labels(q, labels2, 2);
    st = ct_idx_load(&ds, p, q, 0, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    CHECK(ds.count == 2 && ds.shape.h == 2 && ds.shape.w == 3 && ds.shape.c == 2 && ds.images[23] == 23);
    ct_dataset_free(&ds);

    /* Missing file. */
    expect_idx_fail("/nonexistent/ct/images.gz", rl, CT_ERR_IO, "/nonexistent/ct/images.gz",
                    "No such file");
    expect_idx_fail(ri, "/nonexistent/ct/labels", CT_ERR_IO, "/nonexistent/ct/labels", "No such file");
    /* A folder where a file should be. */
    expect_idx_fail(tmp_root, rl, CT_ERR_IO, tmp_root, "a folder, not an IDX image file");

    /* Truncated gzip: the first half of the real label file, then the first MB of the images. */
    uint8_t *gzl = read_file(vl, &n);
    CHECK(gzl != NULL && n > 1000);
    tmp_path(p, sizeof p, "half-labels.gz");
    write_file(p, gzl, n / 2);
    expect_idx_fail(vi, p, CT_ERR_DATA, p, "truncated: header says 10000 labels, file holds");
    size_t ni = 0;
    uint8_t *gzi = read_file(vi, &ni);
    tmp_path(q, sizeof q, "cut-images.gz");
    write_file(q, gzi, ni < (1u << 20) ? ni / 2 : (1u << 20));
    expect_idx_fail(q, vl, CT_ERR_DATA, q, "truncated: header says 10000 images of 28x28");
    free(gzi);

    /* Corrupted gzip stream: bytes flipped in the middle of the deflate data. */
    for (size_t i = n / 2; i < n / 2 + 16; i++)
        gzl[i] ^= 0xff;
    tmp_path(p, sizeof p, "corrupt-labels.gz");
    write_file(p, gzl, n);
    expect_idx_fail(vi, p, CT_ERR_DATA, p, "corrupted gzip stream");
    free(gzl);

    /* Data that inflates but fails the CRC: change one byte of a stored (level 0) gzip payload. */
    uint8_t payload[8 + 100];
    put32(payload, 0x801);
    put32(payload + 4, 100);
    for (int i = 0; i < 100; i++)
        payload[8 + i] = (uint8_t)(i % 3);
    tmp_path(p, sizeof p, "stored-labels.gz");
    gzFile gz = gzopen(p, "wb0");
    CHECK(gz && gzwrite(gz, payload, sizeof payload) == (int)sizeof payload);
    if (gz)
        gzclose(gz);
    uint8_t *stored = read_file(p, &n);
    size_t mid = n - 8 - 50;    /* inside the payload: the trailer is the last 8 bytes */
    stored[mid] ^= 0x01;
    write_file(p, stored, n);
    free(stored);
    tmp_path(q, sizeof q, "hundred-images");
    write_idx_images(q, 100, 100, 2, 2);
    expect_idx_fail(q, p, CT_ERR_DATA, p, "corrupted gzip stream");

    /* Wrong magic: labels given as images. */
    expect_idx_fail(vl, vl, CT_ERR_DATA, vl, "not an IDX image file (magic 0x00000801, expected 0x00000803)");
    expect_idx_fail(vi, vi, CT_ERR_DATA, vi, "not an IDX label file (magic 0x00000803, expected 0x00000801)");

    /* Image/label count mismatch. */
    expect_idx_fail(vi, tl, CT_ERR_DATA, vi, "10000 images but");
    expect_idx_fail(vi, tl, CT_ERR_DATA, tl, "60000 labels");

    /* Header claims more images than the file holds: refused by the file's size, before reading. */
    tmp_path(p, sizeof p, "short-images");
    write_idx_images(p, 10, 5, 28, 28);
    uint8_t labels10[10] = {0};
    tmp_path(q, sizeof q, "ten-labels");
    write_idx_labels(q, labels10, 10);
    expect_idx_fail(p, q, CT_ERR_DATA, p,
                    "the header claims 10 images of 28x28x1 (7840 bytes after the header) but the file has 3920 bytes");

    /* Labels truncated on a raw file. */
    uint8_t lab_short[8 + 4];
    put32(lab_short, 0x801);
    put32(lab_short + 4, 10);
    memset(lab_short + 8, 1, 4);
    tmp_path(q, sizeof q, "short-labels");
    write_file(q, lab_short, sizeof lab_short);
    write_idx_images(p, 10, 10, 2, 2);
    expect_idx_fail(p, q, CT_ERR_DATA, q,
                    "the header claims 10 labels (10 bytes after the header) but the file has 4 bytes");

    /* Empty file; header cut short; zero and absurd sizes. */
    tmp_path(p, sizeof p, "empty");
    write_file(p, "", 0);
    expect_idx_fail(p, rl, CT_ERR_DATA, p, "empty file");
    tmp_path(p, sizeof p, "cut-header");
    uint8_t cut[10];
    put32(cut, 0x803);
    put32(cut + 4, 3);
    write_file(p, cut, sizeof cut);
    expect_idx_fail(p, rl, CT_ERR_DATA, p, "truncated IDX header");
    tmp_path(p, sizeof p, "zero-rows");
    write_idx_images(p, 3, 0, 0, 5);
    expect_idx_fail(p, rl, CT_ERR_DATA, p, "zero size");
    tmp_path(p, sizeof p, "huge-images");
    write_idx_images(p, 3, 0, 65536, 65536);
    expect_idx_fail(p, rl, CT_ERR_DATA, p, "too large");
    /* A header claiming 4 billion images (or labels) fails against the file's size, before any
     * read or allocation. */
    tmp_path(p, sizeof p, "billions");
    write_idx_images(p, 0xffffffffu, 2, 4, 5);
    uint8_t lab_big[8];
    put32(lab_big, 0x801);
    put32(lab_big + 4, 0xffffffffu);
    tmp_path(q, sizeof q, "billions-labels");
    write_file(q, lab_big, sizeof lab_big);
    expect_idx_fail(p, q, CT_ERR_DATA, p, "the header claims 4294967295 images of 4x5x1 (85899345900 bytes");
    expect_idx_fail(ri, q, CT_ERR_DATA, q, "the header claims 4294967295 labels (4294967295 bytes after the header) "
                                           "but the file has 0 bytes");

    ct_shape shape;
    CHECK(ct_idx_probe(ri, &shape, &err) == CT_OK && shape.h == 4 && shape.w == 5 && shape.c == 1);
    CHECK(ct_idx_probe(vl, &shape, &err) == CT_ERR_DATA && ct_contains(err.msg, vl));
    CHECK(ct_idx_probe("/nonexistent/x", &shape, &err) == CT_ERR_IO && ct_contains(err.msg, "/nonexistent/x"));
}

/* ---- ct_data_load and ct_data_probe, config level ---- */

static void expect_load_fail(const ct_data_settings *dc, ct_status want, const char *what)
{
    ct_dataset train, test;
    ct_err err;
    ct_err_clear(&err);
    ct_status st = ct_data_load(dc, 3, &train, &test, &err);
    CHECK_MSG(st == want, "status %d, expected %d: %s", (int)st, (int)want, err.msg);
    CHECK_MSG(ct_contains(err.msg, what), "message lacks \"%s\": %s", what, err.msg);
    CHECK(is_zeroed(&train) && is_zeroed(&test));
}

static void test_data_load(void)
{
    char ti[1024], tl[1024], vi[1024], vl[1024];
    tmp_path(ti, sizeof ti, "dl-train-images");
    tmp_path(tl, sizeof tl, "dl-train-labels");
    tmp_path(vi, sizeof vi, "dl-test-images");
    tmp_path(vl, sizeof vl, "dl-test-labels");
    write_idx_images(ti, 4, 4, 3, 3);
    write_idx_images(vi, 2, 2, 2, 2);
    const uint8_t tlab[4] = {0, 1, 2, 3}, vlab[2] = {5, 0};
    write_idx_labels(tl, tlab, 4);
    write_idx_labels(vl, vlab, 2);

    ct_data_settings dc = {0};
    dc.format = CT_DATA_IDX;
    expect_load_fail(&dc, CT_ERR_CONFIG, "[data] train is required for format = idx");
    dc.train = ti;
    expect_load_fail(&dc, CT_ERR_CONFIG, "[data] train_labels is required for format = idx");
    dc.train_labels = tl;
    dc.test = vi;
    expect_load_fail(&dc, CT_ERR_CONFIG, "test_labels is required");
    dc.test_labels = vl;
    expect_load_fail(&dc, CT_ERR_DATA, "test images are 2x2x1 but training images are 3x3x1");

    /* No test set: test is zeroed. */
    dc.test = dc.test_labels = NULL;
    ct_dataset train, test;
    ct_err err;
    ct_err_clear(&err);
    CHECK(ct_data_load(&dc, 3, &train, &test, &err) == CT_OK);
    CHECK(train.count == 4 && train.classes == 4 && is_zeroed(&test));
    ct_dataset_free(&train);

    /* Class count covers both label sets. */
    write_idx_images(vi, 2, 2, 3, 3);
    dc.test = vi;
    dc.test_labels = vl;
    CHECK(ct_data_load(&dc, 3, &train, &test, &err) == CT_OK);
    CHECK(train.classes == 6 && test.classes == 6 && test.count == 2);
    ct_dataset_free(&train);
    ct_dataset_free(&test);
    ct_shape shape;
    int classes = 0;
    CHECK(ct_data_probe(&dc, &shape, &classes, &err) == CT_OK && classes == 6 && shape.h == 3);

    /* normalize must give 1 value or one per channel. */
    dc.n_normalize = 3;
    dc.std[0] = dc.std[1] = dc.std[2] = 1.0f;
    expect_load_fail(&dc, CT_ERR_CONFIG, "normalize gives 3 values but the images have 1 channel");
    CHECK(ct_data_probe(&dc, &shape, &classes, &err) == CT_ERR_CONFIG);
    dc.n_normalize = 1;
    dc.std[0] = 0.0f;
    expect_load_fail(&dc, CT_ERR_CONFIG, "std");

    ct_data_settings syn = {0};
    syn.format = CT_DATA_SYNTHETIC;
    syn.shape = (ct_shape){8, 8, 1};
    syn.classes = 0;
    syn.count = 10;
    expect_load_fail(&syn, CT_ERR_CONFIG, "classes");
    syn.classes = 3;
    syn.shape.c = 5;
    expect_load_fail(&syn, CT_ERR_CONFIG, "shape 8x8x5");

    ct_data_settings cif = {0};
    cif.format = CT_DATA_CIFAR10;
    expect_load_fail(&cif, CT_ERR_CONFIG, "[data] train is required for format = cifar10");
    cif.train = "/nonexistent/cifar";
    expect_load_fail(&cif, CT_ERR_IO, "/nonexistent/cifar");
    CHECK(ct_data_probe(&cif, &shape, &classes, &err) == CT_OK && shape.h == 32 && shape.c == 3 && classes == 10);
}

/* Every row of CT_DATA_FORMATS has a whole record: a name, open and probe, keys with names, and a
 * `with` that names another path key of the same format. */
static void test_format_records(void)
{
    CHECK(ct_data_format_of(CT_DATA_FORMAT_COUNT) == NULL);
    CHECK(strcmp(ct_data_format_name(CT_DATA_FORMAT_COUNT), "?") == 0);
    CHECK(ct_data_format_names[CT_DATA_FORMAT_COUNT] == NULL);
    for (int f = 0; f < CT_DATA_FORMAT_COUNT; f++) {
        const ct_data_format_def *def = ct_data_format_of((ct_data_format)f);
        const char *name = ct_data_format_name((ct_data_format)f);
        CHECK_MSG(def && def->open && def->probe, "format %d (%s) has no open or probe", f, name);
        CHECK_MSG(name && strcmp(name, ct_data_format_names[f]) == 0 && strcmp(name, "?") != 0, "format %d", f);
        for (int i = 0; def && i < def->n_keys; i++) {
            const ct_data_key *k = &def->keys[i];
            int is_path = k->kind == CT_DATA_KEY_PATH || k->kind == CT_DATA_KEY_PATHS, partner = 0;
            CHECK_MSG(k->name && k->offset < sizeof(ct_data_settings), "%s key %d", name, i);
            for (int j = 0; k->with && j < def->n_keys; j++)
                partner |= j != i && strcmp(def->keys[j].name, k->with) == 0 &&
                           (def->keys[j].kind == CT_DATA_KEY_PATH || def->keys[j].kind == CT_DATA_KEY_PATHS);
            CHECK_MSG(!k->with || (is_path && partner), "%s: %s is given with '%s', not a path key of %s", name,
                      k->name, k->with, name);
        }
    }
}

/* ---- CIFAR-10 ---- */

static uint8_t cifar_pixel(int r, int c, int y, int x)
{
    return (uint8_t)((r * 31 + c * 71 + y * 5 + x * 3) & 255);
}

/* `n` records with labels label0, label0+1, ... (mod 10); record r is numbered first + r. */
static void write_cifar(const char *path, int n, int first, int label0)
{
    size_t size = (size_t)n * 3073;
    uint8_t *buf = malloc(size);
    for (int r = 0; r < n; r++) {
        uint8_t *rec = buf + (size_t)r * 3073;
        rec[0] = (uint8_t)((label0 + r) % 10);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++)
                    rec[1 + c * 1024 + y * 32 + x] = cifar_pixel(first + r, c, y, x);
    }
    write_file(path, buf, size);
    free(buf);
}

/* Every pixel of sample i is record `rec`'s, in HWC order. */
static int cifar_matches(const ct_dataset *ds, long i, int rec)
{
    const uint8_t *img = ds->images + (size_t)i * 3072;
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++)
            for (int c = 0; c < 3; c++)
                if (img[(y * 32 + x) * 3 + c] != cifar_pixel(rec, c, y, x))
                    return 0;
    return 1;
}

static void expect_cifar_fail(const char *paths, int test, ct_status want, const char *file, const char *what)
{
    ct_dataset ds;
    ct_err err;
    ct_err_clear(&err);
    ct_status st = ct_cifar10_load(&ds, paths, test, 0, &err);
    CHECK_MSG(st == want, "status %d, expected %d: %s", (int)st, (int)want, err.msg);
    CHECK_MSG(ct_contains(err.msg, file), "message does not name %s: %s", file, err.msg);
    CHECK_MSG(ct_contains(err.msg, what), "message lacks \"%s\": %s", what, err.msg);
    CHECK(is_zeroed(&ds));
}

static void test_cifar(void)
{
    char a[1024], b[1024], dir[1024], f[1200], list[3000];
    ct_dataset ds;
    ct_err err;
    ct_err_clear(&err);

    tmp_path(a, sizeof a, "three.bin");
    write_cifar(a, 3, 0, 4);
    ct_status st = ct_cifar10_load(&ds, a, 0, 0, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    CHECK(ds.count == 3 && ds.shape.h == 32 && ds.shape.w == 32 && ds.shape.c == 3 && ds.classes == 10);
    for (int r = 0; r < 3 && st == CT_OK; r++) {
        CHECK(ds.labels[r] == 4 + r);
        CHECK_MSG(cifar_matches(&ds, r, r), "record %d is not converted to HWC", r);
    }
    /* One pixel spelled out: record 1, green (c=1), y=2, x=5 sits at HWC (2*32+5)*3+1. */
    CHECK(st == CT_OK && ds.images[3072 + (2 * 32 + 5) * 3 + 1] == (uint8_t)((31 + 71 + 10 + 15) & 255));
    ct_dataset_free(&ds);

    /* A comma list with spaces, and a limit that stops inside the second file. */
    tmp_path(b, sizeof b, "two.bin");
    write_cifar(b, 2, 3, 0);
    snprintf(list, sizeof list, " %s ,%s ,", a, b);
    st = ct_cifar10_load(&ds, list, 0, 0, &err);
    CHECK_MSG(st == CT_OK && ds.count == 5, "%s", err.msg);
    CHECK(st == CT_OK && cifar_matches(&ds, 4, 4) && ds.labels[3] == 0 && ds.labels[4] == 1);
    ct_dataset_free(&ds);
    st = ct_cifar10_load(&ds, list, 0, 4, &err);
    CHECK(st == CT_OK && ds.count == 4 && cifar_matches(&ds, 3, 3));
    ct_dataset_free(&ds);

    /* A folder of data_batch_1..5.bin and test_batch.bin. */
    tmp_path(dir, sizeof dir, "cifar");
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(f, sizeof f, "%s/data_batch_1.bin", dir);
    write_cifar(f, 2, 0, 0);
    expect_cifar_fail(dir, 0, CT_ERR_IO, "data_batch_2.bin", "No such file");
    for (int i = 2; i <= 5; i++) {
        snprintf(f, sizeof f, "%s/data_batch_%d.bin", dir, i);
        write_cifar(f, 2, 2 * (i - 1), 2 * (i - 1));
    }
    snprintf(f, sizeof f, "%s/test_batch.bin", dir);
    write_cifar(f, 1, 100, 9);
    st = ct_cifar10_load(&ds, dir, 0, 0, &err);
    CHECK_MSG(st == CT_OK && ds.count == 10, "%s", err.msg);
    int ok = st == CT_OK;
    for (int r = 0; r < 10 && ok; r++)
        ok = ds.labels[r] == r % 10 && cifar_matches(&ds, r, r);
    CHECK(ok);
    ct_dataset_free(&ds);
    st = ct_cifar10_load(&ds, dir, 1, 0, &err);
    CHECK(st == CT_OK && ds.count == 1 && ds.labels[0] == 9 && cifar_matches(&ds, 0, 100));
    ct_dataset_free(&ds);

    ct_data_settings dc = {0};
    dc.format = CT_DATA_CIFAR10;
    dc.train = dir;
    dc.test = dir;
    dc.train_limit = 7;
    ct_dataset train, test;
    st = ct_data_load(&dc, 0, &train, &test, &err);
    CHECK_MSG(st == CT_OK && train.count == 7 && test.count == 1 && test.classes == 10, "%s", err.msg);
    ct_dataset_free(&train);
    ct_dataset_free(&test);

    /* Bad label in record 1. */
    tmp_path(a, sizeof a, "bad-label.bin");
    write_cifar(a, 3, 0, 0);
    size_t n = 0;
    uint8_t *buf = read_file(a, &n);
    buf[3073] = 12;
    write_file(a, buf, n);
    expect_cifar_fail(a, 0, CT_ERR_DATA, a, "record 1 (byte offset 3073) has label 12");
    /* Size not a multiple of 3073, and an empty file. */
    tmp_path(a, sizeof a, "odd-size.bin");
    write_file(a, buf, 2 * 3073 + 5);
    expect_cifar_fail(a, 0, CT_ERR_DATA, a, "size 6151 bytes is not a positive multiple");
    snprintf(list, sizeof list, "%s,%s", b, a);    /* the bad one second: still reported */
    expect_cifar_fail(list, 0, CT_ERR_DATA, a, "not a positive multiple");
    tmp_path(a, sizeof a, "empty.bin");
    write_file(a, buf, 0);
    expect_cifar_fail(a, 0, CT_ERR_DATA, a, "size 0 bytes");
    free(buf);
    expect_cifar_fail("/nonexistent/c.bin", 0, CT_ERR_IO, "/nonexistent/c.bin", "No such file");
    expect_cifar_fail(" , ", 0, CT_ERR_CONFIG, "", "no CIFAR-10 file");
}

/* ---- synthetic ---- */

/* Nearest-centroid accuracy on `test` with class means from `train`: the two sets must share
 * their class templates for this to beat chance. */
static double centroid_accuracy(const ct_dataset *train, const ct_dataset *test)
{
    size_t size = ct_shape_size(train->shape);
    int k = train->classes;
    double *mean = calloc((size_t)k * size, sizeof *mean);
    long *count = calloc((size_t)k, sizeof *count);
    for (long i = 0; i < train->count; i++) {
        int l = train->labels[i];
        count[l]++;
        for (size_t j = 0; j < size; j++)
            mean[l * size + j] += train->images[i * size + j];
    }
    for (int l = 0; l < k; l++)
        for (size_t j = 0; j < size; j++)
            mean[l * size + j] /= count[l] ? (double)count[l] : 1.0;
    long right = 0;
    for (long i = 0; i < test->count; i++) {
        int best = 0;
        double best_d = 1e300;
        for (int l = 0; l < k; l++) {
            double d = 0;
            for (size_t j = 0; j < size; j++) {
                double e = test->images[i * size + j] - mean[l * size + j];
                d += e * e;
            }
            if (d < best_d) {
                best_d = d;
                best = l;
            }
        }
        right += best == test->labels[i];
    }
    free(mean);
    free(count);
    return (double)right / (double)test->count;
}

static void test_synthetic(void)
{
    ct_shape s = {8, 6, 3};
    ct_dataset a, b, c;
    CHECK(ct_synthetic_make(&a, s, 5, 100, 1) == CT_OK);
    CHECK(ct_synthetic_make(&b, s, 5, 100, 1) == CT_OK);
    CHECK(ct_synthetic_make(&c, s, 5, 100, 2) == CT_OK);
    CHECK(a.count == 100 && a.classes == 5 && a.shape.h == 8 && a.shape.w == 6 && a.shape.c == 3);
    CHECK(memcmp(a.images, b.images, 100 * 144) == 0 && memcmp(a.labels, b.labels, 100) == 0);
    CHECK(memcmp(a.images, c.images, 100 * 144) != 0);
    CHECK(memcmp(a.labels, c.labels, 100) != 0);
    long counts[5] = {0};
    int in_range = 1, distinct = 0;
    for (long i = 0; i < 100; i++) {
        in_range &= a.labels[i] < 5;
        if (a.labels[i] < 5)
            counts[a.labels[i]]++;
    }
    CHECK(in_range);
    for (int k = 0; k < 5; k++)
        CHECK(counts[k] == 20);
    int seen[256] = {0};
    for (long i = 0; i < 100 * 144; i++)
        distinct += !seen[a.images[i]]++;
    CHECK_MSG(distinct > 100, "only %d distinct pixel values", distinct);   /* noise, not flat */
    ct_dataset_free(&a);
    ct_dataset_free(&b);
    ct_dataset_free(&c);

    CHECK(ct_synthetic_make(&a, (ct_shape){0, 4, 1}, 2, 10, 1) == CT_ERR_USAGE && is_zeroed(&a));
    CHECK(ct_synthetic_make(&a, s, 0, 10, 1) == CT_ERR_USAGE && is_zeroed(&a));

    /* Through ct_data_load: the test set differs from the training set but is the same task. */
    ct_data_settings dc = {0};
    dc.format = CT_DATA_SYNTHETIC;
    dc.shape = (ct_shape){16, 16, 1};
    dc.classes = 10;
    dc.count = 2000;
    dc.test_count = 500;
    ct_dataset train, test;
    ct_err err;
    ct_err_clear(&err);
    CHECK(ct_data_load(&dc, 7, &train, &test, &err) == CT_OK);
    CHECK(train.count == 2000 && test.count == 500 && test.classes == 10);
    CHECK(memcmp(train.images, test.images, 500 * 256) != 0);
    double acc = centroid_accuracy(&train, &test);
    CHECK_MSG(acc > 0.5, "nearest-centroid accuracy %.3f", acc);
    ct_dataset_free(&train);
    ct_dataset_free(&test);
    dc.test_count = 0;
    CHECK(ct_data_load(&dc, 7, &train, &test, &err) == CT_OK && is_zeroed(&test));
    ct_dataset_free(&train);
    ct_shape shape;
    int classes = 0;
    CHECK(ct_data_probe(&dc, &shape, &classes, &err) == CT_OK && shape.h == 16 && shape.c == 1 && classes == 10);
}

/* ---- augmentation config and the batcher ---- */

static void test_augment_config(void)
{
    ct_data_settings dc = {0};
    ct_augment aug;
    dc.crop_pad = 4;
    dc.flip = 1;
    ct_augment_from_config(&aug, &dc, 3);
    CHECK(aug.crop_pad == 4 && aug.flip == 1);
    CHECK(aug.mean[0] == 0.0f && aug.std[0] == 1.0f && aug.mean[2] == 0.0f && aug.std[2] == 1.0f);
    dc.n_normalize = 1;
    dc.mean[0] = 0.5f;
    dc.std[0] = 0.25f;
    ct_augment_from_config(&aug, &dc, 3);
    CHECK(aug.mean[0] == 0.5f && aug.mean[1] == 0.5f && aug.mean[2] == 0.5f && aug.std[2] == 0.25f);
    dc.n_normalize = 3;
    dc.mean[1] = 0.1f;
    dc.mean[2] = 0.2f;
    dc.std[1] = 2.0f;
    dc.std[2] = 3.0f;
    ct_augment_from_config(&aug, &dc, 3);
    CHECK(aug.mean[0] == 0.5f && aug.mean[1] == 0.1f && aug.mean[2] == 0.2f);
    CHECK(aug.std[0] == 0.25f && aug.std[1] == 2.0f && aug.std[2] == 3.0f);
}

/* The batcher's recipe, rebuilt the long way: pad into a bigger zero image, cut the window,
 * mirror it, then normalise. */
static void reference_sample(const ct_dataset *ds, long k, const ct_augment *aug, int augmenting,
                             uint64_t seed, int i, float *out)
{
    ct_shape s = ds->shape;
    int p = augmenting ? aug->crop_pad : 0;
    int dy = 0, dx = 0, flip = 0;
    if (augmenting) {
        uint64_t r = ct_hash3(seed, (uint64_t)i, 0);
        int span = 2 * aug->crop_pad + 1;
        dy = aug->crop_pad ? (int)((r & 0xffff) % (uint64_t)span) : 0;
        dx = aug->crop_pad ? (int)(((r >> 16) & 0xffff) % (uint64_t)span) : 0;
        flip = aug->flip ? (int)((r >> 32) & 1) : 0;
    }
    int ph = s.h + 2 * p, pw = s.w + 2 * p;
    uint8_t *padded = calloc((size_t)ph * pw * s.c, 1);
    const uint8_t *img = ds->images + (size_t)k * ct_shape_size(s);
    for (int y = 0; y < s.h; y++)
        memcpy(padded + ((size_t)(y + p) * pw + p) * s.c, img + (size_t)y * s.w * s.c, (size_t)s.w * s.c);
    for (int y = 0; y < s.h; y++)
        for (int x = 0; x < s.w; x++) {
            int wx = flip ? s.w - 1 - x : x;
            for (int c = 0; c < s.c; c++) {
                float v = padded[((size_t)(y + dy) * pw + (wx + dx)) * s.c + c];
                out[((size_t)y * s.w + x) * s.c + c] = (v / 255.0f - aug->mean[c]) / aug->std[c];
            }
        }
    free(padded);
}

/* Largest difference between the batcher and the reference over a whole batch. */
static double batch_error(const ct_dataset *ds, const long *idx, int n, const ct_augment *aug,
                          int augmenting, uint64_t seed, const float *x, const int32_t *y, int *labels_ok)
{
    size_t size = ct_shape_size(ds->shape);
    float *ref = malloc(size * sizeof *ref);
    double worst = 0;
    *labels_ok = 1;
    for (int i = 0; i < n; i++) {
        reference_sample(ds, idx[i], aug, augmenting, seed, i, ref);
        for (size_t j = 0; j < size; j++) {
            double e = fabs((double)x[i * size + j] - ref[j]);
            worst = e > worst ? e : worst;
        }
        *labels_ok &= y[i] == ds->labels[idx[i]];
    }
    free(ref);
    return worst;
}

static void test_make_batch(void)
{
    ct_dataset ds;
    ct_shape s = {7, 6, 3};   /* h != w, so a swapped axis shows */
    CHECK(ct_synthetic_make(&ds, s, 4, 50, 11) == CT_OK);
    enum { N = 64 };
    long idx[N];
    for (int i = 0; i < N; i++)
        idx[i] = (i * 17 + 3) % 50;
    size_t size = ct_shape_size(s);
    float *x = malloc(N * size * sizeof *x), *x2 = malloc(N * size * sizeof *x);
    int32_t y[N], y2[N];
    ct_augment aug = {0};
    aug.mean[0] = 0.1f, aug.mean[1] = 0.2f, aug.mean[2] = 0.3f;
    aug.std[0] = 0.5f, aug.std[1] = 0.25f, aug.std[2] = 2.0f;
    aug.crop_pad = 2;
    aug.flip = 1;
    int labels_ok = 0;

    /* Not augmenting: plain normalisation, checked pixel by pixel against the formula. */
    ct_make_batch(&ds, idx, N, &aug, 0, 99, x, y);
    for (int i = 0; i < 3; i++) {
        size_t j = (size_t)(i * 37) % size;
        int c = (int)(j % 3);
        float want = ((float)ds.images[idx[i] * size + j] / 255.0f - aug.mean[c]) / aug.std[c];
        CHECK_NEAR(x[i * size + j], want, 1e-5);
    }
    CHECK(batch_error(&ds, idx, N, &aug, 0, 99, x, y, &labels_ok) < 1e-5);
    CHECK(labels_ok);

    /* Augmenting: crops and flips match the separately written reference. */
    ct_make_batch(&ds, idx, N, &aug, 1, 99, x, y);
    CHECK(batch_error(&ds, idx, N, &aug, 1, 99, x, y, &labels_ok) < 1e-5);
    CHECK(labels_ok);
    /* ... and the draws actually vary: both flips and several offsets occur. */
    int flips = 0, offsets[5] = {0}, kinds = 0;
    for (int i = 0; i < N; i++) {
        uint64_t r = ct_hash3(99, (uint64_t)i, 0);
        flips += (int)((r >> 32) & 1);
        offsets[(r & 0xffff) % 5]++;
    }
    for (int k = 0; k < 5; k++)
        kinds += offsets[k] > 0;
    CHECK(flips > 0 && flips < N && kinds == 5);
    /* Something changed relative to the plain batch. */
    ct_make_batch(&ds, idx, N, &aug, 0, 99, x2, y2);
    CHECK(memcmp(x, x2, N * size * sizeof *x) != 0);

    /* Determinism: the same seed gives the same bytes; another seed gives other crops. */
    ct_make_batch(&ds, idx, N, &aug, 1, 99, x2, y2);
    CHECK(memcmp(x, x2, N * size * sizeof *x) == 0 && memcmp(y, y2, sizeof y) == 0);
    ct_make_batch(&ds, idx, N, &aug, 1, 100, x2, y2);
    CHECK(memcmp(x, x2, N * size * sizeof *x) != 0);

    /* Flip only, and crop only. */
    aug.crop_pad = 0;
    ct_make_batch(&ds, idx, N, &aug, 1, 5, x, y);
    CHECK(batch_error(&ds, idx, N, &aug, 1, 5, x, y, &labels_ok) < 1e-5);
    aug.flip = 0;
    aug.crop_pad = 3;
    ct_make_batch(&ds, idx, N, &aug, 1, 5, x, y);
    CHECK(batch_error(&ds, idx, N, &aug, 1, 5, x, y, &labels_ok) < 1e-5);

    /* Evaluation settings (no crop, no flip) only normalise even when augmenting is set. */
    aug.crop_pad = 0;
    ct_make_batch(&ds, idx, N, &aug, 1, 5, x, y);
    ct_make_batch(&ds, idx, N, &aug, 0, 5, x2, y2);
    CHECK(memcmp(x, x2, N * size * sizeof *x) == 0);

    free(x);
    free(x2);
    ct_dataset_free(&ds);
}

/* ---- shuffle and normal draws ---- */

static int is_permutation(const long *idx, long n)
{
    char *seen = calloc((size_t)n + 1, 1);
    int ok = 1;
    for (long i = 0; i < n && ok; i++) {
        ok = idx[i] >= 0 && idx[i] < n && !seen[idx[i]];
        if (ok)
            seen[idx[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_shuffle(void)
{
    enum { N = 1000 };
    static long a[N], b[N], c[N], d[N];
    ct_shuffle_indices(a, N, 42, 1);
    ct_shuffle_indices(b, N, 42, 1);
    ct_shuffle_indices(c, N, 42, 2);
    ct_shuffle_indices(d, N, 43, 1);
    CHECK(is_permutation(a, N) && is_permutation(c, N) && is_permutation(d, N));
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    CHECK(memcmp(a, d, sizeof a) != 0);
    long fixed = 0;
    for (long i = 0; i < N; i++)
        fixed += a[i] == i;
    CHECK_MSG(fixed < 10, "%ld fixed points", fixed);   /* about 1 expected */
    long one = -1;
    ct_shuffle_indices(&one, 1, 42, 1);
    CHECK(one == 0);
    ct_shuffle_indices(NULL, 0, 42, 1);
}

static void test_rng_normal(void)
{
    ct_rng r = {123};
    double sum = 0, sq = 0;
    int finite = 1;
    enum { N = 200000 };
    for (int i = 0; i < N; i++) {
        float v = ct_rng_normal(&r);
        finite &= isfinite(v);
        sum += v;
        sq += (double)v * v;
    }
    double mean = sum / N, var = sq / N - mean * mean;
    CHECK(finite);
    CHECK_NEAR(mean, 0.0, 0.01);
    CHECK_NEAR(var, 1.0, 0.02);
}

int main(void)
{
    if (!mkdtemp(tmp_root)) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_fmnist();
    test_idx_files();
    test_data_load();
    test_format_records();
    test_cifar();
    test_synthetic();
    test_augment_config();
    test_make_batch();
    test_shuffle();
    test_rng_normal();
    remove_tree(tmp_root);
    return ct_test_done();
}
