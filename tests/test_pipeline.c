/* The input pipeline's host side (data/pipeline.h): batches identical to ct_make_batch and to
 * sync mode for any workers and prefetch depth, in order, each sample exactly once per epoch;
 * augmentation against a direct computation of the documented formula; raw uint8 batches;
 * drop_last; resume at a batch; early stop with workers blocked on a full ring; worker faults and
 * failed allocations reported and cleaned up; tiny datasets; workers = auto; the input bench.
 * Runs on tiny synthetic sets and on a Fashion-MNIST subset. Meant to pass under ASan+LSan. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/pipeline.h"
#include "base/rng.h"
#include "test_util.h"

#define SALT_AUGMENT 0x41554700ULL   /* engine/train.c; pinned here, not taken from the header */

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ---- data ---- */

/* count samples of (h, w, c); the first two bytes of sample i are i's low and high bytes (so a raw
 * batch names its samples), the rest a pattern that differs across samples, rows, columns and
 * channels; label i % 10. */
static void make_tagged(ct_dataset *ds, long count, int h, int w, int c)
{
    memset(ds, 0, sizeof *ds);
    ds->shape = (ct_shape){h, w, c};
    ds->count = count;
    ds->classes = 10;
    size_t size = (size_t)h * w * c;
    ds->images = malloc((size_t)count * size);
    ds->labels = malloc((size_t)count);
    for (long i = 0; i < count; i++) {
        uint8_t *img = ds->images + (size_t)i * size;
        for (size_t j = 0; j < size; j++)
            img[j] = (uint8_t)((i * 7 + (long)j * 13 + (long)(j / (size_t)c) * 3 + 1) & 255);
        img[0] = (uint8_t)(i & 255);
        if (size > 1)
            img[1] = (uint8_t)((i >> 8) & 255);
        ds->labels[i] = (uint8_t)(i % 10);
    }
}

static long sample_id(const uint8_t *img) { return (long)img[0] | ((long)img[1] << 8); }

static ct_augment make_aug(int crop, int flip, int channels)
{
    ct_augment a;
    memset(&a, 0, sizeof a);
    a.crop_pad = crop;
    a.flip = flip;
    for (int c = 0; c < CT_MAX_CHANNELS; c++) {
        a.mean[c] = c < channels ? 0.25f + 0.1f * (float)c : 0.0f;
        a.std[c] = c < channels ? 0.35f + 0.05f * (float)c : 1.0f;
    }
    return a;
}

static ct_pipeline_config base_config(const ct_dataset *ds, const ct_augment *aug, int batch, uint64_t seed)
{
    ct_pipeline_config c;
    memset(&c, 0, sizeof c);
    c.ds = ds;
    c.aug = aug;
    c.batch = batch;
    c.seed = seed;
    c.shuffle = 1;
    c.augment = 1;
    return c;
}

/* ---- one epoch, flattened ---- */

typedef struct dump {
    long nb;            /* batches */
    long *index;
    int *n;
    uint64_t *seed;
    int *augment;
    unsigned char *x;   /* all batches' x, back to back */
    int32_t *y;
    size_t x_used, y_used;
} dump;

static void dump_init(dump *d, const ct_dataset *ds, long max_batches, int batch, int raw)
{
    memset(d, 0, sizeof *d);
    size_t per = ct_shape_size(ds->shape) * (raw ? 1 : sizeof(float));
    d->index = calloc((size_t)max_batches + 1, sizeof *d->index);
    d->n = calloc((size_t)max_batches + 1, sizeof *d->n);
    d->seed = calloc((size_t)max_batches + 1, sizeof *d->seed);
    d->augment = calloc((size_t)max_batches + 1, sizeof *d->augment);
    d->x = malloc((size_t)(max_batches + 1) * (size_t)batch * per + 1);
    d->y = malloc((size_t)(max_batches + 1) * (size_t)batch * sizeof(int32_t) + 1);
}

