/* Each cutrain layer as ONNX operators (docs/export.md has the table): weights laid out for NCHW,
 * a flattened value's (c, h, w) order absorbed by the weights of the layers that read it. */
#include "export/onnx_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A global average pool of more cells than this averages each row first (emit_pool). */
#define GLOBAL_AVERAGE_CELLS 256

typedef struct layer_ctx {
    builder *b;
    const ct_export_net *net;
    const ct_layer *l;
    const float *w, *bias, *state;   /* the layer's weights, biases, statistics in the checkpoint */
    value *in[CT_MAX_INPUTS];
} layer_ctx;

/* an initializer "<layer>.<what>" */
static void param_name(char *name, const ct_layer *l, const char *what)
{
    snprintf(name, NAME_LEN, "%s.%s", l->cfg->name, what);
}

// w: (units, in) fp32, in cutrain's (h, w, c) flattening
static ct_status emit_dense(layer_ctx *c, value *out)
{
    builder *b = c->b;
    const ct_layer *l = c->l;
    value x = ct_onnx_alias(b, c->in[0], l->in_shape.c);
    ct_onnx_to_rank2(b, &x, l->cfg->name);
    int units = l->out.c, k = (int)ct_shape_size(l->in_shape);
    float *w = malloc((size_t)units * (size_t)k * sizeof *w);
    if (!w) {
        free(x.perm);
        b->nomem = 1;
        return CT_ERR_NOMEM;
    }
    for (int u = 0; u < units; u++)
        for (int p = 0; p < k; p++)
            w[(size_t)u * k + p] = c->w[(size_t)u * k + (x.perm ? x.perm[p] : p)];
    char wn[NAME_LEN], bn[NAME_LEN], y[NAME_LEN];
    param_name(wn, l, "weight");
    param_name(bn, l, "bias");
    int64_t wd[2] = {units, k}, bd[1] = {units};
    ct_onnx_init_floats(b, wn, wd, 2, w, (size_t)units * k);
    free(w);
    if (l->b_count)
        ct_onnx_init_floats(b, bn, bd, 1, c->bias, (size_t)units);
    ct_onnx_main_output(y, l->cfg->name, l->act);
    size_t m = ct_onnx_node_begin(b, "Gemm", (const char *const[]){x.name, wn, bn}, l->b_count ? 3 : 2, y);
    ct_onnx_attr_int(b, "transB", 1);
    ct_onnx_node_end(b, m);
    free(x.perm);
    *out = (value){.rank = 2};
    snprintf(out->name, NAME_LEN, "%s", y);
    ct_onnx_activation(b, out, l->act, l->cfg->name);
    return CT_OK;
}

/* A Conv's or a pool's window attributes (the node being written): ONNX's pads (top, left, bottom,
 * right) are cutrain's leading pads, and the trailing ones that make ONNX's
 * floor((in + pads - k) / stride) + 1 give the same output size. */
static void window_attrs(builder *b, const ct_layer *l)
{
    int pb = (l->out.h - 1) * l->stride + l->kh - l->in_shape.h - l->pad_t;
    int pr = (l->out.w - 1) * l->stride + l->kw - l->in_shape.w - l->pad_l;
    int64_t ks[2] = {l->kh, l->kw}, st[2] = {l->stride, l->stride};
    int64_t pads[4] = {l->pad_t, l->pad_l, pb > 0 ? pb : 0, pr > 0 ? pr : 0};
    ct_onnx_attr_ints(b, "kernel_shape", ks, 2);
    ct_onnx_attr_ints(b, "strides", st, 2);
    ct_onnx_attr_ints(b, "pads", pads, 4);
}

