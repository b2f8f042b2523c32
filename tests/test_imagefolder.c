/* format = imagefolder (data/imagefolder.c) on class folders of Fashion-MNIST images written as PNG
 * files at test time: the index (order, labels, class names, skipped files, the hash), classes and
 * validation_split, the batches (identical for 1, 2, 3 workers and sync mode, cache = bytes equal
 * to cache = none), the decoded pixels (PNG is lossless: equal to the IDX bytes), the crop's
 * bounds, bad files (error names the file, skip replaces and counts), the config's keys, and an
 * evaluation and a short training against the IDX files of the same images. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cutrain.h"
#include "data/imagefolder.h"
#include "data/pipeline.h"
/* the encoders' header has helpers for the decoder's tests that this one does not use */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "tests/test_image_enc.h"
#pragma GCC diagnostic pop

#define N_PER_CLASS 20

typedef struct fixture {
    char root[256];           /* the temporary folder */
    uint8_t *px;              /* Fashion-MNIST training images, (count, 28, 28) */
    uint8_t *labels;
    long count;
} fixture;

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

static void write_png(const char *path, const uint8_t *img28)
{
    enc_buf b = enc_png(img28, 28, 28, PNG_COLOR_TYPE_GRAY, 8, 0, NULL, 0, NULL);
    write_file(path, b.p, b.n);
    free(b.p);
}

static void mkdirs(const char *fmt, const char *a, const char *b)
{
    char p[512];
    snprintf(p, sizeof p, fmt, a, b);
    mkdir(p, 0755);
}

/* The rm -r of the fixture's folder (only what the test made: names without '/'). */
static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(path);
}

/* Class folders in byte order are Zebra (Fashion-MNIST label 1), apple (0), mango (2): sorting
 * by bytes puts the capital first. The first N_PER_CLASS training images of each label, named by
 * their sample number; apple holds one in a subfolder and one PNG named .jpg; apple also holds a
 * hidden PNG and a text file, which are skipped. */
static const char *const folder_of_label[3] = {"apple", "Zebra", "mango"};

static void make_folder(fixture *fx, const char *sub)
{
    char base[300];
    snprintf(base, sizeof base, "%s/%s", fx->root, sub);
    mkdir(base, 0755);
    for (int c = 0; c < 3; c++)
        mkdirs("%s/%s", base, folder_of_label[c]);
    mkdirs("%s/%s/deep", base, "apple");
    int have[3] = {0, 0, 0};
    for (long k = 0; k < fx->count; k++) {
        int l = fx->labels[k];
        if (l > 2 || have[l] == N_PER_CLASS)
            continue;
        char p[700];
        if (l == 0 && have[l] == 3)
            snprintf(p, sizeof p, "%s/apple/deep/%05ld.png", base, k);
        else if (l == 0 && have[l] == 5)
            snprintf(p, sizeof p, "%s/apple/%05ld.jpg", base, k);
        else
            snprintf(p, sizeof p, "%s/%s/%05ld.png", base, folder_of_label[l], k);
        write_png(p, fx->px + k * 784);
        have[l]++;
    }
    char p[700];
    snprintf(p, sizeof p, "%s/apple/.hidden.png", base);
    write_png(p, fx->px);
    snprintf(p, sizeof p, "%s/apple/notes.txt", base);
    write_file(p, "not an image\n", 13);
}

static ct_data_settings settings(const char *train)
{
    ct_data_settings dc;
    memset(&dc, 0, sizeof dc);
    dc.format = CT_DATA_IMAGEFOLDER;
    dc.train = (char *)train;
    dc.image_h = dc.image_w = 28;
    dc.channels = 1;
    dc.crop_scale[0] = 0.08f;
    dc.crop_scale[1] = 1.0f;
    dc.crop_ratio[0] = 0.75f;
    dc.crop_ratio[1] = 4.0f / 3.0f;
    dc.eval_resize = 28;
    dc.max_pixels = 178956970;
    dc.workers = 1;
    return dc;
}

/* The sample number in a file name (.../00123.png). */
static long sample_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return strtol(slash ? slash + 1 : path, NULL, 10);
}

