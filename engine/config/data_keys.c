/* [data]: its keys, the parsers of its compound values, and the checks across its keys. The
 * variant is the format: a row with a mask applies only to those formats. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config/keys.h"

static const char *const format_names[] = {"idx", "cifar10", "synthetic", NULL};
static const char *const augment_on_names[] = {"cpu", "gpu", NULL};
static const char *const pipeline_names[] = {"parallel", "sync", NULL};

/* CT_KEY_ENUM writes an int */
_Static_assert(sizeof(ct_data_format) == sizeof(int) && sizeof(ct_augment_on) == sizeof(int) &&
                   sizeof(ct_pipeline_mode) == sizeof(int),
               "enums must be int-sized");

static ct_status parse_files(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_normalize(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_augment(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_shape(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_auto_count(const ct_value_ctx *, const ct_key_spec *, const char *, void *);

#define D(f) offsetof(ct_data_settings, f)
#define FMT(x) (1u << CT_DATA_##x)

static const ct_key_spec data_keys[] = {
    {.name = "format", .kind = CT_KEY_ENUM, .offset = D(format), .def = "idx", .names = format_names,
     .label = "format"},
    {.name = "train", .kind = CT_KEY_CUSTOM, .parse = parse_files, .offset = D(train), .mask = FMT(IDX) | FMT(CIFAR10),
     .flags = CT_KEY_REQUIRED},
    {.name = "train_labels", .kind = CT_KEY_PATH, .offset = D(train_labels), .mask = FMT(IDX), .flags = CT_KEY_REQUIRED,
     .note = "cifar10 files hold their labels"},
    {.name = "test", .kind = CT_KEY_CUSTOM, .parse = parse_files, .offset = D(test), .mask = FMT(IDX) | FMT(CIFAR10)},
    {.name = "test_labels", .kind = CT_KEY_PATH, .offset = D(test_labels), .mask = FMT(IDX),
     .note = "cifar10 files hold their labels"},
    {.name = "normalize", .kind = CT_KEY_CUSTOM, .parse = parse_normalize, .def = "none"},
    {.name = "augment", .kind = CT_KEY_CUSTOM, .parse = parse_augment, .def = "none"},
    {.name = "shape", .kind = CT_KEY_CUSTOM, .offset = D(shape), .parse = parse_shape, .def = "28, 28, 1",
     .mask = FMT(SYNTHETIC)},
    {.name = "classes", .kind = CT_KEY_INT, .offset = D(classes), .def = "10", .mask = FMT(SYNTHETIC),
     .flags = CT_KEY_HAS_MIN | CT_KEY_HAS_MAX, .min = 2, .max = 256},
    {.name = "count", .kind = CT_KEY_LONG, .offset = D(count), .def = "1000", .mask = FMT(SYNTHETIC),
     .flags = CT_KEY_HAS_MIN, .min = 1},
    {.name = "test_count", .kind = CT_KEY_LONG, .offset = D(test_count), .def = "200", .mask = FMT(SYNTHETIC),
     .flags = CT_KEY_HAS_MIN, .min = 0},
    {.name = "train_limit", .kind = CT_KEY_LONG, .offset = D(train_limit), .def = "0", .flags = CT_KEY_HAS_MIN,
     .min = 0},
    {.name = "test_limit", .kind = CT_KEY_LONG, .offset = D(test_limit), .def = "0", .flags = CT_KEY_HAS_MIN, .min = 0},
    /* the input pipeline: worker threads (auto sizes the pool from measured rates), the prefetch
     * ring's depth in batches, where augmentation runs, the naive mode, the last partial batch */
    {.name = "workers", .kind = CT_KEY_CUSTOM, .parse = parse_auto_count, .offset = D(workers), .def = "auto",
     .flags = CT_KEY_HAS_MIN | CT_KEY_HAS_MAX, .min = 1, .max = 256},
    {.name = "prefetch", .kind = CT_KEY_CUSTOM, .parse = parse_auto_count, .offset = D(prefetch), .def = "auto",
     .flags = CT_KEY_HAS_MIN | CT_KEY_HAS_MAX, .min = 1, .max = 64},
    {.name = "augment_on", .kind = CT_KEY_ENUM, .offset = D(augment_on), .def = "cpu", .names = augment_on_names,
     .label = "augment_on"},
    {.name = "pipeline", .kind = CT_KEY_ENUM, .offset = D(pipeline), .def = "parallel", .names = pipeline_names,
     .label = "pipeline"},
    {.name = "drop_last", .kind = CT_KEY_BOOL, .offset = D(drop_last), .def = "off"},
};

static const ct_key_table data_table = CT_KEY_TABLE(data_keys);
static const ct_key_set data_set = {&data_table, 1, &data_keys[0], format_names, "format", CT_MISPLACED_SETTING};

/* train, test: one path, or for cifar10 a comma list of files (or a folder). Which one follows the
 * format read so far: the default, idx, until the format entry is reached in file order. */
static ct_status parse_files(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    const ct_data_settings *d = base;
    ct_key_spec files = *ks;
    files.kind = d->format == CT_DATA_CIFAR10 ? CT_KEY_PATH_LIST : CT_KEY_PATH;
    return ct_key_parse(vc, &files, text, base);
}

/* normalize = m1, ..., mk, s1, ..., sk: k means then k standard deviations, k in 1..4. */
static ct_status parse_normalize(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    ct_data_settings *d = base;
    d->n_normalize = 0;
    if (strcmp(text, "none") == 0)
        return CT_OK;
    ct_item_list list;
    ct_status st = ct_split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    if (list.n % 2 != 0)
        return ct_fail_value(vc, "normalize needs k means then k standard deviations (an even count), got %d numbers",
                             list.n);
    int k = list.n / 2;
    if (k > CT_MAX_CHANNELS)
        return ct_fail_value(vc, "normalize takes at most %d channels (%d numbers), got %d numbers", CT_MAX_CHANNELS,
                             2 * CT_MAX_CHANNELS, list.n);
    for (int i = 0; i < list.n; i++) {
        double v;
        if (!ct_strict_float(list.item[i], &v))
            return ct_fail_value(vc, "bad number '%s' in normalize", list.item[i]);
        if (i >= k && v <= 0)
            return ct_fail_value(vc, "normalize standard deviations must be greater than 0, got %s", list.item[i]);
        if (i < k)
            d->mean[i] = (float)v;
        else
            d->std[i - k] = (float)v;
    }
    d->n_normalize = k;
    return CT_OK;
}

/* augment = crop:N, flip | none */
static ct_status parse_augment_item(const ct_value_ctx *vc, const char *item, ct_data_settings *d)
{
    if (strcmp(item, "flip") == 0) {
        d->flip = 1;
        return CT_OK;
    }
    if (strcmp(item, "crop") == 0)
        return ct_fail_value(vc, "augment crop needs a padding in pixels, as crop:4");
    if (strncmp(item, "crop:", 5) == 0) {
        long n;
        const char *num = item + 5;
        if (ct_strict_long(num, &n) != 0)
            return ct_fail_value(vc, "bad integer '%s' in augment %s", num, item);
        if (n < 1 || n > 16)
            return ct_fail_value(vc, "augment crop padding must be between 1 and 16, got %s", num);
        d->crop_pad = (int)n;
        return CT_OK;
    }
    /* suggest on the word before any ':' so "crp:4" finds crop */
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(item, ":"), item);
    ct_suggestion s = ct_suggest_start(word);
    ct_suggest_consider(&s, "crop");
    ct_suggest_consider(&s, "flip");
    ct_suggest_consider(&s, "none");
    char hint[96] = "";
    if (s.best)
        snprintf(hint, sizeof hint, " (did you mean '%s%s'?)", s.best, strcmp(s.best, "crop") == 0 ? ":N" : "");
    return ct_fail_value(vc, "unknown augment '%s'%s; expected crop:N, flip or none", item, hint);
}

static ct_status parse_augment(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    ct_data_settings *d = base;
    d->crop_pad = 0;
    d->flip = 0;
    if (strcmp(text, "none") == 0)
        return CT_OK;
    ct_item_list list;
    ct_status st = ct_split_items(vc, ks, text, &list);
    for (int i = 0; st == CT_OK && i < list.n; i++) {
        if (strcmp(list.item[i], "none") == 0)
            return ct_fail_value(vc, "augment = none cannot be combined with other items");
        st = parse_augment_item(vc, list.item[i], d);
    }
    return st;
}

/* shape = H, W, C */
static ct_status parse_shape(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    ct_shape *shape = (ct_shape *)((char *)base + ks->offset);
    ct_item_list list;
    ct_status st = ct_split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    if (list.n != 3)
        return ct_fail_value(vc, "shape needs 3 numbers 'H, W, C', got %d", list.n);
    static const char *const what[3] = {"height", "width", "channels"};
    long v[3];
    for (int i = 0; i < 3; i++) {
        if (ct_strict_long(list.item[i], &v[i]) != 0)
            return ct_fail_value(vc, "bad integer '%s' in shape", list.item[i]);
        long hi = i == 2 ? CT_MAX_CHANNELS : INT_MAX;
        if (v[i] < 1 || v[i] > hi)
            return ct_fail_value(vc, "shape %s must be between 1 and %ld, got %s", what[i], hi, list.item[i]);
    }
    *shape = (ct_shape){(int)v[0], (int)v[1], (int)v[2]};
    return CT_OK;
}

/* auto | N (an int; auto is stored as 0), N within the row's range. */
static ct_status parse_auto_count(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    int *dst = (int *)((char *)base + ks->offset);
    if (strcmp(text, "auto") == 0) {
        *dst = 0;
        return CT_OK;
    }
    long v;
    if (ct_strict_long(text, &v) != 0 || v < (long)ks->min || v > (long)ks->max)
        return ct_fail_value(vc, "bad value '%s' for %s; expected auto or a number from %g to %g", text, ks->name,
                             ks->min, ks->max);
    *dst = (int)v;
    return CT_OK;
}

ct_status ct_config_read_data(ct_value_ctx *vc)
{
    ct_data_settings *d = &vc->cfg->data;
    d->line = vc->sec->line;
    ct_status st = ct_keys_read(vc, &data_set, d);
    if (st != CT_OK)
        return st;
    /* idx test images and labels come as a pair */
    const ct_ini_entry *test = ct_section_entry(vc->sec, "test"), *labels = ct_section_entry(vc->sec, "test_labels");
    if (d->format == CT_DATA_IDX && test && !labels)
        return ct_fail_entry(vc, test, "[data] has test but no test_labels; give both or neither");
    if (d->format == CT_DATA_IDX && labels && !test)
        return ct_fail_entry(vc, labels, "[data] has test_labels but no test; give both or neither");
    return CT_OK;
}