static void dump_free(dump *d)
{
    free(d->index);
    free(d->n);
    free(d->seed);
    free(d->augment);
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

static void dump_add(dump *d, const ct_dataset *ds, const ct_batch_view *v, int raw)
{
    size_t per = ct_shape_size(ds->shape) * (raw ? 1 : sizeof(float));
    d->index[d->nb] = v->index;
    d->n[d->nb] = v->n;
    d->seed[d->nb] = v->augment_seed;
    d->augment[d->nb] = v->augment;
    memcpy(d->x + d->x_used, raw ? (const void *)v->x_u8 : (const void *)v->x, (size_t)v->n * per);
    memcpy(d->y + d->y_used, v->y, (size_t)v->n * sizeof(int32_t));
    d->x_used += (size_t)v->n * per;
    d->y_used += (size_t)v->n;
    d->nb++;
}

/* What epoch `epoch` from batch `first` must be, made directly with ct_make_batch. */
static void reference(dump *d, const ct_dataset *ds, const ct_augment *aug, int batch, uint64_t seed, int epoch,
                      long first, int shuffle, int augment, int drop_last, int raw)
{
    long count = ds->count, steps = (count + batch - 1) / batch;
    long batches = drop_last ? count / batch : steps;
    dump_init(d, ds, batches, batch, raw);
    long *order = malloc((size_t)count * sizeof *order);
    if (shuffle)
        ct_shuffle_indices(order, count, seed, epoch);
    else
        for (long i = 0; i < count; i++)
            order[i] = i;
    size_t per = ct_shape_size(ds->shape);
    for (long b = first; b < batches; b++) {
        int n = (int)(count - b * batch < batch ? count - b * batch : batch);
        uint64_t s = augment ? ct_hash3(seed, SALT_AUGMENT, (uint64_t)epoch * (uint64_t)steps + (uint64_t)b) : 0;
        d->index[d->nb] = b;
        d->n[d->nb] = n;
        d->seed[d->nb] = s;
        d->augment[d->nb] = raw && augment;
        if (raw) {
            for (int i = 0; i < n; i++) {
                memcpy(d->x + d->x_used + (size_t)i * per, ds->images + (size_t)order[b * batch + i] * per, per);
                d->y[d->y_used + (size_t)i] = ds->labels[order[b * batch + i]];
            }
            d->x_used += (size_t)n * per;
        } else {
            ct_make_batch(ds, order + b * batch, n, aug, augment, s, (float *)(d->x + d->x_used), d->y + d->y_used);
            d->x_used += (size_t)n * per * sizeof(float);
        }
        d->y_used += (size_t)n;
        d->nb++;
    }
    free(order);
}

static int dump_equal(const dump *a, const dump *b, const char *what)
{
    int ok = a->nb == b->nb && a->x_used == b->x_used && a->y_used == b->y_used;
    for (long i = 0; ok && i < a->nb; i++)
        ok = a->index[i] == b->index[i] && a->n[i] == b->n[i] && a->seed[i] == b->seed[i] &&
             a->augment[i] == b->augment[i];
    ok = ok && memcmp(a->x, b->x, a->x_used) == 0 && memcmp(a->y, b->y, a->y_used * sizeof(int32_t)) == 0;
    CHECK_MSG(ok, "%s: batches differ (%ld vs %ld batches)", what, a->nb, b->nb);
    return ok;
}

/* Runs one epoch through p into d. hold: keep up to `hold` slots before releasing the oldest
 * (the trainer holding a batch while its copy is in flight). Returns the status of the first
 * failing call. */
static ct_status run_epoch(ct_pipeline *p, dump *d, const ct_dataset *ds, int epoch, long first, int hold, int raw,
                           ct_err *err)
{
    ct_status st = ct_pipeline_start_epoch(p, epoch, first, err);
    if (st != CT_OK)
        return st;
    int held[CT_PIPELINE_MAX_PREFETCH];
    int n_held = 0;
    for (;;) {
        ct_batch_view v;
        double wait = -1;
        st = ct_pipeline_next(p, &v, &wait, err);
        if (st != CT_OK)
            break;
        CHECK(wait >= 0);
        if (v.n == 0) {
            CHECK(v.slot == -1);
            break;
        }
        CHECK(v.epoch == epoch);
        CHECK(raw ? (v.x_u8 != NULL && v.x == NULL) : (v.x != NULL && v.x_u8 == NULL));
        dump_add(d, ds, &v, raw);
        held[n_held++] = v.slot;
        if (n_held > hold) {
            ct_pipeline_release(p, held[0]);
            memmove(held, held + 1, (size_t)(n_held - 1) * sizeof *held);
            n_held--;
        }
    }
    for (int i = 0; i < n_held; i++)
        ct_pipeline_release(p, held[i]);
    return st;
}

/* A hook that sleeps a pseudo-random few hundred microseconds, so that workers finish out of order. */
static ct_status jitter_hook(void *ctx, int worker, long batch, ct_err *err)
{
    (void)ctx;
    (void)err;
    uint64_t r = ct_hash3(0xfeed, (uint64_t)worker, (uint64_t)batch);
    if (r % 3 == 0)
        sleep_us((long)(r >> 40) % 400);
    return CT_OK;
}

/* ---- identical batches for every layout ---- */

typedef struct layout {
    int workers, prefetch, sync, on_caller;
} layout;

static const layout layouts[] = {
    {1, 1, 0, 0}, {1, 2, 0, 0}, {1, 5, 0, 0}, {2, 1, 0, 0}, {2, 2, 0, 0}, {2, 5, 0, 0}, {8, 1, 0, 0}, {8, 2, 0, 0},
    {8, 5, 0, 0}, {0, 0, 0, 0}, {3, 0, 0, 0}, {0, 3, 0, 0}, {0, 0, 0, 1}, {0, 0, 1, 0},
};

/* Every layout, for epochs 0 and 1, against ct_make_batch and against sync mode (on-caller mode:
 * float32 batches only). */
static void check_layouts(const char *name, const ct_dataset *ds, const ct_augment *aug, int batch, uint64_t seed,
                          int raw, int shuffle, int augment, int drop_last, int jitter)
{
    for (int epoch = 0; epoch < 2; epoch++) {
        dump ref, sync;
        reference(&ref, ds, aug, batch, seed, epoch, 0, shuffle, augment, drop_last, raw);
        memset(&sync, 0, sizeof sync);
        for (size_t L = 0; L < sizeof layouts / sizeof *layouts; L++) {
            const layout *lay = &layouts[sizeof layouts / sizeof *layouts - 1 - L];   /* sync first */
            if (lay->on_caller && raw)
                continue;
            ct_pipeline_config c = base_config(ds, aug, batch, seed);
            c.workers = lay->workers;
            c.prefetch = lay->prefetch;
            c.sync = lay->sync;
            c.on_caller = lay->on_caller;
            c.raw_u8 = raw;
            c.shuffle = shuffle;
            c.augment = augment;
            c.drop_last = drop_last;
            if (jitter)
                c.test_hook = jitter_hook;
            ct_pipeline *p;
            ct_err err;
            ct_err_clear(&err);
            ct_status st = ct_pipeline_create(&p, &c, &err);
            CHECK_MSG(st == CT_OK, "%s: create: %s", name, err.msg);
            if (st != CT_OK)
                continue;
            /* hold as many slots as allowed: prefetch - 1 (none for prefetch 1 and sync; 1 for auto) */
            int hold = lay->sync || lay->on_caller ? 0 : (lay->prefetch > 0 ? lay->prefetch - 1 : 1);
            dump got;
            dump_init(&got, ds, ct_pipeline_batches(p), batch, raw);
            /* earlier epochs run first, so that epoch 1 follows an epoch on the same pipeline */
            for (int e = 0; e <= epoch && st == CT_OK; e++) {
                if (e < epoch) {
                    dump skip;
                    dump_init(&skip, ds, ct_pipeline_batches(p), batch, raw);
                    st = run_epoch(p, &skip, ds, e, 0, hold, raw, &err);
                    dump_free(&skip);
                } else {
                    st = run_epoch(p, &got, ds, e, 0, hold, raw, &err);
                }
            }
            CHECK_MSG(st == CT_OK, "%s: %s", name, err.msg);
            char what[160];
            snprintf(what, sizeof what, "%s epoch %d workers %d prefetch %d%s vs ct_make_batch", name, epoch,
                     lay->workers, lay->prefetch, lay->sync ? " sync" : lay->on_caller ? " on caller" : "");
            dump_equal(&got, &ref, what);
            if (lay->sync) {
                sync = got;   /* kept to compare the parallel layouts against */
            } else {
                snprintf(what, sizeof what, "%s epoch %d workers %d prefetch %d%s vs sync", name, epoch,
                         lay->workers, lay->prefetch, lay->on_caller ? " on caller" : "");
                dump_equal(&got, &sync, what);
                dump_free(&got);
            }
            ct_pipeline_destroy(p);
        }
        dump_free(&sync);
        dump_free(&ref);
    }
}

static void test_layouts_synthetic(void)
{
    ct_dataset ds;
    make_tagged(&ds, 37, 5, 6, 2);
    ct_augment aug = make_aug(2, 1, 2);
    check_layouts("synthetic float", &ds, &aug, 8, 7, 0, 1, 1, 0, 1);
    check_layouts("synthetic raw", &ds, &aug, 8, 7, 1, 1, 1, 0, 1);
    check_layouts("synthetic drop_last", &ds, &aug, 8, 7, 0, 1, 1, 1, 1);
    check_layouts("synthetic evaluation", &ds, &aug, 8, 7, 0, 0, 0, 0, 0);
    check_layouts("batch larger than the dataset", &ds, &aug, 64, 3, 0, 1, 1, 0, 0);
    ct_dataset_free(&ds);
}

/* ---- exactly once ---- */

static void test_exactly_once(void)
{
    ct_dataset ds;
    make_tagged(&ds, 301, 4, 4, 1);
    int *seen = calloc(301, sizeof *seen);
    for (int drop = 0; drop <= 1; drop++) {
        for (int workers = 1; workers <= 8; workers *= 2) {
            ct_pipeline_config c = base_config(&ds, NULL, 16, 99);
            c.raw_u8 = 1;
            c.workers = workers;
            c.prefetch = 4;
            c.drop_last = drop;
            c.test_hook = jitter_hook;
            ct_pipeline *p;
            ct_err err;
            ct_err_clear(&err);
            CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
            CHECK(ct_pipeline_batches(p) == (drop ? 18 : 19));
            CHECK(ct_pipeline_steps_for_seed(p) == 19);
            long *order = malloc(301 * sizeof *order);
            for (int epoch = 0; epoch < 3; epoch++) {
                memset(seen, 0, 301 * sizeof *seen);
                ct_shuffle_indices(order, 301, 99, epoch);
                CHECK(ct_pipeline_start_epoch(p, epoch, 0, &err) == CT_OK);
                long expect_b = 0, total = 0;
                for (;;) {
                    ct_batch_view v;
                    ct_status st = ct_pipeline_next(p, &v, NULL, &err);
                    CHECK_MSG(st == CT_OK, "%s", err.msg);
                    if (st != CT_OK || v.n == 0)
                        break;
                    CHECK(v.index == expect_b);
                    CHECK(v.n == (expect_b < 18 ? 16 : 301 - 18 * 16));
                    for (int i = 0; i < v.n; i++) {
                        long id = sample_id(v.x_u8 + (size_t)i * 16);
                        CHECK(id >= 0 && id < 301);
                        if (id >= 0 && id < 301)
                            seen[id]++;
                        CHECK(v.y[i] == (int32_t)(id % 10));
                    }
                    total += v.n;
                    expect_b++;
                    ct_pipeline_release(p, v.slot);
                }
                int once = 1, dropped_ok = 1;
                for (long i = 0; i < 301; i++) {
                    if (drop) {
                        /* the last partial batch holds order[288..300], and only those are missing */
                        int in_last = 0;
                        for (long j = 288; j < 301; j++)
                            in_last |= order[j] == i;
                        dropped_ok &= seen[i] == (in_last ? 0 : 1);
                    } else {
                        once &= seen[i] == 1;
                    }
                }
                CHECK_MSG(once && dropped_ok, "drop %d workers %d epoch %d: a sample missing or repeated", drop,
                          workers, epoch);
                CHECK(total == (drop ? 288 : 301));
            }
            free(order);
            ct_pipeline_destroy(p);
        }
    }
    free(seen);
    ct_dataset_free(&ds);
}

/* ---- augmentation from the documented formula ---- */

/* batch.c: r = ct_hash3(augment_seed, i, 0); span = 2 pad + 1; dy = (r & 0xffff) % span;
 * dx = ((r >> 16) & 0xffff) % span; flip = (r >> 32) & 1; out(y, x) = padded(y + dy, x' + dx) with
 * x' = w - 1 - x when flipped; normalised ((p / 255) - mean) / std. */
static void test_augment_direct(void)
{
    ct_dataset ds;
    make_tagged(&ds, 50, 7, 5, 3);
    ct_augment aug = make_aug(3, 1, 3);
    const int batch = 16, h = 7, w = 5, ch = 3, pad = 3;
    ct_pipeline_config c = base_config(&ds, &aug, batch, 2024);
    c.workers = 2;
    c.prefetch = 3;
    ct_pipeline *p;
    ct_err err;
    ct_err_clear(&err);
    CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
    long order[50];
    int dys[7] = {0}, dxs[7] = {0}, flips[2] = {0};
    double worst = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
        ct_shuffle_indices(order, 50, 2024, epoch);
        CHECK(ct_pipeline_start_epoch(p, epoch, 0, &err) == CT_OK);
        for (;;) {
            ct_batch_view v;
            if (ct_pipeline_next(p, &v, NULL, &err) != CT_OK || v.n == 0)
                break;
            uint64_t seed = ct_hash3(2024, SALT_AUGMENT, (uint64_t)epoch * 4u + (uint64_t)v.index);
            CHECK(v.augment_seed == seed && v.augment == 0);
            for (int i = 0; i < v.n; i++) {
                long k = order[v.index * batch + i];
                uint64_t r = ct_hash3(seed, (uint64_t)i, 0);
                int dy = (int)((r & 0xffff) % 7), dx = (int)(((r >> 16) & 0xffff) % 7), flip = (int)((r >> 32) & 1);
                dys[dy]++;
                dxs[dx]++;
                flips[flip]++;
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++)
                        for (int cc = 0; cc < ch; cc++) {
                            int sy = y + dy - pad, sx = (flip ? w - 1 - x : x) + dx - pad;
                            double pix = sy >= 0 && sy < h && sx >= 0 && sx < w
                                             ? ds.images[(size_t)k * h * w * ch + ((size_t)sy * w + sx) * ch + cc]
                                             : 0.0;
                            double want = (pix / 255.0 - aug.mean[cc]) / aug.std[cc];
                            double got = v.x[(((size_t)i * h + y) * w + x) * ch + cc];
                            double d = got > want ? got - want : want - got;
                            if (d > worst)
                                worst = d;
                        }
                CHECK(v.y[i] == (int32_t)(k % 10));
            }
            ct_pipeline_release(p, v.slot);
        }
    }
    CHECK_MSG(worst < 1e-5, "augmented pixels differ from the direct computation by %g", worst);
    /* the draws do vary: several offsets each way, both flips */
    int ny = 0, nx = 0;
    for (int i = 0; i < 7; i++) {
        ny += dys[i] > 0;
        nx += dxs[i] > 0;
    }
    CHECK(ny >= 5 && nx >= 5 && flips[0] > 10 && flips[1] > 10);
    ct_pipeline_destroy(p);
    ct_dataset_free(&ds);
}

