/* The batcher: gather samples, augment, normalise.
 *
 * Augmentation draws are a pure function of (augment_seed, i), i = the sample's index within the
 * batch; the caller folds epoch and batch number into augment_seed. With
 *     r    = ct_hash3(augment_seed, i, 0)
 *     span = 2 * crop_pad + 1
 *     dy   = (r & 0xffff) % span          row offset of the crop in the padded image
 *     dx   = ((r >> 16) & 0xffff) % span  column offset
 *     flip = (r >> 32) & 1                mirror the cropped window
 * a batch is identical for any thread count, and on any backend that follows the same recipe.
 * (The modulo bias of 16 bits over a span of a few pixels is below 0.1%.) */
#include <string.h>

#include <stdlib.h>

#include "base/rng.h"
#include "data/format.h"

void ct_augment_from_config(ct_augment *aug, const ct_data_settings *dc, int channels)
{
    memset(aug, 0, sizeof *aug);
    /* a format that decodes on demand crops and flips while decoding: nothing is left to do */
    const ct_data_format_def *def = ct_data_format_of(dc->format);
    int at_decode = def && def->read;
    aug->crop_pad = dc->crop_pad > 0 && !at_decode ? dc->crop_pad : 0;
    aug->flip = dc->flip != 0 && !at_decode;
    for (int c = 0; c < CT_MAX_CHANNELS; c++) {
        /* 0 values: identity; 1 value: every channel; otherwise one per channel (ct_data_load
         * has checked n_normalize == channels; channels past the list fall back to identity). */
        int src = dc->n_normalize == 1 ? 0 : c;
        int given = dc->n_normalize == 1 || (c < dc->n_normalize && c < channels);
        aug->mean[c] = given ? dc->mean[src] : 0.0f;
        aug->std[c] = given && dc->std[src] > 0.0f ? dc->std[src] : 1.0f;
    }
}

typedef struct crop_plan {
    int dy, dx;   /* window origin in the padded image */
    int flip;
} crop_plan;

static crop_plan plan_for(const ct_augment *aug, int augmenting, uint64_t seed, int i)
{
    crop_plan p = {0, 0, 0};
    if (!augmenting)
        return p;
    uint64_t r = ct_hash3(seed, (uint64_t)i, 0);
    if (aug->crop_pad > 0) {
        uint64_t span = 2 * (uint64_t)aug->crop_pad + 1;
        p.dy = (int)((r & 0xffff) % span);
        p.dx = (int)(((r >> 16) & 0xffff) % span);
    }
    p.flip = aug->flip ? (int)((r >> 32) & 1) : 0;
    return p;
}

// img: (h, w, c) uint8; out: (h, w, c) float32
static void augment_one(const uint8_t *img, ct_shape s, int pad, crop_plan p, const float *norm_scale,
                        const float *norm_bias, float *out)
{
    /* The window is the image itself (no crop offset, no flip: every evaluation batch, and every
     * training batch without crop or flip): one straight pass the compiler vectorises, the same
     * multiply-add per element as below, so the same bits. */
    if (p.dy == pad && p.dx == pad && !p.flip) {
        size_t pixels = (size_t)s.h * (size_t)s.w;
        if (s.c == 1) {
            float scale = norm_scale[0], bias = norm_bias[0];
            for (size_t e = 0; e < pixels; e++)
                out[e] = (float)img[e] * scale + bias;
            return;
        }
        for (size_t e = 0; e < pixels; e++)
            for (int c = 0; c < s.c; c++)
                out[e * s.c + c] = (float)img[e * s.c + c] * norm_scale[c] + norm_bias[c];
        return;
    }
    for (int y = 0; y < s.h; y++) {
        int sy = y + p.dy - pad;   /* source row; outside the image it is padding */
        for (int x = 0; x < s.w; x++) {
            int sx = (p.flip ? s.w - 1 - x : x) + p.dx - pad;
            int inside = sy >= 0 && sy < s.h && sx >= 0 && sx < s.w;
            const uint8_t *src = inside ? img + ((size_t)sy * s.w + sx) * s.c : NULL;
            float *dst = out + ((size_t)y * s.w + x) * s.c;
            for (int c = 0; c < s.c; c++)
                dst[c] = (float)(src ? src[c] : 0) * norm_scale[c] + norm_bias[c];   /* padding is pixel 0 */
        }
    }
}

