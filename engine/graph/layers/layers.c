/* The table of layer records, made from CT_LAYER_TYPES (what the records share: params.c). */
#include <stddef.h>

#include "graph/layer.h"

#define CT_LAYER_DEF_DECL(upper, lower) extern const ct_layer_def ct_layer_def_##lower;
CT_LAYER_TYPES(CT_LAYER_DEF_DECL)
#undef CT_LAYER_DEF_DECL

const ct_layer_def *ct_layer_def_of(ct_layer_type type)
{
    static const ct_layer_def *const defs[CT_LAYER_TYPE_COUNT] = {
#define CT_LAYER_DEF_ENTRY(upper, lower) [CT_LAYER_##upper] = &ct_layer_def_##lower,
        CT_LAYER_TYPES(CT_LAYER_DEF_ENTRY)
#undef CT_LAYER_DEF_ENTRY
    };
    return (unsigned)type < CT_LAYER_TYPE_COUNT ? defs[type] : NULL;
}
