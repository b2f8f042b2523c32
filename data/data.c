/* Loading the train and test sets named by [data], whatever their format: what every format shares
 * (its required paths, a shape the batcher can normalise, train and test that look alike) is
 * checked here, and the rest is the format's record (data/format.h). */
#include <string.h>

#include "data/format.h"

/* The value of a path key of dc (NULL when absent). */
static const char *path_value(const ct_data_settings *dc, const ct_data_key *k)
{
    return *(char *const *)((const char *)dc + k->offset);
}

static const ct_data_key *key_named(const ct_data_format_def *def, const char *name)
{
    for (int i = 0; i < def->n_keys; i++)
        if (strcmp(def->keys[i].name, name) == 0)
            return &def->keys[i];
    return NULL;
}

/* Every path the format needs is present, then the format's own checks (before any file is
 * touched). The settings may come from a program rather than the config reader, which checks the
 * same paths with file lines. */
static ct_status check_config(const ct_data_settings *dc, const ct_data_format_def **out, ct_err *err)
{
    const ct_data_format_def *def = ct_data_format_of(dc->format);
    if (!def)
        return ct_fail(err, CT_ERR_CONFIG, "[data] unknown format %d", (int)dc->format);
    const char *name = ct_data_format_name(dc->format);
    for (int i = 0; i < def->n_keys; i++) {
        const ct_data_key *k = &def->keys[i];
        if (k->kind != CT_DATA_KEY_PATH && k->kind != CT_DATA_KEY_PATHS)
            continue;
        if ((k->flags & CT_DATA_KEY_REQUIRED) && !path_value(dc, k))
            return ct_fail(err, CT_ERR_CONFIG, "[data] %s is required for format = %s", k->name, name);
        const ct_data_key *partner = k->with ? key_named(def, k->with) : NULL;
        if (partner && path_value(dc, partner) && !path_value(dc, k))
            return ct_fail(err, CT_ERR_CONFIG, "[data] %s is required when %s is set for format = %s", k->name,
                           k->with, name);
    }
    *out = def;
    return def->check ? def->check(dc, err) : CT_OK;
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
    const ct_data_format_def *def = NULL;
    ct_status st = check_config(dc, &def, err);
    if (st == CT_OK)
        st = def->open(dc, CT_DATA_TRAIN, seed, train, err);
    if (st == CT_OK)
        st = def->open(dc, CT_DATA_TEST, seed, test, err);
    if (st == CT_OK)
        st = reconcile(dc, train, test, err);
    if (st != CT_OK) {
        ct_dataset_free(train);
        ct_dataset_free(test);
    }
    return st;
}

void ct_data_largest_label(const ct_data_settings *dc, char *text, size_t size)
{
    const ct_data_format_def *def = NULL;
    ct_err ignored;
    if (size)
        text[0] = '\0';
    if (size && check_config(dc, &def, &ignored) == CT_OK && def->largest_label)
        def->largest_label(dc, text, size);
}

ct_status ct_data_probe(const ct_data_settings *dc, ct_shape *shape, int *classes, ct_err *err)
{
    const ct_data_format_def *def = NULL;
    ct_status st = check_config(dc, &def, err);
    if (st == CT_OK)
        st = def->probe(dc, shape, classes, err);
    if (st == CT_OK)
        st = check_shape(dc, *shape, dc->train ? dc->train : "[data]", err);
    return st;
}
