/* The layer sections: the keys every layer has (type, its inputs, a fused activation), the input
 * references, and the rows each type's record brings (engine/graph/layers/). The variant is the
 * layer type: a row applies only to the types whose record lists it, and a key of another type is
 * reported as such ("units applies only to dense layers"). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config/keys.h"
#include "graph/layer.h"

/* CT_KEY_ENUM writes an int */
_Static_assert(sizeof(ct_activation) == sizeof(int) && sizeof(ct_layer_type) == sizeof(int) &&
                   sizeof(ct_padding) == sizeof(int) && sizeof(ct_init) == sizeof(int) &&
                   sizeof(ct_layer_dtype) == sizeof(int),
               "enums must be int-sized");
_Static_assert(CT_LAYER_TYPE_COUNT <= 32, "a key row's mask has one bit per layer type");

static ct_status parse_inputs(const ct_value_ctx *, const ct_key_spec *, const char *, void *);

/* The rows of all layer types as one table, masks filled in from the records. Built for each
 * section read (a few dozen rows), so the records stay the only place a type's keys are written. */
enum { MAX_LAYER_ROWS = 64, MAX_KEY_TABLES = 32 };
typedef struct layer_rows {
    ct_key_spec row[MAX_LAYER_ROWS];
    size_t n;
    unsigned one_input, several_inputs, required_inputs, fused;   /* masks of types, from their records */
} layer_rows;

static int add_row(layer_rows *r, ct_key_spec row, unsigned mask)
{
    if (mask == 0)
        return 1;
    if (r->n == MAX_LAYER_ROWS)
        return 0;
    row.mask = mask;
    r->row[r->n++] = row;
    return 1;
}

/* The first row, `type`, picks the variant: it is read before the others. */
static ct_status gather_layer_rows(layer_rows *r, ct_err *err)
{
    const ct_key_table *tables[MAX_KEY_TABLES];
    unsigned table_mask[MAX_KEY_TABLES];
    size_t n_tables = 0;
    memset(r, 0, sizeof *r);
    for (int t = 0; t < CT_LAYER_TYPE_COUNT; t++) {
        const ct_layer_def *def = ct_layer_def_of((ct_layer_type)t);
        unsigned bit = 1u << t;
        r->one_input |= def->max_inputs == 1 ? bit : 0;
        r->several_inputs |= def->max_inputs > 1 ? bit : 0;
        r->required_inputs |= def->min_inputs > 1 ? bit : 0;
        r->fused |= def->fused_activation ? bit : 0;
        for (const ct_key_table *const *tb = def->keys; tb && *tb; tb++) {
            size_t i = 0;
            while (i < n_tables && tables[i] != *tb)
                i++;
            if (i == n_tables) {
                if (n_tables == MAX_KEY_TABLES)
                    return ct_fail(err, CT_ERR_INTERNAL, "the layer records list more than %d key tables",
                                   MAX_KEY_TABLES);
                tables[n_tables] = *tb;
                table_mask[n_tables++] = 0;
            }
            table_mask[i] |= bit;
        }
    }
    const unsigned all = (1u << CT_LAYER_TYPE_COUNT) - 1;
    int ok = add_row(r, (ct_key_spec){.name = "type", .kind = CT_KEY_ENUM, .offset = offsetof(ct_layer_config, type),
                                      .names = ct_layer_type_names, .label = "layer type",
                                      .flags = CT_KEY_REQUIRED}, all);
    ok = ok && add_row(r, (ct_key_spec){.name = "input", .kind = CT_KEY_CUSTOM, .parse = parse_inputs}, r->one_input);
    ok = ok && add_row(r, (ct_key_spec){.name = "inputs", .kind = CT_KEY_CUSTOM, .parse = parse_inputs,
                                        .flags = CT_KEY_REQUIRED}, r->several_inputs & r->required_inputs);
    ok = ok && add_row(r, (ct_key_spec){.name = "inputs", .kind = CT_KEY_CUSTOM, .parse = parse_inputs},
                       r->several_inputs & ~r->required_inputs);
    ok = ok && add_row(r, (ct_key_spec){.name = "activation", .kind = CT_KEY_ENUM,
                                        .offset = offsetof(ct_layer_config, activation), .def = "linear",
                                        .names = ct_activation_names, .label = "activation"}, r->fused);
    for (size_t i = 0; ok && i < n_tables; i++)
        for (size_t k = 0; ok && k < tables[i]->n; k++)
            ok = add_row(r, tables[i]->rows[k], table_mask[i]);
    if (!ok)
        return ct_fail(err, CT_ERR_INTERNAL, "the layer records have more than %d key rows", MAX_LAYER_ROWS);
    return CT_OK;
}

