/* Reading a section against key tables (see table.h): value parsing, the common loop over a
 * section's entries, and the messages, with the nearest valid word suggested. Nothing here knows
 * which sections exist or what their keys are: the tables are data, elsewhere. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/table.h"

static int applies(const ct_key_spec *ks, unsigned variant) { return ks->mask == 0 || (ks->mask & variant) != 0; }

/* The rows of a key set, table after table. */
typedef struct row_iter {
    const ct_key_set *set;
    size_t table, row;
} row_iter;

static const ct_key_spec *next_row(row_iter *it)
{
    for (; it->table < it->set->n_tables; it->table++, it->row = 0) {
        const ct_key_table *t = &it->set->tables[it->table];
        if (it->row < t->n)
            return &t->rows[it->row++];
    }
    return NULL;
}

static const ct_key_spec *find_key(const ct_key_set *set, const char *name, unsigned variant)
{
    const ct_key_spec *ks;
    for (row_iter it = {set, 0, 0}; (ks = next_row(&it)) != NULL;)
        if (strcmp(ks->name, name) == 0 && applies(ks, variant))
            return ks;
    return NULL;
}

const ct_ini_entry *ct_section_entry(const ct_ini_section *sec, const char *key)
{
    for (int i = 0; sec && i < sec->n_entries; i++)
        if (strcmp(sec->entries[i].key, key) == 0)
            return &sec->entries[i];
    return NULL;
}

/* ---- messages ---- */

/* Reports msg for the value being read: at its file line, or as "--set section.key: " for an
 * override. A bad built-in default is our bug, not the user's. */
static ct_status report_at_entry(const ct_value_ctx *vc, const ct_ini_entry *e, const char *msg)
{
    if (!e)
        return ct_fail(vc->err, CT_ERR_INTERNAL, "built-in default of [%s]: %s", vc->section, msg);
    if (e->line > 0)
        return ct_fail_at(vc->err, CT_ERR_CONFIG, vc->ini->file, e->line, "%s", msg);
    return ct_fail(vc->err, CT_ERR_CONFIG, "--set %s.%s: %s", vc->section, e->key, msg);
}

static ct_status vfail_entry(const ct_value_ctx *vc, const ct_ini_entry *e, const char *fmt, va_list ap)
{
    char msg[900];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return report_at_entry(vc, e, msg);
}

ct_status ct_fail_entry(const ct_value_ctx *vc, const ct_ini_entry *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ct_status st = vfail_entry(vc, e, fmt, ap);
    va_end(ap);
    return st;
}

ct_status ct_fail_value(const ct_value_ctx *vc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ct_status st = vfail_entry(vc, vc->entry, fmt, ap);
    va_end(ap);
    return st;
}

ct_status ct_fail_section(const ct_value_ctx *vc, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ct_fail_at(vc->err, CT_ERR_CONFIG, vc->ini->file, vc->sec ? vc->sec->line : 0, "%s", msg);
}

ct_status ct_config_nomem(ct_err *err) { return ct_fail(err, CT_ERR_NOMEM, "out of memory reading the config"); }

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

ct_suggestion ct_suggest_start(const char *word) { return (ct_suggestion){word, NULL, INT_MAX}; }

void ct_suggest_consider(ct_suggestion *s, const char *candidate)
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

const char *ct_did_you_mean(const ct_suggestion *s, char *buf, size_t size)
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
void ct_join_names(const char *const *names, unsigned mask, char *buf, size_t size)
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

int ct_strict_long(const char *text, long *out)
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

int ct_strict_float(const char *text, double *out)
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

int ct_bool_word(const char *text)
{
    static const char *const on[] = {"on", "true", "yes", "1"};
    static const char *const off[] = {"off", "false", "no", "0"};
    for (size_t i = 0; i < CT_COUNT(on); i++) {
        if (strcmp(text, on[i]) == 0)
            return 1;
        if (strcmp(text, off[i]) == 0)
            return 0;
    }
    return -1;
}

