/* format = imagefolder: one class per subfolder of `train` (and `test`), JPEG and PNG files
 * decoded by the input pipeline's workers at the crop (data/image_decode.h).
 *
 * Open builds the index (image_index.c) and keeps it as ds->source; nothing is decoded then. A
 * worker's reader holds one decoder and one read buffer, grown only. Each sample is decoded from
 * a source region straight to the output size:
 *   training  random_resized_crop (torchvision's: 10 tries of an area fraction in crop_scale and a
 *             log-uniform aspect ratio in crop_ratio, then the centre crop clamped to the ratio
 *             range) and a horizontal flip, drawn from (augment_seed, i, width, height) only:
 *                 r    = ct_hash3(augment_seed, i, 0),  flip = (r >> 32) & 1   (as batch.c)
 *                 the crop's draws: ct_rng seeded with ct_hash3(augment_seed, i, 1)
 *             so a batch is the same for any number of workers, in sync mode and on resume;
 *   otherwise the shorter side resized to eval_resize and the centre image_size of it, expressed
 *             as the region of the original image it covers, so the decoder decodes only that.
 * With decode = gpu (read_encoded) the region and flip are drawn the same way, but a JPEG the device
 * decoder takes is handed over compressed with them instead of being decoded (data/encoded.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/rng.h"
#include "data/format.h"
#include "data/image_decode.h"
#include "data/image_index.h"
#include "data/imagefolder.h"

enum { CROP_TRIES = 10 };

/* What a set decoded on demand keeps: its index and the transform of dc. */
typedef struct folder_source {
    ct_image_index ix;
    int out_h, out_w, channels;
    int random_resized_crop, flip;
    float scale[2], ratio[2];
    int eval_resize;
    ct_bad_image_action on_bad;
    ct_image_cache cache;
    long max_pixels;
    ct_decode_shortcuts shortcuts;
    ct_jpeg_huffman_choice huffman;
    unsigned char *bad;   /* per entry: found bad (on_bad_image = skip); written by workers */
} folder_source;

typedef struct folder_reader {
    ct_image_decoder *dec;
    uint8_t *buf;
    size_t cap;
} folder_reader;

/* ---- the crop ---- */

/* A w x h region (each clamped to 1 .. the image's side) in the centre of a width x height image. */
static ct_image_region centred_region(int width, int height, int w, int h)
{
    w = w < 1 ? 1 : w > width ? width : w;
    h = h < 1 ? 1 : h > height ? height : h;
    return (ct_image_region){(width - w) / 2, (height - h) / 2, w, h, 0};
}

/* The region random_resized_crop takes of a width x height image for sample i of the batch. */
static ct_image_region random_region(const folder_source *s, uint64_t seed, int i, int width, int height)
{
    ct_rng rng = {ct_hash3(seed, (uint64_t)i, 1)};
    double area = (double)width * (double)height;
    double lr0 = log((double)s->ratio[0]), lr1 = log((double)s->ratio[1]);
    for (int t = 0; t < CROP_TRIES; t++) {
        double target = area * (s->scale[0] + (s->scale[1] - s->scale[0]) * (double)ct_rng_uniform(&rng));
        double ar = exp(lr0 + (lr1 - lr0) * (double)ct_rng_uniform(&rng));
        int w = (int)lround(sqrt(target * ar)), h = (int)lround(sqrt(target / ar));
        if (w > 0 && h > 0 && w <= width && h <= height) {
            int y = (int)(ct_rng_next(&rng) % (uint64_t)(height - h + 1));
            int x = (int)(ct_rng_next(&rng) % (uint64_t)(width - w + 1));
            return (ct_image_region){x, y, w, h, 0};
        }
    }
    /* fallback: the whole image, narrowed to the ratio range, centred */
    double in_ratio = (double)width / (double)height;
    int w = width, h = height;
    if (in_ratio < s->ratio[0])
        h = (int)lround(w / (double)s->ratio[0]);
    else if (in_ratio > s->ratio[1])
        w = (int)lround(h * (double)s->ratio[1]);
    return centred_region(width, height, w, h);
}

/* The evaluation region: the shorter side resized to eval_resize, then the centre out_w x out_h,
 * as the part of the original image it covers. */
