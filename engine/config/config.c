/* The typed configuration: ct_ini -> ct_config.
 *
 * Every section kind has a const table of keys (name, kind, where it is stored, default, range).
 * Reading a section is the same loop for all of them: apply the defaults, read each entry through
 * its row, then check the required rows. A later key is one more table row. Rows may apply only
 * to some "variants" of a section (data formats, layer types); the same key name can have several
 * rows with different defaults or ranges per variant (stride is 1 for conv2d but 0 for pools).
 *
 * Every error names where the value came from: "file:line: " for the file, "--set section.key: "
 * for an override, and the section header's line for a missing key. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

/* Enum fields are written through an int, which needs them to be int-sized. */
_Static_assert(sizeof(ct_activation) == sizeof(int) && sizeof(ct_layer_type) == sizeof(int) &&
                   sizeof(ct_padding) == sizeof(int) && sizeof(ct_init) == sizeof(int) &&
                   sizeof(ct_optimizer) == sizeof(int) && sizeof(ct_schedule) == sizeof(int) &&
                   sizeof(ct_precision) == sizeof(int) && sizeof(ct_data_format) == sizeof(int) &&
                   sizeof(ct_augment_on) == sizeof(int) && sizeof(ct_pipeline_mode) == sizeof(int),
               "enums must be int-sized");

/* ---- the words of each enum, in enum order ---- */

static const char *const format_names[] = {"idx", "cifar10", "synthetic", NULL};
#define activation_names ct_activation_names
#define layer_type_names ct_layer_type_names
static const char *const padding_names[] = {"valid", "same", NULL};
static const char *const init_names[] = {"auto", "he", "glorot", NULL};
static const char *const optimizer_names[] = {"sgd", "momentum", "adam", "adamw", NULL};
static const char *const schedule_names[] = {"constant", "step", "cosine", NULL};
static const char *const precision_names[] = {"fp32", "fp16", NULL};
static const char *const augment_on_names[] = {"cpu", "gpu", NULL};
static const char *const pipeline_names[] = {"parallel", "sync", NULL};


/* ---- key tables ---- */

typedef enum key_kind {
    K_INT,    /* int, strict decimal */
    K_LONG,   /* long, strict decimal */
    K_U64,    /* uint64_t, digits only */
    K_FLOAT,  /* float, finite */
    K_BOOL,   /* int 0/1 from on|off|true|false|yes|no|1|0 */
    K_ENUM,   /* int index into names */
    K_PATH,   /* char *, malloc'd, resolved against the config's folder */
    K_CUSTOM  /* the row's parse function */
} key_kind;

enum {
    REQUIRED = 1 << 0,
    HAS_MIN = 1 << 1,
    HAS_MAX = 1 << 2,
    MIN_OPEN = 1 << 3, /* min itself is not allowed */
    MAX_OPEN = 1 << 4, /* max itself is not allowed */
};

struct key_spec;

/* What a value parser needs to know about where it is. */
typedef struct value_ctx {
    const ct_ini *ini;
    ct_config *cfg;
    const ct_ini_section *sec;   /* NULL for a [train] that is not in the file */
    const char *section;         /* its name, for messages */
    const ct_ini_entry *entry;   /* the entry being read; NULL while applying a default */
    unsigned variant;            /* bit of the data format or layer type; 0 for [train] */
    int layer;                   /* index of the layer being read, -1 outside layers */
    ct_err *err;
} value_ctx;

typedef ct_status (*parse_fn)(const value_ctx *vc, const struct key_spec *ks, const char *text, void *base);

typedef struct key_spec {
    const char *name;
    key_kind kind;
    size_t offset;              /* of the field in the section's struct */
    const char *def;            /* default, parsed like a given value; NULL: none */
    unsigned mask;              /* variants the row applies to; 0: all */
    unsigned flags;
    double min, max;
    const char *const *names;   /* K_ENUM: accepted words */
    const char *label;          /* K_ENUM: what the words are, for "unknown <label> 'x'" */
    parse_fn parse;             /* K_CUSTOM */
    const char *note;           /* reason shown when the key does not apply to a variant */
} key_spec;

static ct_status parse_normalize(const value_ctx *, const key_spec *, const char *, void *);
static ct_status parse_augment(const value_ctx *, const key_spec *, const char *, void *);
static ct_status parse_shape(const value_ctx *, const key_spec *, const char *, void *);
static ct_status parse_batch(const value_ctx *, const key_spec *, const char *, void *);
static ct_status parse_auto_count(const value_ctx *, const key_spec *, const char *, void *);
static ct_status parse_devices(const value_ctx *, const key_spec *, const char *, void *);
static ct_status parse_graph(const value_ctx *, const key_spec *, const char *, void *);
static ct_status parse_memory(const value_ctx *, const key_spec *, const char *, void *);
static ct_status parse_inputs(const value_ctx *, const key_spec *, const char *, void *);

#define D(f) offsetof(ct_data_config, f)
#define T(f) offsetof(ct_train_config, f)
#define L(f) offsetof(ct_layer_config, f)
#define FMT(x) (1u << CT_DATA_##x)
#define LT(x) (1u << CT_LAYER_##x)
#define POOLS (LT(MAXPOOL) | LT(AVGPOOL))