/* Checks that name is an earlier layer (index < vc->layer). */
static ct_status check_reference(const ct_value_ctx *vc, const ct_key_spec *ks, const char *name)
{
    const ct_config *cfg = vc->cfg;
    if (name[0] == '\0')
        return ct_fail_value(vc, "empty layer name in %s", ks->name);
    if (strlen(name) >= CT_MAX_NAME)
        return ct_fail_value(vc, "layer name '%s' in %s is too long (at most %d characters)", name, ks->name,
                             CT_MAX_NAME - 1);
    for (int i = 0; i < vc->layer; i++)
        if (strcmp(cfg->layers[i].name, name) == 0)
            return CT_OK;
    if (strcmp(name, vc->section) == 0)
        return ct_fail_value(vc, "layer '%s' cannot be its own input", name);
    for (int i = 0; i < vc->ini->n_sections; i++) {
        const char *other = vc->ini->sections[i].name;
        if (strcmp(other, name) == 0 && strcmp(other, "data") != 0 && strcmp(other, "train") != 0)
            return ct_fail_value(vc, "layer '%s' comes after [%s]; inputs must refer to earlier layers", name,
                                 vc->section);
    }
    ct_suggestion s = ct_suggest_start(name);
    for (int i = 0; i < vc->layer; i++)
        ct_suggest_consider(&s, cfg->layers[i].name);
    char hint[128];
    return ct_fail_value(vc, "unknown layer '%s' in %s%s", name, ks->name, ct_did_you_mean(&s, hint, sizeof hint));
}

/* input = name (one earlier layer), or, for the types that take several (add, concat),
 * inputs = a, b, ... within the counts their records allow. */
static ct_status parse_inputs(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    ct_layer_config *layer = base;
    const ct_layer_def *def = ct_layer_def_of(layer->type);
    const char *type = ct_layer_type_name(layer->type);
    ct_item_list list;
    ct_status st = ct_split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    if (def->max_inputs == 1 && list.n != 1) {
        unsigned several = 0;
        for (int t = 0; t < CT_LAYER_TYPE_COUNT; t++)
            several |= ct_layer_def_of((ct_layer_type)t)->max_inputs > 1 ? 1u << t : 0;
        char which[128];
        ct_join_names(ct_layer_type_names, several, which, sizeof which);
        return ct_fail_value(vc, "input takes one layer name, got %d (only %s layers take several, as inputs = a, b)",
                             list.n, which);
    }
    if (def->min_inputs == def->max_inputs && list.n != def->min_inputs)
        return ct_fail_value(vc, "%s needs exactly %d inputs, got %d", type, def->min_inputs, list.n);
    if (list.n < def->min_inputs)
        return ct_fail_value(vc, "%s needs at least %d inputs, got %d", type, def->min_inputs, list.n);
    if (list.n > def->max_inputs)
        return ct_fail_value(vc, "%s takes at most %d inputs, got %d", type, def->max_inputs, list.n);
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

ct_status ct_config_read_layer(ct_value_ctx *vc)
{
    ct_layer_config *layer = &vc->cfg->layers[vc->layer];
    const char *name = vc->sec->name;
    layer->line = vc->sec->line;
    if (strlen(name) >= CT_MAX_NAME)
        return ct_fail_section(vc, "layer name [%s] is too long (at most %d characters)", name, CT_MAX_NAME - 1);
    if (strcmp(name, "input") == 0)
        return ct_fail_section(vc, "[input] is a reserved name; call the layer something else");
    snprintf(layer->name, sizeof layer->name, "%s", name);

    if (!ct_section_entry(vc->sec, "type")) {
        /* a section nobody meant as a layer is most likely a misspelt [data] or [train] */
        ct_suggestion s = ct_suggest_start(name);
        ct_suggest_consider(&s, "data");
        ct_suggest_consider(&s, "train");
        char hint[96] = "";
        if (s.best)
            snprintf(hint, sizeof hint, " (or did you mean [%s]?)", s.best);
        return ct_fail_section(vc, "[%s] needs 'type'%s", name, hint);
    }
    layer_rows rows;
    ct_status st = gather_layer_rows(&rows, vc->err);
    if (st != CT_OK)
        return st;
    const ct_key_table table = {rows.row, rows.n};
    const ct_key_set set = {&table, 1, &rows.row[0], ct_layer_type_names, "layers", CT_MISPLACED_KIND};
    st = ct_keys_read(vc, &set, layer);
    if (st != CT_OK)
        return st;
    const ct_layer_def *def = ct_layer_def_of(layer->type);
    return def->check_keys ? def->check_keys(vc, layer) : CT_OK;
}
