/* Synthetic data for tests and smoke runs that must not depend on downloaded files.
 *
 * Each class has a smooth template image (a coarse random grid, bilinearly upsampled, so that
 * convolutions see spatial structure). A sample is 70% its class template + 30% the template of
 * another random class + a random brightness shift + Gaussian pixel noise, clamped to 0..255:
 * easy enough to learn in an epoch or two, noisy enough that accuracy is not 100% at once.
 *
 * The templates depend only on (shape, classes), not on the seed: the seed picks labels, mixes
 * and noise, so a training set and a test set made with different seeds pose the same task. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "data/format.h"

#define SYN_GRID 4                 /* coarse template grid per side */
#define SYN_OWN 0.7f               /* weight of the sample's own class template */
#define SYN_NOISE 40.0f            /* pixel noise, standard deviation in 0..255 units */
#define SYN_SHIFT 20.0f            /* per-sample brightness shift, standard deviation */
#define SYN_TEMPLATE_KEY 0x54454d504c415445ULL   /* "TEMPLATE" */
#define SYN_SAMPLE_STREAM 0x53414d504c45ULL      /* "SAMPLE" */
#define SYN_TEST_STREAM 0x54455354534554ULL      /* "TESTSET": the test set's seed is derived */

static float clamp255(float v)
{
    return v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
}

/* Position of pixel i (of n) on a grid of g points, for bilinear interpolation. */
static float grid_pos(int i, int n, int g)
{
    return n > 1 ? (float)i * (float)(g - 1) / (float)(n - 1) : 0.0f;
}

// grid: (gh, gw, c) float; out: (h, w, c) float
static void upsample(const float *grid, int gh, int gw, ct_shape s, float *out)
{
    for (int y = 0; y < s.h; y++) {
        float fy = grid_pos(y, s.h, gh);
        int y0 = (int)fy, y1 = y0 + 1 < gh ? y0 + 1 : y0;
        float ty = fy - (float)y0;
        for (int x = 0; x < s.w; x++) {
            float fx = grid_pos(x, s.w, gw);
            int x0 = (int)fx, x1 = x0 + 1 < gw ? x0 + 1 : x0;
            float tx = fx - (float)x0;
            for (int c = 0; c < s.c; c++) {
                float a = grid[(y0 * gw + x0) * s.c + c], b = grid[(y0 * gw + x1) * s.c + c];
                float d = grid[(y1 * gw + x0) * s.c + c], e = grid[(y1 * gw + x1) * s.c + c];
                float top = a + (b - a) * tx, bottom = d + (e - d) * tx;
                out[(y * s.w + x) * s.c + c] = top + (bottom - top) * ty;
            }
        }
    }
}

// templates: (classes, h, w, c) float in 0..255; needs s.c <= CT_MAX_CHANNELS
static void make_templates(ct_shape s, int classes, float *templates)
{
    int gh = s.h < SYN_GRID ? s.h : SYN_GRID, gw = s.w < SYN_GRID ? s.w : SYN_GRID;
    float grid[SYN_GRID * SYN_GRID * CT_MAX_CHANNELS];
    uint64_t dims = (uint64_t)s.h << 40 ^ (uint64_t)s.w << 20 ^ (uint64_t)s.c;
    ct_rng rng = {ct_hash3(SYN_TEMPLATE_KEY, dims, (uint64_t)classes)};
    for (int k = 0; k < classes; k++) {
        for (int i = 0; i < gh * gw * s.c; i++)
            grid[i] = ct_rng_uniform(&rng) * 255.0f;
        upsample(grid, gh, gw, s, templates + (size_t)k * ct_shape_size(s));
    }
}

/* Balanced labels (round-robin over the classes), then shuffled so classes are interleaved. */
static void make_labels(uint8_t *labels, long count, int classes, uint64_t seed)
{
    for (long i = 0; i < count; i++)
        labels[i] = (uint8_t)(i % classes);
    ct_rng rng = {ct_hash3(seed, 0x4c4142454c53ULL /* "LABELS" */, 0)};
    for (long i = count - 1; i > 0; i--) {
        long j = (long)(ct_rng_next(&rng) % (uint64_t)(i + 1));
        uint8_t t = labels[i];
        labels[i] = labels[j];
        labels[j] = t;
    }
}

// templates: (classes, h, w, c) float; img: (h, w, c) uint8
static void make_sample(const float *templates, ct_shape s, int classes, int label, uint64_t seed,
                        long k, uint8_t *img)
{
    /* One generator per sample: the result does not depend on thread scheduling. */
    ct_rng rng = {ct_hash3(seed, SYN_SAMPLE_STREAM, (uint64_t)k)};
    int other = classes > 1 ? (label + 1 + (int)(ct_rng_next(&rng) % (uint64_t)(classes - 1))) % classes
                            : label;
    float shift = SYN_SHIFT * ct_rng_normal(&rng);
    size_t size = ct_shape_size(s);
    const float *own = templates + (size_t)label * size, *mix = templates + (size_t)other * size;
    for (size_t i = 0; i < size; i++) {
        float v = SYN_OWN * own[i] + (1.0f - SYN_OWN) * mix[i] + shift + SYN_NOISE * ct_rng_normal(&rng);
        img[i] = (uint8_t)lrintf(clamp255(v));
    }
}