static const key_spec data_keys[] = {
    {.name = "format", .kind = K_ENUM, .offset = D(format), .def = "idx", .names = format_names, .label = "format"},
    {.name = "train", .kind = K_PATH, .offset = D(train), .mask = FMT(IDX) | FMT(CIFAR10), .flags = REQUIRED},
    {.name = "train_labels", .kind = K_PATH, .offset = D(train_labels), .mask = FMT(IDX), .flags = REQUIRED,
     .note = "cifar10 files hold their labels"},
    {.name = "test", .kind = K_PATH, .offset = D(test), .mask = FMT(IDX) | FMT(CIFAR10)},
    {.name = "test_labels", .kind = K_PATH, .offset = D(test_labels), .mask = FMT(IDX),
     .note = "cifar10 files hold their labels"},
    {.name = "normalize", .kind = K_CUSTOM, .parse = parse_normalize, .def = "none"},
    {.name = "augment", .kind = K_CUSTOM, .parse = parse_augment, .def = "none"},
    {.name = "shape", .kind = K_CUSTOM, .offset = D(shape), .parse = parse_shape, .def = "28, 28, 1",
     .mask = FMT(SYNTHETIC)},
    {.name = "classes", .kind = K_INT, .offset = D(classes), .def = "10", .mask = FMT(SYNTHETIC),
     .flags = HAS_MIN | HAS_MAX, .min = 2, .max = 256},
    {.name = "count", .kind = K_LONG, .offset = D(count), .def = "1000", .mask = FMT(SYNTHETIC),
     .flags = HAS_MIN, .min = 1},
    {.name = "test_count", .kind = K_LONG, .offset = D(test_count), .def = "200", .mask = FMT(SYNTHETIC),
     .flags = HAS_MIN, .min = 0},
    {.name = "train_limit", .kind = K_LONG, .offset = D(train_limit), .def = "0", .flags = HAS_MIN, .min = 0},
    {.name = "test_limit", .kind = K_LONG, .offset = D(test_limit), .def = "0", .flags = HAS_MIN, .min = 0},
    /* the input pipeline: worker threads (auto sizes the pool from measured rates), the prefetch
     * ring's depth in batches, where augmentation runs, the naive mode, the last partial batch */
    {.name = "workers", .kind = K_CUSTOM, .parse = parse_auto_count, .offset = D(workers), .def = "auto",
     .flags = HAS_MIN | HAS_MAX, .min = 1, .max = 256},
    {.name = "prefetch", .kind = K_CUSTOM, .parse = parse_auto_count, .offset = D(prefetch), .def = "auto",
     .flags = HAS_MIN | HAS_MAX, .min = 1, .max = 64},
    {.name = "augment_on", .kind = K_ENUM, .offset = D(augment_on), .def = "cpu", .names = augment_on_names,
     .label = "augment_on"},
    {.name = "pipeline", .kind = K_ENUM, .offset = D(pipeline), .def = "parallel", .names = pipeline_names,
     .label = "pipeline"},
    {.name = "drop_last", .kind = K_BOOL, .offset = D(drop_last), .def = "off"},
};

static const key_spec train_keys[] = {
    {.name = "epochs", .kind = K_INT, .offset = T(epochs), .def = "10", .flags = HAS_MIN, .min = 1},
    {.name = "batch", .kind = K_CUSTOM, .parse = parse_batch, .offset = T(batch), .def = "64", .flags = HAS_MIN,
     .min = 1},
    {.name = "optimizer", .kind = K_ENUM, .offset = T(optimizer), .def = "adam", .names = optimizer_names,
     .label = "optimizer"},
    {.name = "learning_rate", .kind = K_FLOAT, .offset = T(learning_rate), .def = "0.001",
     .flags = HAS_MIN | MIN_OPEN, .min = 0},
    {.name = "momentum", .kind = K_FLOAT, .offset = T(momentum), .def = "0.9",
     .flags = HAS_MIN | HAS_MAX | MAX_OPEN, .min = 0, .max = 1},
    {.name = "nesterov", .kind = K_BOOL, .offset = T(nesterov), .def = "off"},
    {.name = "beta1", .kind = K_FLOAT, .offset = T(beta1), .def = "0.9", .flags = HAS_MIN | HAS_MAX | MAX_OPEN,
     .min = 0, .max = 1},
    {.name = "beta2", .kind = K_FLOAT, .offset = T(beta2), .def = "0.999", .flags = HAS_MIN | HAS_MAX | MAX_OPEN,
     .min = 0, .max = 1},
    {.name = "epsilon", .kind = K_FLOAT, .offset = T(epsilon), .def = "1e-8", .flags = HAS_MIN | MIN_OPEN, .min = 0},
    /* adamw's default of 0.01 is applied after reading, when weight_decay is not given */
    {.name = "weight_decay", .kind = K_FLOAT, .offset = T(weight_decay), .def = "0", .flags = HAS_MIN, .min = 0},
    {.name = "schedule", .kind = K_ENUM, .offset = T(schedule), .def = "constant", .names = schedule_names,
     .label = "schedule"},
    {.name = "step_size", .kind = K_FLOAT, .offset = T(step_size), .def = "10", .flags = HAS_MIN | MIN_OPEN,
     .min = 0},
    {.name = "gamma", .kind = K_FLOAT, .offset = T(gamma), .def = "0.1", .flags = HAS_MIN | MIN_OPEN | HAS_MAX,
     .min = 0, .max = 1},
    {.name = "warmup", .kind = K_FLOAT, .offset = T(warmup), .def = "0", .flags = HAS_MIN, .min = 0},
    {.name = "min_lr", .kind = K_FLOAT, .offset = T(min_lr), .def = "0", .flags = HAS_MIN, .min = 0},
    {.name = "precision", .kind = K_ENUM, .offset = T(precision), .def = "fp32", .names = precision_names,
     .label = "precision"},
    {.name = "devices", .kind = K_CUSTOM, .parse = parse_devices, .offset = T(devices), .def = "all"},
    {.name = "graph", .kind = K_CUSTOM, .parse = parse_graph, .offset = T(graph), .def = "auto"},
    {.name = "memory", .kind = K_CUSTOM, .parse = parse_memory, .def = "grow"},
    {.name = "seed", .kind = K_U64, .offset = T(seed), .def = "42"},
    {.name = "threads", .kind = K_INT, .offset = T(threads), .def = "0", .flags = HAS_MIN, .min = 0},
    {.name = "checkpoint_every", .kind = K_LONG, .offset = T(checkpoint_every), .def = "0", .flags = HAS_MIN,
     .min = 0},
    {.name = "keep", .kind = K_INT, .offset = T(keep), .def = "3", .flags = HAS_MIN, .min = 1},
};