// w: (f, kh, kw, c) fp32 -> (f, c, kh, kw), its input channels in the input value's order
static ct_status emit_conv2d(layer_ctx *c, value *out)
{
    builder *b = c->b;
    const ct_layer *l = c->l;
    int f = l->out.c, ch = l->in_shape.c, kh = l->kh, kw = l->kw;
    value x = ct_onnx_alias(b, c->in[0], ch);
    size_t n = (size_t)f * ch * kh * kw;
    float *w = malloc(n * sizeof *w);
    if (!w) {
        free(x.perm);
        b->nomem = 1;
        return CT_ERR_NOMEM;
    }
    for (int o = 0; o < f; o++)
        for (int i = 0; i < ch; i++)
            for (int y = 0; y < kh; y++)
                for (int xx = 0; xx < kw; xx++) {
                    int src = x.perm ? x.perm[i] : i;
                    w[(((size_t)o * ch + i) * kh + y) * kw + xx] = c->w[(((size_t)o * kh + y) * kw + xx) * ch + src];
                }
    /* the weights took the input's order: a flat input is now (N, c, 1, 1) in its own order */
    free(x.perm);
    x.perm = NULL;
    ct_onnx_to_rank4(b, &x, l->cfg->name);
    char wn[NAME_LEN], bn[NAME_LEN], y[NAME_LEN];
    param_name(wn, l, "weight");
    param_name(bn, l, "bias");
    int64_t wd[4] = {f, ch, kh, kw}, bd[1] = {f};
    ct_onnx_init_floats(b, wn, wd, 4, w, n);
    free(w);
    if (l->b_count)
        ct_onnx_init_floats(b, bn, bd, 1, c->bias, (size_t)f);
    ct_onnx_main_output(y, l->cfg->name, l->act);
    size_t m = ct_onnx_node_begin(b, "Conv", (const char *const[]){x.name, wn, bn}, l->b_count ? 3 : 2, y);
    window_attrs(b, l);
    ct_onnx_node_end(b, m);
    *out = (value){.rank = 4};
    snprintf(out->name, NAME_LEN, "%s", y);
    ct_onnx_activation(b, out, l->act, l->cfg->name);
    return CT_OK;
}

static ct_status emit_pool(layer_ctx *c, value *out)
{
    builder *b = c->b;
    const ct_layer *l = c->l;
    int is_max = l->type == CT_LAYER_MAXPOOL;
    value x = ct_onnx_alias(b, c->in[0], l->in_shape.c);
    ct_onnx_to_cutrain_order(b, &x, l->in_shape.c, l->cfg->name);
    ct_onnx_to_rank4(b, &x, l->cfg->name);
    char y[NAME_LEN];
    snprintf(y, NAME_LEN, "%s", l->cfg->name);
    ct_shape in = l->in_shape;
    if (l->cfg->global && !is_max && in.h > 1 && in.w > 1 && in.h * in.w > GLOBAL_AVERAGE_CELLS) {
        /* onnxruntime sums a plane in float one cell after another (224x224 cells drift by 1e-4);
         * the mean of the rows' means is the same mean with sums of a row's length */
        char rows[NAME_LEN];
        ct_onnx_fresh_name(b, rows, l->cfg->name, "rows");
        size_t m = ct_onnx_node_begin(b, "AveragePool", (const char *const[]){x.name}, 1, rows);
        int64_t ks[2] = {1, in.w};
        ct_onnx_attr_ints(b, "kernel_shape", ks, 2);
        ct_onnx_attr_ints(b, "strides", ks, 2);
        ct_onnx_node_end(b, m);
        ct_onnx_node2(b, "GlobalAveragePool", rows, NULL, y);
    } else if (l->cfg->global) {
        ct_onnx_node2(b, is_max ? "GlobalMaxPool" : "GlobalAveragePool", x.name, NULL, y);
    } else {
        /* padded cells never count: MaxPool pads with -inf, AveragePool's count_include_pad is 0 */
        size_t m = ct_onnx_node_begin(b, is_max ? "MaxPool" : "AveragePool", (const char *const[]){x.name}, 1, y);
        window_attrs(b, l);
        ct_onnx_node_end(b, m);
    }
    *out = (value){.rank = 4};
    snprintf(out->name, NAME_LEN, "%s", y);
    return CT_OK;
}