ct_status ct_synthetic_make(ct_dataset *ds, ct_shape shape, int classes, long count, uint64_t seed)
{
    memset(ds, 0, sizeof *ds);
    size_t size = (size_t)(shape.h > 0 ? shape.h : 0) * (size_t)(shape.w > 0 ? shape.w : 0) *
                  (size_t)(shape.c > 0 ? shape.c : 0);
    if (size == 0 || shape.c > CT_MAX_CHANNELS || size > (1u << 24) || classes < 1 || classes > 256 ||
        count < 1 || (size_t)count > SIZE_MAX / size)
        return CT_ERR_USAGE;
    float *templates = malloc((size_t)classes * size * sizeof *templates);
    ds->images = malloc((size_t)count * size);
    ds->labels = malloc((size_t)count);
    if (!templates || !ds->images || !ds->labels) {
        free(templates);
        ct_dataset_free(ds);
        return CT_ERR_NOMEM;
    }
    make_templates(shape, classes, templates);
    make_labels(ds->labels, count, classes, seed);
    #pragma omp parallel for schedule(static)
    for (long k = 0; k < count; k++)
        make_sample(templates, shape, classes, ds->labels[k], seed, k, ds->images + (size_t)k * size);
    free(templates);
    ds->count = count;
    ds->shape = shape;
    ds->classes = classes;
    return CT_OK;
}

/* ---- format = synthetic: no files; the shape, classes and counts are keys ---- */

#define D(f) offsetof(ct_data_settings, f)
static const ct_data_key synthetic_keys[] = {
    {.name = "shape", .kind = CT_DATA_KEY_SHAPE, .offset = D(shape), .def = "28, 28, 1"},
    {.name = "classes", .kind = CT_DATA_KEY_INT, .offset = D(classes), .def = "10",
     .flags = CT_DATA_KEY_HAS_MIN | CT_DATA_KEY_HAS_MAX, .min = 2, .max = 256},
    {.name = "count", .kind = CT_DATA_KEY_LONG, .offset = D(count), .def = "1000", .flags = CT_DATA_KEY_HAS_MIN,
     .min = 1},
    {.name = "test_count", .kind = CT_DATA_KEY_LONG, .offset = D(test_count), .def = "200",
     .flags = CT_DATA_KEY_HAS_MIN, .min = 0},
};
#undef D

/* Settings a program made have not been through the config's ranges: what the generator needs. */
static ct_status check_set(const ct_data_settings *dc, ct_err *err)
{
    ct_shape s = dc->shape;
    if (s.h < 1 || s.w < 1 || s.c < 1 || s.c > CT_MAX_CHANNELS || (size_t)s.h * s.w * s.c > (1u << 24))
        return ct_fail(err, CT_ERR_CONFIG, "[data] shape %dx%dx%d is not valid for format = synthetic", s.h, s.w,
                       s.c);
    if (dc->classes < 1 || dc->classes > 256)
        return ct_fail(err, CT_ERR_CONFIG, "[data] classes = %d: expected 1..256", dc->classes);
    if (dc->count < 1 || dc->test_count < 0)
        return ct_fail(err, CT_ERR_CONFIG, "[data] count = %ld, test_count = %ld: count must be "
                       "positive and test_count not negative", dc->count, dc->test_count);
    return CT_OK;
}

static ct_status open_set(const ct_data_settings *dc, ct_data_split split, uint64_t seed, ct_dataset *ds,
                          ct_err *err)
{
    ct_status st = CT_OK;
    if (split == CT_DATA_TRAIN)
        st = ct_synthetic_make(ds, dc->shape, dc->classes, dc->count, seed);
    else if (dc->test_count > 0)
        st = ct_synthetic_make(ds, dc->shape, dc->classes, dc->test_count, ct_hash3(seed, SYN_TEST_STREAM, 0));
    if (st != CT_OK)   /* check_set ruled out bad arguments, so this is memory */
        return ct_fail(err, st, "[data] out of memory for %ld synthetic images", dc->count + dc->test_count);
    return CT_OK;
}

static ct_status probe_set(const ct_data_settings *dc, ct_shape *shape, int *classes, ct_err *err)
{
    (void)err;
    *shape = dc->shape;
    *classes = dc->classes;
    return CT_OK;
}

const ct_data_format_def ct_data_format_synthetic = {CT_DATA_KEYS(synthetic_keys), .check = check_set,
                                                    .open = open_set, .probe = probe_set};