/* ((p / 255) - mean) / std folded into one multiply-add per pixel. */
void ct_augment_fold(const ct_augment *aug, float *norm_scale, float *norm_bias)
{
    for (int c = 0; c < CT_MAX_CHANNELS; c++) {
        norm_scale[c] = 1.0f / (255.0f * aug->std[c]);
        norm_bias[c] = -aug->mean[c] / aug->std[c];
    }
}

/* The one per-sample step every batch maker shares: sample k of ds at position i of the batch.
 * x: (h, w, c) float32 out; y: one label out. */
static void sample_into(const ct_dataset *ds, long k, int i, const ct_augment *aug, int augmenting,
                        uint64_t augment_seed, const float *norm_scale, const float *norm_bias, float *x, int32_t *y)
{
    ct_shape s = ds->shape;
    size_t size = ct_shape_size(s);
    int pad = augmenting ? aug->crop_pad : 0;
    crop_plan p = plan_for(aug, augmenting, augment_seed, i);
    augment_one(ds->images + (size_t)k * size, s, pad, p, norm_scale, norm_bias, x);
    *y = ds->labels ? ds->labels[k] : 0; /* images to predict carry no labels */
}

void ct_make_sample(const ct_dataset *ds, long index, int i, const ct_augment *aug, int augmenting,
                    uint64_t augment_seed, float *x, int32_t *y)
{
    float norm_scale[CT_MAX_CHANNELS], norm_bias[CT_MAX_CHANNELS];
    ct_augment_fold(aug, norm_scale, norm_bias);
    sample_into(ds, index, i, aug, augmenting, augment_seed, norm_scale, norm_bias, x, y);
}

// x: (n, h, w, c) float32; y: (n) int32
void ct_make_batch(const ct_dataset *ds, const long *indices, int n, const ct_augment *aug,
                   int augmenting, uint64_t augment_seed, float *x, int32_t *y)
{
    size_t size = ct_shape_size(ds->shape);
    float norm_scale[CT_MAX_CHANNELS], norm_bias[CT_MAX_CHANNELS];
    ct_augment_fold(aug, norm_scale, norm_bias);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        sample_into(ds, indices[i], i, aug, augmenting, augment_seed, norm_scale, norm_bias, x + (size_t)i * size,
                    y + i);
}

// x: (n, h, w, c) float32; y: (n) int32
void ct_make_batch_serial(const ct_dataset *ds, const long *indices, int n, const ct_augment *aug,
                          int augmenting, uint64_t augment_seed, float *x, int32_t *y)
{
    size_t size = ct_shape_size(ds->shape);
    float norm_scale[CT_MAX_CHANNELS], norm_bias[CT_MAX_CHANNELS];
    ct_augment_fold(aug, norm_scale, norm_bias);
    for (int i = 0; i < n; i++)
        sample_into(ds, indices[i], i, aug, augmenting, augment_seed, norm_scale, norm_bias, x + (size_t)i * size,
                    y + i);
}

void ct_make_sample_u8(const ct_dataset *ds, long index, uint8_t *x, int32_t *y)
{
    size_t size = ct_shape_size(ds->shape);
    memcpy(x, ds->images + (size_t)index * size, size);
    *y = ds->labels ? ds->labels[index] : 0;
}

// x: (n, h, w, c) uint8; y: (n) int32
void ct_make_batch_u8(const ct_dataset *ds, const long *indices, int n, uint8_t *x, int32_t *y)
{
    size_t size = ct_shape_size(ds->shape);
    for (int i = 0; i < n; i++)
        ct_make_sample_u8(ds, indices[i], x + (size_t)i * size, y + i);
}

/* ---- any set, also one decoded on demand ---- */

/* Sample k of a set decoded on demand at position i, into x as (h, w, c) float32 normalised: the
 * format decodes into the float slot's last quarter (uint8 takes a quarter of the floats' bytes),
 * which the normalisation then reads front to back, each byte before its float overwrites it. */