static ct_image_region eval_region(const folder_source *s, int width, int height)
{
    double shorter = width < height ? width : height;
    double f = shorter / (double)s->eval_resize;   /* source pixels per resized pixel */
    return centred_region(width, height, (int)lround(s->out_w * f), (int)lround(s->out_h * f));
}

ct_image_region ct_imagefolder_region(const ct_dataset *ds, int augmenting, uint64_t seed, int i, int width,
                                      int height)
{
    const folder_source *s = ds->source;
    ct_image_region r = augmenting && s->random_resized_crop ? random_region(s, seed, i, width, height)
                                                             : eval_region(s, width, height);
    r.flip = augmenting && s->flip ? (int)((ct_hash3(seed, (uint64_t)i, 0) >> 32) & 1) : 0;
    return r;
}

/* ---- reading ---- */

static ct_status reader_new(const ct_dataset *ds, void **state, ct_err *err)
{
    const folder_source *s = ds->source;
    folder_reader *r = calloc(1, sizeof *r);
    if (!r)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for an image reader");
    ct_image_decode_options opt = {
        .region = s->shortcuts == CT_DECODE_SHORTCUTS_ALL || s->shortcuts == CT_DECODE_SHORTCUTS_REGION,
        .dct_scale = s->shortcuts == CT_DECODE_SHORTCUTS_ALL || s->shortcuts == CT_DECODE_SHORTCUTS_DCT_SCALE,
        .max_pixels = s->max_pixels,
        .libjpeg_huffman = s->huffman == CT_JPEG_HUFFMAN_LIBJPEG};
    ct_status st = ct_image_decoder_new(&r->dec, &opt, err);
    if (st != CT_OK) {
        free(r);
        return st;
    }
    *state = r;
    return CT_OK;
}

static void reader_free(void *state)
{
    folder_reader *r = state;
    if (!r)
        return;
    ct_image_decoder_free(r->dec);
    free(r->buf);
    free(r);
}