/* The first row must be `type`: it is read before the others to pick the variant. */
static const key_spec layer_keys[] = {
    {.name = "type", .kind = K_ENUM, .offset = L(type), .names = layer_type_names, .label = "layer type",
     .flags = REQUIRED},
    {.name = "input", .kind = K_CUSTOM, .parse = parse_inputs, .mask = ~LT(ADD)},
    {.name = "inputs", .kind = K_CUSTOM, .parse = parse_inputs, .mask = LT(ADD), .flags = REQUIRED},
    {.name = "units", .kind = K_INT, .offset = L(units), .mask = LT(DENSE), .flags = REQUIRED | HAS_MIN, .min = 1},
    {.name = "filters", .kind = K_INT, .offset = L(filters), .mask = LT(CONV2D), .flags = REQUIRED | HAS_MIN,
     .min = 1},
    {.name = "size", .kind = K_INT, .offset = L(size), .mask = LT(CONV2D), .flags = REQUIRED | HAS_MIN, .min = 1},
    {.name = "size", .kind = K_INT, .offset = L(size), .mask = POOLS, .def = "2", .flags = HAS_MIN, .min = 1},
    {.name = "stride", .kind = K_INT, .offset = L(stride), .mask = LT(CONV2D), .def = "1", .flags = HAS_MIN,
     .min = 1},
    {.name = "stride", .kind = K_INT, .offset = L(stride), .mask = POOLS, .def = "0", .flags = HAS_MIN, .min = 0},
    {.name = "padding", .kind = K_ENUM, .offset = L(padding), .mask = LT(CONV2D) | POOLS, .def = "valid",
     .names = padding_names, .label = "padding"},
    {.name = "global", .kind = K_BOOL, .offset = L(global), .mask = POOLS, .def = "off"},
    {.name = "activation", .kind = K_ENUM, .offset = L(activation), .mask = LT(DENSE) | LT(CONV2D) | LT(ADD),
     .def = "linear", .names = activation_names, .label = "activation"},
    {.name = "activation", .kind = K_ENUM, .offset = L(activation), .mask = LT(ACTIVATION), .flags = REQUIRED,
     .names = activation_names, .label = "activation"},
    {.name = "bias", .kind = K_BOOL, .offset = L(bias), .mask = LT(DENSE) | LT(CONV2D), .def = "on"},
    {.name = "init", .kind = K_ENUM, .offset = L(init), .mask = LT(DENSE) | LT(CONV2D), .def = "auto",
     .names = init_names, .label = "init"},
    {.name = "momentum", .kind = K_FLOAT, .offset = L(momentum), .mask = LT(BATCHNORM), .def = "0.1",
     .flags = HAS_MIN | HAS_MAX, .min = 0, .max = 1},
    {.name = "epsilon", .kind = K_FLOAT, .offset = L(epsilon), .mask = LT(BATCHNORM), .def = "1e-5",
     .flags = HAS_MIN | MIN_OPEN, .min = 0},
    {.name = "rate", .kind = K_FLOAT, .offset = L(rate), .mask = LT(DROPOUT), .flags = REQUIRED | HAS_MIN | HAS_MAX | MAX_OPEN,
     .min = 0, .max = 1},
};

#define COUNT(a) (sizeof(a) / sizeof *(a))

static int applies(const key_spec *ks, unsigned variant) { return ks->mask == 0 || (ks->mask & variant) != 0; }

static const key_spec *find_key(const key_spec *table, size_t n, const char *name, unsigned variant)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0 && applies(&table[i], variant))
            return &table[i];
    return NULL;
}

static const ct_ini_entry *find_entry(const ct_ini_section *sec, const char *key)
{
    for (int i = 0; sec && i < sec->n_entries; i++)
        if (strcmp(sec->entries[i].key, key) == 0)
            return &sec->entries[i];
    return NULL;
}

/* ---- messages ---- */

/* Reports msg for the value being read: at its file line, or as "--set section.key: " for an
 * override. A bad built-in default is our bug, not the user's. */
static ct_status report_at_entry(const value_ctx *vc, const ct_ini_entry *e, const char *msg)
{
    if (!e)
        return ct_fail(vc->err, CT_ERR_INTERNAL, "built-in default of [%s]: %s", vc->section, msg);
    if (e->line > 0)
        return ct_fail_at(vc->err, CT_ERR_CONFIG, vc->ini->file, e->line, "%s", msg);
    return ct_fail(vc->err, CT_ERR_CONFIG, "--set %s.%s: %s", vc->section, e->key, msg);
}