static void test_index(fixture *fx)
{
    char train[512];
    snprintf(train, sizeof train, "%s/set", fx->root);
    ct_data_settings dc = settings(train);
    ct_dataset tr, te;
    ct_err err;
    ct_err_clear(&err);
    CHECK_MSG(ct_data_load(&dc, 1, &tr, &te, &err) == CT_OK, "%s", err.msg);
    CHECK(tr.count == 3 * N_PER_CLASS && te.count == 0);
    CHECK(tr.classes == 3 && tr.class_names);
    if (tr.class_names) {
        CHECK(strcmp(tr.class_names[0], "Zebra") == 0);
        CHECK(strcmp(tr.class_names[1], "apple") == 0);
        CHECK(strcmp(tr.class_names[2], "mango") == 0);
    }
    long hidden, not_images;
    ct_dataset_skipped(&tr, &hidden, &not_images);
    CHECK(hidden == 1 && not_images == 1);
    /* labels follow the folders, paths are sorted, each file is the Fashion-MNIST sample it names */
    int order_ok = 1, labels_ok = 1;
    for (long i = 0; i < tr.count; i++) {
        const char *p = ct_dataset_sample_path(&tr, i);
        long k = sample_of(p);
        int want = fx->labels[k] == 1 ? 0 : fx->labels[k] == 0 ? 1 : 2;
        labels_ok &= tr.labels[i] == want && strstr(p, tr.class_names[want]) != NULL;
        if (i > 0)
            order_ok &= strcmp(ct_dataset_sample_path(&tr, i - 1), p) < 0;
    }
    CHECK(order_ok && labels_ok);
    CHECK(ct_dataset_sample_path(&tr, tr.count) == NULL);
    /* the subfolder's file is in, after apple/ files that sort before "deep", and the .jpg too */
    int deep = 0, jpg = 0;
    for (long i = 0; i < tr.count; i++) {
        deep += strstr(ct_dataset_sample_path(&tr, i), "/apple/deep/") != NULL;
        jpg += strstr(ct_dataset_sample_path(&tr, i), ".jpg") != NULL;
    }
    CHECK(deep == 1 && jpg == 1);
    /* decoded with the evaluation transform at the file's own size: the IDX bytes */
    uint8_t x[784];
    int same = 1;
    for (long i = 0; i < tr.count; i++) {
        CHECK(ct_dataset_read_sample_u8(&tr, i, x, &err) == CT_OK);
        same &= memcmp(x, fx->px + sample_of(ct_dataset_sample_path(&tr, i)) * 784, 784) == 0;
    }
    CHECK_MSG(same, "decoded PNG samples differ from the IDX images");
    uint64_t hash = tr.index_hash;
    CHECK(hash != 0);

    /* the same set opened again hashes the same; a file grown by a byte or renamed does not */
    ct_dataset tr2, te2;
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_OK && tr2.index_hash == hash);
    ct_dataset_free(&tr2);
    char p[700], q[700];
    snprintf(p, sizeof p, "%s", ct_dataset_sample_path(&tr, 7));
    FILE *f = fopen(p, "ab");
    fputc(0, f);
    fclose(f);
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_OK && tr2.index_hash != hash && tr2.count == tr.count);
    uint64_t grown = tr2.index_hash;
    ct_dataset_free(&tr2);
    snprintf(q, sizeof q, "%s", p);
    strcpy(strrchr(q, '/') + 1, "zz_renamed.png");
    CHECK(rename(p, q) == 0);
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_OK && tr2.index_hash != grown && tr2.index_hash != hash);
    ct_dataset_free(&tr2);
    CHECK(rename(q, p) == 0);
    /* the whole folder moved: the paths below it are the same, and so is the hash */
    char moved[300];
    snprintf(moved, sizeof moved, "%s/moved", fx->root);
    CHECK(rename(train, moved) == 0);
    dc.train = moved;
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_OK && tr2.index_hash == grown);
    ct_dataset_free(&tr2);
    CHECK(rename(moved, train) == 0);
    dc.train = train;

    /* train_limit spreads over the classes */
    dc.train_limit = 6;
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_OK && tr2.count == 6);
    CHECK(tr2.count == 6 && tr2.labels[0] == 0 && tr2.labels[2] == 1 && tr2.labels[4] == 2 && tr2.labels[5] == 2);
    ct_dataset_free(&tr2);
    dc.train_limit = 0;

    /* classes = mango, Zebra: two classes in that order */
    dc.class_list = "mango, Zebra";
    CHECK_MSG(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_OK, "%s", err.msg);
    CHECK(tr2.count == 2 * N_PER_CLASS && tr2.classes == 2);
    if (tr2.class_names)
        CHECK(strcmp(tr2.class_names[0], "mango") == 0 && strcmp(tr2.class_names[1], "Zebra") == 0);
    CHECK(tr2.labels[0] == 0 && strstr(ct_dataset_sample_path(&tr2, 0), "/mango/") != NULL);
    ct_dataset_free(&tr2);
    dc.class_list = "mango, pear";
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_ERR_DATA && ct_contains(err.msg, "'pear'"));
    dc.class_list = NULL;

    /* a test folder with other classes, a missing folder, an empty class, no class folders */
    char other[300];
    snprintf(other, sizeof other, "%s/other", fx->root);
    mkdir(other, 0755);
    mkdirs("%s/%s", other, "apple");
    dc.test = other;
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_ERR_DATA && ct_contains(err.msg, "(apple)") &&
          ct_contains(err.msg, "(Zebra, apple, mango)"));
    char missing_test[300];
    snprintf(missing_test, sizeof missing_test, "%s/missing-test", fx->root);
    dc.test = missing_test;   /* the training folder is good, the test folder is not there */
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_ERR_DATA && ct_contains(err.msg, "missing-test"));
    dc.test = NULL;
    dc.train = other;
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_ERR_DATA && ct_contains(err.msg, "other/apple") &&
          ct_contains(err.msg, "no JPEG or PNG"));
    snprintf(other, sizeof other, "%s/other/apple", fx->root);
    dc.train = other;
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_ERR_DATA && ct_contains(err.msg, "no class subfolders"));
    snprintf(other, sizeof other, "%s/missing", fx->root);
    dc.train = other;
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_ERR_DATA && ct_contains(err.msg, "missing"));
    ct_dataset_free(&tr);
}

