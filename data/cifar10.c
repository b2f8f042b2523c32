/* CIFAR-10 "binary version" batches.
 *
 * Each file is a run of 3073-byte records: one label byte (0..9), then the 32x32 red plane, the
 * green plane and the blue plane (CHW). Images are stored HWC here, as everywhere in cutrain. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "data/format.h"

#define CIFAR_SIDE 32
#define CIFAR_CHANNELS 3
#define CIFAR_PLANE (CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR_PIXELS (CIFAR_PLANE * CIFAR_CHANNELS)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define CIFAR_CLASSES 10
#define CIFAR_TRAIN_FILES 5

typedef struct path_list {
    char **items;
    int n;
} path_list;

static void paths_free(path_list *pl)
{
    for (int i = 0; i < pl->n; i++)
        free(pl->items[i]);
    free(pl->items);
    pl->items = NULL;
    pl->n = 0;
}

/* Appends a copy of s[0..len) (strdup is not C11). */
static ct_status paths_add(path_list *pl, const char *s, size_t len, ct_err *err)
{
    char **grown = realloc(pl->items, (size_t)(pl->n + 1) * sizeof *grown);
    char *copy = malloc(len + 1);
    if (grown)
        pl->items = grown;
    if (!grown || !copy) {
        free(copy);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory listing CIFAR-10 files");
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    pl->items[pl->n++] = copy;
    return CT_OK;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Splits "a.bin, b.bin" into trimmed items; empty items (",,") are skipped. */
static ct_status split_paths(const char *paths, path_list *pl, ct_err *err)
{
    const char *p = paths;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && is_space(*a))
            a++;
        while (b > a && is_space(b[-1]))
            b--;
        if (b > a) {
            ct_status st = paths_add(pl, a, (size_t)(b - a), err);
            if (st != CT_OK)
                return st;
        }
        p = *end ? end + 1 : end;
    }
    if (pl->n == 0)
        return ct_fail(err, CT_ERR_CONFIG, "no CIFAR-10 file given (\"%s\")", paths);
    return CT_OK;
}

/* A single folder stands for the standard file names inside it. */
static ct_status expand_folder(path_list *pl, int test, ct_err *err)
{
    struct stat sb;
    if (pl->n != 1 || stat(pl->items[0], &sb) != 0 || !S_ISDIR(sb.st_mode))
        return CT_OK;
    path_list files = {NULL, 0};
    int n = test ? 1 : CIFAR_TRAIN_FILES;
    ct_status st = CT_OK;
    for (int i = 0; i < n && st == CT_OK; i++) {
        char name[4096];
        int len = test ? snprintf(name, sizeof name, "%s/test_batch.bin", pl->items[0])
                       : snprintf(name, sizeof name, "%s/data_batch_%d.bin", pl->items[0], i + 1);
        if (len < 0 || (size_t)len >= sizeof name)
            st = ct_fail(err, CT_ERR_CONFIG, "%s: folder name too long", pl->items[0]);
        else
            st = paths_add(&files, name, (size_t)len, err);
    }
    if (st != CT_OK) {
        paths_free(&files);
        return st;
    }
    paths_free(pl);
    *pl = files;
    return CT_OK;
}

/* The number of records in a file, from its size (which must be a whole number of records). */
static ct_status count_records(const char *path, long *records, ct_err *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ct_fail(err, CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return ct_fail(err, CT_ERR_CONFIG,
                       "%s: is a folder (give one folder alone, or a comma list of files)", path);
    /* its size counts the records, and it is read twice (sized, then read): a regular file only */
    if (!S_ISREG(sb.st_mode))
        return ct_fail(err, CT_ERR_IO, "%s: %s, not a CIFAR-10 file: give a regular file", path,
                       S_ISFIFO(sb.st_mode)                          ? "a FIFO or pipe"
                       : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                                     : "not a regular file");
    if (sb.st_size <= 0 || sb.st_size % CIFAR_RECORD != 0)
        return ct_fail(err, CT_ERR_DATA,
                       "%s: size %lld bytes is not a positive multiple of the %d-byte CIFAR-10 record",
                       path, (long long)sb.st_size, CIFAR_RECORD);
    *records = (long)(sb.st_size / CIFAR_RECORD);
    return CT_OK;
}

// rec: 1 label byte + (c, h, w) uint8; img: (h, w, c) uint8
static void chw_to_hwc(const uint8_t *planes, uint8_t *img)
{
    for (int y = 0; y < CIFAR_SIDE; y++)
        for (int x = 0; x < CIFAR_SIDE; x++)
            for (int c = 0; c < CIFAR_CHANNELS; c++)
                img[(y * CIFAR_SIDE + x) * CIFAR_CHANNELS + c] = planes[c * CIFAR_PLANE + y * CIFAR_SIDE + x];
}

/* Reads `records` records of one file into images (records, 32, 32, 3) and labels (records). */
static ct_status read_records(const char *path, long records, uint8_t *images, uint8_t *labels,
                              ct_err *err)
{
    int fd;
    ct_status opened = ct_file_open(path, CT_FILE_REGULAR, "a CIFAR-10 file", &fd, err);
    if (opened != CT_OK)
        return opened;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        close(fd);
        return ct_fail(err, CT_ERR_NOMEM, "%s: cannot open: %s", path, strerror(errno));
    }
    uint8_t rec[CIFAR_RECORD];
    ct_status st = CT_OK;
    for (long r = 0; r < records && st == CT_OK; r++) {
        if (fread(rec, 1, sizeof rec, fp) != sizeof rec)
            st = ferror(fp) ? ct_fail(err, CT_ERR_IO, "%s: cannot read: %s", path, strerror(errno))
                            : ct_fail(err, CT_ERR_DATA, "%s: truncated at record %ld", path, r);
        else if (rec[0] >= CIFAR_CLASSES)
            st = ct_fail(err, CT_ERR_DATA,
                         "%s: record %ld (byte offset %ld) has label %d, expected 0..%d", path, r,
                         r * CIFAR_RECORD, rec[0], CIFAR_CLASSES - 1);
        else {
            labels[r] = rec[0];
            chw_to_hwc(rec + 1, images + (size_t)r * CIFAR_PIXELS);
        }
    }
    fclose(fp);
    return st;
}