/* ---- raw uint8 ---- */

static void test_raw_u8(void)
{
    ct_dataset ds;
    make_tagged(&ds, 40, 6, 6, 1);
    ct_augment aug = make_aug(2, 1, 1);
    for (int training = 0; training <= 1; training++) {
        ct_pipeline_config c = base_config(&ds, &aug, 12, 5);
        c.raw_u8 = 1;
        c.shuffle = c.augment = training;
        c.workers = 3;
        ct_pipeline *p;
        ct_err err;
        ct_err_clear(&err);
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        long order[40];
        if (training)
            ct_shuffle_indices(order, 40, 5, 1);
        else
            for (int i = 0; i < 40; i++)
                order[i] = i;
        CHECK(ct_pipeline_start_epoch(p, 1, 0, &err) == CT_OK);
        long b = 0;
        for (;;) {
            ct_batch_view v;
            if (ct_pipeline_next(p, &v, NULL, &err) != CT_OK || v.n == 0)
                break;
            CHECK(v.index == b && v.x == NULL && v.x_u8 != NULL);
            CHECK(v.augment == training);
            CHECK(v.augment_seed == (training ? ct_hash3(5, SALT_AUGMENT, 4u + (uint64_t)b) : 0));
            int same = 1;
            for (int i = 0; i < v.n; i++) {
                long k = order[b * 12 + i];
                same &= memcmp(v.x_u8 + (size_t)i * 36, ds.images + (size_t)k * 36, 36) == 0;
                same &= v.y[i] == ds.labels[k];
            }
            CHECK_MSG(same, "raw batch %ld differs from the dataset's bytes", b);
            ct_pipeline_release(p, v.slot);
            b++;
        }
        CHECK(b == 4);
        ct_pipeline_destroy(p);
    }
    ct_dataset_free(&ds);
}