static ct_status fail_entry(const value_ctx *vc, const ct_ini_entry *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ct_status fail_entry(const value_ctx *vc, const ct_ini_entry *e, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return report_at_entry(vc, e, msg);
}

/* An error about the value being read. */
#define fail_value(vc, ...) fail_entry((vc), (vc)->entry, __VA_ARGS__)

/* An error about the section as a whole (a missing key): its header's line. */
static ct_status fail_section(const value_ctx *vc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ct_status fail_section(const value_ctx *vc, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ct_fail_at(vc->err, CT_ERR_CONFIG, vc->ini->file, vc->sec ? vc->sec->line : 0, "%s", msg);
}

static ct_status out_of_memory(ct_err *err) { return ct_fail(err, CT_ERR_NOMEM, "out of memory reading the config"); }

/* ---- "did you mean" ---- */

/* Levenshtein distance, ignoring case so that "ReLU" finds "relu". Words longer than the buffer
 * are never close to anything we would suggest. */
static int edit_distance(const char *a, const char *b)
{
    enum { MAXLEN = 64 };
    size_t na = strlen(a), nb = strlen(b);
    if (na > MAXLEN || nb > MAXLEN)
        return INT_MAX / 2;
    int row[MAXLEN + 1];
    for (size_t j = 0; j <= nb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* The nearest candidate seen so far, if it is close enough to be worth suggesting. */
typedef struct suggestion {
    const char *word;
    const char *best;
    int dist;
} suggestion;

static suggestion suggest_start(const char *word) { return (suggestion){word, NULL, INT_MAX}; }

static void suggest_consider(suggestion *s, const char *candidate)
{
    int limit = (int)strlen(s->word) / 3;
    if (limit < 2)
        limit = 2;
    int d = edit_distance(s->word, candidate);
    if (d <= limit && d < s->dist) {
        s->best = candidate;
        s->dist = d;
    }
}

/* " (did you mean 'x'?)" or "", into buf. */
static const char *did_you_mean(const suggestion *s, char *buf, size_t size)
{
    if (!s->best)
        return "";
    snprintf(buf, size, " (did you mean '%s'?)", s->best);
    return buf;
}

/* "a, b, c" from a NULL-terminated list. */
static void join_words(const char *const *words, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; words[i] && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", words[i]);
}

/* "a or b", "a, b or c" from the names whose bit is set in mask. */
static void join_variants(const char *const *names, unsigned mask, char *buf, size_t size)
{
    int total = 0, done = 0;
    for (int i = 0; names[i]; i++)
        total += (int)((mask >> i) & 1u);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; names[i] && used < size; i++) {
        if (!((mask >> i) & 1u))
            continue;
        const char *sep = done == 0 ? "" : done == total - 1 ? " or " : ", ";
        used += (size_t)snprintf(buf + used, size - used, "%s%s", sep, names[i]);
        done++;
    }
}

/* ---- strict scalar parsing ---- */

/* 0: ok; 1: not an integer; 2: out of range of long. */
static int strict_long(const char *text, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || isspace((unsigned char)text[0]))
        return 1;
    if (errno == ERANGE)
        return 2;
    *out = v;
    return 0;
}

/* 1 when text is a whole, finite decimal number that fits a float. */
static int strict_float(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || isspace((unsigned char)text[0]))
        return 0;
    if (!isfinite(v) || fabs(v) > FLT_MAX)
        return 0;
    *out = v;
    return 1;
}

/* 1 on, 0 off, -1 not a boolean word. */
static int bool_word(const char *text)
{
    static const char *const on[] = {"on", "true", "yes", "1"};
    static const char *const off[] = {"off", "false", "no", "0"};
    for (size_t i = 0; i < COUNT(on); i++) {
        if (strcmp(text, on[i]) == 0)
            return 1;
        if (strcmp(text, off[i]) == 0)
            return 0;
    }
    return -1;
}

/* "at least 1", "in [0, 1)", ... for the row's bounds. */
static void describe_range(const key_spec *ks, char *buf, size_t size)
{
    int lo = (ks->flags & HAS_MIN) != 0, hi = (ks->flags & HAS_MAX) != 0;
    int integer = ks->kind != K_FLOAT;
    if (lo && hi && integer)
        snprintf(buf, size, "between %g and %g", ks->min, ks->max);
    else if (lo && hi)
        snprintf(buf, size, "in %c%g, %g%c", ks->flags & MIN_OPEN ? '(' : '[', ks->min, ks->max,
                 ks->flags & MAX_OPEN ? ')' : ']');
    else if (lo)
        snprintf(buf, size, "%s %g", ks->flags & MIN_OPEN ? "greater than" : "at least", ks->min);
    else
        snprintf(buf, size, "%s %g", ks->flags & MAX_OPEN ? "less than" : "at most", ks->max);
}

static ct_status check_range(const value_ctx *vc, const key_spec *ks, double v, const char *text)
{
    int lo_ok = !(ks->flags & HAS_MIN) || ((ks->flags & MIN_OPEN) ? v > ks->min : v >= ks->min);
    int hi_ok = !(ks->flags & HAS_MAX) || ((ks->flags & MAX_OPEN) ? v < ks->max : v <= ks->max);
    if (lo_ok && hi_ok)
        return CT_OK;
    char need[96];
    describe_range(ks, need, sizeof need);
    return fail_value(vc, "[%s] %s must be %s, got %s", vc->section, ks->name, need, text);
}

static ct_status read_integer(const value_ctx *vc, const key_spec *ks, const char *text, long lo, long hi,
                              long *out)
{
    int r = strict_long(text, out);
    if (r == 1)
        return fail_value(vc, "bad integer '%s' for %s", text, ks->name);
    if (r == 2 || *out < lo || *out > hi)
        return fail_value(vc, "%s = %s is out of range", ks->name, text);
    return check_range(vc, ks, (double)*out, text);
}

static ct_status read_u64(const value_ctx *vc, const key_spec *ks, const char *text, uint64_t *out)
{
    /* strtoull would quietly wrap "-1" around; insist on digits */
    for (const char *p = text; *p; p++)
        if (!isdigit((unsigned char)*p))
            return fail_value(vc, "bad integer '%s' for %s (expected 0 to 18446744073709551615)", text, ks->name);
    errno = 0;
    unsigned long long v = strtoull(text, NULL, 10);
    if (errno == ERANGE)
        return fail_value(vc, "%s = %s is out of range", ks->name, text);
    *out = (uint64_t)v;
    return CT_OK;
}

static ct_status read_float(const value_ctx *vc, const key_spec *ks, const char *text, float *out)
{
    double v;
    if (!strict_float(text, &v))
        return fail_value(vc, "bad number '%s' for %s", text, ks->name);
    ct_status st = check_range(vc, ks, v, text);
    if (st == CT_OK)
        *out = (float)v;
    return st;
}

static ct_status read_bool(const value_ctx *vc, const key_spec *ks, const char *text, int *out)
{
    int b = bool_word(text);
    if (b < 0)
        return fail_value(vc, "bad boolean '%s' for %s; expected on, off, true, false, yes, no, 1 or 0", text,
                          ks->name);
    *out = b;
    return CT_OK;
}

static ct_status read_enum(const value_ctx *vc, const key_spec *ks, const char *text, void *dst)
{
    for (int i = 0; ks->names[i]; i++)
        if (strcmp(text, ks->names[i]) == 0) {
            memcpy(dst, &i, sizeof i);
            return CT_OK;
        }
    suggestion s = suggest_start(text);
    for (int i = 0; ks->names[i]; i++)
        suggest_consider(&s, ks->names[i]);
    char hint[96], all[256];
    join_words(ks->names, all, sizeof all);
    return fail_value(vc, "unknown %s '%s'%s; expected one of: %s", ks->label, text,
                      did_you_mean(&s, hint, sizeof hint), all);
}

/* ---- paths ---- */

/* dir/path, or path itself when absolute. */
static char *join_path(const char *dir, const char *path, size_t path_len)
{
    int absolute = path_len > 0 && path[0] == '/';
    size_t dlen = absolute ? 0 : strlen(dir);
    int slash = !absolute && dlen > 0 && dir[dlen - 1] != '/';
    char *p = malloc(dlen + (size_t)slash + path_len + 1);
    if (!p)
        return NULL;
    memcpy(p, dir, dlen);
    if (slash)
        p[dlen] = '/';
    memcpy(p + dlen + (size_t)slash, path, path_len);
    p[dlen + (size_t)slash + path_len] = '\0';
    return p;
}

/* Appends item to *list (malloc'd, comma-separated); frees *list on failure. */
static int append_item(char **list, const char *item)
{
    size_t old = *list ? strlen(*list) : 0;
    char *p = realloc(*list, old + (old ? 1 : 0) + strlen(item) + 1);
    if (!p) {
        free(*list);
        *list = NULL;
        return 0;
    }
    if (old)
        p[old++] = ',';
    strcpy(p + old, item);
    *list = p;
    return 1;
}

/* Resolves every comma-separated item of a cifar10 file list against the folder. */
static ct_status resolve_list(const value_ctx *vc, const key_spec *ks, const char *text, char **out)
{
    char *list = NULL;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        while (p < end && isspace((unsigned char)*p))
            p++;
        while (end > p && isspace((unsigned char)end[-1]))
            end--;
        if (end == p) {
            free(list);
            return fail_value(vc, "empty file name in %s = %s", ks->name, text);
        }
        char *one = join_path(vc->cfg->dir, p, (size_t)(end - p));
        int ok = one && append_item(&list, one);
        free(one);
        if (!ok) {
            free(list);  /* NULL when append_item failed: it frees the list itself */
            return out_of_memory(vc->err);
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    *out = list;
    return CT_OK;
}

static ct_status read_path(const value_ctx *vc, const key_spec *ks, const char *text, char **dst)
{
    char *resolved = NULL;
    if (vc->cfg->data.format == CT_DATA_CIFAR10) {
        ct_status st = resolve_list(vc, ks, text, &resolved);
        if (st != CT_OK)
            return st;
    } else if (!(resolved = join_path(vc->cfg->dir, text, strlen(text)))) {
        return out_of_memory(vc->err);
    }
    free(*dst);
    *dst = resolved;
    return CT_OK;
}

/* ---- one value through its row ---- */

static ct_status parse_value(const value_ctx *vc, const key_spec *ks, const char *text, void *base)
{
    void *dst = (char *)base + ks->offset;
    long v = 0;
    ct_status st;
    switch (ks->kind) {
    case K_INT:
        st = read_integer(vc, ks, text, INT_MIN, INT_MAX, &v);
        if (st == CT_OK)
            *(int *)dst = (int)v;
        return st;
    case K_LONG:
        st = read_integer(vc, ks, text, LONG_MIN, LONG_MAX, &v);
        if (st == CT_OK)
            *(long *)dst = v;
        return st;
    case K_U64:
        return read_u64(vc, ks, text, (uint64_t *)dst);
    case K_FLOAT:
        return read_float(vc, ks, text, (float *)dst);
    case K_BOOL:
        return read_bool(vc, ks, text, (int *)dst);
    case K_ENUM:
        return read_enum(vc, ks, text, dst);
    case K_PATH:
        return read_path(vc, ks, text, (char **)dst);
    case K_CUSTOM:
        return ks->parse(vc, ks, text, base);
    }
    return ct_fail(vc->err, CT_ERR_INTERNAL, "key %s has no kind", ks->name);
}

/* ---- lists ---- */

/* A comma-separated value split into trimmed items (empty items kept, so callers can reject
 * "1,,2"). Config values are short; longer ones are rejected rather than allocated. */
typedef struct item_list {
    char buf[512];
    char *item[32];
    int n;
} item_list;

static char *trim_in_place(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static ct_status split_items(const value_ctx *vc, const key_spec *ks, const char *text, item_list *out)
{
    if (strlen(text) >= sizeof out->buf)
        return fail_value(vc, "%s is too long", ks->name);
    strcpy(out->buf, text);
    out->n = 0;
    char *p = out->buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (out->n == (int)COUNT(out->item))
            return fail_value(vc, "too many items in %s", ks->name);
        out->item[out->n++] = trim_in_place(p);
        if (!comma)
            return CT_OK;
        p = comma + 1;
    }
}

/* ---- custom values ---- */

/* normalize = m1, ..., mk, s1, ..., sk: k means then k standard deviations, k in 1..4. */
static ct_status parse_normalize(const value_ctx *vc, const key_spec *ks, const char *text, void *base)
{
    ct_data_config *d = base;
    d->n_normalize = 0;
    if (strcmp(text, "none") == 0)
        return CT_OK;
    item_list list;
    ct_status st = split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    if (list.n % 2 != 0)
        return fail_value(vc, "normalize needs k means then k standard deviations (an even count), got %d numbers",
                          list.n);
    int k = list.n / 2;
    if (k > CT_MAX_CHANNELS)
        return fail_value(vc, "normalize takes at most %d channels (%d numbers), got %d numbers", CT_MAX_CHANNELS,
                          2 * CT_MAX_CHANNELS, list.n);
    for (int i = 0; i < list.n; i++) {
        double v;
        if (!strict_float(list.item[i], &v))
            return fail_value(vc, "bad number '%s' in normalize", list.item[i]);
        if (i >= k && v <= 0)
            return fail_value(vc, "normalize standard deviations must be greater than 0, got %s", list.item[i]);
        if (i < k)
            d->mean[i] = (float)v;
        else
            d->std[i - k] = (float)v;
    }
    d->n_normalize = k;
    return CT_OK;
}

/* augment = crop:N, flip | none */
static ct_status parse_augment_item(const value_ctx *vc, const char *item, ct_data_config *d)
{
    if (strcmp(item, "flip") == 0) {
        d->flip = 1;
        return CT_OK;
    }
    if (strcmp(item, "crop") == 0)
        return fail_value(vc, "augment crop needs a padding in pixels, as crop:4");
    if (strncmp(item, "crop:", 5) == 0) {
        long n;
        const char *num = item + 5;
        if (strict_long(num, &n) != 0)
            return fail_value(vc, "bad integer '%s' in augment %s", num, item);
        if (n < 1 || n > 16)
            return fail_value(vc, "augment crop padding must be between 1 and 16, got %s", num);
        d->crop_pad = (int)n;
        return CT_OK;
    }
    /* suggest on the word before any ':' so "crp:4" finds crop */
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(item, ":"), item);
    suggestion s = suggest_start(word);
    suggest_consider(&s, "crop");
    suggest_consider(&s, "flip");
    suggest_consider(&s, "none");
    char hint[96] = "";
    if (s.best)
        snprintf(hint, sizeof hint, " (did you mean '%s%s'?)", s.best, strcmp(s.best, "crop") == 0 ? ":N" : "");
    return fail_value(vc, "unknown augment '%s'%s; expected crop:N, flip or none", item, hint);
}

static ct_status parse_augment(const value_ctx *vc, const key_spec *ks, const char *text, void *base)
{
    ct_data_config *d = base;
    d->crop_pad = 0;
    d->flip = 0;
    if (strcmp(text, "none") == 0)
        return CT_OK;
    item_list list;
    ct_status st = split_items(vc, ks, text, &list);
    for (int i = 0; st == CT_OK && i < list.n; i++) {
        if (strcmp(list.item[i], "none") == 0)
            return fail_value(vc, "augment = none cannot be combined with other items");
        st = parse_augment_item(vc, list.item[i], d);
    }
    return st;
}

/* shape = H, W, C */
static ct_status parse_shape(const value_ctx *vc, const key_spec *ks, const char *text, void *base)
{
    ct_shape *shape = (ct_shape *)((char *)base + ks->offset);
    item_list list;
    ct_status st = split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    if (list.n != 3)
        return fail_value(vc, "shape needs 3 numbers 'H, W, C', got %d", list.n);
    static const char *const what[3] = {"height", "width", "channels"};
    long v[3];
    for (int i = 0; i < 3; i++) {
        if (strict_long(list.item[i], &v[i]) != 0)
            return fail_value(vc, "bad integer '%s' in shape", list.item[i]);
        long hi = i == 2 ? CT_MAX_CHANNELS : INT_MAX;
        if (v[i] < 1 || v[i] > hi)
            return fail_value(vc, "shape %s must be between 1 and %ld, got %s", what[i], hi, list.item[i]);
    }
    *shape = (ct_shape){(int)v[0], (int)v[1], (int)v[2]};
    return CT_OK;
}

/* batch = N; `auto` is reserved for the memory planner. */
static ct_status parse_batch(const value_ctx *vc, const key_spec *ks, const char *text, void *base)
{
    if (strcmp(text, "auto") == 0)
        return fail_value(vc, "batch = auto is not available yet (it needs the memory planner); give a number");
    long v = 0;
    ct_status st = read_integer(vc, ks, text, INT_MIN, INT_MAX, &v);
    if (st == CT_OK)
        ((ct_train_config *)base)->batch = (int)v;
    return st;
}

/* auto | N (an int; auto is stored as 0), N within the row's range. */
static ct_status parse_auto_count(const value_ctx *vc, const key_spec *ks, const char *text, void *base)
{
    int *dst = (int *)((char *)base + ks->offset);
    if (strcmp(text, "auto") == 0) {
        *dst = 0;
        return CT_OK;
    }
    long v;
    if (strict_long(text, &v) != 0 || v < (long)ks->min || v > (long)ks->max)
        return fail_value(vc, "bad value '%s' for %s; expected auto or a number from %g to %g", text, ks->name,
                          ks->min, ks->max);
    *dst = (int)v;
    return CT_OK;
}

/* devices = cpu | all | 0,1,... stored without spaces. */
static ct_status parse_devices(const value_ctx *vc, const key_spec *ks, const char *text, void *base)
{
    char *out = (char *)base + ks->offset;
    const size_t size = sizeof ((ct_train_config *)0)->devices;
    if (strcmp(text, "cpu") == 0 || strcmp(text, "all") == 0) {
        snprintf(out, size, "%s", text);
        return CT_OK;
    }
    item_list list;
    ct_status st = split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    char norm[sizeof ((ct_train_config *)0)->devices];
    size_t used = 0;
    long seen[COUNT(list.item)];
    for (int i = 0; i < list.n; i++) {
        const char *item = list.item[i];
        long n;
        if (!isdigit((unsigned char)item[0]) || strict_long(item, &n) != 0 || n > INT_MAX)
            return fail_value(vc, "bad devices '%s': expected cpu, all or a comma list of device numbers such as 0,1",
                              text);
        for (int j = 0; j < i; j++)
            if (seen[j] == n)
                return fail_value(vc, "device %ld is listed twice in devices = %s", n, text);
        seen[i] = n;
        int w = snprintf(norm + used, sizeof norm - used, "%s%ld", i ? "," : "", n);
        if (w < 0 || (size_t)w >= sizeof norm - used)
            return fail_value(vc, "devices list is too long: %s", text);
        used += (size_t)w;
    }
    memcpy(out, norm, used + 1);
    return CT_OK;
}

/* graph = on | off | auto (-1: decided by the backend). */
static ct_status parse_graph(const value_ctx *vc, const key_spec *ks, const char *text, void *base)
{
    int *dst = (int *)((char *)base + ks->offset);
    int b = strcmp(text, "auto") == 0 ? -1 : bool_word(text);
    if (b == -1 && strcmp(text, "auto") != 0)
        return fail_value(vc, "bad value '%s' for graph; expected on, off or auto", text);
    *dst = b;
    return CT_OK;
}

/* memory = grow | preallocate | limit:MiB */
static ct_status parse_memory(const value_ctx *vc, const key_spec *ks, const char *text, void *base)
{
    (void)ks;
    ct_train_config *t = base;
    long mib = 0;
    if (strcmp(text, "grow") == 0) {
        t->memory = CT_MEMORY_GROW;
    } else if (strcmp(text, "preallocate") == 0) {
        t->memory = CT_MEMORY_PREALLOCATE;
    } else if (strncmp(text, "limit:", 6) == 0 && strict_long(text + 6, &mib) == 0 && mib >= 1) {
        t->memory = CT_MEMORY_LIMIT;
        t->memory_limit_mib = mib;
    } else {
        return fail_value(vc, "bad value '%s' for memory; expected grow, preallocate or limit:MiB (e.g. limit:512)",
                          text);
    }
    return CT_OK;
}

/* Checks that name is an earlier layer (index < vc->layer). */
static ct_status check_reference(const value_ctx *vc, const key_spec *ks, const char *name)
{
    const ct_config *cfg = vc->cfg;
    if (name[0] == '\0')
        return fail_value(vc, "empty layer name in %s", ks->name);
    if (strlen(name) >= CT_MAX_NAME)
        return fail_value(vc, "layer name '%s' in %s is too long (at most %d characters)", name, ks->name,
                          CT_MAX_NAME - 1);
    for (int i = 0; i < vc->layer; i++)
        if (strcmp(cfg->layers[i].name, name) == 0)
            return CT_OK;
    if (strcmp(name, vc->section) == 0)
        return fail_value(vc, "layer '%s' cannot be its own input", name);
    for (int i = 0; i < vc->ini->n_sections; i++) {
        const char *other = vc->ini->sections[i].name;
        if (strcmp(other, name) == 0 && strcmp(other, "data") != 0 && strcmp(other, "train") != 0)
            return fail_value(vc, "layer '%s' comes after [%s]; inputs must refer to earlier layers", name,
                              vc->section);
    }
    suggestion s = suggest_start(name);
    for (int i = 0; i < vc->layer; i++)
        suggest_consider(&s, cfg->layers[i].name);
    char hint[128];
    return fail_value(vc, "unknown layer '%s' in %s%s", name, ks->name, did_you_mean(&s, hint, sizeof hint));
}

/* input = name (one earlier layer), or, for add, inputs = a, b. */
static ct_status parse_inputs(const value_ctx *vc, const key_spec *ks, const char *text, void *base)
{
    ct_layer_config *layer = base;
    item_list list;
    ct_status st = split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    int want = layer->type == CT_LAYER_ADD ? 2 : 1;
    if (list.n != want && want == 2)
        return fail_value(vc, "add needs exactly 2 inputs, got %d", list.n);
    if (list.n != want)
        return fail_value(vc, "input takes one layer name, got %d (only add takes two, as inputs = a, b)", list.n);
    for (int i = 0; i < list.n; i++) {
        st = check_reference(vc, ks, list.item[i]);
        if (st != CT_OK)
            return st;
        snprintf(layer->inputs[i], CT_MAX_NAME, "%s", list.item[i]);
    }
    layer->n_inputs = list.n;
    layer->inputs_line = vc->entry ? vc->entry->line : 0;
    return CT_OK;
}

/* ---- sections ---- */

/* A key with no row for this variant: a typo (suggest the nearest key) or a key of another variant. */
static ct_status unknown_key(const value_ctx *vc, const key_spec *table, size_t n, const char *key)
{
    unsigned elsewhere = 0;
    const char *note = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].name, key) == 0) {
            elsewhere |= table[i].mask;
            note = table[i].note ? table[i].note : note;
        }
    char which[256] = "", why[160] = "";
    if (note)
        snprintf(why, sizeof why, " (%s)", note);
    if (elsewhere && vc->layer < 0) {
        join_variants(format_names, elsewhere, which, sizeof which);
        return fail_value(vc, "%s applies only to format = %s%s", key, which, why);
    }
    suggestion s = suggest_start(key);
    for (size_t i = 0; i < n; i++)
        if (applies(&table[i], vc->variant))
            suggest_consider(&s, table[i].name);
    char hint[128];
    /* A real key of other layer types is probably not a typo ("units" in a conv2d is not "init"),
     * unless a key of this type is one edit away ("input" in an add means "inputs"). */
    if (!elsewhere || (s.best && s.dist <= 1))
        return fail_value(vc, "unknown key '%s' in [%s]%s", key, vc->section, did_you_mean(&s, hint, sizeof hint));
    join_variants(layer_type_names, elsewhere, which, sizeof which);
    return fail_value(vc, "unknown key '%s' in [%s] (%s applies only to %s layers)", key, vc->section, key, which);
}

