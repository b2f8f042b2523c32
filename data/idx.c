/* IDX files (the MNIST / Fashion-MNIST format), raw or gzip.
 *
 * Layout: a big-endian magic 0x0000TTDD (TT = element type, 0x08 = unsigned byte; DD = number of
 * dimensions), DD big-endian uint32 sizes, then the elements. Images are 0x00000803 (n, rows,
 * cols), or 0x00000804 (n, h, w, c); labels are 0x00000801 (n).
 *
 * Everything goes through zlib's gz* functions, which read plain files unchanged, so gzip is
 * detected by content rather than by the file name. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "data/format.h"

#define IDX_TYPE_UBYTE 0x08
#define IDX_MAX_SAMPLE (1u << 24)      /* bytes per image: rejects absurd headers before malloc */
#define IDX_FIRST_CHUNK (1u << 24)     /* payload buffers grow from here, see read_payload */
#define IDX_MAX_READ (1u << 30)        /* gzread takes an unsigned and returns an int */
/* deflate's best ratio is about 1032:1, so a gzip file of n bytes inflates to at most this many */
#define GZIP_MAX_RATIO 1100u

typedef struct idx_file {
    gzFile gz;
    const char *path;
    long long file_bytes;   /* the file's size on disk, which bounds what its header may claim */
    int ndims;
    uint32_t dims[4];
} idx_file;

static void idx_close(idx_file *f)
{
    if (f->gz)
        gzclose(f->gz);
    f->gz = NULL;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* zlib's message without the "path: " it puts in front. */
static const char *zlib_message(gzFile gz, const char *path, int *zerr)
{
    const char *msg = gzerror(gz, zerr);
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        msg += n + 2;
    return msg;
}

/* Reports a failed gzread. A zlib-level failure is a corrupted stream (data); Z_ERRNO is the
 * operating system refusing the read (I/O, e.g. the path is a folder). */
static ct_status gz_failure(gzFile gz, const char *path, ct_err *err)
{
    int zerr = Z_OK;
    const char *zmsg = zlib_message(gz, path, &zerr);
    if (zerr == Z_ERRNO)
        return ct_fail(err, CT_ERR_IO, "%s: cannot read: %s", path, zmsg);   /* zmsg: strerror */
    if (zerr == Z_BUF_ERROR)   /* zlib's way of saying the gzip stream stops early */
        return ct_fail(err, CT_ERR_DATA, "%s: truncated gzip stream (%s)", path, zmsg);
    return ct_fail(err, CT_ERR_DATA, "%s: corrupted gzip stream (%s)", path, zmsg);
}

/* zlib's error code for the stream (Z_OK after a plain short read of a raw file). */
static int gz_code(gzFile gz)
{
    int zerr = Z_OK;
    gzerror(gz, &zerr);
    return zerr;
}

/* A failure other than the gzip stream ending early (Z_BUF_ERROR). An early end only means the
 * data is short, which callers report with the sizes involved. */
static int gz_broken(gzFile gz)
{
    int zerr = gz_code(gz);
    return zerr != Z_OK && zerr != Z_BUF_ERROR;
}

/* A header read failed outright. zlib may flag an early end of the stream while buffering ahead;
 * that only matters when the read came up short, and then the caller says "truncated". */
static int read_failed(gzFile gz, int got, int want)
{
    return got < 0 || (got < want && gz_broken(gz));
}

/* Opens `path` and reads the magic and dimensions. `ndims_ok` lists the accepted dimension
 * counts (a 0-terminated list); the first one is named in the "expected" part of messages. */
static ct_status idx_open(idx_file *f, const char *path, const int *ndims_ok, const char *what,
                          ct_err *err)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    /* a regular file only: it is opened more than once (its header, then its data), so a pipe's
     * first reader would take the header from the next; a device would never end */
    char kind[32];
    snprintf(kind, sizeof kind, "an IDX %s file", what);
    int fd;
    ct_status st = ct_file_open(path, CT_FILE_REGULAR, kind, &fd, err);
    if (st != CT_OK)
        return st;
    struct stat sb;
    f->file_bytes = fstat(fd, &sb) == 0 ? (long long)sb.st_size : -1;
    f->gz = gzdopen(fd, "rb");
    if (!f->gz) {
        close(fd);
        return ct_fail(err, CT_ERR_NOMEM, "%s: cannot open: out of memory", path);
    }
    gzbuffer(f->gz, 1u << 17);   /* the default 8 KiB makes decompression call overhead-bound */

    unsigned char head[4 + 4 * 4];
    int got = gzread(f->gz, head, 4);
    if (read_failed(f->gz, got, 4))
        return gz_failure(f->gz, path, err);
    if (got == 0)
        return ct_fail(err, CT_ERR_DATA, "%s: empty file (expected an IDX %s file)", path, what);
    if (got < 4)
        return ct_fail(err, CT_ERR_DATA, "%s: truncated IDX header (%d of 4 magic bytes)", path, got);
    uint32_t magic = be32(head);
    int nd = (int)(magic & 0xff);
    int accepted = 0;
    for (const int *n = ndims_ok; *n; n++)
        accepted |= nd == *n;
    if ((magic >> 8) != IDX_TYPE_UBYTE || !accepted)
        return ct_fail(err, CT_ERR_DATA, "%s: not an IDX %s file (magic 0x%08x, expected 0x%08x)",
                       path, what, (unsigned)magic, (unsigned)(IDX_TYPE_UBYTE << 8 | ndims_ok[0]));

    got = gzread(f->gz, head + 4, (unsigned)(4 * nd));
    if (read_failed(f->gz, got, 4 * nd))
        return gz_failure(f->gz, path, err);
    if (got < 4 * nd)
        return ct_fail(err, CT_ERR_DATA, "%s: truncated IDX header (%d of %d bytes)", path, 4 + got,
                       4 + 4 * nd);
    f->ndims = nd;
    for (int i = 0; i < nd; i++)
        f->dims[i] = be32(head + 4 + 4 * i);
    return CT_OK;
}