static void test_split(fixture *fx)
{
    char train[512];
    snprintf(train, sizeof train, "%s/set", fx->root);
    ct_data_settings dc = settings(train);
    dc.validation_split = 0.25f;
    dc.validation_seed = 7;
    ct_dataset tr, te, tr2, te2;
    ct_err err;
    CHECK_MSG(ct_data_load(&dc, 1, &tr, &te, &err) == CT_OK, "%s", err.msg);
    CHECK(te.count == 15 && tr.count == 45 && te.classes == 3);
    int disjoint = 1;
    for (long i = 0; i < te.count; i++)
        for (long j = 0; j < tr.count; j++)
            disjoint &= strcmp(ct_dataset_sample_path(&te, i), ct_dataset_sample_path(&tr, j)) != 0;
    CHECK(disjoint);
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_OK && te2.index_hash == te.index_hash);
    ct_dataset_free(&tr2);
    ct_dataset_free(&te2);
    dc.validation_seed = 8;
    CHECK(ct_data_load(&dc, 1, &tr2, &te2, &err) == CT_OK && te2.index_hash != te.index_hash);
    ct_dataset_free(&tr2);
    ct_dataset_free(&te2);
    ct_dataset_free(&tr);
    ct_dataset_free(&te);
}

/* Every batch of epochs 0 and 1 of a pipeline over ds into out (bytes), in order. */
static size_t run_epochs(const ct_data_settings *dc, const ct_dataset *ds, int workers, int sync, int raw_u8,
                         uint8_t *out, ct_pipeline_stats *stats)
{
    ct_augment aug;
    ct_augment_from_config(&aug, dc, ds->shape.c);
    ct_pipeline_config pc;
    ct_pipeline_config_init(&pc, dc, ds, &aug, 8, 42, 1);
    pc.workers = workers;
    pc.sync = sync;
    pc.raw_u8 = raw_u8;
    ct_pipeline *p = NULL;
    ct_err err;
    size_t used = 0;
    CHECK_MSG(ct_pipeline_create(&p, &pc, &err) == CT_OK, "%s", err.msg);
    for (int e = 0; p && e < 2; e++) {
        CHECK(ct_pipeline_start_epoch(p, e, 0, &err) == CT_OK);
        for (;;) {
            ct_batch_view v;
            ct_status st = ct_pipeline_next(p, &v, NULL, &err);
            CHECK_MSG(st == CT_OK, "%s", err.msg);
            if (st != CT_OK || v.n == 0)
                break;
            size_t bytes = (size_t)v.n * ct_shape_size(ds->shape) * (raw_u8 ? 1 : sizeof(float));
            memcpy(out + used, raw_u8 ? (void *)v.x_u8 : (void *)v.x, bytes);
            used += bytes;
            memcpy(out + used, v.y, (size_t)v.n * sizeof(int32_t));
            used += (size_t)v.n * sizeof(int32_t);
            ct_pipeline_release(p, v.slot);
        }
    }
    if (p && stats)
        ct_pipeline_get_stats(p, stats);
    ct_pipeline_destroy(p);
    return used;
}

