/* The ini reader: text -> sections of key/value entries, each remembering its line so that the
 * typed stage (config.c) can point at the line a bad value came from. Only syntax is checked
 * here; what keys mean is config.c's business. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

/* A piece of the input text, not NUL-terminated. */
typedef struct span {
    const char *s;
    size_t n;
} span;

static int is_space(char c) { return isspace((unsigned char)c) != 0; }

static span trim(span t)
{
    while (t.n > 0 && is_space(t.s[0])) {
        t.s++;
        t.n--;
    }
    while (t.n > 0 && is_space(t.s[t.n - 1]))
        t.n--;
    return t;
}

static int span_eq(span t, const char *z) { return strlen(z) == t.n && memcmp(t.s, z, t.n) == 0; }

static char *span_dup(span t)
{
    char *p = malloc(t.n + 1);
    if (p) {
        memcpy(p, t.s, t.n);
        p[t.n] = '\0';
    }
    return p;
}

/* Cuts an inline comment: `#` or `;` counts only after whitespace, so values such as
 * "a#b" survive while "8   # units" loses its comment. */
static span strip_inline_comment(span t)
{
    for (size_t i = 1; i < t.n; i++)
        if ((t.s[i] == '#' || t.s[i] == ';') && is_space(t.s[i - 1])) {
            t.n = i;
            break;
        }
    return t;
}

static int is_name_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.'; }

/* ---- growing the tables ---- */

static ct_ini_section *find_section(const ct_ini *ini, const char *name, size_t n)
{
    for (int i = 0; i < ini->n_sections; i++)
        if (strlen(ini->sections[i].name) == n && memcmp(ini->sections[i].name, name, n) == 0)
            return &ini->sections[i];
    return NULL;
}

static ct_ini_entry *find_entry(const ct_ini_section *sec, const char *key, size_t n)
{
    for (int i = 0; i < sec->n_entries; i++)
        if (strlen(sec->entries[i].key) == n && memcmp(sec->entries[i].key, key, n) == 0)
            return &sec->entries[i];
    return NULL;
}

static ct_status out_of_memory(ct_err *err) { return ct_fail(err, CT_ERR_NOMEM, "out of memory reading the config"); }

/* Appends a section; returns NULL (with err set) when memory runs out. */
static ct_ini_section *add_section(ct_ini *ini, span name, int line, ct_err *err)
{
    if (ini->n_sections == ini->cap_sections) {
        int cap = ini->cap_sections ? 2 * ini->cap_sections : 8;
        ct_ini_section *p = realloc(ini->sections, (size_t)cap * sizeof *p);
        if (!p) {
            out_of_memory(err);
            return NULL;
        }
        ini->sections = p;
        ini->cap_sections = cap;
    }
    ct_ini_section *sec = &ini->sections[ini->n_sections];
    memset(sec, 0, sizeof *sec);
    sec->name = span_dup(name);
    if (!sec->name) {
        out_of_memory(err);
        return NULL;
    }
    sec->line = line;
    ini->n_sections++;
    return sec;
}

static ct_status add_entry(ct_ini_section *sec, span key, span value, int line, ct_err *err)
{
    if (sec->n_entries == sec->cap_entries) {
        int cap = sec->cap_entries ? 2 * sec->cap_entries : 8;
        ct_ini_entry *p = realloc(sec->entries, (size_t)cap * sizeof *p);
        if (!p)
            return out_of_memory(err);
        sec->entries = p;
        sec->cap_entries = cap;
    }
    ct_ini_entry e = {span_dup(key), span_dup(value), line};
    if (!e.key || !e.value) {
        free(e.key);
        free(e.value);
        return out_of_memory(err);
    }
    sec->entries[sec->n_entries++] = e;
    return CT_OK;
}

/* ---- one line at a time ---- */

static ct_status parse_header(ct_ini *ini, span t, int line, ct_ini_section **cur, ct_err *err)
{
    const char *close = memchr(t.s, ']', t.n);
    if (!close)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, line, "missing ']' in section header '%.*s'",
                          (int)t.n, t.s);
    span name = trim((span){t.s + 1, (size_t)(close - t.s - 1)});
    span rest = trim((span){close + 1, t.n - (size_t)(close - t.s) - 1});
    if (rest.n > 0)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, line, "unexpected '%.*s' after ']'", (int)rest.n,
                          rest.s);
    if (name.n == 0)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, line, "empty section name '[]'");
    for (size_t i = 0; i < name.n; i++)
        if (!is_name_char(name.s[i]))
            return ct_fail_at(err, CT_ERR_CONFIG, ini->file, line,
                              "bad section name [%.*s]: use letters, digits, '_', '-' and '.'", (int)name.n,
                              name.s);
    const ct_ini_section *first = find_section(ini, name.s, name.n);
    if (first)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, line, "duplicate section [%.*s] (first at line %d)",
                          (int)name.n, name.s, first->line);
    *cur = add_section(ini, name, line, err);
    return *cur ? CT_OK : err->status;
}

