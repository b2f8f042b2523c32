/* maxpool and avgpool: windows of size x size every `stride` (default = size) per channel;
 * global = on pools each channel's whole plane to one value. */
#include <stddef.h>

#include "config/table.h"
#include "graph/layer.h"

#define C(f) offsetof(ct_layer_config, f)
static const ct_key_spec pool_rows[] = {
    {.name = "size", .kind = CT_KEY_INT, .offset = C(size), .def = "2", .flags = CT_KEY_HAS_MIN, .min = 1},
    {.name = "stride", .kind = CT_KEY_INT, .offset = C(stride), .def = "0", .flags = CT_KEY_HAS_MIN, .min = 0},
    {.name = "padding", .kind = CT_KEY_ENUM, .offset = C(padding), .def = "valid", .names = ct_padding_names,
     .label = "padding"},
    {.name = "global", .kind = CT_KEY_BOOL, .offset = C(global), .def = "off"},
};
#undef C
static const ct_key_table pool_keys = CT_KEY_TABLE(pool_rows);

/* A global pool has no window to size. */
static ct_status pool_check_keys(const ct_value_ctx *vc, const ct_layer_config *c)
{
    static const char *const sized[] = {"size", "stride"};
    for (size_t i = 0; c->global && i < CT_COUNT(sized); i++) {
        const ct_ini_entry *e = ct_section_entry(vc->sec, sized[i]);
        if (e)
            return ct_fail_entry(vc, e, "[%s] %s does not apply when global = on", c->name, sized[i]);
    }
    return CT_OK;
}

static ct_status pool_infer(ct_layer *l, const char *file, ct_err *err)
{
    const ct_layer_config *c = l->cfg;
    ct_shape in = l->in_shape;
    if (c->global) {
        l->kh = in.h;
        l->kw = in.w;
        l->stride = 1;
        l->pad_t = l->pad_l = 0;
        l->out = (ct_shape){1, 1, in.c};
        return CT_OK;
    }
    l->kh = l->kw = c->size;
    l->stride = c->stride > 0 ? c->stride : c->size;
    int oh, ow;
    ct_window_dim(in.h, l->kh, l->stride, c->padding == CT_PAD_SAME, &oh, &l->pad_t);
    ct_window_dim(in.w, l->kw, l->stride, c->padding == CT_PAD_SAME, &ow, &l->pad_l);
    if (oh <= 0 || ow <= 0)
        return ct_fail_at(err, CT_ERR_CONFIG, file, c->line,
                          "[%s] a %dx%d pooling window does not fit its %dx%dx%d input", c->name,
                          c->size, c->size, in.h, in.w, in.c);
    l->out = (ct_shape){oh, ow, in.c};
    return CT_OK;
}

static double pool_flops(const ct_layer *l)
{
    return (double)ct_shape_size(l->out) * l->kh * l->kw;
}

/* The argmax of each output, for backward. */
static size_t maxpool_aux(const ct_layer *l, int n, ct_dtype *dtype)
{
    *dtype = CT_DTYPE_I32;
    return (size_t)n * ct_shape_size(l->out);
}

const ct_layer_def ct_layer_def_maxpool = {
    .min_inputs = 1, .max_inputs = 1, .keys = (const ct_key_table *const[]){&pool_keys, NULL},
    .check_keys = pool_check_keys, .infer = pool_infer, .flops = pool_flops, .aux_count = maxpool_aux,
};
const ct_layer_def ct_layer_def_avgpool = {
    .min_inputs = 1, .max_inputs = 1, .keys = (const ct_key_table *const[]){&pool_keys, NULL},
    .check_keys = pool_check_keys, .infer = pool_infer, .flops = pool_flops,
};