static void test_batches(fixture *fx)
{
    char train[512];
    snprintf(train, sizeof train, "%s/set", fx->root);
    ct_data_settings dc = settings(train);
    dc.image_h = 24;
    dc.image_w = 20;
    dc.random_resized_crop = 1;
    dc.flip = 1;
    dc.n_normalize = 1;
    dc.mean[0] = 0.3f;
    dc.std[0] = 0.35f;
    ct_dataset tr, te;
    ct_err err;
    CHECK_MSG(ct_data_load(&dc, 1, &tr, &te, &err) == CT_OK, "%s", err.msg);
    ct_augment aug;
    ct_augment_from_config(&aug, &dc, 1);
    CHECK(aug.crop_pad == 0 && aug.flip == 0);   /* the crop and flip happen at decode only */
    size_t cap = 2 * (size_t)tr.count * (24 * 20 * 4 + 4) + 64;
    uint8_t *a = malloc(cap), *b = malloc(cap);
    ct_pipeline_stats st;
    size_t na = run_epochs(&dc, &tr, 1, 0, 0, a, &st);
    CHECK(na > 0 && st.input_bytes > 0 && st.bad_images == 0);
    for (int w = 2; w <= 3; w++) {
        size_t nb = run_epochs(&dc, &tr, w, 0, 0, b, NULL);
        CHECK_MSG(nb == na && memcmp(a, b, na) == 0, "workers %d differ from workers 1", w);
    }
    size_t nb = run_epochs(&dc, &tr, 1, 1, 0, b, NULL);
    CHECK_MSG(nb == na && memcmp(a, b, na) == 0, "sync mode differs from workers 1");
    /* the two epochs differ (new shuffle, new crops) */
    CHECK(memcmp(a, a + na / 2, na / 2) != 0);
    /* uint8 batches (augment_on = gpu): the same crops, normalised by the device later */
    size_t nu = run_epochs(&dc, &tr, 2, 0, 1, b, NULL);
    uint8_t *u = malloc(cap);
    size_t nu1 = run_epochs(&dc, &tr, 1, 1, 1, u, NULL);
    CHECK(nu == nu1 && memcmp(b, u, nu) == 0);
    /* a uint8 batch normalised equals the float batch: compare the first sample */
    int close = 1;
    for (int e = 0; e < 24 * 20; e++) {
        float want = ((const float *)a)[e], got = (float)b[e] * (1.0f / (255.0f * 0.35f)) - 0.3f / 0.35f;
        close &= fabsf(want - got) < 1e-5f;
    }
    CHECK(close);
    free(u);
    /* cache = bytes gives the same batches and reads no file while decoding */
    ct_dataset trc, tec;
    dc.cache = CT_IMAGE_CACHE_BYTES;
    CHECK(ct_data_load(&dc, 1, &trc, &tec, &err) == CT_OK);
    nb = run_epochs(&dc, &trc, 2, 0, 0, b, &st);
    CHECK(nb == na && memcmp(a, b, na) == 0);
    ct_dataset_free(&trc);
    free(a);
    free(b);
    ct_dataset_free(&tr);
}

/* random_resized_crop's regions: inside the image, within scale and ratio (or the fallback),
 * the same for the same arguments, varied across samples. */