static ct_status decode_normalise(const ct_dataset *ds, ct_sample_reader *rd, long k, int i, int augmenting,
                                  uint64_t augment_seed, const float *norm_scale, const float *norm_bias, float *x,
                                  int32_t *y, ct_err *err)
{
    size_t size = ct_shape_size(ds->shape);
    uint8_t *u8 = (uint8_t *)(x + size) - size;
    ct_status st = rd->def->read(ds, rd, k, i, augmenting, augment_seed, u8, y, err);
    if (st != CT_OK)
        return st;
    int c = ds->shape.c;
    for (size_t e = 0; e < size; e++)
        x[e] = (float)u8[e] * norm_scale[e % (size_t)c] + norm_bias[e % (size_t)c];
    return CT_OK;
}

static int on_demand(const ct_dataset *ds) { return !ds->images && ds->source; }

static ct_status need_reader(const ct_dataset *ds, const ct_sample_reader *rd, ct_err *err)
{
    if (!rd || !rd->def)
        return ct_fail(err, CT_ERR_USAGE, "a set decoded on demand is read through a reader of its own");
    (void)ds;
    return CT_OK;
}

ct_status ct_read_sample(const ct_dataset *ds, ct_sample_reader *rd, long index, int i, const ct_augment *aug,
                         int augmenting, uint64_t augment_seed, float *x, int32_t *y, ct_err *err)
{
    if (!on_demand(ds)) {
        ct_make_sample(ds, index, i, aug, augmenting, augment_seed, x, y);
        return CT_OK;
    }
    ct_status st = need_reader(ds, rd, err);
    float norm_scale[CT_MAX_CHANNELS], norm_bias[CT_MAX_CHANNELS];
    ct_augment_fold(aug, norm_scale, norm_bias);
    *y = 0;
    if (st == CT_OK)
        st = decode_normalise(ds, rd, index, i, augmenting, augment_seed, norm_scale, norm_bias, x, y, err);
    return st;
}

// x: (n, h, w, c) float32; y: (n) int32
ct_status ct_read_batch_serial(const ct_dataset *ds, ct_sample_reader *rd, const long *indices, int n,
                               const ct_augment *aug, int augmenting, uint64_t augment_seed, float *x, int32_t *y,
                               ct_err *err)
{
    if (!on_demand(ds)) {
        ct_make_batch_serial(ds, indices, n, aug, augmenting, augment_seed, x, y);
        return CT_OK;
    }
    size_t size = ct_shape_size(ds->shape);
    ct_status st = need_reader(ds, rd, err);
    float norm_scale[CT_MAX_CHANNELS], norm_bias[CT_MAX_CHANNELS];
    ct_augment_fold(aug, norm_scale, norm_bias);
    for (int i = 0; i < n && st == CT_OK; i++)
        st = decode_normalise(ds, rd, indices[i], i, augmenting, augment_seed, norm_scale, norm_bias,
                              x + (size_t)i * size, y + i, err);
    return st;
}

// x: (n, h, w, c) float32; y: (n) int32
ct_status ct_read_batch(const ct_dataset *ds, const long *indices, int n, const ct_augment *aug, int augmenting,
                        uint64_t augment_seed, float *x, int32_t *y, ct_err *err)
{
    if (!on_demand(ds)) {
        ct_make_batch(ds, indices, n, aug, augmenting, augment_seed, x, y);
        return CT_OK;
    }
    /* one reader per thread for this call (evaluation, batch search: not the training's workers) */
    size_t size = ct_shape_size(ds->shape);
    float norm_scale[CT_MAX_CHANNELS], norm_bias[CT_MAX_CHANNELS];
    ct_augment_fold(aug, norm_scale, norm_bias);
    ct_status first = CT_OK;
    #pragma omp parallel
    {
        ct_err e;
        ct_err_clear(&e);
        ct_sample_reader *rd = NULL;
        ct_status st = ct_sample_reader_new(ds, &rd, &e);
        #pragma omp for schedule(static)
        for (int i = 0; i < n; i++) {
            y[i] = 0;
            if (st == CT_OK)
                st = decode_normalise(ds, rd, indices[i], i, augmenting, augment_seed, norm_scale, norm_bias,
                                      x + (size_t)i * size, y + i, &e);
        }
        ct_sample_reader_free(rd);
        #pragma omp critical(ct_read_batch_err)
        if (st != CT_OK && first == CT_OK) {
            first = st;
            ct_fail(err, st, "%s", e.msg);
        }
    }
    return first;
}