/* "at least 1", "in [0, 1)", ... for the row's bounds. */
static void describe_range(const ct_key_spec *ks, char *buf, size_t size)
{
    int lo = (ks->flags & CT_KEY_HAS_MIN) != 0, hi = (ks->flags & CT_KEY_HAS_MAX) != 0;
    int integer = ks->kind != CT_KEY_FLOAT;
    if (lo && hi && integer)
        snprintf(buf, size, "between %g and %g", ks->min, ks->max);
    else if (lo && hi)
        snprintf(buf, size, "in %c%g, %g%c", ks->flags & CT_KEY_MIN_OPEN ? '(' : '[', ks->min, ks->max,
                 ks->flags & CT_KEY_MAX_OPEN ? ')' : ']');
    else if (lo)
        snprintf(buf, size, "%s %g", ks->flags & CT_KEY_MIN_OPEN ? "greater than" : "at least", ks->min);
    else
        snprintf(buf, size, "%s %g", ks->flags & CT_KEY_MAX_OPEN ? "less than" : "at most", ks->max);
}

static ct_status check_range(const ct_value_ctx *vc, const ct_key_spec *ks, double v, const char *text)
{
    int lo_ok = !(ks->flags & CT_KEY_HAS_MIN) || ((ks->flags & CT_KEY_MIN_OPEN) ? v > ks->min : v >= ks->min);
    int hi_ok = !(ks->flags & CT_KEY_HAS_MAX) || ((ks->flags & CT_KEY_MAX_OPEN) ? v < ks->max : v <= ks->max);
    if (lo_ok && hi_ok)
        return CT_OK;
    char need[96];
    describe_range(ks, need, sizeof need);
    return ct_fail_value(vc, "[%s] %s must be %s, got %s", vc->section, ks->name, need, text);
}

ct_status ct_key_read_integer(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, long lo, long hi,
                              long *out)
{
    int r = ct_strict_long(text, out);
    if (r == 1)
        return ct_fail_value(vc, "bad integer '%s' for %s", text, ks->name);
    if (r == 2 || *out < lo || *out > hi)
        return ct_fail_value(vc, "%s = %s is out of range", ks->name, text);
    return check_range(vc, ks, (double)*out, text);
}

static ct_status read_u64(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, uint64_t *out)
{
    /* strtoull would quietly wrap "-1" around; insist on digits */
    for (const char *p = text; *p; p++)
        if (!isdigit((unsigned char)*p))
            return ct_fail_value(vc, "bad integer '%s' for %s (expected 0 to 18446744073709551615)", text, ks->name);
    errno = 0;
    unsigned long long v = strtoull(text, NULL, 10);
    if (errno == ERANGE)
        return ct_fail_value(vc, "%s = %s is out of range", ks->name, text);
    *out = (uint64_t)v;
    return CT_OK;
}

static ct_status read_float(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, float *out)
{
    double v;
    if (!ct_strict_float(text, &v))
        return ct_fail_value(vc, "bad number '%s' for %s", text, ks->name);
    ct_status st = check_range(vc, ks, v, text);
    if (st == CT_OK)
        *out = (float)v;
    return st;
}

static ct_status read_bool(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, int *out)
{
    int b = ct_bool_word(text);
    if (b < 0)
        return ct_fail_value(vc, "bad boolean '%s' for %s; expected on, off, true, false, yes, no, 1 or 0", text,
                             ks->name);
    *out = b;
    return CT_OK;
}

static ct_status read_enum(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *dst)
{
    for (int i = 0; ks->names[i]; i++)
        if (strcmp(text, ks->names[i]) == 0) {
            memcpy(dst, &i, sizeof i);
            return CT_OK;
        }
    ct_suggestion s = ct_suggest_start(text);
    for (int i = 0; ks->names[i]; i++)
        ct_suggest_consider(&s, ks->names[i]);
    char hint[96], all[256];
    join_words(ks->names, all, sizeof all);
    return ct_fail_value(vc, "unknown %s '%s'%s; expected one of: %s", ks->label, text,
                         ct_did_you_mean(&s, hint, sizeof hint), all);
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

/* Resolves every comma-separated item of a file list (cifar10's) against the folder. */
static ct_status resolve_list(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, char **out)
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
            return ct_fail_value(vc, "empty file name in %s = %s", ks->name, text);
        }
        char *one = join_path(vc->cfg->dir, p, (size_t)(end - p));
        int ok = one && append_item(&list, one);
        free(one);
        if (!ok) {
            free(list);  /* NULL when append_item failed: it frees the list itself */
            return ct_config_nomem(vc->err);
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    *out = list;
    return CT_OK;
}