static void test_crop(fixture *fx)
{
    char train[512];
    snprintf(train, sizeof train, "%s/set", fx->root);
    ct_data_settings dc = settings(train);
    dc.random_resized_crop = 1;
    dc.flip = 1;
    ct_dataset tr, te;
    ct_err err;
    CHECK(ct_data_load(&dc, 1, &tr, &te, &err) == CT_OK);
    int inside = 1, bounded = 1, same = 1, flips = 0, distinct = 0, fallbacks = 0;
    ct_image_region prev = {0};
    const int W = 400, H = 300;
    for (int i = 0; i < 2000; i++) {
        ct_image_region r = ct_imagefolder_region(&tr, 1, 12345, i, W, H);
        ct_image_region r2 = ct_imagefolder_region(&tr, 1, 12345, i, W, H);
        same &= memcmp(&r, &r2, sizeof r) == 0;
        inside &= r.x >= 0 && r.y >= 0 && r.w >= 1 && r.h >= 1 && r.x + r.w <= W && r.y + r.h <= H;
        double area = (double)r.w * r.h / ((double)W * H), ratio = (double)r.w / r.h;
        /* rounding to whole pixels moves the figures by a pixel's worth */
        int in_bounds = area >= 0.08 - 0.01 && area <= 1.0 && ratio >= 0.75 - 0.02 && ratio <= 4.0 / 3.0 + 0.02;
        int fallback = r.w == W && r.x == 0 && r.h == H;
        fallbacks += fallback;
        bounded &= in_bounds || fallback;
        flips += r.flip;
        distinct += memcmp(&r, &prev, sizeof r) != 0;
        prev = r;
    }
    CHECK(same && inside && bounded);
    CHECK(flips > 900 && flips < 1100);
    CHECK(distinct > 1900);
    /* a wide image: the fallback narrows it to the largest ratio, centred */
    int fell = 0;
    for (int i = 0; i < 200; i++) {
        ct_image_region r = ct_imagefolder_region(&tr, 1, 7, i, 1000, 10);
        fell += r.w == 13 && r.h == 10 && r.x == (1000 - 13) / 2;
    }
    CHECK(fell > 150);
    /* evaluation: the centre crop of the shorter side resized to eval_resize, no flip */
    ct_image_region e = ct_imagefolder_region(&tr, 0, 12345, 3, 56, 80);
    CHECK(e.w == 56 && e.h == 56 && e.x == 0 && e.y == 12 && e.flip == 0);
    ct_dataset_free(&tr);
}

