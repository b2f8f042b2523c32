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

const char *ct_activation_name(ct_activation a)
{
    static const char *const names[CT_ACT_COUNT] = {"linear", "relu", "leaky", "sigmoid", "tanh", "gelu"};
    return (unsigned)a < CT_ACT_COUNT ? names[a] : "?";
}

const char *ct_layer_type_name(ct_layer_type t)
{
    static const char *const names[CT_LAYER_TYPE_COUNT] = {
        "dense", "conv2d", "maxpool", "avgpool", "batchnorm", "dropout", "flatten", "activation", "add",
    };
    return (unsigned)t < CT_LAYER_TYPE_COUNT ? names[t] : "?";
}