static ct_status read_path(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, char **dst)
{
    char *resolved = NULL;
    if (ks->kind == CT_KEY_PATH_LIST) {
        ct_status st = resolve_list(vc, ks, text, &resolved);
        if (st != CT_OK)
            return st;
    } else if (!(resolved = join_path(vc->cfg->dir, text, strlen(text)))) {
        return ct_config_nomem(vc->err);
    }
    free(*dst);
    *dst = resolved;
    return CT_OK;
}

/* ---- one value through its row ---- */

ct_status ct_key_parse(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    void *dst = (char *)base + ks->offset;
    long v = 0;
    ct_status st;
    switch (ks->kind) {
    case CT_KEY_INT:
        st = ct_key_read_integer(vc, ks, text, INT_MIN, INT_MAX, &v);
        if (st == CT_OK)
            *(int *)dst = (int)v;
        return st;
    case CT_KEY_LONG:
        st = ct_key_read_integer(vc, ks, text, LONG_MIN, LONG_MAX, &v);
        if (st == CT_OK)
            *(long *)dst = v;
        return st;
    case CT_KEY_U64:
        return read_u64(vc, ks, text, (uint64_t *)dst);
    case CT_KEY_FLOAT:
        return read_float(vc, ks, text, (float *)dst);
    case CT_KEY_BOOL:
        return read_bool(vc, ks, text, (int *)dst);
    case CT_KEY_ENUM:
        return read_enum(vc, ks, text, dst);
    case CT_KEY_PATH:
    case CT_KEY_PATH_LIST:
        return read_path(vc, ks, text, (char **)dst);
    case CT_KEY_CUSTOM:
        return ks->parse(vc, ks, text, base);
    }
    return ct_fail(vc->err, CT_ERR_INTERNAL, "key %s has no kind", ks->name);
}

/* ---- lists ---- */

static char *trim_in_place(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

ct_status ct_split_items(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, ct_item_list *out)
{
    if (strlen(text) >= sizeof out->buf)
        return ct_fail_value(vc, "%s is too long", ks->name);
    strcpy(out->buf, text);
    out->n = 0;
    char *p = out->buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (out->n == (int)CT_COUNT(out->item))
            return ct_fail_value(vc, "too many items in %s", ks->name);
        out->item[out->n++] = trim_in_place(p);
        if (!comma)
            return CT_OK;
        p = comma + 1;
    }
}

/* ---- sections ---- */

/* A key with no row for this variant: a typo (suggest the nearest key) or a key of another variant. */
static ct_status unknown_key(const ct_value_ctx *vc, const ct_key_set *set, const char *key)
{
    unsigned elsewhere = 0, explain = 0;
    const char *note = NULL;
    const ct_key_spec *ks;
    for (row_iter it = {set, 0, 0}; (ks = next_row(&it)) != NULL;)
        if (strcmp(ks->name, key) == 0) {
            elsewhere |= ks->mask;
            explain |= ks->flags & CT_KEY_EXPLAIN_MISPLACED;
            note = ks->note ? ks->note : note;
        }
    char which[256] = "", why[160] = "";
    if (note)
        snprintf(why, sizeof why, " (%s)", note);
    if (elsewhere && set->misplaced == CT_MISPLACED_SETTING) {
        ct_join_names(set->variant_names, elsewhere, which, sizeof which);
        return ct_fail_value(vc, "%s applies only to %s = %s%s", key, set->variant_label, which, why);
    }
    ct_suggestion s = ct_suggest_start(key);
    for (row_iter it = {set, 0, 0}; (ks = next_row(&it)) != NULL;)
        if (applies(ks, vc->variant))
            ct_suggest_consider(&s, ks->name);
    char hint[128];
    /* A real key of other layer types is probably not a typo ("units" in a conv2d is not "init"),
     * unless a key of this type is one edit away ("input" in an add means "inputs") and the row
     * does not ask to be explained. */
    if (!elsewhere || (!explain && s.best && s.dist <= 1))
        return ct_fail_value(vc, "unknown key '%s' in [%s]%s", key, vc->section,
                             ct_did_you_mean(&s, hint, sizeof hint));
    ct_join_names(set->variant_names, elsewhere, which, sizeof which);
    return ct_fail_value(vc, "unknown key '%s' in [%s] (%s applies only to %s %s)", key, vc->section, key, which,
                         set->variant_label);
}