/* ---- drop_last, tiny sets, resume ---- */

static void test_drop_last_and_tiny(void)
{
    ct_dataset ds;
    make_tagged(&ds, 37, 3, 3, 1);
    ct_augment aug = make_aug(1, 1, 1);
    ct_err err;
    ct_err_clear(&err);
    ct_pipeline *p;

    /* same seeds for the common batches whatever drop_last says */
    dump off, on;
    reference(&off, &ds, &aug, 8, 11, 2, 0, 1, 1, 0, 0);
    reference(&on, &ds, &aug, 8, 11, 2, 0, 1, 1, 1, 0);
    CHECK(off.nb == 5 && on.nb == 4 && off.n[4] == 5);
    for (int b = 0; b < 4; b++)
        CHECK(off.seed[b] == on.seed[b] && off.n[b] == 8);
    CHECK(memcmp(off.x, on.x, on.x_used) == 0);
    dump_free(&off);
    dump_free(&on);

    /* fewer samples than a batch: one short batch, or a clear refusal with drop_last */
    ct_dataset small;
    make_tagged(&small, 5, 3, 3, 1);
    ct_pipeline_config c = base_config(&small, &aug, 8, 1);
    c.drop_last = 1;
    c.workers = 2;
    ct_status st = ct_pipeline_create(&p, &c, &err);
    CHECK(st == CT_ERR_CONFIG && p == NULL);
    CHECK_MSG(ct_contains(err.msg, "drop_last = on with 5 samples and batch 8 leaves no batch"), "%s", err.msg);
    c.sync = 1;
    CHECK(ct_pipeline_create(&p, &c, &err) == CT_ERR_CONFIG);
    /* on-caller mode makes float32 batches from a set in memory: uint8 batches are refused */
    c = base_config(&small, &aug, 4, 1);
    c.on_caller = 1;
    c.raw_u8 = 1;
    CHECK(ct_pipeline_create(&p, &c, &err) == CT_ERR_USAGE && p == NULL);
    CHECK_MSG(ct_contains(err.msg, "caller's thread need a set held in memory"), "%s", err.msg);
    c = base_config(&small, &aug, 8, 1);
    c.drop_last = 1;
    c.workers = 2;
    for (int sync = 0; sync <= 1; sync++) {
        c.drop_last = 0;
        c.sync = sync;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        CHECK(ct_pipeline_batches(p) == 1);
        dump got, ref;
        dump_init(&got, &small, 1, 8, 0);
        CHECK(run_epoch(p, &got, &small, 0, 0, 0, 0, &err) == CT_OK);
        reference(&ref, &small, &aug, 8, 1, 0, 0, 1, 1, 0, 0);
        CHECK(got.nb == 1 && got.n[0] == 5);
        dump_equal(&got, &ref, "5 samples, batch 8");
        dump_free(&got);
        dump_free(&ref);
        ct_pipeline_destroy(p);
    }
    ct_dataset_free(&small);

    /* one sample, batch 1, one worker; and one sample with eight workers */
    ct_dataset one;
    make_tagged(&one, 1, 2, 2, 1);
    for (int workers = 1; workers <= 8; workers += 7) {
        c = base_config(&one, &aug, 1, 3);
        c.workers = workers;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        for (int epoch = 0; epoch < 3; epoch++) {
            dump got, ref;
            dump_init(&got, &one, 1, 1, 0);
            CHECK(run_epoch(p, &got, &one, epoch, 0, 0, 0, &err) == CT_OK);
            reference(&ref, &one, &aug, 1, 3, epoch, 0, 1, 1, 0, 0);
            dump_equal(&got, &ref, "one sample");
            dump_free(&got);
            dump_free(&ref);
        }
        ct_pipeline_destroy(p);
    }
    ct_dataset_free(&one);

    /* resume: first_batch > 0 gives the remaining batches of that epoch; the end is empty */
    for (int sync = 0; sync <= 1; sync++) {
        c = base_config(&ds, &aug, 8, 11);
        c.workers = 2;
        c.sync = sync;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        dump got, ref;
        dump_init(&got, &ds, 5, 8, 0);
        CHECK(run_epoch(p, &got, &ds, 3, 3, sync ? 0 : 1, 0, &err) == CT_OK);
        reference(&ref, &ds, &aug, 8, 11, 3, 3, 1, 1, 0, 0);
        CHECK(got.nb == 2 && got.index[0] == 3 && got.index[1] == 4);
        dump_equal(&got, &ref, sync ? "resume at batch 3 (sync)" : "resume at batch 3");
        dump_free(&got);
        dump_free(&ref);
        CHECK(ct_pipeline_start_epoch(p, 4, 5, &err) == CT_OK);
        ct_batch_view v;
        CHECK(ct_pipeline_next(p, &v, NULL, &err) == CT_OK && v.n == 0 && v.slot == -1);
        CHECK(ct_pipeline_next(p, &v, NULL, &err) == CT_OK && v.n == 0);
        CHECK(ct_pipeline_start_epoch(p, 4, 6, &err) == CT_ERR_USAGE);
        CHECK(ct_contains(err.msg, "first batch 6 is outside"));
        CHECK(ct_pipeline_start_epoch(p, 4, -1, &err) == CT_ERR_USAGE);
        ct_pipeline_destroy(p);
    }
    ct_dataset_free(&ds);
}