/* The common loop: defaults, then the entries in file order, then the required keys. */
static ct_status read_section(value_ctx *vc, const key_spec *table, size_t n, void *base)
{
    ct_status st;
    vc->entry = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!table[i].def || !applies(&table[i], vc->variant))
            continue;
        if ((st = parse_value(vc, &table[i], table[i].def, base)) != CT_OK)
            return st;
    }
    for (int i = 0; vc->sec && i < vc->sec->n_entries; i++) {
        const ct_ini_entry *e = &vc->sec->entries[i];
        const key_spec *ks = find_key(table, n, e->key, vc->variant);
        vc->entry = e;
        if (!ks)
            return unknown_key(vc, table, n, e->key);
        if ((st = parse_value(vc, ks, e->value, base)) != CT_OK)
            return st;
    }
    vc->entry = NULL;
    for (size_t i = 0; i < n; i++)
        if ((table[i].flags & REQUIRED) && applies(&table[i], vc->variant) && !find_entry(vc->sec, table[i].name))
            return fail_section(vc, "[%s] needs '%s'", vc->section, table[i].name);
    return CT_OK;
}

/* Reads the key that picks the variant (format, type) before the rest. */
static ct_status read_variant_key(value_ctx *vc, const key_spec *ks, void *base)
{
    const ct_ini_entry *e = find_entry(vc->sec, ks->name);
    vc->entry = e;
    return parse_value(vc, ks, e ? e->value : ks->def, base);
}