static void test_bad(fixture *fx)
{
    char train[300], bad[700];
    snprintf(train, sizeof train, "%s/bad", fx->root);
    make_folder(fx, "bad");
    /* a PNG cut short, with a name that sorts first in mango */
    enc_buf b = enc_png(fx->px, 28, 28, PNG_COLOR_TYPE_GRAY, 8, 0, NULL, 0, NULL);
    snprintf(bad, sizeof bad, "%s/mango/00000_cut.png", train);
    write_file(bad, b.p, b.n / 2);
    free(b.p);
    ct_data_settings dc = settings(train);
    ct_dataset tr, te;
    ct_err err;
    CHECK(ct_data_load(&dc, 1, &tr, &te, &err) == CT_OK && tr.count == 3 * N_PER_CLASS + 1);
    size_t cap = 2 * (size_t)tr.count * (28 * 28 * 4 + 4) + 64;
    uint8_t *out = malloc(cap);
    /* error: the training's failure names the worker, the batch and the file */
    {
        ct_augment aug;
        ct_augment_from_config(&aug, &dc, 1);
        ct_pipeline_config pc;
        ct_pipeline_config_init(&pc, &dc, &tr, &aug, 8, 42, 1);
        pc.workers = 2;
        ct_pipeline *p = NULL;
        CHECK(ct_pipeline_create(&p, &pc, &err) == CT_OK);
        CHECK(ct_pipeline_start_epoch(p, 0, 0, &err) == CT_OK);
        ct_status st = CT_OK;
        for (int k = 0; k < 20 && st == CT_OK; k++) {
            ct_batch_view v;
            st = ct_pipeline_next(p, &v, NULL, &err);
            if (st == CT_OK && v.n == 0)
                break;
            if (st == CT_OK)
                ct_pipeline_release(p, v.slot);
        }
        CHECK_MSG(st == CT_ERR_DATA && ct_contains(err.msg, "input worker") && ct_contains(err.msg, bad),
                  "%d %s", (int)st, err.msg);
        ct_pipeline_destroy(p);
    }
    ct_dataset_free(&tr);
    /* skip: every batch comes, the bad sample replaced and counted, its name kept */
    dc.on_bad_image = CT_BAD_IMAGE_SKIP;
    CHECK(ct_data_load(&dc, 1, &tr, &te, &err) == CT_OK);
    ct_pipeline_stats st;
    size_t n1 = run_epochs(&dc, &tr, 3, 0, 0, out, &st);
    CHECK(n1 > 0 && st.bad_images == 2);   /* once in each of the two epochs */
    const char *names[4];
    CHECK(ct_dataset_bad_files(&tr, names, 4) == 1 && strcmp(names[0], bad) == 0);
    uint8_t *again = malloc(cap);
    CHECK(run_epochs(&dc, &tr, 1, 1, 0, again, NULL) == n1 && memcmp(out, again, n1) == 0);
    free(again);
    free(out);
    ct_dataset_free(&tr);
    /* a replaced sample carries its replacement's label: a bad file last in apple is replaced by
     * mango's first file, and labelled mango */
    snprintf(bad, sizeof bad, "%s/apple/zzzzz_cut.png", train);
    b = enc_png(fx->px, 28, 28, PNG_COLOR_TYPE_GRAY, 8, 0, NULL, 0, NULL);
    write_file(bad, b.p, b.n / 2);
    free(b.p);
    CHECK(ct_data_load(&dc, 1, &tr, &te, &err) == CT_OK);
    long at = -1;
    for (long k = 0; k < tr.count; k++)
        if (strcmp(ct_dataset_sample_path(&tr, k), bad) == 0)
            at = k;
    CHECK(at >= 0 && at + 1 < tr.count && tr.labels[at] == 1 && tr.labels[at + 1] == 2);
    ct_sample_reader *rd = NULL;
    uint8_t x[784];
    int32_t y = -1;
    CHECK(ct_sample_reader_new(&tr, &rd, &err) == CT_OK);
    CHECK(at >= 0 && ct_read_sample_u8(&tr, rd, at, 0, 0, 0, x, &y, &err) == CT_OK);
    CHECK_MSG(y == 2, "the replaced sample is labelled %d, not its replacement's 2", (int)y);
    ct_sample_reader_free(rd);
    ct_dataset_free(&tr);
}

/* ct_image_files_open: files and folders in the order given, unlabelled, the evaluation size. */
static void test_files(fixture *fx)
{
    char a[512], f[700];
    snprintf(a, sizeof a, "%s/set/mango", fx->root);
    ct_data_settings dc = settings(NULL);
    ct_dataset ds;
    ct_err err;
    ct_dataset folder;
    const char *one[1] = {a};
    CHECK_MSG(ct_image_files_open(&dc, one, 1, &folder, &err) == CT_OK, "%s", err.msg);
    CHECK(folder.count == N_PER_CLASS && folder.classes == 0 && !folder.labels);
    snprintf(f, sizeof f, "%s", ct_dataset_sample_path(&folder, 3));
    const char *paths[2] = {f, a};
    CHECK(ct_image_files_open(&dc, paths, 2, &ds, &err) == CT_OK && ds.count == N_PER_CLASS + 1);
    CHECK(strcmp(ct_dataset_sample_path(&ds, 0), f) == 0);
    uint8_t x[784];
    CHECK(ct_dataset_read_sample_u8(&ds, 0, x, &err) == CT_OK && memcmp(x, fx->px + sample_of(f) * 784, 784) == 0);
    ct_dataset_free(&ds);
    snprintf(f, sizeof f, "%s/set/apple/notes.txt", fx->root);
    const char *text[1] = {f};
    CHECK(ct_image_files_open(&dc, text, 1, &ds, &err) == CT_ERR_DATA && ct_contains(err.msg, "notes.txt"));
    ct_dataset_free(&folder);
}