/* ---- misuse is an error, not a hang ---- */

static void test_misuse(void)
{
    ct_dataset ds;
    make_tagged(&ds, 64, 3, 3, 1);
    ct_err err;
    ct_err_clear(&err);
    ct_pipeline *p;
    ct_pipeline_config c = base_config(&ds, NULL, 8, 1);

    c.batch = 0;
    CHECK(ct_pipeline_create(&p, &c, &err) == CT_ERR_USAGE && ct_contains(err.msg, "batch"));
    c.batch = 8;
    c.workers = 257;
    CHECK(ct_pipeline_create(&p, &c, &err) == CT_ERR_USAGE && ct_contains(err.msg, "workers"));
    c.workers = 1;
    c.prefetch = 65;
    CHECK(ct_pipeline_create(&p, &c, &err) == CT_ERR_USAGE && ct_contains(err.msg, "prefetch"));
    c.prefetch = 2;
    ct_dataset empty = ds;
    empty.count = 0;
    c.ds = &empty;
    CHECK(ct_pipeline_create(&p, &c, &err) == CT_ERR_USAGE && ct_contains(err.msg, "empty"));
    c.ds = &ds;

    /* next before an epoch */
    CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
    ct_batch_view v, v2, v3;
    CHECK(ct_pipeline_next(p, &v, NULL, &err) == CT_ERR_USAGE && ct_contains(err.msg, "no epoch started"));
    /* prefetch 2: holding 2 slots and asking for a third is refused */
    CHECK(ct_pipeline_start_epoch(p, 0, 0, &err) == CT_OK);
    CHECK(ct_pipeline_next(p, &v, NULL, &err) == CT_OK && v.n == 8);
    CHECK(ct_pipeline_next(p, &v2, NULL, &err) == CT_OK && v2.n == 8 && v2.slot != v.slot);
    CHECK(ct_pipeline_next(p, &v3, NULL, &err) == CT_ERR_USAGE);
    CHECK_MSG(ct_contains(err.msg, "holds all 2 slots"), "%s", err.msg);
    ct_pipeline_release(p, v.slot);
    ct_pipeline_release(p, v.slot);   /* twice: ignored */
    ct_pipeline_release(p, 99);       /* unknown: ignored */
    CHECK(ct_pipeline_next(p, &v3, NULL, &err) == CT_OK && v3.index == 2);
    ct_pipeline_destroy(p);           /* with slots still held */

    /* sync: one buffer, so release before the next */
    c.sync = 1;
    CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
    CHECK(ct_pipeline_start_epoch(p, 0, 0, &err) == CT_OK);
    CHECK(ct_pipeline_next(p, &v, NULL, &err) == CT_OK && v.slot == 0);
    CHECK(ct_pipeline_next(p, &v2, NULL, &err) == CT_ERR_USAGE && ct_contains(err.msg, "release the previous"));
    ct_pipeline_release(p, v.slot);
    CHECK(ct_pipeline_next(p, &v2, NULL, &err) == CT_OK && v2.index == 1);
    int workers = -1, prefetch = -1;
    ct_pipeline_info(p, &workers, &prefetch, NULL);
    CHECK(workers == 0 && prefetch == 1);
    ct_pipeline_stop(p);
    ct_pipeline_stop(p);
    ct_pipeline_destroy(p);
    ct_pipeline_destroy(NULL);
    ct_pipeline_stop(NULL);
    ct_dataset_free(&ds);
}

/* ---- shutdown ---- */