static ct_status read_data(value_ctx *vc)
{
    ct_data_config *d = &vc->cfg->data;
    d->line = vc->sec->line;
    ct_status st = read_variant_key(vc, &data_keys[0], d);
    if (st != CT_OK)
        return st;
    vc->variant = 1u << d->format;
    if ((st = read_section(vc, data_keys, COUNT(data_keys), d)) != CT_OK)
        return st;
    /* idx test images and labels come as a pair */
    const ct_ini_entry *test = find_entry(vc->sec, "test"), *labels = find_entry(vc->sec, "test_labels");
    if (d->format == CT_DATA_IDX && test && !labels)
        return fail_entry(vc, test, "[data] has test but no test_labels; give both or neither");
    if (d->format == CT_DATA_IDX && labels && !test)
        return fail_entry(vc, labels, "[data] has test_labels but no test; give both or neither");
    return CT_OK;
}

static ct_status read_train(value_ctx *vc)
{
    ct_train_config *t = &vc->cfg->train;
    t->line = vc->sec ? vc->sec->line : 0;
    ct_status st = read_section(vc, train_keys, COUNT(train_keys), t);
    if (st != CT_OK)
        return st;
    /* decoupled decay is the point of adamw, so it gets a useful default */
    if (t->optimizer == CT_OPT_ADAMW && !find_entry(vc->sec, "weight_decay"))
        t->weight_decay = 0.01f;
    return CT_OK;
}