// gamma, beta, running mean, running var: (c) fp32 each, permuted to the input value's order
static ct_status emit_batchnorm(layer_ctx *c, value *out)
{
    builder *b = c->b;
    const ct_layer *l = c->l;
    int ch = l->in_shape.c;
    *out = ct_onnx_alias(b, c->in[0], ch);
    const float *src[4] = {c->w, c->bias, c->state, c->state + ch};
    const char *what[4] = {"weight", "bias", "running_mean", "running_var"};
    char names[4][NAME_LEN];
    float *v = malloc((size_t)ch * sizeof *v);
    if (!v) {
        b->nomem = 1;
        return CT_ERR_NOMEM;
    }
    int64_t dims[1] = {ch};
    for (int k = 0; k < 4; k++) {
        for (int p = 0; p < ch; p++)
            v[p] = src[k][out->perm ? out->perm[p] : p];
        param_name(names[k], l, what[k]);
        ct_onnx_init_floats(b, names[k], dims, 1, v, (size_t)ch);
    }
    free(v);
    char y[NAME_LEN];
    ct_onnx_main_output(y, l->cfg->name, l->act);
    size_t m = ct_onnx_node_begin(b, "BatchNormalization",
                          (const char *const[]){out->name, names[0], names[1], names[2], names[3]}, 5, y);
    ct_onnx_attr_float(b, "epsilon", l->cfg->epsilon);
    ct_onnx_node_end(b, m);
    snprintf(out->name, NAME_LEN, "%s", y);
    ct_onnx_activation(b, out, l->act, l->cfg->name);
    return CT_OK;
}

static ct_status emit_flatten(layer_ctx *c, value *out)
{
    builder *b = c->b;
    const ct_layer *l = c->l;
    ct_shape s = l->in_shape;
    if (c->in[0]->rank == 2) {
        *out = ct_onnx_alias(b, c->in[0], s.c);
        return CT_OK;
    }
    *out = (value){.rank = 2};
    snprintf(out->name, NAME_LEN, "%s", l->cfg->name);
    size_t m = ct_onnx_node_begin(b, "Flatten", (const char *const[]){c->in[0]->name}, 1, out->name);
    ct_onnx_attr_int(b, "axis", 1);
    ct_onnx_node_end(b, m);
    /* NCHW flattens as (c, h, w); cutrain's NHWC as (h, w, c) */
    if (s.c > 1 && s.h * s.w > 1) {
        int n = s.h * s.w * s.c;
        out->perm = malloc((size_t)n * sizeof *out->perm);
        if (!out->perm) {
            b->nomem = 1;
            return CT_ERR_NOMEM;
        }
        for (int ch = 0; ch < s.c; ch++)
            for (int p = 0; p < s.h * s.w; p++)
                out->perm[ch * s.h * s.w + p] = p * s.c + ch;
    }
    return CT_OK;
}

static ct_status emit_add(layer_ctx *c, value *out)
{
    builder *b = c->b;
    const ct_layer *l = c->l;
    int ch = l->in_shape.c;
    value x0 = ct_onnx_alias(b, c->in[0], ch), x1 = ct_onnx_alias(b, c->in[1], ch);
    if (x0.rank != x1.rank) {
        ct_onnx_to_rank2(b, &x0, l->cfg->name);
        ct_onnx_to_rank2(b, &x1, l->cfg->name);
    }
    int same = (!x0.perm && !x1.perm) || (x0.perm && x1.perm && memcmp(x0.perm, x1.perm, (size_t)ch * sizeof *x0.perm) == 0);
    if (!same) {
        ct_onnx_to_cutrain_order(b, &x0, ch, l->cfg->name);
        ct_onnx_to_cutrain_order(b, &x1, ch, l->cfg->name);
    }
    char y[NAME_LEN];
    ct_onnx_main_output(y, l->cfg->name, l->act);
    ct_onnx_node2(b, "Add", x0.name, x1.name, y);
    *out = (value){.rank = x0.rank, .perm = x0.perm};
    free(x1.perm);
    snprintf(out->name, NAME_LEN, "%s", y);
    ct_onnx_activation(b, out, l->act, l->cfg->name);
    return CT_OK;
}