/* The whole file of entry e: from the cache, or one pread into the reader's buffer. */
static ct_status file_bytes(const ct_image_entry *e, folder_reader *r, ct_sample_reader *rd, const uint8_t **bytes,
                            size_t *n, ct_err *err)
{
    if (e->bytes) {
        *bytes = e->bytes;
        *n = (size_t)e->size;
        return CT_OK;
    }
    /* the index took regular files only: one swapped since for a FIFO must not block a worker */
    int fd = open(e->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return ct_fail(err, CT_ERR_IO, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ct_fail(err, CT_ERR_IO, "no longer a regular file (it changed since the folder was indexed)");
    }
    size_t want = (size_t)e->size;
    if (want > r->cap) {
        uint8_t *g = realloc(r->buf, want);
        if (!g) {
            close(fd);
            return ct_fail(err, CT_ERR_NOMEM, "out of memory for a read buffer of %zu bytes", want);
        }
        r->buf = g;
        r->cap = want;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t k = pread(fd, r->buf + got, want - got, (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e_no = errno;
            close(fd);
            return k < 0 ? ct_fail(err, CT_ERR_IO, "read failed: %s", strerror(e_no))
                         : ct_fail(err, CT_ERR_DATA, "the file is shorter (%zu bytes) than at open (%zu)", got, want);
        }
        got += (size_t)k;
    }
    close(fd);
    rd->input_bytes += (long long)got;
    *bytes = r->buf;
    *n = got;
    return CT_OK;
}

/* Whether a device decoder ([data] decode = gpu) takes the file: a baseline JPEG of one or three
 * components within max_pixels. Progressive and CMYK/YCCK JPEGs, and PNGs, are decoded by the
 * worker (nvJPEG's default backend handles neither four components nor, on its hardware engine,
 * progressive scans; the CPU decoder's max_pixels refusal then gives its usual message). */
static int device_takes(const folder_source *s, const ct_image_info *info)
{
    return info->kind == CT_IMAGE_JPEG && !info->progressive && (info->channels == 1 || info->channels == 3) &&
           (s->max_pixels == 0 || (long long)info->width * info->height <= s->max_pixels);
}

/* Entry k as sample i: decoded into x, or with enc, a file the device takes left compressed there.
 * x: (out_h, out_w, channels) uint8 */
static ct_status take_entry(const ct_dataset *ds, folder_reader *r, ct_sample_reader *rd, long k, int i,
                            int augmenting, uint64_t seed, uint8_t *x, ct_encoded_batch *enc, ct_err *err)
{
    const folder_source *s = ds->source;
    const uint8_t *bytes = NULL;
    size_t n = 0;
    ct_status st = file_bytes(&s->ix.entries[k], r, rd, &bytes, &n, err);
    ct_image_info info;
    if (st == CT_OK)
        st = ct_image_read_info(r->dec, bytes, n, &info, err);
    if (st != CT_OK)
        return st;
    ct_image_region reg = ct_imagefolder_region(ds, augmenting, seed, i, info.width, info.height);
    if (enc && !ct_encoded_place_on_cpu(i, enc->cpu_share) && device_takes(s, &info)) {
        st = ct_encoded_batch_add(enc, i, bytes, n, err);
        if (st == CT_OK) {
            ct_encoded_image *e = &enc->images[i];
            e->x = reg.x;
            e->y = reg.y;
            e->w = reg.w;
            e->h = reg.h;
            e->flip = reg.flip;
            e->width = info.width;
            e->height = info.height;
            e->name = s->ix.entries[k].path;
        }
        return st;
    }
    return ct_image_decode_region(r->dec, bytes, n, &reg, s->out_w, s->out_h, s->channels, x, err);
}

/* on_bad_image = skip: a file that fails is replaced by the next entry of the index (wrapping)
 * that decodes, a choice that depends on the files alone, so batches stay deterministic. With enc
 * (decode = gpu) a file the device takes counts as good once its header reads: a flaw in its
 * compressed data is found by the device decoder, which fails the batch naming the file. */
static ct_status take_sample(const ct_dataset *ds, ct_sample_reader *rd, long index, int i, int augmenting,
                             uint64_t seed, uint8_t *x, int32_t *y, ct_encoded_batch *enc, ct_err *err)
{
    folder_source *s = ds->source;
    folder_reader *r = rd->state;
    for (long t = 0; t < ds->count; t++) {
        long k = (index + t) % ds->count;
        ct_err e;
        ct_err_clear(&e);
        ct_status st = take_entry(ds, r, rd, k, i, augmenting, seed, x, enc, &e);
        if (st == CT_OK) {
            if (t > 0)
                rd->bad_images++;
            *y = ds->labels ? ds->labels[k] : 0;   /* the label of the file decoded */
            return CT_OK;
        }
        if (s->on_bad != CT_BAD_IMAGE_SKIP || st == CT_ERR_NOMEM)
            return ct_fail(err, st, "%s: %s", s->ix.entries[k].path, e.msg);
        __atomic_store_n(&s->bad[k], 1, __ATOMIC_RELAXED);
    }
    return ct_fail(err, CT_ERR_DATA, "no file of the set decodes (on_bad_image = skip); the first: %s",
                   s->ix.entries[index].path);
}

static ct_status read_sample(const ct_dataset *ds, ct_sample_reader *rd, long index, int i, int augmenting,
                             uint64_t seed, uint8_t *x, int32_t *y, ct_err *err)
{
    return take_sample(ds, rd, index, i, augmenting, seed, x, y, NULL, err);
}

static ct_status read_encoded(const ct_dataset *ds, ct_sample_reader *rd, long index, int i, int augmenting,
                              uint64_t seed, uint8_t *x, int32_t *y, ct_encoded_batch *enc, ct_err *err)
{
    return take_sample(ds, rd, index, i, augmenting, seed, x, y, enc, err);
}

/* ---- open ---- */

static void source_free(void *p)
{
    folder_source *s = p;
    if (!s)
        return;
    ct_image_index_free(&s->ix);
    free(s->bad);
    free(s);
}

static long long mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* cache = bytes: every file into memory, once the total is known to fit. */
static ct_status cache_files(ct_image_index *ix, const char *root, ct_err *err)
{
    long long total = 0;
    for (long i = 0; i < ix->count; i++)
        total += ix->entries[i].size;
    long long avail = mem_available();
    if (avail >= 0 && total > avail)
        return ct_fail(err, CT_ERR_NOMEM,
                       "%s: cache = bytes needs %.1f MiB for %ld files but only %.1f MiB are available "
                       "(MemAvailable); use cache = none",
                       root, total / 1048576.0, ix->count, avail / 1048576.0);
    for (long i = 0; i < ix->count; i++) {
        ct_image_entry *e = &ix->entries[i];
        size_t len = 0;
        ct_status st = ct_file_read(e->path, CT_FILE_REGULAR, 0, "an image file", &e->bytes, &len, err);
        if (st != CT_OK)
            return st;
        e->size = (long long)len;
    }
    return CT_OK;
}

static ct_status new_source(const ct_data_settings *dc, folder_source **out, ct_err *err)
{
    folder_source *s = calloc(1, sizeof *s);
    if (!s)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory opening an image folder");
    s->out_h = dc->image_h;
    s->out_w = dc->image_w;
    s->channels = dc->channels;
    s->random_resized_crop = dc->random_resized_crop;
    s->flip = dc->flip;
    memcpy(s->scale, dc->crop_scale, sizeof s->scale);
    memcpy(s->ratio, dc->crop_ratio, sizeof s->ratio);
    int longer = s->out_h > s->out_w ? s->out_h : s->out_w;
    s->eval_resize = dc->eval_resize > 0 ? dc->eval_resize : (int)lround(longer * 256.0 / 224.0);
    s->on_bad = dc->on_bad_image;
    s->cache = dc->cache;
    s->max_pixels = dc->max_pixels;
    s->shortcuts = dc->decode_shortcuts;
    s->huffman = dc->jpeg_huffman;
    *out = s;
    return CT_OK;
}

/* Fills ds from a finished index (taken over by ds). */
static ct_status finish(const ct_data_settings *dc, folder_source *s, const char *root, ct_dataset *ds, ct_err *err)
{
    ct_status st = CT_OK;
    if (dc->cache == CT_IMAGE_CACHE_BYTES)
        st = cache_files(&s->ix, root, err);
    if (st == CT_OK && !(s->bad = calloc((size_t)s->ix.count + 1, 1)))
        st = ct_fail(err, CT_ERR_NOMEM, "out of memory opening %s", root);
    if (st != CT_OK) {
        source_free(s);
        return st;
    }
    ds->format = CT_DATA_IMAGEFOLDER;
    ds->source = s;
    ds->count = s->ix.count;
    ds->shape = (ct_shape){s->out_h, s->out_w, s->channels};
    /* the paths below root ("root/class/x.png" -> "class/x.png"), so a moved folder hashes the same */
    size_t root_len = strlen(root);
    if (root_len && root[root_len - 1] != '/')
        root_len++;
    ds->index_hash = ct_image_index_hash(&s->ix, root_len);
    return CT_OK;
}

/* The class names: `classes = ...` in its order (each must be a folder of root), else every
 * subfolder of root, sorted. */
static ct_status class_folders(const ct_data_settings *dc, const char *root, char ***names, int *n, ct_err *err)
{
    char **all;
    int n_all;
    ct_status st = ct_image_subfolders(root, &all, &n_all, err);
    if (st != CT_OK)
        return st;
    if (!dc->class_list) {
        if (n_all == 0) {
            ct_image_names_free(all, n_all);
            return ct_fail(err, CT_ERR_DATA, "%s has no class subfolders (format = imagefolder takes one folder per "
                           "class)", root);
        }
        *names = all;
        *n = n_all;
        return CT_OK;
    }
    char *copy = strdup(dc->class_list);
    char **mine = calloc(strlen(dc->class_list) / 2 + 2, sizeof *mine);
    int k = 0;
    if (!copy || !mine)
        st = ct_fail(err, CT_ERR_NOMEM, "out of memory reading classes");
    for (char *save = NULL, *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && st == CT_OK;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t len = strlen(tok);
        while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
            tok[--len] = 0;
        if (!len)
            continue;
        int found = 0;
        for (int i = 0; i < n_all; i++)
            found |= strcmp(all[i], tok) == 0;
        for (int i = 0; i < k; i++)
            if (strcmp(mine[i], tok) == 0)
                st = ct_fail(err, CT_ERR_CONFIG, "[data] classes names '%s' twice", tok);
        if (st == CT_OK && !found)
            st = ct_fail(err, CT_ERR_DATA, "%s has no folder for class '%s' named in [data] classes", root, tok);
        if (st == CT_OK && !(mine[k++] = strdup(tok)))
            st = ct_fail(err, CT_ERR_NOMEM, "out of memory reading classes");
    }
    free(copy);
    ct_image_names_free(all, n_all);
    if (st == CT_OK && k > 256)
        st = ct_fail(err, CT_ERR_DATA, "%s: %d classes; at most 256 are supported", root, k);
    if (st != CT_OK) {
        ct_image_names_free(mine, k);
        return st;
    }
    *names = mine;
    *n = k;
    return CT_OK;
}

/* The whole labelled index of root, every class folder in label order. */
static ct_status index_classes(const char *root, char **names, int n, ct_image_index *ix, ct_err *err)
{
    ct_status st = CT_OK;
    for (int c = 0; c < n && st == CT_OK; c++) {
        size_t len = strlen(root) + strlen(names[c]) + 2;
        char *p = malloc(len);
        if (!p)
            return ct_fail(err, CT_ERR_NOMEM, "out of memory indexing %s", root);
        snprintf(p, len, "%s%s%s", root, root[0] && root[strlen(root) - 1] == '/' ? "" : "/", names[c]);
        long before = ix->count;
        st = ct_image_index_add_folder(ix, p, c, err);
        if (st == CT_OK && ix->count == before)
            st = ct_fail(err, CT_ERR_DATA, "class folder %s holds no JPEG or PNG file", p);
        free(p);
    }
    if (st == CT_OK && n > 256)
        st = ct_fail(err, CT_ERR_DATA, "%s: %d classes; at most 256 are supported", root, n);
    return st;
}

/* Keeps entries whose keep[] is set, in order (the others freed). */
static void keep_entries(ct_image_index *ix, const unsigned char *keep)
{
    long k = 0;
    for (long i = 0; i < ix->count; i++) {
        if (keep[i])
            ix->entries[k++] = ix->entries[i];
        else {
            free(ix->entries[i].path);
            free(ix->entries[i].bytes);
        }
    }
    ix->count = k;
}

/* validation_split: a seeded shuffle of the index, its last floor(F * count) entries the
 * validation (test) set and the rest training (as Keras); each kept in index order. */
static ct_status split_index(const ct_data_settings *dc, ct_data_split split, ct_image_index *ix, ct_err *err)
{
    long n = ix->count, n_val = (long)((double)dc->validation_split * (double)n);
    long *perm = malloc((size_t)(n ? n : 1) * sizeof *perm);
    unsigned char *keep = calloc((size_t)n + 1, 1);
    if (!perm || !keep) {
        free(perm);
        free(keep);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory splitting %s", dc->train);
    }
    ct_shuffle_indices(perm, n, (uint64_t)dc->validation_seed, 0);
    for (long i = 0; i < n; i++)
        keep[perm[i]] = (i >= n - n_val) == (split == CT_DATA_TEST);
    keep_entries(ix, keep);
    free(perm);
    free(keep);
    if (ix->count == 0)
        return ct_fail(err, CT_ERR_DATA, "%s: validation_split = %g of %ld files leaves the %s set empty", dc->train,
                       (double)dc->validation_split, n, split == CT_DATA_TEST ? "validation" : "training");
    return CT_OK;
}

static ct_status names_differ(const char *train, char **a, int na, const char *test, char **b, int nb, ct_err *err)
{
    char la[512] = "", lb[512] = "";
    for (int i = 0; i < na; i++)
        snprintf(la + strlen(la), sizeof la - strlen(la), "%s%s", i ? ", " : "", a[i]);
    for (int i = 0; i < nb; i++)
        snprintf(lb + strlen(lb), sizeof lb - strlen(lb), "%s%s", i ? ", " : "", b[i]);
    return ct_fail(err, CT_ERR_DATA, "the test folder %s has classes (%s) but the training folder %s has (%s)", test,
                   lb, train, la);
}

static ct_status open_set(const ct_data_settings *dc, ct_data_split split, uint64_t seed, ct_dataset *ds,
                          ct_err *err)
{
    (void)seed;
    int from_split = split == CT_DATA_TEST && dc->validation_split > 0;
    if (split == CT_DATA_TEST && !dc->test && !from_split)
        return CT_OK;
    const char *root = split == CT_DATA_TEST && !from_split ? dc->test : dc->train;
    char **names = NULL;
    int n = 0;
    ct_status st = class_folders(dc, dc->train, &names, &n, err);
    if (st == CT_OK && root != dc->train) {
        char **tn = NULL;   /* stays NULL when the folder cannot be read */
        int tc = 0;
        st = class_folders(dc, root, &tn, &tc, err);
        int same = st == CT_OK && tc == n;
        for (int i = 0; same && i < n; i++)
            same = strcmp(tn[i], names[i]) == 0;
        if (st == CT_OK && !same)
            st = names_differ(dc->train, names, n, root, tn, tc, err);
        if (tn)
            ct_image_names_free(tn, tc);
    }
    folder_source *s = NULL;
    if (st == CT_OK)
        st = new_source(dc, &s, err);
    if (st == CT_OK)
        st = index_classes(root, names, n, &s->ix, err);
    if (st == CT_OK && dc->validation_split > 0)
        st = split_index(dc, split, &s->ix, err);
    long limit = split == CT_DATA_TEST ? dc->test_limit : dc->train_limit;
    if (st == CT_OK && limit > 0 && limit < s->ix.count) {
        unsigned char *keep = calloc((size_t)s->ix.count, 1);
        if (!keep)
            st = ct_fail(err, CT_ERR_NOMEM, "out of memory opening %s", root);
        /* evenly spread over the index, so that every class keeps its share (the first N
         * entries would be the first classes only) */
        for (long i = 0; keep && i < limit; i++)
            keep[(long)((double)i * (double)s->ix.count / (double)limit)] = 1;
        if (keep)
            keep_entries(&s->ix, keep);
        free(keep);
    }
    if (st == CT_OK && !(ds->labels = malloc((size_t)s->ix.count + 1)))
        st = ct_fail(err, CT_ERR_NOMEM, "out of memory for %ld labels", s->ix.count);
    if (st != CT_OK) {
        source_free(s);
        ct_image_names_free(names, n);
        free(ds->labels);
        ds->labels = NULL;
        return st;
    }
    for (long i = 0; i < s->ix.count; i++)
        ds->labels[i] = (uint8_t)s->ix.entries[i].label;
    st = finish(dc, s, root, ds, err);
    if (st != CT_OK) {
        ct_image_names_free(names, n);
        free(ds->labels);
        ds->labels = NULL;
        return st;
    }
    ds->classes = n;
    ds->class_names = names;
    return CT_OK;
}

static ct_status probe_set(const ct_data_settings *dc, ct_shape *shape, int *classes, ct_err *err)
{
    char **names;
    int n;
    ct_status st = class_folders(dc, dc->train, &names, &n, err);
    if (st != CT_OK)
        return st;
    ct_image_names_free(names, n);
    *shape = (ct_shape){dc->image_h, dc->image_w, dc->channels};
    *classes = n;
    return CT_OK;
}

static ct_status check_set(const ct_data_settings *dc, ct_err *err)
{
    if (dc->image_h < 1 || dc->image_w < 1 || (size_t)dc->image_h * (size_t)dc->image_w > (1u << 24))
        return ct_fail(err, CT_ERR_CONFIG, "[data] image_size %dx%d is not valid for format = imagefolder",
                       dc->image_h, dc->image_w);
    if (dc->channels != 1 && dc->channels != 3)
        return ct_fail(err, CT_ERR_CONFIG, "[data] channels = %d: format = imagefolder takes 1 or 3", dc->channels);
    if (!(dc->validation_split >= 0.0f && dc->validation_split < 1.0f))
        return ct_fail(err, CT_ERR_CONFIG, "[data] validation_split = %g: expected 0 < F < 1 (or 0: none)",
                       (double)dc->validation_split);
    if (dc->validation_split > 0 && dc->test)
        return ct_fail(err, CT_ERR_CONFIG,
                       "[data] has both test and validation_split; give one (validation_split takes the test set "
                       "from train)");
    if (dc->crop_pad > 0)
        return ct_fail(err, CT_ERR_CONFIG,
                       "[data] augment crop:N pads and crops images held in memory; format = imagefolder crops at "
                       "decode: use augment = random_resized_crop");
    if (!(dc->crop_scale[0] > 0 && dc->crop_scale[0] <= dc->crop_scale[1] && dc->crop_scale[1] <= 1.0f))
        return ct_fail(err, CT_ERR_CONFIG, "[data] crop_scale = %g, %g: expected 0 < lo <= hi <= 1",
                       (double)dc->crop_scale[0], (double)dc->crop_scale[1]);
    if (!(dc->crop_ratio[0] > 0 && dc->crop_ratio[0] <= dc->crop_ratio[1]))
        return ct_fail(err, CT_ERR_CONFIG, "[data] crop_ratio = %g, %g: expected 0 < lo <= hi",
                       (double)dc->crop_ratio[0], (double)dc->crop_ratio[1]);
    if (dc->decode == CT_DECODE_AT_GPU && dc->augment_on != CT_AUGMENT_ON_GPU)
        return ct_fail(err, CT_ERR_CONFIG,
                       "[data] decode = gpu needs augment_on = gpu: the device normalises the images it decodes "
                       "(or use decode = auto, which decodes on the CPU when augment_on = cpu)");
    if (dc->eval_resize < 0 || dc->max_pixels < 0)
        return ct_fail(err, CT_ERR_CONFIG, "[data] eval_resize and max_pixels must not be negative");
    return CT_OK;
}

/* ---- image files to predict ---- */

ct_status ct_image_files_open(const ct_data_settings *dc, const char *const *paths, int n_paths, ct_dataset *ds,
                              ct_err *err)
{
    memset(ds, 0, sizeof *ds);
    ct_data_settings eval = *dc;
    eval.random_resized_crop = 0;
    eval.flip = 0;
    eval.on_bad_image = CT_BAD_IMAGE_ERROR;
    eval.cache = CT_IMAGE_CACHE_NONE;
    if (eval.channels == 0)
        eval.channels = 3;
    if (eval.crop_scale[1] == 0) {   /* settings a program made: the transform needs only these */
        eval.crop_scale[0] = eval.crop_scale[1] = 1;
        eval.crop_ratio[0] = eval.crop_ratio[1] = 1;
    }
    eval.validation_split = 0;
    eval.test = NULL;
    eval.crop_pad = 0;
    eval.decode = CT_DECODE_AT_CPU;   /* prediction decodes in the caller's process, on the CPU */
    ct_status st = check_set(&eval, err);
    folder_source *s = NULL;
    if (st == CT_OK)
        st = new_source(&eval, &s, err);
    for (int i = 0; i < n_paths && st == CT_OK; i++)
        st = ct_image_index_add_path(&s->ix, paths[i], 0, err);
    if (st == CT_OK && s->ix.count == 0)
        st = ct_fail(err, CT_ERR_DATA, "no JPEG or PNG file in %s%s", n_paths > 0 ? paths[0] : "(no paths)",
                     n_paths > 1 ? " and the other paths given" : "");
    if (st != CT_OK) {
        source_free(s);
        return st;
    }
    return finish(&eval, s, "", ds, err);
}

/* ---- what the log and the pipeline ask ---- */

static const folder_source *source_of(const ct_dataset *ds)
{
    return ds && !ds->images && ds->source && ds->format == CT_DATA_IMAGEFOLDER ? ds->source : NULL;
}

const char *ct_dataset_sample_path(const ct_dataset *ds, long index)
{
    const folder_source *s = source_of(ds);
    return s && index >= 0 && index < s->ix.count ? s->ix.entries[index].path : NULL;
}

void ct_dataset_skipped(const ct_dataset *ds, long *hidden, long *not_images)
{
    const folder_source *s = source_of(ds);
    if (hidden)
        *hidden = s ? s->ix.hidden : 0;
    if (not_images)
        *not_images = s ? s->ix.not_images : 0;
}

long ct_dataset_bad_files(const ct_dataset *ds, const char **names, long max)
{
    const folder_source *s = source_of(ds);
    long n = 0;
    for (long i = 0; s && i < s->ix.count; i++)
        if (__atomic_load_n(&s->bad[i], __ATOMIC_RELAXED)) {
            if (names && n < max)
                names[n] = s->ix.entries[i].path;
            n++;
        }
    return n;
}

void ct_dataset_prefetch_hint(const ct_dataset *ds, long index)
{
    const folder_source *s = source_of(ds);
    if (!s || s->cache != CT_IMAGE_CACHE_NONE || index < 0 || index >= s->ix.count)
        return;
    int fd = open(s->ix.entries[index].path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;   /* the read itself reports it */
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    close(fd);
}

/* ---- the record ---- */

static const char *const bad_image_names[] = {"error", "skip", NULL};
static const char *const cache_names[] = {"none", "bytes", NULL};
static const char *const shortcut_names[] = {"all", "region", "dct_scale", "none", NULL};
static const char *const huffman_names[] = {"cutrain", "libjpeg", NULL};
static const char *const decode_names[] = {"cpu", "gpu", "auto", NULL};

#define D(f) offsetof(ct_data_settings, f)
static const ct_data_key imagefolder_keys[] = {
    {.name = "train", .kind = CT_DATA_KEY_PATH, .offset = D(train), .flags = CT_DATA_KEY_REQUIRED},
    {.name = "test", .kind = CT_DATA_KEY_PATH, .offset = D(test)},
    {.name = "validation_split", .kind = CT_DATA_KEY_FLOAT, .offset = D(validation_split), .def = "0",
     .note = "other formats have a test set of their own"},
    {.name = "validation_seed", .kind = CT_DATA_KEY_LONG, .offset = D(validation_seed), .def = "0",
     .flags = CT_DATA_KEY_HAS_MIN, .min = 0, .note = "other formats have a test set of their own"},
    {.name = "classes", .kind = CT_DATA_KEY_WORDS, .offset = D(class_list),
     .note = "the class names of format = imagefolder are its folders"},
    {.name = "image_size", .kind = CT_DATA_KEY_SIZE, .offset = D(image_h), .flags = CT_DATA_KEY_REQUIRED,
     .note = "other formats' images have their files' size"},
    {.name = "channels", .kind = CT_DATA_KEY_INT, .offset = D(channels), .def = "3",
     .flags = CT_DATA_KEY_HAS_MIN | CT_DATA_KEY_HAS_MAX, .min = 1, .max = 3},
    {.name = "crop_scale", .kind = CT_DATA_KEY_RANGE, .offset = D(crop_scale), .def = "0.08, 1.0",
     .note = "random_resized_crop is format = imagefolder's"},
    {.name = "crop_ratio", .kind = CT_DATA_KEY_RANGE, .offset = D(crop_ratio), .def = "0.75, 1.3333333",
     .note = "random_resized_crop is format = imagefolder's"},
    {.name = "eval_resize", .kind = CT_DATA_KEY_INT, .offset = D(eval_resize), .def = "0",
     .flags = CT_DATA_KEY_HAS_MIN, .min = 0},
    {.name = "on_bad_image", .kind = CT_DATA_KEY_ENUM, .offset = D(on_bad_image), .def = "error",
     .names = bad_image_names},
    {.name = "cache", .kind = CT_DATA_KEY_ENUM, .offset = D(cache), .def = "none", .names = cache_names},
    {.name = "max_pixels", .kind = CT_DATA_KEY_LONG, .offset = D(max_pixels), .def = "178956970",
     .flags = CT_DATA_KEY_HAS_MIN, .min = 0},
    {.name = "decode_shortcuts", .kind = CT_DATA_KEY_ENUM, .offset = D(decode_shortcuts), .def = "all",
     .names = shortcut_names},
    {.name = "jpeg_huffman", .kind = CT_DATA_KEY_ENUM, .offset = D(jpeg_huffman), .def = "cutrain",
     .names = huffman_names},
    {.name = "decode", .kind = CT_DATA_KEY_ENUM, .offset = D(decode), .def = "cpu", .names = decode_names,
     .note = "only JPEG files are decoded on the device"},
    {.name = "gpu_decode_cpu_share", .kind = CT_DATA_KEY_SHARE, .offset = D(gpu_decode_cpu_share), .def = "auto",
     .note = "only JPEG files are decoded on the device"},
};
#undef D

const ct_data_format_def ct_data_format_imagefolder = {
    CT_DATA_KEYS(imagefolder_keys), .check = check_set, .open = open_set, .probe = probe_set,
    .source_free = source_free, .reader_new = reader_new, .reader_free = reader_free, .read = read_sample,
    .read_encoded = read_encoded};