ct_status ct_read_sample_u8(const ct_dataset *ds, ct_sample_reader *rd, long index, int i, int augmenting,
                            uint64_t augment_seed, uint8_t *x, int32_t *y, ct_err *err)
{
    if (!on_demand(ds)) {
        ct_make_sample_u8(ds, index, x, y);
        return CT_OK;
    }
    ct_status st = need_reader(ds, rd, err);
    *y = 0;
    if (st == CT_OK)
        st = rd->def->read(ds, rd, index, i, augmenting, augment_seed, x, y, err);
    return st;
}

// x: (n, h, w, c) uint8; y: (n) int32
ct_status ct_read_batch_u8(const ct_dataset *ds, ct_sample_reader *rd, const long *indices, int n, int augmenting,
                           uint64_t augment_seed, uint8_t *x, int32_t *y, ct_err *err)
{
    size_t size = ct_shape_size(ds->shape);
    ct_status st = CT_OK;
    for (int i = 0; i < n && st == CT_OK; i++)
        st = ct_read_sample_u8(ds, rd, indices[i], i, augmenting, augment_seed, x + (size_t)i * size, y + i, err);
    return st;
}

int ct_dataset_can_encode(const ct_dataset *ds)
{
    const ct_data_format_def *def = ds && on_demand(ds) ? ct_data_format_of(ds->format) : NULL;
    return def && def->read_encoded;
}

// x: (n, h, w, c) uint8 (the samples decoded on the CPU); y: (n) int32
ct_status ct_read_batch_encoded(const ct_dataset *ds, ct_sample_reader *rd, const long *indices, int n,
                                int augmenting, uint64_t augment_seed, double cpu_share, uint8_t *x, int32_t *y,
                                ct_encoded_batch *enc, ct_err *err)
{
    if (!ct_dataset_can_encode(ds))
        return ct_fail(err, CT_ERR_USAGE, "this set's format cannot leave images compressed for a device decoder");
    ct_status st = need_reader(ds, rd, err);
    if (st == CT_OK)
        st = ct_encoded_batch_reset(enc, n, cpu_share, err);
    size_t size = ct_shape_size(ds->shape);
    for (int i = 0; i < n && st == CT_OK; i++) {
        y[i] = 0;
        st = rd->def->read_encoded(ds, rd, indices[i], i, augmenting, augment_seed, x + (size_t)i * size, y + i, enc,
                                   err);
    }
    return st;
}

ct_status ct_dataset_read_sample_u8(const ct_dataset *ds, long index, uint8_t *x, ct_err *err)
{
    if (index < 0 || index >= ds->count)
        return ct_fail(err, CT_ERR_USAGE, "sample %ld is outside the set's 0..%ld", index, ds->count - 1);
    int32_t y;
    if (!on_demand(ds)) {
        ct_make_sample_u8(ds, index, x, &y);
        return CT_OK;
    }
    ct_sample_reader *rd = NULL;
    ct_status st = ct_sample_reader_new(ds, &rd, err);
    if (st == CT_OK)
        st = ct_read_sample_u8(ds, rd, index, 0, 0, 0, x, &y, err);
    ct_sample_reader_free(rd);
    return st;
}

void ct_shuffle_indices(long *indices, long count, uint64_t seed, int epoch)
{
    ct_rng rng = {ct_hash3(seed, 0x5348554646ULL /* "SHUFF" */, (uint64_t)epoch)};
    for (long i = 0; i < count; i++)
        indices[i] = i;
    /* Fisher-Yates; the modulo bias of a 64-bit draw over count <= 2^31 is negligible. */
    for (long i = count - 1; i > 0; i--) {
        long j = (long)(ct_rng_next(&rng) % (uint64_t)(i + 1));
        long t = indices[i];
        indices[i] = indices[j];
        indices[j] = t;
    }
}