/* The header's claim against the file's size, before anything is read by it: `payload` bytes after
 * the header cannot come from a raw file with fewer, nor from a gzip file that small. */
static ct_status check_claim(const idx_file *f, unsigned long long payload, const char *claim, ct_err *err)
{
    if (f->file_bytes < 0)
        return CT_OK;
    unsigned long long head = 4u + 4u * (unsigned)f->ndims, size = (unsigned long long)f->file_bytes;
    if (gzdirect(f->gz)) {
        if (size < head || payload > size - head)
            return ct_fail(err, CT_ERR_DATA, "%s: the header claims %s (%llu bytes after the header) but the file "
                                             "has %llu bytes: truncated, or a wrong header",
                           f->path, claim, payload, size > head ? size - head : 0ull);
    } else if (payload / GZIP_MAX_RATIO > size) {
        return ct_fail(err, CT_ERR_DATA, "%s: the header claims %s (%llu bytes) but a gzip file of %llu bytes "
                                         "cannot hold that many: truncated, or a wrong header",
                       f->path, claim, payload, size);
    }
    return CT_OK;
}

static const int image_ndims[] = {3, 4, 0};
static const int label_ndims[] = {1, 0};

/* Opens an image file and turns its header into a sample shape, checking sizes are sane. */
static ct_status open_images(idx_file *f, const char *path, ct_shape *shape, ct_err *err)
{
    ct_status st = idx_open(f, path, image_ndims, "image", err);
    if (st != CT_OK)
        return st;
    uint32_t h = f->dims[1], w = f->dims[2], c = f->ndims == 4 ? f->dims[3] : 1;
    if (f->dims[0] == 0 || h == 0 || w == 0 || c == 0)
        return ct_fail(err, CT_ERR_DATA, "%s: IDX header has a zero size (%u images of %ux%ux%u)",
                       path, (unsigned)f->dims[0], (unsigned)h, (unsigned)w, (unsigned)c);
    /* h * w first: three 32-bit sizes can wrap 64 bits (2^25 cubed is 0), two cannot. */
    if ((uint64_t)h * w > IDX_MAX_SAMPLE || (uint64_t)h * w * c > IDX_MAX_SAMPLE)
        return ct_fail(err, CT_ERR_DATA, "%s: images of %ux%ux%u are too large (at most %u bytes each)",
                       path, (unsigned)h, (unsigned)w, (unsigned)c, (unsigned)IDX_MAX_SAMPLE);
    shape->h = (int)h;
    shape->w = (int)w;
    shape->c = (int)c;
    char claim[96];
    snprintf(claim, sizeof claim, "%u images of %ux%ux%u", (unsigned)f->dims[0], (unsigned)h, (unsigned)w,
             (unsigned)c);
    return check_claim(f, (unsigned long long)f->dims[0] * h * w * c, claim, err);
}

/* Opens a label file, its count checked against its size. */
static ct_status open_labels(idx_file *f, const char *path, ct_err *err)
{
    ct_status st = idx_open(f, path, label_ndims, "label", err);
    char claim[48];
    snprintf(claim, sizeof claim, "%u labels", (unsigned)f->dims[0]);
    return st == CT_OK ? check_claim(f, f->dims[0], claim, err) : st;
}

/* Reads up to `want` bytes into a new buffer. The buffer grows as data arrives instead of being
 * sized from the header, so a header that claims billions of images costs no more memory than
 * the file holds. *got < want means the payload ended early; the caller words that message. */
