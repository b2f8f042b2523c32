#include <stdio.h>

#include "base/types.h"

char *ct_shape_text(ct_shape s, char *buf, size_t n)
{
    if (s.h == 1 && s.w == 1)
        snprintf(buf, n, "%d", s.c);
    else
        snprintf(buf, n, "%dx%dx%d", s.h, s.w, s.c);
    return buf;
}

const char *const ct_activation_names[CT_ACT_COUNT + 1] = {"linear", "relu", "leaky", "sigmoid", "tanh",
                                                          "gelu", NULL};

const char *const ct_padding_names[3] = {"valid", "same", NULL};

const char *const ct_precision_names[4] = {"fp32", "fp16", "bf16", NULL};

const char *ct_precision_name(ct_precision p)
{
    return (unsigned)p < sizeof ct_precision_names / sizeof *ct_precision_names - 1 ? ct_precision_names[p] : "?";
}

const char *ct_activation_name(ct_activation a)
{
    return (unsigned)a < CT_ACT_COUNT ? ct_activation_names[a] : "?";
}

const char *const ct_layer_type_names[CT_LAYER_TYPE_COUNT + 1] = {
#define CT_LAYER_NAME(upper, lower) [CT_LAYER_##upper] = #lower,
    CT_LAYER_TYPES(CT_LAYER_NAME)
#undef CT_LAYER_NAME
    NULL};

const char *ct_layer_type_name(ct_layer_type t)
{
    return (unsigned)t < CT_LAYER_TYPE_COUNT ? ct_layer_type_names[t] : "?";
}

const char *ct_optimizer_name(unsigned optimizer)
{
    static const char *const names[] = {"sgd", "momentum", "adam", "adamw"};
    return optimizer < sizeof names / sizeof *names ? names[optimizer] : "?";
}
