/* [data]: its keys, the parsers of its compound values, and the checks across its keys. The
 * variant is the format: the keys every format has are here, and each format's own keys come from
 * its record (data/format.h), as rows that apply only to that format. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/keys.h"
#include "data/format.h"

static const char *const augment_on_names[] = {"cpu", "gpu", NULL};
static const char *const pipeline_names[] = {"parallel", "sync", NULL};

/* CT_KEY_ENUM writes an int */
_Static_assert(sizeof(ct_data_format) == sizeof(int) && sizeof(ct_augment_on) == sizeof(int) &&
                   sizeof(ct_pipeline_mode) == sizeof(int),
               "enums must be int-sized");
_Static_assert(CT_DATA_FORMAT_COUNT <= 32, "a key row's mask has one bit per format");

static ct_status parse_normalize(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_augment(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_shape(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_auto_count(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_range(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_size(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_words(const ct_value_ctx *, const ct_key_spec *, const char *, void *);
static ct_status parse_share(const ct_value_ctx *, const ct_key_spec *, const char *, void *);

#define D(f) offsetof(ct_data_settings, f)

/* Read first: it picks the format, whose rows then apply. */
static const ct_key_spec format_key[] = {{.name = "format", .kind = CT_KEY_ENUM, .offset = D(format), .def = "idx",
                                          .names = ct_data_format_names, .label = "format"}};

/* The keys of every format, after the format's own. */
static const ct_key_spec common_keys[] = {
    {.name = "normalize", .kind = CT_KEY_CUSTOM, .parse = parse_normalize, .def = "none"},
    {.name = "augment", .kind = CT_KEY_CUSTOM, .parse = parse_augment, .def = "none"},
    {.name = "train_limit", .kind = CT_KEY_LONG, .offset = D(train_limit), .def = "0", .flags = CT_KEY_HAS_MIN,
     .min = 0},
    {.name = "test_limit", .kind = CT_KEY_LONG, .offset = D(test_limit), .def = "0", .flags = CT_KEY_HAS_MIN, .min = 0},
    /* the input pipeline: worker threads (auto sizes them from measured rates), the prefetch
     * ring's depth in batches, where augmentation runs, the naive mode, the last partial batch */
    {.name = "workers", .kind = CT_KEY_CUSTOM, .parse = parse_auto_count, .offset = D(workers), .def = "auto",
     .flags = CT_KEY_PER_PROCESS | CT_KEY_HAS_MIN | CT_KEY_HAS_MAX, .min = 1, .max = 256},
    {.name = "prefetch", .kind = CT_KEY_CUSTOM, .parse = parse_auto_count, .offset = D(prefetch), .def = "auto",
     .flags = CT_KEY_PER_PROCESS | CT_KEY_HAS_MIN | CT_KEY_HAS_MAX, .min = 1, .max = 64},
    {.name = "augment_on", .kind = CT_KEY_ENUM, .offset = D(augment_on), .def = "cpu", .names = augment_on_names,
     .label = "augment_on"},
    {.name = "pipeline", .kind = CT_KEY_ENUM, .offset = D(pipeline), .def = "parallel", .names = pipeline_names,
     .label = "pipeline"},
    {.name = "drop_last", .kind = CT_KEY_BOOL, .offset = D(drop_last), .def = "off"},
};

/* A format's key as a row of the config's tables, applying to the formats in mask. */
static ct_key_spec format_row(const ct_data_key *k, unsigned mask)
{
    static const ct_key_kind kinds[] = {[CT_DATA_KEY_PATH] = CT_KEY_PATH, [CT_DATA_KEY_PATHS] = CT_KEY_PATH_LIST,
                                        [CT_DATA_KEY_INT] = CT_KEY_INT, [CT_DATA_KEY_LONG] = CT_KEY_LONG,
                                        [CT_DATA_KEY_SHAPE] = CT_KEY_CUSTOM, [CT_DATA_KEY_FLOAT] = CT_KEY_FLOAT,
                                        [CT_DATA_KEY_RANGE] = CT_KEY_CUSTOM, [CT_DATA_KEY_SIZE] = CT_KEY_CUSTOM,
                                        [CT_DATA_KEY_ENUM] = CT_KEY_ENUM, [CT_DATA_KEY_WORDS] = CT_KEY_CUSTOM,
                                        [CT_DATA_KEY_SHARE] = CT_KEY_CUSTOM};
    static const ct_key_parse_fn parsers[] = {[CT_DATA_KEY_SHAPE] = parse_shape, [CT_DATA_KEY_RANGE] = parse_range,
                                              [CT_DATA_KEY_SIZE] = parse_size, [CT_DATA_KEY_WORDS] = parse_words,
                                              [CT_DATA_KEY_SHARE] = parse_share};
    unsigned flags = (k->flags & CT_DATA_KEY_REQUIRED ? CT_KEY_REQUIRED : 0u) |
                     (k->flags & CT_DATA_KEY_HAS_MIN ? CT_KEY_HAS_MIN : 0u) |
                     (k->flags & CT_DATA_KEY_HAS_MAX ? CT_KEY_HAS_MAX : 0u);
    return (ct_key_spec){.name = k->name, .kind = kinds[k->kind], .offset = k->offset, .def = k->def, .mask = mask,
                         .flags = flags, .min = (double)k->min, .max = (double)k->max,
                         .parse = parsers[k->kind], .note = k->note, .names = k->names,
                         .label = k->names ? k->name : NULL};
}

/* Every format's keys as one table, format after format. Built for each read (a dozen rows), so
 * the records stay the only place a format's keys are written. */
enum { MAX_FORMAT_ROWS = 64 };
typedef struct format_rows {
    ct_key_spec row[MAX_FORMAT_ROWS];
    size_t n;
} format_rows;

static ct_status gather_format_rows(format_rows *r, ct_err *err)
{
    r->n = 0;
    for (int f = 0; f < CT_DATA_FORMAT_COUNT; f++) {
        const ct_data_format_def *def = ct_data_format_of((ct_data_format)f);
        for (int i = 0; i < def->n_keys; i++) {
            if (r->n == MAX_FORMAT_ROWS)
                return ct_fail(err, CT_ERR_INTERNAL, "the data formats have more than %d keys", MAX_FORMAT_ROWS);
            r->row[r->n++] = format_row(&def->keys[i], 1u << f);
        }
    }
    return CT_OK;
}

/* A path key given only with its partner (idx's test_labels with test): both or neither. */
static ct_status check_pairs(const ct_value_ctx *vc, const ct_data_format_def *def)
{
    for (int i = 0; i < def->n_keys; i++) {
        const ct_data_key *k = &def->keys[i];
        if (!k->with)
            continue;
        const ct_ini_entry *mine = ct_section_entry(vc->sec, k->name), *other = ct_section_entry(vc->sec, k->with);
        if (other && !mine)
            return ct_fail_entry(vc, other, "[data] has %s but no %s; give both or neither", k->with, k->name);
        if (mine && !other)
            return ct_fail_entry(vc, mine, "[data] has %s but no %s; give both or neither", k->name, k->with);
    }
    return CT_OK;
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

/* augment = crop:N, flip | random_resized_crop, flip | none. crop:N pads and crops images held in
 * memory; random_resized_crop is done at decode by the formats that decode (imagefolder). */
static ct_status parse_augment_item(const ct_value_ctx *vc, const char *item, ct_data_settings *d)
{
    const ct_data_format_def *def = ct_data_format_of(d->format);
    int at_decode = def && def->read;
    if (strcmp(item, "flip") == 0) {
        d->flip = 1;
        return CT_OK;
    }
    if (strcmp(item, "random_resized_crop") == 0) {
        if (!at_decode)
            return ct_fail_value(vc, "augment random_resized_crop is done while decoding image files (format = "
                                 "imagefolder); format = %s holds its images in memory: use crop:N",
                                 ct_data_format_name(d->format));
        d->random_resized_crop = 1;
        return CT_OK;
    }
    if (at_decode && strncmp(item, "crop", 4) == 0)
        return ct_fail_value(vc, "augment %s pads and crops images held in memory; format = %s crops while "
                             "decoding: use random_resized_crop (with crop_scale, crop_ratio)",
                             item, ct_data_format_name(d->format));
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
    ct_suggest_consider(&s, "random_resized_crop");
    char hint[96] = "";
    if (s.best)
        snprintf(hint, sizeof hint, " (did you mean '%s%s'?)", s.best, strcmp(s.best, "crop") == 0 ? ":N" : "");
    return ct_fail_value(vc, "unknown augment '%s'%s; expected crop:N, random_resized_crop, flip or none", item, hint);
}

static ct_status parse_augment(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    ct_data_settings *d = base;
    d->crop_pad = 0;
    d->flip = 0;
    d->random_resized_crop = 0;
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

/* lo, hi: two positive numbers, lo <= hi (crop_scale, crop_ratio) into float[2]. */
static ct_status parse_range(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    float *dst = (float *)((char *)base + ks->offset);
    ct_item_list list;
    ct_status st = ct_split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    if (list.n != 2)
        return ct_fail_value(vc, "%s needs two numbers 'lo, hi', got %d", ks->name, list.n);
    double v[2];
    for (int i = 0; i < 2; i++)
        if (!ct_strict_float(list.item[i], &v[i]) || !(v[i] > 0))
            return ct_fail_value(vc, "bad number '%s' in %s; expected a positive number", list.item[i], ks->name);
    if (v[0] > v[1])
        return ct_fail_value(vc, "%s = %s, %s: the first must not exceed the second", ks->name, list.item[0],
                             list.item[1]);
    dst[0] = (float)v[0];
    dst[1] = (float)v[1];
    return CT_OK;
}

/* H, W or N (both N), each 1..65535, into int[2] (h then w). */
static ct_status parse_size(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    int *dst = (int *)((char *)base + ks->offset);
    ct_item_list list;
    ct_status st = ct_split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    if (list.n != 1 && list.n != 2)
        return ct_fail_value(vc, "%s needs 'H, W' or one number N (N x N), got %d numbers", ks->name, list.n);
    long v[2];
    for (int i = 0; i < list.n; i++)
        if (ct_strict_long(list.item[i], &v[i]) != 0 || v[i] < 1 || v[i] > 65535)
            return ct_fail_value(vc, "bad size '%s' in %s; expected 1 to 65535", list.item[i], ks->name);
    dst[0] = (int)v[0];
    dst[1] = (int)(list.n == 2 ? v[1] : v[0]);
    return CT_OK;
}

/* A comma list of words kept as given (classes = cat, dog), malloc'd. */
static ct_status parse_words(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    char **dst = (char **)((char *)base + ks->offset);
    ct_item_list list;
    ct_status st = ct_split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    if (list.n < 1)
        return ct_fail_value(vc, "%s needs at least one name", ks->name);
    size_t len = 1;
    for (int i = 0; i < list.n; i++) {
        if (!list.item[i][0])
            return ct_fail_value(vc, "an empty name in %s", ks->name);
        len += strlen(list.item[i]) + 1;
    }
    char *s = malloc(len);
    if (!s)
        return ct_config_nomem(vc->err);
    s[0] = 0;
    for (int i = 0; i < list.n; i++) {
        strcat(s, list.item[i]);
        if (i + 1 < list.n)
            strcat(s, ",");
    }
    free(*dst);
    *dst = s;
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

/* auto (-1) or a fraction from 0 to 1, into a float. */
static ct_status parse_share(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    float *dst = (float *)((char *)base + ks->offset);
    double v;
    if (strcmp(text, "auto") == 0) {
        *dst = -1.0f;
        return CT_OK;
    }
    if (!ct_strict_float(text, &v) || !(v >= 0 && v <= 1))
        return ct_fail_value(vc, "bad value '%s' for %s; expected auto or a fraction from 0 to 1", text, ks->name);
    *dst = (float)v;
    return CT_OK;
}

ct_status ct_config_read_data(ct_value_ctx *vc)
{
    ct_data_settings *d = &vc->cfg->data;
    d->line = vc->sec->line;
    format_rows rows;
    ct_status st = gather_format_rows(&rows, vc->err);
    if (st != CT_OK)
        return st;
    const ct_key_table tables[] = {CT_KEY_TABLE(format_key), {rows.row, rows.n}, CT_KEY_TABLE(common_keys)};
    const ct_key_set set = {tables, CT_COUNT(tables), &format_key[0], ct_data_format_names, "format",
                            CT_MISPLACED_SETTING};
    st = ct_keys_read(vc, &set, d);
    return st == CT_OK ? check_pairs(vc, ct_data_format_of(d->format)) : st;
}
