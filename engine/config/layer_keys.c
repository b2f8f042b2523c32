/* The layer sections: their keys, the input references, and the checks across keys. The variant
 * is the layer type: a row with a mask applies only to those types, and a key of another type is
 * reported as such ("units applies only to dense layers"). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config/keys.h"

/* the one table of each: base/types.c, made from the enums' lists */
#define activation_names ct_activation_names
#define layer_type_names ct_layer_type_names
static const char *const padding_names[] = {"valid", "same", NULL};
static const char *const init_names[] = {"auto", "he", "glorot", NULL};

/* CT_KEY_ENUM writes an int */
_Static_assert(sizeof(ct_activation) == sizeof(int) && sizeof(ct_layer_type) == sizeof(int) &&
                   sizeof(ct_padding) == sizeof(int) && sizeof(ct_init) == sizeof(int),
               "enums must be int-sized");

static ct_status parse_inputs(const ct_value_ctx *, const ct_key_spec *, const char *, void *);

#define L(f) offsetof(ct_layer_config, f)
#define LT(x) (1u << CT_LAYER_##x)
#define POOLS (LT(MAXPOOL) | LT(AVGPOOL))

/* The first row, `type`, picks the variant: it is read before the others. */
static const ct_key_spec layer_keys[] = {
    {.name = "type", .kind = CT_KEY_ENUM, .offset = L(type), .names = layer_type_names, .label = "layer type",
     .flags = CT_KEY_REQUIRED},
    {.name = "input", .kind = CT_KEY_CUSTOM, .parse = parse_inputs, .mask = ~LT(ADD)},
    {.name = "inputs", .kind = CT_KEY_CUSTOM, .parse = parse_inputs, .mask = LT(ADD), .flags = CT_KEY_REQUIRED},
    {.name = "units", .kind = CT_KEY_INT, .offset = L(units), .mask = LT(DENSE),
     .flags = CT_KEY_REQUIRED | CT_KEY_HAS_MIN, .min = 1},
    {.name = "filters", .kind = CT_KEY_INT, .offset = L(filters), .mask = LT(CONV2D),
     .flags = CT_KEY_REQUIRED | CT_KEY_HAS_MIN, .min = 1},
    {.name = "size", .kind = CT_KEY_INT, .offset = L(size), .mask = LT(CONV2D),
     .flags = CT_KEY_REQUIRED | CT_KEY_HAS_MIN, .min = 1},
    {.name = "size", .kind = CT_KEY_INT, .offset = L(size), .mask = POOLS, .def = "2", .flags = CT_KEY_HAS_MIN,
     .min = 1},
    {.name = "stride", .kind = CT_KEY_INT, .offset = L(stride), .mask = LT(CONV2D), .def = "1", .flags = CT_KEY_HAS_MIN,
     .min = 1},
    {.name = "stride", .kind = CT_KEY_INT, .offset = L(stride), .mask = POOLS, .def = "0", .flags = CT_KEY_HAS_MIN,
     .min = 0},
    {.name = "padding", .kind = CT_KEY_ENUM, .offset = L(padding), .mask = LT(CONV2D) | POOLS, .def = "valid",
     .names = padding_names, .label = "padding"},
    {.name = "global", .kind = CT_KEY_BOOL, .offset = L(global), .mask = POOLS, .def = "off"},
    {.name = "activation", .kind = CT_KEY_ENUM, .offset = L(activation), .mask = LT(DENSE) | LT(CONV2D) | LT(ADD),
     .def = "linear", .names = activation_names, .label = "activation"},
    {.name = "activation", .kind = CT_KEY_ENUM, .offset = L(activation), .mask = LT(ACTIVATION),
     .flags = CT_KEY_REQUIRED, .names = activation_names, .label = "activation"},
    {.name = "bias", .kind = CT_KEY_BOOL, .offset = L(bias), .mask = LT(DENSE) | LT(CONV2D), .def = "on"},
    {.name = "init", .kind = CT_KEY_ENUM, .offset = L(init), .mask = LT(DENSE) | LT(CONV2D), .def = "auto",
     .names = init_names, .label = "init"},
    {.name = "momentum", .kind = CT_KEY_FLOAT, .offset = L(momentum), .mask = LT(BATCHNORM), .def = "0.1",
     .flags = CT_KEY_HAS_MIN | CT_KEY_HAS_MAX, .min = 0, .max = 1},
    {.name = "epsilon", .kind = CT_KEY_FLOAT, .offset = L(epsilon), .mask = LT(BATCHNORM), .def = "1e-5",
     .flags = CT_KEY_HAS_MIN | CT_KEY_MIN_OPEN, .min = 0},
    {.name = "rate", .kind = CT_KEY_FLOAT, .offset = L(rate), .mask = LT(DROPOUT),
     .flags = CT_KEY_REQUIRED | CT_KEY_HAS_MIN | CT_KEY_HAS_MAX | CT_KEY_MAX_OPEN, .min = 0, .max = 1},
};

static const ct_key_table layer_table = CT_KEY_TABLE(layer_keys);
static const ct_key_set layer_set = {&layer_table, 1, &layer_keys[0], layer_type_names, "layers", CT_MISPLACED_KIND};

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

/* input = name (one earlier layer), or, for add, inputs = a, b. */
static ct_status parse_inputs(const ct_value_ctx *vc, const ct_key_spec *ks, const char *text, void *base)
{
    ct_layer_config *layer = base;
    ct_item_list list;
    ct_status st = ct_split_items(vc, ks, text, &list);
    if (st != CT_OK)
        return st;
    int want = layer->type == CT_LAYER_ADD ? 2 : 1;
    if (list.n != want && want == 2)
        return ct_fail_value(vc, "add needs exactly 2 inputs, got %d", list.n);
    if (list.n != want)
        return ct_fail_value(vc, "input takes one layer name, got %d (only add takes two, as inputs = a, b)", list.n);
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
    ct_status st = ct_keys_read(vc, &layer_set, layer);
    if (st != CT_OK)
        return st;
    if ((vc->variant & POOLS) && layer->global) {
        static const char *const sized[] = {"size", "stride"};
        for (size_t i = 0; i < CT_COUNT(sized); i++) {
            const ct_ini_entry *e = ct_section_entry(vc->sec, sized[i]);
            if (e)
                return ct_fail_entry(vc, e, "[%s] %s does not apply when global = on", name, sized[i]);
        }
    }
    return CT_OK;
}