/* The variant key's entry, else its default, and the variant it names. */
static ct_status read_variant(ct_value_ctx *vc, const ct_key_spec *ks, void *base)
{
    const ct_ini_entry *e = ct_section_entry(vc->sec, ks->name);
    const char *text = e ? e->value : ks->def;
    vc->entry = e;
    if (!text)
        return CT_OK;
    ct_status st = ct_key_parse(vc, ks, text, base);
    if (st != CT_OK)
        return st;
    int v;
    memcpy(&v, (char *)base + ks->offset, sizeof v);
    vc->variant = 1u << v;
    return CT_OK;
}

/* Row ks's value as read into base, canonical where the kind allows ("1e-3" and "0.001" are one
 * number), else text as written; into buf. */
static const char *resolved_text(const ct_key_spec *ks, const char *text, const void *base, char *buf, size_t n)
{
    const char *field = (const char *)base + ks->offset;
    switch (ks->kind) {
    case CT_KEY_INT:
        snprintf(buf, n, "%d", *(const int *)field);
        return buf;
    case CT_KEY_LONG:
        snprintf(buf, n, "%ld", *(const long *)field);
        return buf;
    case CT_KEY_U64:
        snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)field);
        return buf;
    case CT_KEY_FLOAT:
        snprintf(buf, n, "%.9g", (double)*(const float *)field);
        return buf;
    case CT_KEY_BOOL:
        return *(const int *)field ? "on" : "off";
    case CT_KEY_ENUM:
        return ks->names[*(const int *)field];
    case CT_KEY_PATH:
    case CT_KEY_PATH_LIST:
        return *(char *const *)field ? *(char *const *)field : text;
    case CT_KEY_CUSTOM:
        break;
    }
    return text;
}

/* Appends every row that applies to the section's variant (each name once) to vc->cfg->values. */
static ct_status record_values(ct_value_ctx *vc, const ct_key_set *set, const void *base)
{
    const ct_key_spec *ks;
    for (row_iter it = {set, 0, 0}; (ks = next_row(&it)) != NULL;) {
        if (!applies(ks, vc->variant) || find_key(set, ks->name, vc->variant) != ks)
            continue;
        const ct_ini_entry *e = ct_section_entry(vc->sec, ks->name);
        const char *text = e ? e->value : ks->def;
        char buf[64];
        const char *value = text ? resolved_text(ks, text, base, buf, sizeof buf) : "(not set)";
        ct_config *cfg = vc->cfg;
        ct_config_value *grown = realloc(cfg->values, (size_t)(cfg->n_values + 1) * sizeof *grown);
        if (!grown)
            return ct_config_nomem(vc->err);
        cfg->values = grown;
        ct_config_value *v = &cfg->values[cfg->n_values];
        size_t klen = strlen(vc->section) + strlen(ks->name) + 2;
        v->key = malloc(klen);
        v->value = strdup(value);
        v->per_process = (ks->flags & CT_KEY_PER_PROCESS) || ks->kind == CT_KEY_PATH || ks->kind == CT_KEY_PATH_LIST;
        if (!v->key || !v->value) {
            free(v->key);
            free(v->value);
            return ct_config_nomem(vc->err);
        }
        snprintf(v->key, klen, "%s.%s", vc->section, ks->name);
        cfg->n_values++;
    }
    return CT_OK;
}

ct_status ct_keys_read(ct_value_ctx *vc, const ct_key_set *set, void *base)
{
    ct_status st;
    const ct_key_spec *ks;
    if (set->variant_key && (st = read_variant(vc, set->variant_key, base)) != CT_OK)
        return st;
    vc->entry = NULL;
    for (row_iter it = {set, 0, 0}; (ks = next_row(&it)) != NULL;) {
        if (!ks->def || !applies(ks, vc->variant))
            continue;
        if ((st = ct_key_parse(vc, ks, ks->def, base)) != CT_OK)
            return st;
    }
    for (int i = 0; vc->sec && i < vc->sec->n_entries; i++) {
        const ct_ini_entry *e = &vc->sec->entries[i];
        vc->entry = e;
        if (!(ks = find_key(set, e->key, vc->variant)))
            return unknown_key(vc, set, e->key);
        if ((st = ct_key_parse(vc, ks, e->value, base)) != CT_OK)
            return st;
    }
    vc->entry = NULL;
    for (row_iter it = {set, 0, 0}; (ks = next_row(&it)) != NULL;)
        if ((ks->flags & CT_KEY_REQUIRED) && applies(ks, vc->variant) && !ct_section_entry(vc->sec, ks->name))
            return ct_fail_section(vc, "[%s] needs '%s'", vc->section, ks->name);
    return record_values(vc, set, base);
}