static ct_status emit_concat(layer_ctx *c, value *out)
{
    builder *b = c->b;
    const ct_layer *l = c->l;
    int n = l->n_in, any2 = 0, any_perm = 0;
    value x[CT_MAX_INPUTS];
    const char *names[CT_MAX_INPUTS];
    for (int i = 0; i < n; i++) {
        x[i] = ct_onnx_alias(b, c->in[i], l->in_shapes[i].c);
        any2 |= x[i].rank == 2;
        any_perm |= x[i].perm != NULL;
    }
    *out = (value){.rank = any2 ? 2 : 4};
    if (any_perm) {
        out->perm = malloc((size_t)l->out.c * sizeof *out->perm);
        if (!out->perm)
            b->nomem = 1;
    }
    for (int i = 0, off = 0; i < n; off += l->in_shapes[i].c, i++) {
        if (any2)
            ct_onnx_to_rank2(b, &x[i], l->cfg->name);
        for (int p = 0; out->perm && p < l->in_shapes[i].c; p++)
            out->perm[off + p] = off + (x[i].perm ? x[i].perm[p] : p);
        names[i] = x[i].name;
    }
    snprintf(out->name, NAME_LEN, "%s", l->cfg->name);
    size_t m = ct_onnx_node_begin(b, "Concat", names, n, out->name);
    ct_onnx_attr_int(b, "axis", 1);
    ct_onnx_node_end(b, m);
    for (int i = 0; i < n; i++)
        free(x[i].perm);
    return b->nomem ? CT_ERR_NOMEM : CT_OK;
}

static ct_status emit_layer(layer_ctx *c, value *out, ct_err *err)
{
    const ct_layer *l = c->l;
    switch (l->type) {
    case CT_LAYER_DENSE:
        return emit_dense(c, out);
    case CT_LAYER_CONV2D:
        return emit_conv2d(c, out);
    case CT_LAYER_MAXPOOL:
    case CT_LAYER_AVGPOOL:
        return emit_pool(c, out);
    case CT_LAYER_BATCHNORM:
        return emit_batchnorm(c, out);
    case CT_LAYER_DROPOUT:   /* identity in inference */
        *out = ct_onnx_alias(c->b, c->in[0], l->in_shape.c);
        return CT_OK;
    case CT_LAYER_FLATTEN:
        return emit_flatten(c, out);
    case CT_LAYER_ACTIVATION:
        *out = ct_onnx_alias(c->b, c->in[0], l->in_shape.c);
        ct_onnx_activation(c->b, out, l->act, l->cfg->name);
        return CT_OK;
    case CT_LAYER_ADD:
        return emit_add(c, out);
    case CT_LAYER_CONCAT:
        return emit_concat(c, out);
    default:
        return ct_fail(err, CT_ERR_USAGE, "[%s]: ONNX opset %d cannot express a %s layer", l->cfg->name,
                       c->b->spec->opset, ct_layer_type_name(l->type));
    }
}

ct_status ct_onnx_emit_layers(builder *b, const ct_export_net *net, value *vals, value *input, ct_err *err)
{
    const ct_graph *g = net->graph;
    ct_status st = CT_OK;
    for (int i = 0; i < g->n_layers && st == CT_OK; i++) {
        const ct_layer *l = &g->layers[i];
        layer_ctx c = {.b = b, .net = net, .l = l};
        c.w = net->ck->params + net->packed_off[i];
        c.bias = c.w + l->w_count;
        c.state = l->state_count ? net->ck->state + l->state_off : NULL;
        for (int k = 0; k < l->n_in; k++)
            c.in[k] = l->in[k] == CT_INPUT_NODE ? input : &vals[l->in[k]];
        st = emit_layer(&c, &vals[i], err);
        if (st == CT_OK && b->nomem)
            st = CT_ERR_NOMEM;
    }
    if (st == CT_ERR_NOMEM)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory writing the ONNX model");
    return st;
}