typedef struct counter {
    pthread_mutex_t mu;
    int calls;
    long max_batch;
} counter;

static ct_status counting_hook(void *ctx, int worker, long batch, ct_err *err)
{
    (void)worker;
    (void)err;
    counter *k = ctx;
    pthread_mutex_lock(&k->mu);
    k->calls++;
    if (batch > k->max_batch)
        k->max_batch = batch;
    pthread_mutex_unlock(&k->mu);
    return CT_OK;
}

static int counter_calls(counter *k)
{
    pthread_mutex_lock(&k->mu);
    int n = k->calls;
    pthread_mutex_unlock(&k->mu);
    return n;
}

static void test_early_stop(void)
{
    ct_dataset ds;
    make_tagged(&ds, 400, 4, 4, 1);
    ct_augment aug = make_aug(1, 1, 1);
    ct_err err;
    ct_err_clear(&err);
    for (int round = 0; round < 3; round++) {
        counter k = {PTHREAD_MUTEX_INITIALIZER, 0, -1};
        ct_pipeline_config c = base_config(&ds, &aug, 4, 8);
        c.workers = 4;
        c.prefetch = 3;
        c.test_hook = counting_hook;
        c.test_ctx = &k;
        ct_pipeline *p;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        CHECK(ct_pipeline_start_epoch(p, 0, 0, &err) == CT_OK);
        ct_batch_view v;
        CHECK(ct_pipeline_next(p, &v, NULL, &err) == CT_OK && v.index == 0);
        /* hold batch 0: the ring (3 slots) fills with batches 1 and 2 and all four workers block */
        for (int i = 0; i < 200 && counter_calls(&k) < 3; i++)
            sleep_us(1000);
        sleep_us(20000);
        CHECK_MSG(counter_calls(&k) == 3, "%d batches started with a ring of 3", counter_calls(&k));
        if (round == 0) {
            ct_pipeline_stop(p);          /* workers blocked on the full ring: must join */
            CHECK(ct_pipeline_next(p, &v, NULL, &err) == CT_OK && v.n == 0);
            ct_pipeline_release(p, v.slot);
            /* and it starts again: epoch 1, every batch right */
            dump got, ref;
            dump_init(&got, &ds, 100, 4, 0);
            CHECK(run_epoch(p, &got, &ds, 1, 0, 2, 0, &err) == CT_OK);
            reference(&ref, &ds, &aug, 4, 8, 1, 0, 1, 1, 0, 0);
            dump_equal(&got, &ref, "epoch after an early stop");
            dump_free(&got);
            dump_free(&ref);
        } else if (round == 1) {
            /* a new epoch abandons this one: its slots are taken back */
            dump got, ref;
            dump_init(&got, &ds, 100, 4, 0);
            CHECK(run_epoch(p, &got, &ds, 2, 0, 1, 0, &err) == CT_OK);
            reference(&ref, &ds, &aug, 4, 8, 2, 0, 1, 1, 0, 0);
            dump_equal(&got, &ref, "epoch started over an unfinished one");
            dump_free(&got);
            dump_free(&ref);
        }
        ct_pipeline_destroy(p);           /* round 2: destroyed mid-epoch, workers blocked */
    }
    ct_dataset_free(&ds);
}

/* ---- faults ---- */

typedef struct fault {
    long at_batch;
    int hits;
} fault;

static ct_status fault_hook(void *ctx, int worker, long batch, ct_err *err)
{
    (void)worker;
    fault *f = ctx;
    if (batch == __atomic_load_n(&f->at_batch, __ATOMIC_SEQ_CST)) {
        __atomic_add_fetch(&f->hits, 1, __ATOMIC_SEQ_CST);
        return ct_fail(err, CT_ERR_IO, "simulated read error");
    }
    return jitter_hook(NULL, worker, batch, err);
}

typedef struct allocs {
    pthread_mutex_t mu;
    int allocs, frees, fail_at;   /* the fail_at-th allocation (1-based) returns NULL; 0: never */
} allocs;

static void *counting_alloc(void *ctx, size_t bytes)
{
    allocs *a = ctx;
    pthread_mutex_lock(&a->mu);
    int n = ++a->allocs;
    pthread_mutex_unlock(&a->mu);
    if (a->fail_at && n == a->fail_at)
        return NULL;
    return malloc(bytes);
}

static void counting_free(void *ctx, void *ptr)
{
    allocs *a = ctx;
    pthread_mutex_lock(&a->mu);
    a->frees++;
    pthread_mutex_unlock(&a->mu);
    free(ptr);
}