/* Sizes every file first (so all size errors come before reading), then reads until `keep`. */
static ct_status load_files(ct_dataset *ds, const path_list *pl, long limit, ct_err *err)
{
    long total = 0;
    for (int i = 0; i < pl->n; i++) {
        long n = 0;
        ct_status st = count_records(pl->items[i], &n, err);
        if (st != CT_OK)
            return st;
        total += n;
    }
    long keep = limit > 0 && limit < total ? limit : total;
    ds->images = malloc((size_t)keep * CIFAR_PIXELS);
    ds->labels = malloc((size_t)keep);
    if (!ds->images || !ds->labels)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for %ld CIFAR-10 images", keep);
    long done = 0;
    for (int i = 0; i < pl->n && done < keep; i++) {
        long n = 0;
        ct_status st = count_records(pl->items[i], &n, err);
        if (st == CT_OK) {
            n = n < keep - done ? n : keep - done;
            st = read_records(pl->items[i], n, ds->images + (size_t)done * CIFAR_PIXELS,
                              ds->labels + done, err);
        }
        if (st != CT_OK)
            return st;
        done += n;
    }
    ds->count = keep;
    return CT_OK;
}

ct_status ct_cifar10_load(ct_dataset *ds, const char *paths, int test, long limit, ct_err *err)
{
    memset(ds, 0, sizeof *ds);
    if (!paths)
        return ct_fail(err, CT_ERR_CONFIG, "no CIFAR-10 file given");
    path_list pl = {NULL, 0};
    ct_status st = split_paths(paths, &pl, err);
    if (st == CT_OK)
        st = expand_folder(&pl, test, err);
    if (st == CT_OK)
        st = load_files(ds, &pl, limit, err);
    paths_free(&pl);
    if (st != CT_OK) {
        ct_dataset_free(ds);
        return st;
    }
    ds->shape = (ct_shape){CIFAR_SIDE, CIFAR_SIDE, CIFAR_CHANNELS};
    ds->classes = CIFAR_CLASSES;
    return CT_OK;
}

/* ---- format = cifar10: labels inside the files; train and test may list several files ---- */

#define D(f) offsetof(ct_data_settings, f)
static const ct_data_key cifar10_keys[] = {
    {.name = "train", .kind = CT_DATA_KEY_PATHS, .offset = D(train), .flags = CT_DATA_KEY_REQUIRED},
    {.name = "test", .kind = CT_DATA_KEY_PATHS, .offset = D(test)},
};
#undef D

static ct_status open_set(const ct_data_settings *dc, ct_data_split split, uint64_t seed, ct_dataset *ds,
                          ct_err *err)
{
    (void)seed;
    if (split == CT_DATA_TRAIN)
        return ct_cifar10_load(ds, dc->train, 0, dc->train_limit, err);
    return dc->test ? ct_cifar10_load(ds, dc->test, 1, dc->test_limit, err) : CT_OK;
}

static ct_status probe_set(const ct_data_settings *dc, ct_shape *shape, int *classes, ct_err *err)
{
    (void)dc;
    (void)err;
    *shape = (ct_shape){CIFAR_SIDE, CIFAR_SIDE, CIFAR_CHANNELS};
    *classes = CIFAR_CLASSES;
    return CT_OK;
}

const ct_data_format_def ct_data_format_cifar10 = {CT_DATA_KEYS(cifar10_keys), .open = open_set,
                                                  .probe = probe_set};
