/* conv2d: y (n, oh, ow, f) = act(conv(x (n, h, w, c), w (f, kh, kw, c)) + b). padding = same pads
 * so that oh = ceil(h / stride), splitting the total as TensorFlow does (extra on the bottom/right). */
#include <stddef.h>
#include <string.h>

#include "config/table.h"
#include "graph/layer.h"

#define C(f) offsetof(ct_layer_config, f)
static const ct_key_spec conv_rows[] = {
    {.name = "filters", .kind = CT_KEY_INT, .offset = C(filters), .flags = CT_KEY_REQUIRED | CT_KEY_HAS_MIN, .min = 1},
    {.name = "size", .kind = CT_KEY_INT, .offset = C(size), .flags = CT_KEY_REQUIRED | CT_KEY_HAS_MIN, .min = 1},
    {.name = "stride", .kind = CT_KEY_INT, .offset = C(stride), .def = "1", .flags = CT_KEY_HAS_MIN, .min = 1},
    {.name = "padding", .kind = CT_KEY_ENUM, .offset = C(padding), .def = "valid", .names = ct_padding_names,
     .label = "padding"},
};
#undef C
static const ct_key_table conv_keys = CT_KEY_TABLE(conv_rows);

static ct_status conv_infer(ct_layer *l, const char *file, ct_err *err)
{
    const ct_layer_config *c = l->cfg;
    ct_shape in = l->in_shape;
    l->kh = l->kw = c->size;
    l->stride = c->stride > 0 ? c->stride : 1;
    int oh, ow;
    ct_window_dim(in.h, l->kh, l->stride, c->padding == CT_PAD_SAME, &oh, &l->pad_t);
    ct_window_dim(in.w, l->kw, l->stride, c->padding == CT_PAD_SAME, &ow, &l->pad_l);
    if (oh <= 0 || ow <= 0)
        return ct_fail_at(err, CT_ERR_CONFIG, file, c->line,
                          "[%s] a %dx%d valid convolution does not fit its %dx%dx%d input", c->name,
                          c->size, c->size, in.h, in.w, in.c);
    l->out = (ct_shape){oh, ow, c->filters};
    l->w_count = (size_t)c->filters * l->kh * l->kw * in.c;
    l->b_count = c->bias ? (size_t)c->filters : 0;
    return CT_OK;
}

static double conv_flops(const ct_layer *l)
{
    return 2.0 * (double)l->w_count * l->out.h * l->out.w + (double)ct_shape_size(l->out) * (l->b_count > 0);
}

static void conv_init(const ct_layer *l, float *w, float *b, float *state, ct_rng *rng)
{
    (void)state;
    int fan_in = l->kh * l->kw * l->in_shape.c;
    int fan_out = l->kh * l->kw * l->cfg->filters;
    ct_init_uniform_fan(w, l->w_count, fan_in, fan_out, l->cfg->init, l->act, rng);
    if (b)
        memset(b, 0, l->b_count * sizeof *b);
}

const ct_layer_def ct_layer_def_conv2d = {
    .min_inputs = 1, .max_inputs = 1, .fused_activation = 1,
    .keys = (const ct_key_table *const[]){&conv_keys, &ct_weight_keys, &ct_dtype_keys, NULL},
    .infer = conv_infer, .flops = conv_flops, .init = conv_init,
};