static ct_status read_payload(idx_file *f, size_t want, uint8_t **out, size_t *got, ct_err *err)
{
    *out = NULL;
    *got = 0;
    size_t cap = want < IDX_FIRST_CHUNK ? want : IDX_FIRST_CHUNK;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf)
        return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory for %zu bytes", f->path, cap);
    size_t have = 0;
    while (have < want) {
        if (have == cap) {
            size_t next = cap > want / 2 ? want : cap * 2;
            uint8_t *grown = realloc(buf, next);
            if (!grown) {
                free(buf);
                return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory for %zu bytes", f->path, next);
            }
            buf = grown;
            cap = next;
        }
        size_t room = cap - have;
        int n = gzread(f->gz, buf + have, (unsigned)(room < IDX_MAX_READ ? room : IDX_MAX_READ));
        if (n > 0)
            have += (size_t)n;
        if (n <= 0 || gz_broken(f->gz))
            break;
    }
    if (gz_broken(f->gz)) {
        free(buf);
        return gz_failure(f->gz, f->path, err);
    }
    *out = buf;
    *got = have;
    return CT_OK;
}

/* After the whole payload, one more read makes zlib reach the gzip trailer and verify its CRC,
 * which catches corruption that still inflates. Extra bytes after the payload are tolerated. */
static ct_status check_trailer(idx_file *f, ct_err *err)
{
    unsigned char extra;
    int n = gzread(f->gz, &extra, 1);
    if (n < 0 || gz_code(f->gz) != Z_OK)
        return gz_failure(f->gz, f->path, err);
    return CT_OK;
}

/* Reads every label (they are small) so that `classes` describes the whole file, not only the
 * first `limit` samples. */
static ct_status read_labels(idx_file *f, uint8_t **labels, int *classes, long *top_at, ct_err *err)
{
    size_t n = f->dims[0], got = 0;
    ct_status st = read_payload(f, n, labels, &got, err);
    if (st == CT_OK && got < n)
        st = ct_fail(err, CT_ERR_DATA, "%s: truncated: header says %zu labels, file holds %zu",
                     f->path, n, got);
    if (st == CT_OK)
        st = check_trailer(f, err);
    if (st != CT_OK) {
        free(*labels);
        *labels = NULL;
        return st;
    }
    int top = 0;
    *top_at = 0;
    for (size_t i = 0; i < n; i++)
        if ((*labels)[i] > top) {
            top = (*labels)[i];
            *top_at = (long)i;
        }
    *classes = top + 1;
    return CT_OK;
}

/* "28x28" for one channel, "32x32x3" otherwise, as the header gave them. */
static void shape_text(char *buf, size_t size, ct_shape s)
{
    if (s.c == 1)
        snprintf(buf, size, "%dx%d", s.h, s.w);
    else
        snprintf(buf, size, "%dx%dx%d", s.h, s.w, s.c);
}

/* Reads the first `keep` images. The CRC is only checked when `keep` covers the whole file. */
static ct_status read_images(idx_file *f, ct_shape shape, long keep, uint8_t **images, ct_err *err)
{
    size_t sample = ct_shape_size(shape), want = (size_t)keep * sample, got = 0;
    ct_status st = read_payload(f, want, images, &got, err);
    if (st == CT_OK && got < want) {
        char dims[48];
        shape_text(dims, sizeof dims, shape);
        st = ct_fail(err, CT_ERR_DATA,
                     "%s: truncated: header says %u images of %s, file holds %zu bytes of pixel "
                     "data (%zu needed)",
                     f->path, (unsigned)f->dims[0], dims, got, want);
    }
    if (st == CT_OK && (uint32_t)keep == f->dims[0])
        st = check_trailer(f, err);
    if (st != CT_OK) {
        free(*images);
        *images = NULL;
    }
    return st;
}

ct_status ct_idx_probe(const char *images_path, ct_shape *shape, ct_err *err)
{
    idx_file f;
    ct_status st = open_images(&f, images_path, shape, err);
    idx_close(&f);
    return st;
}