/* The config's keys: image_size, classes, augment words per format. */
static void test_config(fixture *fx)
{
    char ini[2048];
    snprintf(ini, sizeof ini,
             "[data]\nformat = imagefolder\ntrain = %s/set\nimage_size = 28\nchannels = 1\n"
             "augment = random_resized_crop, flip\ncrop_scale = 0.5, 1\neval_resize = 28\n"
             "[train]\nepochs = 1\nbatch = 16\n[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 3\n",
             fx->root);
    ct_net *net = NULL;
    CHECK(ct_open_string(ini, "if.ini", &net) == CT_OK);
    CHECK_MSG(ct_prepare(net) == CT_OK, "%s", ct_errmsg(net));
    ct_close(net);
    /* crop:N is refused for imagefolder, random_resized_crop for idx */
    snprintf(ini, sizeof ini,
             "[data]\nformat = imagefolder\ntrain = %s/set\nimage_size = 28\naugment = crop:4\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 3\n",
             fx->root);
    CHECK(ct_open_string(ini, "if.ini", &net) == CT_OK);
    CHECK(ct_prepare(net) == CT_ERR_CONFIG && ct_contains(ct_errmsg(net), "random_resized_crop"));
    ct_close(net);
    snprintf(ini, sizeof ini,
             "[data]\ntrain = a\ntrain_labels = b\naugment = random_resized_crop\n"
             "[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 3\n");
    CHECK(ct_open_string(ini, "if.ini", &net) == CT_OK);
    CHECK(ct_prepare(net) == CT_ERR_CONFIG && ct_contains(ct_errmsg(net), "crop:N"));
    ct_close(net);
}

/* Evaluation and a short training from PNG folders of Fashion-MNIST images against IDX files of the
 * same images: one folder per label named 0..9, so labels match. */
static void make_digits_folder(const char *dir, const uint8_t *px, const uint8_t *labels, long n)
{
    mkdir(dir, 0755);
    for (int c = 0; c < 10; c++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%d", dir, c);
        mkdir(p, 0755);
    }
    for (long k = 0; k < n; k++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%d/%05ld.png", dir, labels[k], k);
        write_png(p, px + k * 784);
    }
}

static void put_be32(FILE *f, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    fwrite(b, 1, 4, f);
}

/* The IDX twin of a folder: its images and labels in the folder's index order (class folders in
 * turn), so that training on either sees the same batches. */
static void write_idx_twin(const char *folder, const fixture *fx, const char *images, const char *labels)
{
    ct_data_settings dc = settings(folder);
    ct_dataset ds, none;
    ct_err err;
    CHECK_MSG(ct_data_load(&dc, 1, &ds, &none, &err) == CT_OK, "%s", err.msg);
    FILE *fi = fopen(images, "wb"), *fl = fopen(labels, "wb");
    put_be32(fi, 0x803);
    put_be32(fi, (uint32_t)ds.count);
    put_be32(fi, 28);
    put_be32(fi, 28);
    put_be32(fl, 0x801);
    put_be32(fl, (uint32_t)ds.count);
    for (long i = 0; i < ds.count; i++) {
        long k = sample_of(ct_dataset_sample_path(&ds, i));
        fwrite(fx->px + k * 784, 1, 784, fi);
        fputc(fx->labels[k], fl);
    }
    fclose(fi);
    fclose(fl);
    ct_dataset_free(&ds);
}

static const char *const e2e_net =
    "normalize = 0.2860, 0.3530\n[train]\nepochs = 3\nbatch = 32\noptimizer = adam\nlearning_rate = 0.002\n"
    "seed = 5\ndevices = cpu\n[flat]\ntype = flatten\n[fc1]\ntype = dense\nunits = 64\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 10\n";