static ct_status parse_entry(ct_ini *ini, span t, int line, ct_ini_section *cur, ct_err *err)
{
    const char *eq = memchr(t.s, '=', t.n);
    if (!eq)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, line, "expected 'key = value', got '%.*s'", (int)t.n,
                          t.s);
    span key = trim((span){t.s, (size_t)(eq - t.s)});
    span value = trim((span){eq + 1, t.n - (size_t)(eq - t.s) - 1});
    if (key.n == 0)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, line, "missing key before '='");
    if (!cur)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, line,
                          "'%.*s' comes before any [section]; keys belong in a section such as [train]",
                          (int)key.n, key.s);
    if (value.n == 0)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, line, "empty value for '%.*s'", (int)key.n, key.s);
    const ct_ini_entry *first = find_entry(cur, key.s, key.n);
    if (first)
        return ct_fail_at(err, CT_ERR_CONFIG, ini->file, line, "duplicate key '%.*s' in [%s] (first at line %d)",
                          (int)key.n, key.s, cur->name, first->line);
    return add_entry(cur, key, value, line, err);
}

static ct_status parse_line(ct_ini *ini, span t, int line, ct_ini_section **cur, ct_err *err)
{
    t = trim(t);
    if (t.n == 0 || t.s[0] == '#' || t.s[0] == ';')
        return CT_OK;
    t = trim(strip_inline_comment(t));
    if (t.s[0] == '[')
        return parse_header(ini, t, line, cur, err);
    return parse_entry(ini, t, line, *cur, err);
}

ct_status ct_ini_parse(ct_ini *ini, const char *text, const char *file, ct_err *err)
{
    memset(ini, 0, sizeof *ini);
    ini->file = strdup(file ? file : "config");
    if (!ini->file)
        return out_of_memory(err);
    if (!text)
        text = "";
    if (strncmp(text, "\xEF\xBB\xBF", 3) == 0)
        text += 3;  /* editors on Windows like to start UTF-8 files with a byte order mark */

    ct_ini_section *cur = NULL;
    int line = 0;
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        line++;
        /* trim() also eats the '\r' of CRLF ends, as '\r' is whitespace */
        ct_status st = parse_line(ini, (span){p, n}, line, &cur, err);
        if (st != CT_OK)
            return st;
        p += n + (end ? 1 : 0);
    }
    return CT_OK;
}

ct_status ct_ini_set(ct_ini *ini, const char *section_dot_key, const char *value, ct_err *err)
{
    const char *what = section_dot_key ? section_dot_key : "";
    const char *dot = strchr(what, '.');
    if (!dot || dot == what || dot[1] == '\0')
        return ct_fail(err, CT_ERR_CONFIG, "--set %s: expected section.key, such as train.epochs", what);
    span sec_name = {what, (size_t)(dot - what)};
    span key = trim((span){dot + 1, strlen(dot + 1)});
    span val = trim((span){value ? value : "", value ? strlen(value) : 0});
    if (key.n == 0)
        return ct_fail(err, CT_ERR_CONFIG, "--set %s: expected section.key, such as train.epochs", what);
    if (val.n == 0)
        return ct_fail(err, CT_ERR_CONFIG, "--set %s: empty value", what);

    ct_ini_section *sec = find_section(ini, sec_name.s, sec_name.n);
    if (!sec && (span_eq(sec_name, "data") || span_eq(sec_name, "train")))
        sec = add_section(ini, sec_name, 0, err);  /* [train] is optional; create it to hold the value */
    else if (!sec)
        return ct_fail(err, CT_ERR_CONFIG, "--set %s: no section [%.*s] in %s", what, (int)sec_name.n,
                       sec_name.s, ini->file ? ini->file : "the config");
    if (!sec)
        return err->status;

    ct_ini_entry *e = find_entry(sec, key.s, key.n);
    if (!e)
        return add_entry(sec, key, val, 0, err);
    char *copy = span_dup(val);
    if (!copy)
        return out_of_memory(err);
    free(e->value);
    e->value = copy;
    e->line = 0;  /* messages about this value should now blame --set, not the file */
    return CT_OK;
}

void ct_ini_free(ct_ini *ini)
{
    if (!ini)
        return;
    for (int i = 0; i < ini->n_sections; i++) {
        ct_ini_section *sec = &ini->sections[i];
        for (int j = 0; j < sec->n_entries; j++) {
            free(sec->entries[j].key);
            free(sec->entries[j].value);
        }
        free(sec->entries);
        free(sec->name);
    }
    free(ini->sections);
    free(ini->file);
    memset(ini, 0, sizeof *ini);
}