ct_status ct_idx_load(ct_dataset *ds, const char *images_path, const char *labels_path, long limit,
                      ct_err *err)
{
    memset(ds, 0, sizeof *ds);
    idx_file fi, fl;
    memset(&fl, 0, sizeof fl);
    ct_shape shape;
    uint8_t *labels = NULL, *images = NULL;
    int classes = 0;
    long top_at = 0;

    /* Both headers first: a count mismatch is reported before any pixel is read. */
    ct_status st = open_images(&fi, images_path, &shape, err);
    if (st == CT_OK && labels_path)
        st = open_labels(&fl, labels_path, err);
    if (st == CT_OK && labels_path && fl.dims[0] != fi.dims[0])
        st = ct_fail(err, CT_ERR_DATA, "%s holds %u images but %s holds %u labels", images_path,
                     (unsigned)fi.dims[0], labels_path, (unsigned)fl.dims[0]);
    long keep = (long)fi.dims[0];
    if (limit > 0 && limit < keep)
        keep = limit;
    if (st == CT_OK && (size_t)keep > SIZE_MAX / ct_shape_size(shape))
        st = ct_fail(err, CT_ERR_DATA, "%s: %ld images do not fit in memory", images_path, keep);
    if (st == CT_OK && labels_path)
        st = read_labels(&fl, &labels, &classes, &top_at, err);
    if (st == CT_OK)
        st = read_images(&fi, shape, keep, &images, err);
    /* Images alone: labels 0. Allocated only once the images are read, so `keep` is backed by
     * file content and a header claiming billions of images cannot make us allocate them. */
    if (st == CT_OK && !labels_path && !(labels = calloc((size_t)keep + 1, 1)))
        st = ct_fail(err, CT_ERR_NOMEM, "out of memory for %ld labels", keep);
    idx_close(&fi);
    idx_close(&fl);
    if (st != CT_OK) {
        free(labels);
        free(images);
        return st;
    }
    /* Keep only the first `keep` labels; shrinking cannot fail in practice, and a failure would
     * only leave the larger block, which is still valid. */
    uint8_t *shrunk = realloc(labels, (size_t)keep);
    ds->labels = shrunk ? shrunk : labels;
    ds->images = images;
    ds->count = keep;
    ds->shape = shape;
    ds->classes = classes;
    ds->top_label_at = top_at;
    return CT_OK;
}

/* ---- format = idx: images and labels in files of their own ---- */

#define D(f) offsetof(ct_data_settings, f)
static const ct_data_key idx_keys[] = {
    {.name = "train", .kind = CT_DATA_KEY_PATH, .offset = D(train), .flags = CT_DATA_KEY_REQUIRED},
    {.name = "train_labels", .kind = CT_DATA_KEY_PATH, .offset = D(train_labels), .flags = CT_DATA_KEY_REQUIRED,
     .note = "cifar10 files hold their labels"},
    {.name = "test", .kind = CT_DATA_KEY_PATH, .offset = D(test)},
    {.name = "test_labels", .kind = CT_DATA_KEY_PATH, .offset = D(test_labels), .with = "test",
     .note = "cifar10 files hold their labels"},
};
#undef D

static ct_status open_set(const ct_data_settings *dc, ct_data_split split, uint64_t seed, ct_dataset *ds,
                          ct_err *err)
{
    (void)seed;
    if (split == CT_DATA_TRAIN)
        return ct_idx_load(ds, dc->train, dc->train_labels, dc->train_limit, err);
    return dc->test ? ct_idx_load(ds, dc->test, dc->test_labels, dc->test_limit, err) : CT_OK;
}

/* The class count as open_set would find it: 1 + the largest label of the train and test label
 * files. Loading one image reads every label (they are small) and the headers only. */
static ct_status probe_classes(const ct_data_settings *dc, int *classes, ct_err *err)
{
    ct_dataset ds;
    ct_status st = ct_idx_load(&ds, dc->train, dc->train_labels, 1, err);
    *classes = ds.classes;
    ct_dataset_free(&ds);
    if (st == CT_OK && dc->test) {
        st = ct_idx_load(&ds, dc->test, dc->test_labels, 1, err);
        *classes = ds.classes > *classes ? ds.classes : *classes;
        ct_dataset_free(&ds);
    }
    return st;
}

static ct_status probe_set(const ct_data_settings *dc, ct_shape *shape, int *classes, ct_err *err)
{
    ct_status st = ct_idx_probe(dc->train, shape, err);
    return st == CT_OK ? probe_classes(dc, classes, err) : st;
}

/* probe_classes again, saying which file, index and value gave the count. */
static void largest_label(const ct_data_settings *dc, char *text, size_t size)
{
    const char *files[2] = {dc->train_labels, dc->test ? dc->test_labels : NULL};
    const char *images[2] = {dc->train, dc->test};
    int best = -1;
    for (int i = 0; i < 2; i++) {
        ct_dataset ds;
        ct_err ignored;
        if (files[i] && ct_idx_load(&ds, images[i], files[i], 1, &ignored) == CT_OK && ds.classes - 1 > best) {
            best = ds.classes - 1;
            snprintf(text, size, "label %d at index %ld of %s, the largest", best, ds.top_label_at, files[i]);
        }
        ct_dataset_free(&ds);
    }
}

const ct_data_format_def ct_data_format_idx = {CT_DATA_KEYS(idx_keys), .open = open_set, .probe = probe_set,
                                               .largest_label = largest_label};