static ct_status read_layer(value_ctx *vc)
{
    ct_layer_config *layer = &vc->cfg->layers[vc->layer];
    const char *name = vc->sec->name;
    layer->line = vc->sec->line;
    if (strlen(name) >= CT_MAX_NAME)
        return fail_section(vc, "layer name [%s] is too long (at most %d characters)", name, CT_MAX_NAME - 1);
    if (strcmp(name, "input") == 0)
        return fail_section(vc, "[input] is a reserved name; call the layer something else");
    snprintf(layer->name, sizeof layer->name, "%s", name);

    if (!find_entry(vc->sec, "type")) {
        /* a section nobody meant as a layer is most likely a misspelt [data] or [train] */
        suggestion s = suggest_start(name);
        suggest_consider(&s, "data");
        suggest_consider(&s, "train");
        char hint[96] = "";
        if (s.best)
            snprintf(hint, sizeof hint, " (or did you mean [%s]?)", s.best);
        return fail_section(vc, "[%s] needs 'type'%s", name, hint);
    }
    ct_status st = read_variant_key(vc, &layer_keys[0], layer);
    if (st != CT_OK)
        return st;
    vc->variant = 1u << layer->type;
    if ((st = read_section(vc, layer_keys, COUNT(layer_keys), layer)) != CT_OK)
        return st;
    if ((vc->variant & POOLS) && layer->global) {
        static const char *const sized[] = {"size", "stride"};
        for (size_t i = 0; i < COUNT(sized); i++) {
            const ct_ini_entry *e = find_entry(vc->sec, sized[i]);
            if (e)
                return fail_entry(vc, e, "[%s] %s does not apply when global = on", name, sized[i]);
        }
    }
    return CT_OK;
}

