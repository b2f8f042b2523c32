/* Reading an ini section against tables of keys: the config's generic machinery.
 *
 * Every section kind ([data], [train], the layers) is described by const rows: a key's name, the
 * kind of its value, where in the section's struct it is stored, its default, its range, and the
 * variants (data formats, layer types) it applies to. Reading a section is then the same loop for
 * all of them (ct_keys_read): apply the defaults, read each entry through its row, check the
 * required rows, and report a key without a row with the nearest valid one suggested. A later key
 * is one more row; the same name may have several rows with different defaults or ranges per
 * variant (stride is 1 for conv2d but 0 for pools).
 *
 * A table can live in any .c file. Rows store values at `offset`, offsetof() the field in the
 * struct the section is read into (ct_layer_config for a layer); `mask` has bit i set for the
 * variant numbered i (1u << CT_LAYER_DENSE), 0 for all variants:
 *
 *     static const ct_key_spec dense_rows[] = {
 *         {.name = "units", .kind = CT_KEY_INT, .offset = offsetof(ct_layer_config, units),
 *          .mask = 1u << CT_LAYER_DENSE, .flags = CT_KEY_REQUIRED | CT_KEY_HAS_MIN, .min = 1},
 *     };
 *     const ct_key_table ct_dense_keys = CT_KEY_TABLE(dense_rows);
 *
 * A section is read against a set of tables taken as one, in order, of which only the rows of
 * the section's variant apply. Passing every variant's rows (every layer type's) is what lets a
 * key of another variant be reported as such ("units applies only to dense layers") rather than
 * as a typo:
 *
 *     ct_key_table tables[] = {common_layer_keys, ct_dense_keys, ct_conv2d_keys, ...};
 *     ct_key_set set = {tables, CT_COUNT(tables), &type_row, layer_type_names, "layers",
 *                       CT_MISPLACED_KIND};
 *     ct_value_ctx vc = {.ini = ini, .cfg = cfg, .sec = sec, .section = sec->name, .layer = i,
 *                        .err = err};
 *     st = ct_keys_read(&vc, &set, layer);   // type first, then the rows of that type
 *
 * Every error names where the value came from: "file:line: " for the file, "--set section.key: "
 * for an override, and the section header's line for a missing key. */
#ifndef CT_CONFIG_TABLE_H
#define CT_CONFIG_TABLE_H

#include <stddef.h>

#include "config/config.h"

#define CT_COUNT(a) (sizeof(a) / sizeof *(a))

typedef enum ct_key_kind {
    CT_KEY_INT,       /* int, strict decimal */
    CT_KEY_LONG,      /* long, strict decimal */
    CT_KEY_U64,       /* uint64_t, digits only */
    CT_KEY_FLOAT,     /* float, finite */
    CT_KEY_BOOL,      /* int 0/1 from on|off|true|false|yes|no|1|0 */
    CT_KEY_ENUM,      /* int index into names: the field's enum must be int-sized */
    CT_KEY_PATH,      /* char *, malloc'd, resolved against the config's folder */
    CT_KEY_PATH_LIST, /* char *, malloc'd: a comma list of paths, each resolved, joined by commas */
    CT_KEY_CUSTOM     /* the row's parse function */
} ct_key_kind;

enum {
    CT_KEY_REQUIRED = 1 << 0,
    CT_KEY_HAS_MIN = 1 << 1,
    CT_KEY_HAS_MAX = 1 << 2,
    CT_KEY_MIN_OPEN = 1 << 3, /* min itself is not allowed */
    CT_KEY_MAX_OPEN = 1 << 4, /* max itself is not allowed */
    /* Given where the row does not apply, always say where it does, even when a key of this
     * variant is one edit away: `dtype` on a pool is not a misspelt `type`. */
    CT_KEY_EXPLAIN_MISPLACED = 1 << 5,
    /* May differ between the processes of one launch (ct_config_value.per_process): where and how
     * fast a process runs, not what it trains. Paths are so without the flag. */
    CT_KEY_PER_PROCESS = 1 << 6,
};

struct ct_key_spec;

/* What a value parser needs to know about where it is. */
typedef struct ct_value_ctx {
    const ct_ini *ini;
    ct_config *cfg;              /* being filled: paths resolve against cfg->dir */
    const ct_ini_section *sec;   /* NULL for a [train] that is not in the file */
    const char *section;         /* its name, for messages */
    const ct_ini_entry *entry;   /* the entry being read; NULL while applying a default */
    unsigned variant;            /* bit of the data format or layer type; 0 for [train] */
    int layer;                   /* index of the layer being read, -1 outside layers */
    ct_err *err;
} ct_value_ctx;

/* A CT_KEY_CUSTOM value: text into the struct at base (the row's offset is the parser's to use). */
typedef ct_status (*ct_key_parse_fn)(const ct_value_ctx *vc, const struct ct_key_spec *ks, const char *text,
                                     void *base);