static void test_faults(void)
{
    ct_dataset ds;
    make_tagged(&ds, 200, 4, 4, 1);
    ct_augment aug = make_aug(1, 1, 1);
    ct_err err;
    ct_err_clear(&err);

    for (int workers = 1; workers <= 8; workers *= 2) {
        fault f = {5, 0};
        ct_pipeline_config c = base_config(&ds, &aug, 10, 4);
        c.workers = workers;
        c.prefetch = 4;
        c.test_hook = fault_hook;
        c.test_ctx = &f;
        ct_pipeline *p;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        dump got, ref;
        dump_init(&got, &ds, 20, 10, 0);
        ct_status st = run_epoch(p, &got, &ds, 0, 0, 1, 0, &err);
        CHECK(st == CT_ERR_IO);
        CHECK_MSG(ct_contains(err.msg, "input worker ") && ct_contains(err.msg, "batch 5 of epoch 0") &&
                      ct_contains(err.msg, "simulated read error"),
                  "%s", err.msg);
        char of[32];
        snprintf(of, sizeof of, " of %d,", workers);
        CHECK_MSG(ct_contains(err.msg, of), "'%s' lacks '%s'", err.msg, of);
        /* whatever came before the error was right and in order */
        reference(&ref, &ds, &aug, 10, 4, 0, 0, 1, 1, 0, 0);
        CHECK(got.nb <= 5);
        for (long b = 0; b < got.nb; b++)
            CHECK(got.index[b] == b);
        CHECK(memcmp(got.x, ref.x, got.x_used) == 0);
        dump_free(&got);
        /* the error stays until the pipeline is stopped or restarted */
        ct_batch_view v;
        CHECK(ct_pipeline_next(p, &v, NULL, &err) == CT_ERR_IO);
        if (workers == 2) {
            ct_pipeline_destroy(p);   /* straight after a failure */
            dump_free(&ref);
            continue;
        }
        ct_pipeline_stop(p);
        /* restarted with the fault gone, the same epoch comes out whole */
        __atomic_store_n(&f.at_batch, -1, __ATOMIC_SEQ_CST);
        dump_init(&got, &ds, 20, 10, 0);
        CHECK(run_epoch(p, &got, &ds, 0, 0, 1, 0, &err) == CT_OK);
        dump_equal(&got, &ref, "epoch after a worker fault");
        dump_free(&got);
        /* a fault, then start_epoch without stop: also restarts */
        __atomic_store_n(&f.at_batch, 2, __ATOMIC_SEQ_CST);
        dump_init(&got, &ds, 20, 10, 0);
        CHECK(run_epoch(p, &got, &ds, 0, 0, 1, 0, &err) == CT_ERR_IO);
        dump_free(&got);
        __atomic_store_n(&f.at_batch, -1, __ATOMIC_SEQ_CST);
        dump_init(&got, &ds, 20, 10, 0);
        CHECK(run_epoch(p, &got, &ds, 0, 0, 1, 0, &err) == CT_OK);
        dump_equal(&got, &ref, "epoch restarted after a fault");
        dump_free(&got);
        dump_free(&ref);
        ct_pipeline_destroy(p);
    }

    /* sync mode reports the hook's error too */
    {
        fault f = {3, 0};
        ct_pipeline_config c = base_config(&ds, &aug, 10, 4);
        c.sync = 1;
        c.test_hook = fault_hook;
        c.test_ctx = &f;
        ct_pipeline *p;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        dump got;
        dump_init(&got, &ds, 20, 10, 0);
        CHECK(run_epoch(p, &got, &ds, 0, 0, 0, 0, &err) == CT_ERR_IO);
        CHECK(got.nb == 3);
        CHECK_MSG(ct_contains(err.msg, "batch 3 of epoch 0: simulated read error"), "%s", err.msg);
        dump_free(&got);
        ct_pipeline_destroy(p);
    }

    /* hooks come in pairs */
    {
        ct_pipeline_config c = base_config(&ds, &aug, 10, 4);
        c.host_alloc = counting_alloc;
        ct_pipeline *p;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_ERR_USAGE && ct_contains(err.msg, "host_alloc and host_free"));
    }

    /* the allocation hook: every slot allocated is freed; a failed allocation is the worker's
     * error, with the slot and the size */
    for (int fail_at = 0; fail_at <= 3; fail_at += 3) {
        allocs a = {PTHREAD_MUTEX_INITIALIZER, 0, 0, fail_at};
        ct_pipeline_config c = base_config(&ds, &aug, 10, 4);
        c.workers = 4;
        c.prefetch = 5;
        c.host_alloc = counting_alloc;
        c.host_free = counting_free;
        c.alloc_ctx = &a;
        ct_pipeline *p;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        dump got;
        dump_init(&got, &ds, 20, 10, 0);
        ct_status st = run_epoch(p, &got, &ds, 0, 0, 2, 0, &err);
        if (fail_at) {
            CHECK(st == CT_ERR_NOMEM);
            CHECK_MSG(ct_contains(err.msg, "input worker") &&
                          ct_contains(err.msg, "cannot allocate 680 bytes of host memory for prefetch slot"),
                      "%s", err.msg);
        } else {
            CHECK(st == CT_OK && got.nb == 20);
            CHECK(a.allocs >= 1 && a.allocs <= 5);   /* at most one per slot, reused across batches */
        }
        dump_free(&got);
        ct_pipeline_destroy(p);
        CHECK_MSG(a.frees == a.allocs - (fail_at ? 1 : 0), "%d allocations, %d frees", a.allocs, a.frees);
    }
    ct_dataset_free(&ds);
}

/* ---- workers = auto ---- */

static void test_auto(const ct_dataset *ds, const ct_augment *aug)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int max_workers = cores > 2 ? (int)cores - 1 : 1;
    ct_err err;
    ct_err_clear(&err);
    /* a consumer that takes no time: the most workers */
    for (int slow = 0; slow <= 1; slow++) {
        ct_pipeline_config c = base_config(ds, aug, 64, 42);
        ct_pipeline *p;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        ct_pipeline_stats s;
        ct_pipeline_get_stats(p, &s);
        CHECK(s.workers_auto && s.prefetch_auto && !s.decided);
        CHECK(ct_pipeline_start_epoch(p, 0, 0, &err) == CT_OK);
        long b = 0;
        for (;;) {
            ct_batch_view v;
            if (ct_pipeline_next(p, &v, NULL, &err) != CT_OK || v.n == 0)
                break;
            if (slow)
                sleep_us(20000);   /* a consumer far slower than one worker */
            ct_pipeline_release(p, v.slot);
            b++;
        }
        ct_pipeline_get_stats(p, &s);
        CHECK(b == ct_pipeline_batches(p) && b >= 12);
        CHECK(s.decided);
        CHECK(s.workers >= 1 && s.workers <= max_workers);
        CHECK(s.prefetch >= 2 && s.prefetch <= 8 && s.prefetch == (s.workers + 2 < 8 ? s.workers + 2 : 8));
        CHECK(s.worker_images_per_s > 0 && s.producer_images_per_s >= s.worker_images_per_s);
        if (slow) {
            CHECK_MSG(s.workers == 1, "a slow consumer got %d workers", s.workers);
            CHECK(s.consumer_images_per_s > 0 && s.consumer_images_per_s < 64 / 0.02 * 1.01);
            CHECK(s.wait_seconds >= 0);
        } else {
            CHECK_MSG(s.workers == max_workers, "a free consumer got %d workers of %d", s.workers, max_workers);
        }
        printf("auto (%s consumer): %d workers, prefetch %d, one worker %.0f images/s, consumer %.0f images/s\n",
               slow ? "slow" : "free", s.workers, s.prefetch, s.worker_images_per_s, s.consumer_images_per_s);
        ct_pipeline_destroy(p);
    }
    /* explicit workers with prefetch = auto; auto workers with an explicit depth */
    {
        ct_pipeline_config c = base_config(ds, aug, 64, 42);
        c.workers = 3;
        ct_pipeline *p;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        int w, d;
        ct_pipeline_info(p, &w, &d, NULL);
        CHECK(w == 3 && d == 5);
        ct_pipeline_destroy(p);
        c.workers = 0;
        c.prefetch = 1;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        dump got;
        dump_init(&got, ds, ct_pipeline_batches(p), 64, 0);
        CHECK(run_epoch(p, &got, ds, 0, 0, 0, 0, &err) == CT_OK);
        ct_pipeline_info(p, &w, &d, NULL);
        CHECK(w == 1 && d == 1);
        dump_free(&got);
        ct_pipeline_destroy(p);
    }
    /* a first epoch shorter than the calibration window decides at its end */
    {
        ct_dataset small;
        make_tagged(&small, 30, 3, 3, 1);
        ct_pipeline_config c = base_config(&small, NULL, 8, 1);
        ct_pipeline *p;
        CHECK(ct_pipeline_create(&p, &c, &err) == CT_OK);
        dump got;
        dump_init(&got, &small, 4, 8, 0);
        CHECK(run_epoch(p, &got, &small, 0, 0, 1, 0, &err) == CT_OK);
        ct_pipeline_stats s;
        ct_pipeline_get_stats(p, &s);
        CHECK(s.decided && s.workers == max_workers);
        dump_free(&got);
        ct_pipeline_destroy(p);
        ct_dataset_free(&small);
    }
}

