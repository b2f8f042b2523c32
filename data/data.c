/* Loading the train and test sets named by [data], whatever their format. */
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "data/dataset.h"

#define SYN_TEST_STREAM 0x54455354534554ULL   /* "TESTSET": the test set's seed is derived */

void ct_dataset_free(ct_dataset *ds)
{
    if (!ds)
        return;
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

static const char *format_name(ct_data_format f)
{
    switch (f) {
    case CT_DATA_IDX: return "idx";
    case CT_DATA_CIFAR10: return "cifar10";
    case CT_DATA_SYNTHETIC: return "synthetic";
    }
    return "?";
}

static ct_status need(const char *value, const char *key, const char *why, ct_data_format f, ct_err *err)
{
    if (value)
        return CT_OK;
    return ct_fail(err, CT_ERR_CONFIG, "[data] %s is required %s format = %s", key, why, format_name(f));
}

/* Every path or size the format needs is present (before any file is touched). */
static ct_status check_config(const ct_data_settings *dc, ct_err *err)
{
    ct_status st = CT_OK;
    switch (dc->format) {
    case CT_DATA_IDX:
        st = need(dc->train, "train", "for", dc->format, err);
        if (st == CT_OK)
            st = need(dc->train_labels, "train_labels", "for", dc->format, err);
        if (st == CT_OK && dc->test)
            st = need(dc->test_labels, "test_labels", "when test is set for", dc->format, err);
        return st;
    case CT_DATA_CIFAR10:
        return need(dc->train, "train", "for", dc->format, err);
    case CT_DATA_SYNTHETIC: {
        ct_shape s = dc->shape;
        if (s.h < 1 || s.w < 1 || s.c < 1 || s.c > CT_MAX_CHANNELS || (size_t)s.h * s.w * s.c > (1u << 24))
            return ct_fail(err, CT_ERR_CONFIG, "[data] shape %dx%dx%d is not valid for format = synthetic",
                           s.h, s.w, s.c);
        if (dc->classes < 1 || dc->classes > 256)
            return ct_fail(err, CT_ERR_CONFIG, "[data] classes = %d: expected 1..256", dc->classes);
        if (dc->count < 1 || dc->test_count < 0)
            return ct_fail(err, CT_ERR_CONFIG, "[data] count = %ld, test_count = %ld: count must be "
                           "positive and test_count not negative", dc->count, dc->test_count);
        return CT_OK;
    }
    }
    return ct_fail(err, CT_ERR_CONFIG, "[data] unknown format %d", (int)dc->format);
}

/* The per-sample shape is one the batcher can normalise, as `normalize` describes it. */
static ct_status check_shape(const ct_data_settings *dc, ct_shape s, const char *source, ct_err *err)
{
    if (s.c > CT_MAX_CHANNELS)
        return ct_fail(err, CT_ERR_DATA, "%s: images have %d channels; at most %d are supported",
                       source, s.c, CT_MAX_CHANNELS);
    if (dc->n_normalize > 1 && dc->n_normalize != s.c)
        return ct_fail(err, CT_ERR_CONFIG,
                       "[data] normalize gives %d values but the images have %d channel%s "
                       "(give 1 value, or one per channel)",
                       dc->n_normalize, s.c, s.c == 1 ? "" : "s");
    for (int i = 0; i < dc->n_normalize && i < CT_MAX_CHANNELS; i++)
        if (!(dc->std[i] > 0.0f))
            return ct_fail(err, CT_ERR_CONFIG, "[data] normalize: std of channel %d must be positive", i);
    return CT_OK;
}

static ct_status load_sets(const ct_data_settings *dc, uint64_t seed, ct_dataset *train, ct_dataset *test,
                           ct_err *err)
{
    ct_status st = CT_OK;
    switch (dc->format) {
    case CT_DATA_IDX:
        st = ct_idx_load(train, dc->train, dc->train_labels, dc->train_limit, err);
        if (st == CT_OK && dc->test)
            st = ct_idx_load(test, dc->test, dc->test_labels, dc->test_limit, err);
        return st;
    case CT_DATA_CIFAR10:
        st = ct_cifar10_load(train, dc->train, 0, dc->train_limit, err);
        if (st == CT_OK && dc->test)
            st = ct_cifar10_load(test, dc->test, 1, dc->test_limit, err);
        return st;
    case CT_DATA_SYNTHETIC:
        st = ct_synthetic_make(train, dc->shape, dc->classes, dc->count, seed);
        if (st == CT_OK && dc->test_count > 0)
            st = ct_synthetic_make(test, dc->shape, dc->classes, dc->test_count,
                                   ct_hash3(seed, SYN_TEST_STREAM, 0));
        if (st != CT_OK)   /* check_config ruled out bad arguments, so this is memory */
            return ct_fail(err, st, "[data] out of memory for %ld synthetic images", dc->count + dc->test_count);
        return st;
    }
    return ct_fail(err, CT_ERR_CONFIG, "[data] unknown format %d", (int)dc->format);
}

/* Train and test must look alike to one network; the class count covers both label sets so a
 * test label can never index past the output layer. */
static ct_status reconcile(const ct_data_settings *dc, ct_dataset *train, ct_dataset *test, ct_err *err)
{
    ct_status st = check_shape(dc, train->shape, dc->train ? dc->train : "[data]", err);
    if (st != CT_OK || test->count == 0)
        return st;
    ct_shape a = test->shape, b = train->shape;
    if (a.h != b.h || a.w != b.w || a.c != b.c)
        return ct_fail(err, CT_ERR_DATA, "%s: test images are %dx%dx%d but training images are %dx%dx%d",
                       dc->test ? dc->test : "[data]", a.h, a.w, a.c, b.h, b.w, b.c);
    int classes = train->classes > test->classes ? train->classes : test->classes;
    train->classes = test->classes = classes;
    return CT_OK;
}

ct_status ct_data_load(const ct_data_settings *dc, uint64_t seed, ct_dataset *train, ct_dataset *test,
                       ct_err *err)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    ct_status st = check_config(dc, err);
    if (st == CT_OK)
        st = load_sets(dc, seed, train, test, err);
    if (st == CT_OK)
        st = reconcile(dc, train, test, err);
    if (st != CT_OK) {
        ct_dataset_free(train);
        ct_dataset_free(test);
    }
    return st;
}

/* IDX class count as ct_data_load would find it: 1 + the largest label of the train and test
 * label files. Loading one image reads every label (they are small) and the headers only. */
static ct_status idx_classes(const ct_data_settings *dc, int *classes, ct_err *err)
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

ct_status ct_data_probe(const ct_data_settings *dc, ct_shape *shape, int *classes, ct_err *err)
{
    ct_status st = check_config(dc, err);
    if (st != CT_OK)
        return st;
    switch (dc->format) {
    case CT_DATA_IDX:
        st = ct_idx_probe(dc->train, shape, err);
        if (st == CT_OK)
            st = idx_classes(dc, classes, err);
        break;
    case CT_DATA_CIFAR10:
        *shape = (ct_shape){32, 32, 3};
        *classes = 10;
        break;
    case CT_DATA_SYNTHETIC:
        *shape = dc->shape;
        *classes = dc->classes;
        break;
    }
    if (st == CT_OK)
        st = check_shape(dc, *shape, dc->train ? dc->train : "[data]", err);
    return st;
}