/* ---- the whole config ---- */

static char *folder_of(const char *file)
{
    const char *slash = strrchr(file, '/');
    if (!slash)
        return strdup(".");
    size_t n = slash == file ? 1 : (size_t)(slash - file);  /* "/net.ini" lives in "/" */
    char *dir = malloc(n + 1);
    if (dir) {
        memcpy(dir, file, n);
        dir[n] = '\0';
    }
    return dir;
}

static int is_layer_section(const ct_ini_section *sec)
{
    return strcmp(sec->name, "data") != 0 && strcmp(sec->name, "train") != 0;
}

static ct_status load(ct_config *cfg, const ct_ini *ini, ct_err *err)
{
    cfg->file = strdup(ini->file ? ini->file : "config");
    cfg->dir = cfg->file ? folder_of(cfg->file) : NULL;
    if (!cfg->dir)
        return out_of_memory(err);
    int n_layers = 0;
    for (int i = 0; i < ini->n_sections; i++)
        n_layers += is_layer_section(&ini->sections[i]);
    if (n_layers > 0 && !(cfg->layers = calloc((size_t)n_layers, sizeof *cfg->layers)))
        return out_of_memory(err);

    const ct_ini_section *data = NULL, *train = NULL;
    /* sections in file order, so the first error reported is the first in the file */
    for (int i = 0; i < ini->n_sections; i++) {
        const ct_ini_section *sec = &ini->sections[i];
        value_ctx vc = {.ini = ini, .cfg = cfg, .sec = sec, .section = sec->name, .layer = -1, .err = err};
        ct_status st;
        if (strcmp(sec->name, "data") == 0) {
            data = sec;
            st = read_data(&vc);
        } else if (strcmp(sec->name, "train") == 0) {
            train = sec;
            st = read_train(&vc);
        } else {
            vc.layer = cfg->n_layers++;
            st = read_layer(&vc);
        }
        if (st != CT_OK)
            return st;
    }
    if (!data)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, 0,
                          "no [data] section; add one with format and the training files");
    if (!train) {
        value_ctx vc = {.ini = ini, .cfg = cfg, .section = "train", .layer = -1, .err = err};
        ct_status st = read_train(&vc);
        if (st != CT_OK)
            return st;
    }
    if (cfg->n_layers == 0)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, 0,
                          "no layers; add a section per layer, such as [fc1] with type = dense");
    return CT_OK;
}

ct_status ct_config_load(ct_config *cfg, const ct_ini *ini, ct_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    ct_status st = load(cfg, ini, err);
    if (st != CT_OK)
        ct_config_free(cfg);
    return st;
}

void ct_config_free(ct_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->file);
    free(cfg->dir);
    free(cfg->data.train);
    free(cfg->data.train_labels);
    free(cfg->data.test);
    free(cfg->data.test_labels);
    free(cfg->layers);
    memset(cfg, 0, sizeof *cfg);
}