/* ---- config and bench ---- */

static void test_config_init_and_bench(const ct_dataset *ds, const ct_augment *aug)
{
    ct_data_settings dc;
    memset(&dc, 0, sizeof dc);
    dc.workers = 3;
    dc.prefetch = 4;
    dc.augment_on = CT_AUGMENT_ON_GPU;
    dc.pipeline = CT_PIPELINE_SYNC;
    dc.drop_last = 1;
    ct_pipeline_config pc;
    ct_pipeline_config_init(&pc, &dc, ds, aug, 32, 9, 1);
    CHECK(pc.ds == ds && pc.aug == aug && pc.batch == 32 && pc.seed == 9);
    CHECK(pc.workers == 3 && pc.prefetch == 4 && pc.raw_u8 == 1 && pc.sync == 1 && pc.drop_last == 1);
    CHECK(pc.shuffle == 1 && pc.augment == 1 && pc.host_alloc == NULL);
    ct_pipeline_config_init(&pc, &dc, ds, aug, 32, 9, 0);
    CHECK(pc.shuffle == 0 && pc.augment == 0 && pc.drop_last == 0);

    ct_err err;
    ct_err_clear(&err);
    for (int sync = 0; sync <= 1; sync++) {
        ct_pipeline_config c = base_config(ds, aug, 256, 42);
        c.sync = sync;
        ct_pipeline_bench_result r;
        ct_status st = ct_pipeline_bench(&c, 3, 25, &r, &err);
        CHECK_MSG(st == CT_OK, "%s", err.msg);
        CHECK(r.batches == 25 && r.images > 0 && r.images <= 25 * 256 && r.seconds > 0 && r.images_per_s > 0);
        CHECK(r.sync == sync && (sync ? r.workers == 0 && r.prefetch == 1 : r.workers >= 1));
        /* the process's CPU time: something was spent, and no more than every core for the
         * whole timed part (plus the tick of slack getrusage may round to) */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        CHECK_MSG(r.cpu_seconds > 0 && r.cpu_seconds <= r.seconds * (double)(cores > 0 ? cores : 1) + 0.02,
                  "cpu %.4f s over %.4f s", r.cpu_seconds, r.seconds);
        CHECK(r.input_bytes == 0);   /* held in memory: nothing read */
        printf("input bench (%s): %.0f images/s, %d workers, prefetch %d (not asserted)\n",
               sync ? "sync" : "parallel, auto", r.images_per_s, r.workers, r.prefetch);
    }
    ct_pipeline_bench_result r;
    ct_pipeline_config c = base_config(ds, aug, 256, 42);
    CHECK(ct_pipeline_bench(&c, 0, 0, &r, &err) == CT_ERR_USAGE);
}

/* ---- Fashion-MNIST ---- */

static void test_fmnist(void)
{
    char images[1024], labels[1024];
    snprintf(images, sizeof images, "%s/train-images-idx3-ubyte.gz", ct_fmnist_dir());
    snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte.gz", ct_fmnist_dir());
    ct_dataset ds;
    ct_err err;
    ct_err_clear(&err);
    ct_status st = ct_idx_load(&ds, images, labels, 3000, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    if (st != CT_OK)
        return;
    CHECK(ds.count == 3000 && ds.shape.h == 28 && ds.shape.c == 1);
    /* crop:2, flip, normalise 0.2860, 0.3530 at batch 256: 12 batches, the last of 184 */
    ct_augment aug;
    memset(&aug, 0, sizeof aug);
    aug.crop_pad = 2;
    aug.flip = 1;
    for (int ch = 0; ch < CT_MAX_CHANNELS; ch++) {
        aug.mean[ch] = 0.2860f;
        aug.std[ch] = 0.3530f;
    }
    check_layouts("fashion-mnist", &ds, &aug, 256, 42, 0, 1, 1, 0, 0);
    check_layouts("fashion-mnist raw", &ds, &aug, 256, 42, 1, 1, 1, 0, 0);
    test_auto(&ds, &aug);
    test_config_init_and_bench(&ds, &aug);
    ct_dataset_free(&ds);
}

int main(void)
{
    test_layouts_synthetic();
    test_exactly_once();
    test_augment_direct();
    test_raw_u8();
    test_drop_last_and_tiny();
    test_misuse();
    test_early_stop();
    test_faults();
    test_fmnist();
    return ct_test_done();
}