typedef struct ct_key_spec {
    const char *name;
    ct_key_kind kind;
    size_t offset;              /* of the field in the section's struct */
    const char *def;            /* default, parsed like a given value; NULL: none */
    unsigned mask;              /* variants the row applies to; 0: all */
    unsigned flags;
    double min, max;
    const char *const *names;   /* CT_KEY_ENUM: accepted words */
    const char *label;          /* CT_KEY_ENUM: what the words are, for "unknown <label> 'x'" */
    ct_key_parse_fn parse;      /* CT_KEY_CUSTOM */
    const char *note;           /* reason shown when the key does not apply to a variant */
} ct_key_spec;

typedef struct ct_key_table {
    const ct_key_spec *rows;
    size_t n;
} ct_key_table;

/* An initializer for a ct_key_table of a whole array of rows (a constant expression). */
#define CT_KEY_TABLE(rows) {(rows), CT_COUNT(rows)}

/* How a key with rows only for other variants is reported. */
typedef enum ct_misplaced {
    /* the variant is a setting: "test_labels applies only to format = idx (<note>)" */
    CT_MISPLACED_SETTING,
    /* the variant is what the section is: "unknown key 'units' in [c1] (units applies only to dense
     * layers)", unless a key of this variant is one edit away ("input" in an add means "inputs") */
    CT_MISPLACED_KIND
} ct_misplaced;

/* The keys of one section kind. */
typedef struct ct_key_set {
    const ct_key_table *tables;       /* taken as one table, in order */
    size_t n_tables;
    /* The CT_KEY_ENUM row whose value picks the variant (format, type), read before the others:
     * value i is variant bit i. NULL: the section has no variants (vc->variant is used as is). */
    const ct_key_spec *variant_key;
    const char *const *variant_names; /* NULL-terminated, name i for mask bit i; NULL without variants */
    const char *variant_label;        /* "format" (format = idx), "layers" (dense layers) */
    ct_misplaced misplaced;
} ct_key_set;

/* Reads vc->sec into base: the variant key (its entry, else its default; neither leaves
 * vc->variant alone and the required check to complain), then the defaults of the rows that
 * apply to vc->variant, the entries in file order, and the required keys; then appends every row
 * that applies, as resolved, to vc->cfg->values. vc->entry is left NULL. */
ct_status ct_keys_read(ct_value_ctx *vc, const ct_key_set *set, void *base);
/* One value through its row, text (an entry's value or a default) into the struct at base. */
ct_status ct_key_parse(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base);

/* The entry named key in sec (which may be NULL), or NULL. */
const ct_ini_entry *ct_section_entry(const ct_ini_section *sec, const char *key);

/* ---- for custom parsers and section checks ---- */

/* An error about the value being read (vc->entry): at its file line, as "--set section.key: " for
 * an override, or as an internal error for a bad built-in default. */
ct_status ct_fail_value(const ct_value_ctx *vc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same about entry e of the section. */
ct_status ct_fail_entry(const ct_value_ctx *vc, const ct_ini_entry *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An error about the section as a whole (a missing key): its header's line. */
ct_status ct_fail_section(const ct_value_ctx *vc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ct_status ct_config_nomem(ct_err *err);

/* "did you mean": the nearest candidate seen so far (edit distance, ignoring case), if it is close
 * enough to word to be worth suggesting. */
typedef struct ct_suggestion {
    const char *word;
    const char *best;   /* NULL: nothing close */
    int dist;
} ct_suggestion;

ct_suggestion ct_suggest_start(const char *word);
void ct_suggest_consider(ct_suggestion *s, const char *candidate);
/* " (did you mean 'x'?)" or "", into buf. */
const char *ct_did_you_mean(const ct_suggestion *s, char *buf, size_t size);

/* "a or b", "a, b or c" into buf: the names whose bit is set in mask (names NULL-terminated). */
void ct_join_names(const char *const *names, unsigned mask, char *buf, size_t size);

/* 0: ok; 1: not an integer; 2: out of range of long. */
int ct_strict_long(const char *text, long *out);
/* 1 when text is a whole, finite decimal number that fits a float. */
int ct_strict_float(const char *text, double *out);
/* 1 on, 0 off, -1 not a boolean word. */
int ct_bool_word(const char *text);
/* An integer for the row: lo..hi (the C type's range), then the row's own range. */
ct_status ct_key_read_integer(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, long lo, long hi,
                              long *out);

/* A comma-separated value split into trimmed items (empty items kept, so callers can reject
 * "1,,2"). Config values are short; longer ones are rejected rather than allocated. */
typedef struct ct_item_list {
    char buf[512];
    char *item[32];
    int n;
} ct_item_list;

ct_status ct_split_items(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, ct_item_list *out);

#endif