static void test_against_idx(fixture *fx)
{
    const long n_train = 2000, n_test = 300;
    const char *d = ct_fmnist_dir();
    char train[512], test[512], ini[4096], path[600], lpath[600];
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", d);
    snprintf(lpath, sizeof lpath, "%s/t10k-labels-idx1-ubyte.gz", d);
    ct_dataset t10k;
    ct_err err;
    CHECK_MSG(ct_idx_load(&t10k, path, lpath, n_test, &err) == CT_OK, "%s", err.msg);
    snprintf(train, sizeof train, "%s/digits_train", fx->root);
    snprintf(test, sizeof test, "%s/digits_test", fx->root);
    make_digits_folder(train, fx->px, fx->labels, n_train);
    make_digits_folder(test, t10k.images, t10k.labels, n_test);
    ct_dataset_free(&t10k);
    char twin_x[600], twin_y[600];
    snprintf(twin_x, sizeof twin_x, "%s/twin-images", fx->root);
    snprintf(twin_y, sizeof twin_y, "%s/twin-labels", fx->root);
    write_idx_twin(train, fx, twin_x, twin_y);
    ct_net *png = NULL, *idx = NULL;
    snprintf(ini, sizeof ini,
             "[data]\nformat = imagefolder\ntrain = %s\ntest = %s\nimage_size = 28, 28\nchannels = 1\n"
             "eval_resize = 28\n%s",
             train, test, e2e_net);
    CHECK(ct_open_string(ini, "png.ini", &png) == CT_OK);
    snprintf(ini, sizeof ini,
             "[data]\nformat = idx\ntrain = %s\ntrain_labels = %s\n"
             "test = %s\ntest_labels = %s\ntest_limit = %ld\n%s",
             twin_x, twin_y, path, lpath, n_test, e2e_net);
    CHECK(ct_open_string(ini, "idx.ini", &idx) == CT_OK);
    CHECK_MSG(ct_prepare(png) == CT_OK, "%s", ct_errmsg(png));
    CHECK_MSG(ct_prepare(idx) == CT_OK, "%s", ct_errmsg(idx));
    /* untrained, the same seeded weights: the same images give the same loss (the order of the
     * sum differs: the folder is in class order) and accuracy */
    ct_eval_result p0, i0, p1, i1;
    CHECK_MSG(ct_evaluate(png, &p0) == CT_OK, "%s", ct_errmsg(png));
    CHECK_MSG(ct_evaluate(idx, &i0) == CT_OK, "%s", ct_errmsg(idx));
    CHECK(p0.images == n_test && i0.images == n_test);
    CHECK_NEAR(p0.loss, i0.loss, 1e-5 * i0.loss);
    CHECK_NEAR(p0.accuracy, i0.accuracy, 1.0 / n_test + 1e-9);
    /* trained on the same samples in the same order (the twin is in the folder's order, and the
     * shuffle permutes sample numbers): the same batches, bit for bit, so the same weights */
    CHECK_MSG(ct_fit(png, NULL) == CT_OK, "%s", ct_errmsg(png));
    CHECK_MSG(ct_fit(idx, NULL) == CT_OK, "%s", ct_errmsg(idx));
    CHECK(ct_evaluate(png, &p1) == CT_OK && ct_evaluate(idx, &i1) == CT_OK);
    printf("untrained: PNG loss %.6f acc %.4f, IDX loss %.6f acc %.4f; trained: PNG loss %.9f acc %.4f, IDX loss "
           "%.9f acc %.4f\n",
           p0.loss, p0.accuracy, i0.loss, i0.accuracy, p1.loss, p1.accuracy, i1.loss, i1.accuracy);
    CHECK(p1.accuracy > 0.6);
    CHECK(p1.accuracy == i1.accuracy);
    CHECK_NEAR(p1.loss, i1.loss, 1e-6 * i1.loss);
    ct_close(png);
    ct_close(idx);
}

int main(void)
{
    fixture fx;
    memset(&fx, 0, sizeof fx);
    char images[600], labels[600];
    snprintf(images, sizeof images, "%s/train-images-idx3-ubyte.gz", ct_fmnist_dir());
    snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte.gz", ct_fmnist_dir());
    ct_dataset all;
    ct_err err;
    if (ct_idx_load(&all, images, labels, 2000, &err) != CT_OK) {
        fprintf(stderr, "skipped: %s\n", err.msg);
        return 77;
    }
    fx.px = all.images;
    fx.labels = all.labels;
    fx.count = all.count;
    snprintf(fx.root, sizeof fx.root, "/tmp/ct_imagefolder_XXXXXX");
    if (!mkdtemp(fx.root)) {
        perror("mkdtemp");
        return 1;
    }
    make_folder(&fx, "set");
    test_index(&fx);
    test_split(&fx);
    test_batches(&fx);
    test_crop(&fx);
    test_bad(&fx);
    test_files(&fx);
    test_config(&fx);
    test_against_idx(&fx);
    remove_tree(fx.root);
    ct_dataset_free(&all);
    return ct_test_done();
}
