/* The inference network as an ONNX model (docs/export.md), written with base/protobuf.h.
 *
 * cutrain's tensors are NHWC; the model takes NCHW by ONNX's convention and its weights are laid
 * out for it, so that no Transpose is left where a weight can absorb the order:
 *   - conv2d weights (f, kh, kw, c) become OIHW (f, c, kh, kw);
 *   - a flatten of an (h, w, c) tensor flattens NCHW, in (c, h, w) order: the value carries that
 *     order (value.perm) to its consumers, and the next dense, conv2d or batchnorm permutes its
 *     weights' input positions to match; a consumer without weights (pooling, an add of two
 *     differently ordered values, the output) gets a Gather that puts cutrain's order back.
 * The model's input is the pixels as the data files hold them (0..255, as floats); the first
 * operations are [data]'s normalisation with the very floats the batcher folds. Dropout is left
 * out (identity in inference); the output is the softmax of the last layer. */
#include "export/export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "data/dataset.h"

/* onnx.proto's field numbers, per message */
enum { MODEL_IR_VERSION = 1, MODEL_PRODUCER_NAME = 2, MODEL_PRODUCER_VERSION = 3, MODEL_DOC = 6, MODEL_GRAPH = 7,
       MODEL_OPSET = 8, MODEL_METADATA = 14 };
enum { OPSET_DOMAIN = 1, OPSET_VERSION = 2 };
enum { ENTRY_KEY = 1, ENTRY_VALUE = 2 };
enum { GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12 };
enum { NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5 };
enum { ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20 };
enum { ATTR_TYPE_FLOAT = 1, ATTR_TYPE_INT = 2, ATTR_TYPE_INTS = 7 };
enum { TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9 };
enum { VALUE_NAME = 1, VALUE_TYPE = 2 };
enum { TYPE_TENSOR = 1, TENSOR_ELEM = 1, TENSOR_SHAPE = 2, SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2 };
/* TensorProto.DataType */
enum { ONNX_FLOAT = 1, ONNX_INT64 = 7, ONNX_FLOAT16 = 10 };

enum { NAME_LEN = CT_MAX_NAME + 48 };

/* An ONNX tensor standing for a layer's output. */
typedef struct value {
    char name[NAME_LEN];
    int rank;      /* 4: (N, C, H, W); 2: (N, C), a flat (1, 1, C) output */
    int *perm;     /* rank 2 only: perm[p] is the cutrain channel at ONNX position p; NULL: the same order */
} value;

typedef struct builder {
    ct_pb nodes, inits;      /* GraphProto's node and initializer fields, each whole with its key */
    const ct_export_spec *spec;
    int elem;                /* ONNX_FLOAT or ONNX_FLOAT16: the weights' and the computation's type */
    int nomem;               /* a scratch allocation failed */
    int uid;                 /* makes inserted values' names unique */
} builder;

/* The IR version that goes with an opset (onnx's docs/Versioning.md). */
static int ir_version_for(int opset)
{
    return opset <= 14 ? 7 : opset <= 18 ? 8 : opset <= 20 ? 9 : 10;
}

/* ---- initializers ---- */

static size_t tensor_begin(ct_pb *o, const char *name, int type, const int64_t *dims, int nd)
{
    size_t m = ct_pb_begin(o, GRAPH_INITIALIZER);
    for (int i = 0; i < nd; i++)
        ct_pb_int(o, TENSOR_DIMS, dims[i]);
    ct_pb_int(o, TENSOR_DATA_TYPE, type);
    ct_pb_string(o, TENSOR_NAME, name);
    return m;
}

/* n floats as an initializer in the builder's element type (fp32, or rounded to fp16). */
static void init_floats_as(builder *b, int elem, const char *name, const int64_t *dims, int nd, const float *v,
                           size_t n)
{
    size_t m = tensor_begin(&b->inits, name, elem, dims, nd);
    ct_pb_key(&b->inits, TENSOR_RAW, CT_PB_LEN);
    ct_pb_varint(&b->inits, n * (elem == ONNX_FLOAT16 ? 2 : 4));
    for (size_t i = 0; i < n; i++) {
        if (elem == ONNX_FLOAT16) {
            uint16_t h = ct_f16_from_f32(v[i]);
            unsigned char le[2] = {(unsigned char)h, (unsigned char)(h >> 8)};
            ct_pb_raw(&b->inits, le, 2);
        } else {
            ct_pb_le32(&b->inits, ct_f32_bits(v[i]));
        }
    }
    ct_pb_end(&b->inits, m);
}

static void init_floats(builder *b, const char *name, const int64_t *dims, int nd, const float *v, size_t n)
{
    init_floats_as(b, b->elem, name, dims, nd, v, n);
}

static void init_int64s(builder *b, const char *name, const int64_t *dims, int nd, const int64_t *v, size_t n)
{
    size_t m = tensor_begin(&b->inits, name, ONNX_INT64, dims, nd);
    ct_pb_key(&b->inits, TENSOR_RAW, CT_PB_LEN);
    ct_pb_varint(&b->inits, n * 8);
    for (size_t i = 0; i < n; i++)
        ct_pb_le64(&b->inits, (uint64_t)v[i]);
    ct_pb_end(&b->inits, m);
}

/* ---- nodes ---- */

/* A node named after its output; its attributes follow, then node_end. */
static size_t node_begin(builder *b, const char *op, const char *const *in, int n_in, const char *out)
{
    size_t m = ct_pb_begin(&b->nodes, GRAPH_NODE);
    for (int i = 0; i < n_in; i++)
        ct_pb_string(&b->nodes, NODE_INPUT, in[i]);
    ct_pb_string(&b->nodes, NODE_OUTPUT, out);
    ct_pb_string(&b->nodes, NODE_NAME, out);
    ct_pb_string(&b->nodes, NODE_OP, op);
    return m;
}

static void node_end(builder *b, size_t m)
{
    ct_pb_end(&b->nodes, m);
}

static void attr_int(builder *b, const char *name, int64_t v)
{
    size_t m = ct_pb_begin(&b->nodes, NODE_ATTR);
    ct_pb_string(&b->nodes, ATTR_NAME, name);
    ct_pb_int(&b->nodes, ATTR_TYPE, ATTR_TYPE_INT);
    ct_pb_int(&b->nodes, ATTR_I, v);
    ct_pb_end(&b->nodes, m);
}

static void attr_float(builder *b, const char *name, float v)
{
    size_t m = ct_pb_begin(&b->nodes, NODE_ATTR);
    ct_pb_string(&b->nodes, ATTR_NAME, name);
    ct_pb_int(&b->nodes, ATTR_TYPE, ATTR_TYPE_FLOAT);
    ct_pb_float(&b->nodes, ATTR_F, v);
    ct_pb_end(&b->nodes, m);
}

static void attr_ints(builder *b, const char *name, const int64_t *v, int n)
{
    size_t m = ct_pb_begin(&b->nodes, NODE_ATTR);
    ct_pb_string(&b->nodes, ATTR_NAME, name);
    ct_pb_int(&b->nodes, ATTR_TYPE, ATTR_TYPE_INTS);
    for (int i = 0; i < n; i++)
        ct_pb_int(&b->nodes, ATTR_INTS, v[i]);
    ct_pb_end(&b->nodes, m);
}

/* A node of one or two inputs and no attributes. */
static void node2(builder *b, const char *op, const char *in0, const char *in1, const char *out)
{
    const char *in[2] = {in0, in1};
    node_end(b, node_begin(b, op, in, in1 ? 2 : 1, out));
}

/* "layer/what_N": a name no other value has. */
static void fresh_name(builder *b, char *name, const char *layer, const char *what)
{
    snprintf(name, NAME_LEN, "%s/%s_%d", layer, what, b->uid++);
}

/* ---- values ---- */

static int *perm_dup(builder *b, const int *perm, int n)
{
    if (!perm)
        return NULL;
    int *p = malloc((size_t)n * sizeof *p);
    if (!p) {
        b->nomem = 1;
        return NULL;
    }
    memcpy(p, perm, (size_t)n * sizeof *p);
    return p;
}

/* v as a new value of the layer: the same tensor (dropout, flatten of a flat value). */
static value alias(builder *b, const value *v, int channels)
{
    value a = *v;
    a.perm = perm_dup(b, v->perm, channels);
    return a;
}

/* A rank-4 value of a (1, 1, c) tensor as (N, c): Flatten keeps the order, since h = w = 1. */
static void to_rank2(builder *b, value *v, const char *layer)
{
    if (v->rank == 2)
        return;
    char out[NAME_LEN];
    fresh_name(b, out, layer, "flatten");
    size_t m = node_begin(b, "Flatten", (const char *const[]){v->name}, 1, out);
    attr_int(b, "axis", 1);
    node_end(b, m);
    snprintf(v->name, NAME_LEN, "%s", out);
    v->rank = 2;
}

/* A rank-2 value in cutrain's order: Gather along the channels with the inverse of its order. */
static void to_cutrain_order(builder *b, value *v, int channels, const char *layer)
{
    if (!v->perm)
        return;
    int64_t *idx = malloc((size_t)channels * sizeof *idx);
    if (!idx) {
        b->nomem = 1;
        return;
    }
    for (int p = 0; p < channels; p++)
        idx[v->perm[p]] = p;
    char ind[NAME_LEN], out[NAME_LEN];
    fresh_name(b, ind, layer, "order");
    int64_t dims[1] = {channels};
    init_int64s(b, ind, dims, 1, idx, (size_t)channels);
    free(idx);
    fresh_name(b, out, layer, "gather");
    size_t m = node_begin(b, "Gather", (const char *const[]){v->name, ind}, 2, out);
    attr_int(b, "axis", 1);
    node_end(b, m);
    snprintf(v->name, NAME_LEN, "%s", out);
    free(v->perm);
    v->perm = NULL;
}

/* A rank-2 value of a (1, 1, c) tensor, in cutrain's order, as (N, c, 1, 1). */
static void to_rank4(builder *b, value *v, const char *layer)
{
    if (v->rank == 4)
        return;
    char shape[NAME_LEN], out[NAME_LEN];
    fresh_name(b, shape, layer, "shape");
    int64_t dims[1] = {4}, s[4] = {0, -1, 1, 1};
    init_int64s(b, shape, dims, 1, s, 4);
    fresh_name(b, out, layer, "reshape");
    node2(b, "Reshape", v->name, shape, out);
    snprintf(v->name, NAME_LEN, "%s", out);
    v->rank = 4;
}

/* ---- activations ---- */

/* The name of a layer's main operation's output: the layer's own when no activation follows. */
static void main_output(char *name, const char *layer, ct_activation act)
{
    snprintf(name, NAME_LEN, act == CT_ACT_LINEAR ? "%s" : "%s/pre", layer);
}

/* A scalar constant of the builder's type. */
static void init_scalar(builder *b, const char *name, float v)
{
    init_floats(b, name, NULL, 0, &v, 1);
}

/* act applied to v, its output named after the layer. gelu is ONNX's Gelu from opset 20, before it
 * the same erf form spelt out: x * 0.5 * (1 + erf(x / sqrt(2))). */
static void activation(builder *b, value *v, ct_activation act, const char *layer)
{
    if (act == CT_ACT_LINEAR)
        return;
    char out[NAME_LEN];
    snprintf(out, NAME_LEN, "%s", layer);
    switch (act) {
    case CT_ACT_RELU:
        node2(b, "Relu", v->name, NULL, out);
        break;
    case CT_ACT_LEAKY: {
        size_t m = node_begin(b, "LeakyRelu", (const char *const[]){v->name}, 1, out);
        attr_float(b, "alpha", 0.1f);
        node_end(b, m);
        break;
    }
    case CT_ACT_SIGMOID:
        node2(b, "Sigmoid", v->name, NULL, out);
        break;
    case CT_ACT_TANH:
        node2(b, "Tanh", v->name, NULL, out);
        break;
    case CT_ACT_GELU:
        if (b->spec->opset >= 20) {
            node2(b, "Gelu", v->name, NULL, out);   /* approximate = "none": the erf form */
        } else {
            char k[NAME_LEN], one[NAME_LEN], half[NAME_LEN], t1[NAME_LEN], t2[NAME_LEN], t3[NAME_LEN],
                t4[NAME_LEN];
            fresh_name(b, k, layer, "rsqrt2");
            fresh_name(b, one, layer, "one");
            fresh_name(b, half, layer, "half");
            init_scalar(b, k, 0.70710678118654752440f);   /* 1 / sqrt(2) */
            init_scalar(b, one, 1.0f);
            init_scalar(b, half, 0.5f);
            fresh_name(b, t1, layer, "gelu");
            fresh_name(b, t2, layer, "gelu");
            fresh_name(b, t3, layer, "gelu");
            fresh_name(b, t4, layer, "gelu");
            node2(b, "Mul", v->name, k, t1);
            node2(b, "Erf", t1, NULL, t2);
            node2(b, "Add", t2, one, t3);
            node2(b, "Mul", v->name, t3, t4);
            node2(b, "Mul", t4, half, out);
        }
        break;
    default:
        break;
    }
    snprintf(v->name, NAME_LEN, "%s", out);
}

/* ---- layers ---- */

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
    value x = alias(b, c->in[0], l->in_shape.c);
    to_rank2(b, &x, l->cfg->name);
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
    init_floats(b, wn, wd, 2, w, (size_t)units * k);
    free(w);
    if (l->b_count)
        init_floats(b, bn, bd, 1, c->bias, (size_t)units);
    main_output(y, l->cfg->name, l->act);
    size_t m = node_begin(b, "Gemm", (const char *const[]){x.name, wn, bn}, l->b_count ? 3 : 2, y);
    attr_int(b, "transB", 1);
    node_end(b, m);
    free(x.perm);
    *out = (value){.rank = 2};
    snprintf(out->name, NAME_LEN, "%s", y);
    activation(b, out, l->act, l->cfg->name);
    return CT_OK;
}

/* ONNX's pads (top, left, bottom, right) for cutrain's window: its leading pads, and the trailing
 * ones that make ONNX's floor((in + pads - k) / stride) + 1 give the same output size. */
static void window_pads(const ct_layer *l, int64_t pads[4])
{
    int pb = (l->out.h - 1) * l->stride + l->kh - l->in_shape.h - l->pad_t;
    int pr = (l->out.w - 1) * l->stride + l->kw - l->in_shape.w - l->pad_l;
    pads[0] = l->pad_t;
    pads[1] = l->pad_l;
    pads[2] = pb > 0 ? pb : 0;
    pads[3] = pr > 0 ? pr : 0;
}

// w: (f, kh, kw, c) fp32 -> (f, c, kh, kw), its input channels in the input value's order
static ct_status emit_conv2d(layer_ctx *c, value *out)
{
    builder *b = c->b;
    const ct_layer *l = c->l;
    int f = l->out.c, ch = l->in_shape.c, kh = l->kh, kw = l->kw;
    value x = alias(b, c->in[0], ch);
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
    to_rank4(b, &x, l->cfg->name);
    char wn[NAME_LEN], bn[NAME_LEN], y[NAME_LEN];
    param_name(wn, l, "weight");
    param_name(bn, l, "bias");
    int64_t wd[4] = {f, ch, kh, kw}, bd[1] = {f};
    init_floats(b, wn, wd, 4, w, n);
    free(w);
    if (l->b_count)
        init_floats(b, bn, bd, 1, c->bias, (size_t)f);
    main_output(y, l->cfg->name, l->act);
    size_t m = node_begin(b, "Conv", (const char *const[]){x.name, wn, bn}, l->b_count ? 3 : 2, y);
    int64_t ks[2] = {kh, kw}, st[2] = {l->stride, l->stride}, pads[4];
    window_pads(l, pads);
    attr_ints(b, "kernel_shape", ks, 2);
    attr_ints(b, "strides", st, 2);
    attr_ints(b, "pads", pads, 4);
    node_end(b, m);
    *out = (value){.rank = 4};
    snprintf(out->name, NAME_LEN, "%s", y);
    activation(b, out, l->act, l->cfg->name);
    return CT_OK;
}

static ct_status emit_pool(layer_ctx *c, value *out)
{
    builder *b = c->b;
    const ct_layer *l = c->l;
    int is_max = l->type == CT_LAYER_MAXPOOL;
    value x = alias(b, c->in[0], l->in_shape.c);
    to_cutrain_order(b, &x, l->in_shape.c, l->cfg->name);
    to_rank4(b, &x, l->cfg->name);
    char y[NAME_LEN];
    snprintf(y, NAME_LEN, "%s", l->cfg->name);
    if (l->cfg->global) {
        node2(b, is_max ? "GlobalMaxPool" : "GlobalAveragePool", x.name, NULL, y);
    } else {
        /* padded cells never count: MaxPool pads with -inf, AveragePool's count_include_pad is 0 */
        size_t m = node_begin(b, is_max ? "MaxPool" : "AveragePool", (const char *const[]){x.name}, 1, y);
        int64_t ks[2] = {l->kh, l->kw}, st[2] = {l->stride, l->stride}, pads[4];
        window_pads(l, pads);
        attr_ints(b, "kernel_shape", ks, 2);
        attr_ints(b, "strides", st, 2);
        attr_ints(b, "pads", pads, 4);
        node_end(b, m);
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
    *out = alias(b, c->in[0], ch);
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
        init_floats(b, names[k], dims, 1, v, (size_t)ch);
    }
    free(v);
    char y[NAME_LEN];
    main_output(y, l->cfg->name, l->act);
    size_t m = node_begin(b, "BatchNormalization",
                          (const char *const[]){out->name, names[0], names[1], names[2], names[3]}, 5, y);
    attr_float(b, "epsilon", l->cfg->epsilon);
    node_end(b, m);
    snprintf(out->name, NAME_LEN, "%s", y);
    activation(b, out, l->act, l->cfg->name);
    return CT_OK;
}

static ct_status emit_flatten(layer_ctx *c, value *out)
{
    builder *b = c->b;
    const ct_layer *l = c->l;
    ct_shape s = l->in_shape;
    if (c->in[0]->rank == 2) {
        *out = alias(b, c->in[0], s.c);
        return CT_OK;
    }
    *out = (value){.rank = 2};
    snprintf(out->name, NAME_LEN, "%s", l->cfg->name);
    size_t m = node_begin(b, "Flatten", (const char *const[]){c->in[0]->name}, 1, out->name);
    attr_int(b, "axis", 1);
    node_end(b, m);
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
    value x0 = alias(b, c->in[0], ch), x1 = alias(b, c->in[1], ch);
    if (x0.rank != x1.rank) {
        to_rank2(b, &x0, l->cfg->name);
        to_rank2(b, &x1, l->cfg->name);
    }
    int same = (!x0.perm && !x1.perm) || (x0.perm && x1.perm && memcmp(x0.perm, x1.perm, (size_t)ch * sizeof *x0.perm) == 0);
    if (!same) {
        to_cutrain_order(b, &x0, ch, l->cfg->name);
        to_cutrain_order(b, &x1, ch, l->cfg->name);
    }
    char y[NAME_LEN];
    main_output(y, l->cfg->name, l->act);
    node2(b, "Add", x0.name, x1.name, y);
    *out = (value){.rank = x0.rank, .perm = x0.perm};
    free(x1.perm);
    snprintf(out->name, NAME_LEN, "%s", y);
    activation(b, out, l->act, l->cfg->name);
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
        x[i] = alias(b, c->in[i], l->in_shapes[i].c);
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
            to_rank2(b, &x[i], l->cfg->name);
        for (int p = 0; out->perm && p < l->in_shapes[i].c; p++)
            out->perm[off + p] = off + (x[i].perm ? x[i].perm[p] : p);
        names[i] = x[i].name;
    }
    snprintf(out->name, NAME_LEN, "%s", l->cfg->name);
    size_t m = node_begin(b, "Concat", names, n, out->name);
    attr_int(b, "axis", 1);
    node_end(b, m);
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
        *out = alias(c->b, c->in[0], l->in_shape.c);
        return CT_OK;
    case CT_LAYER_FLATTEN:
        return emit_flatten(c, out);
    case CT_LAYER_ACTIVATION:
        *out = alias(c->b, c->in[0], l->in_shape.c);
        activation(c->b, out, l->act, l->cfg->name);
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

/* ---- the graph and the model ---- */

/* A graph input or output: a tensor of elem with dims (-1: the dynamic batch "N"). */
static void value_info(ct_pb *o, unsigned field, const char *name, int elem, const int64_t *dims, int nd)
{
    size_t m = ct_pb_begin(o, field);
    ct_pb_string(o, VALUE_NAME, name);
    size_t t = ct_pb_begin(o, VALUE_TYPE);
    size_t tt = ct_pb_begin(o, TYPE_TENSOR);
    ct_pb_int(o, TENSOR_ELEM, elem);
    size_t sh = ct_pb_begin(o, TENSOR_SHAPE);
    for (int i = 0; i < nd; i++) {
        size_t d = ct_pb_begin(o, SHAPE_DIM);
        if (dims[i] < 0)
            ct_pb_string(o, DIM_PARAM, "N");
        else
            ct_pb_int(o, DIM_VALUE, dims[i]);
        ct_pb_end(o, d);
    }
    ct_pb_end(o, sh);
    ct_pb_end(o, tt);
    ct_pb_end(o, t);
    ct_pb_end(o, m);
}

/* The input's normalisation: pixels * scale + bias per channel, the batcher's folded floats, in
 * fp32 whatever the model's type (the pixels come as fp32). */
static void emit_input(builder *b, const ct_export_net *net, value *in)
{
    ct_shape s = net->graph->input;
    ct_augment aug;
    float scale[CT_MAX_CHANNELS], bias[CT_MAX_CHANNELS];
    ct_augment_from_config(&aug, net->data, s.c);
    ct_augment_fold(&aug, scale, bias);
    int64_t dims[4] = {1, s.c, 1, 1};
    init_floats_as(b, ONNX_FLOAT, "pixels.scale", dims, 4, scale, (size_t)s.c);
    init_floats_as(b, ONNX_FLOAT, "pixels.bias", dims, 4, bias, (size_t)s.c);
    node2(b, "Mul", "pixels", "pixels.scale", "pixels/scaled");
    node2(b, "Add", "pixels/scaled", "pixels.bias", "pixels/normalised");
    *in = (value){.name = "pixels/normalised", .rank = 4};
    if (b->elem == ONNX_FLOAT16) {
        size_t m = node_begin(b, "Cast", (const char *const[]){"pixels/normalised"}, 1, "pixels/fp16");
        attr_int(b, "to", ONNX_FLOAT16);
        node_end(b, m);
        snprintf(in->name, NAME_LEN, "pixels/fp16");
    }
}

/* The last layer's value as (N, classes) in cutrain's order, fp32, then its softmax. */
static void emit_output(builder *b, const ct_graph *g, value *v)
{
    const char *layer = g->layers[g->n_layers - 1].cfg->name;
    to_rank2(b, v, layer);
    to_cutrain_order(b, v, g->classes, layer);
    const char *logits = v->name;
    if (b->elem == ONNX_FLOAT16) {
        size_t m = node_begin(b, "Cast", (const char *const[]){v->name}, 1, "probabilities/logits");
        attr_int(b, "to", ONNX_FLOAT);
        node_end(b, m);
        logits = "probabilities/logits";
    }
    size_t m = node_begin(b, "Softmax", (const char *const[]){logits}, 1, "probabilities");
    attr_int(b, "axis", 1);
    node_end(b, m);
}

static ct_status emit_layers(builder *b, const ct_export_net *net, value *vals, value *input, ct_err *err)
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

static void metadata(ct_pb *o, const char *key, const char *value)
{
    size_t m = ct_pb_begin(o, MODEL_METADATA);
    ct_pb_string(o, ENTRY_KEY, key);
    ct_pb_string(o, ENTRY_VALUE, value);
    ct_pb_end(o, m);
}

static void emit_model(builder *b, const ct_export_net *net, ct_pb *out)
{
    const ct_graph *g = net->graph;
    ct_pb_int(out, MODEL_IR_VERSION, ir_version_for(b->spec->opset));
    ct_pb_string(out, MODEL_PRODUCER_NAME, "cutrain");
    ct_pb_string(out, MODEL_PRODUCER_VERSION, CT_VERSION_STRING);
    ct_pb_string(out, MODEL_DOC, "input 'pixels': (N, C, H, W) float, the image's 0..255 values as the data "
                                 "files hold them; output 'probabilities': (N, classes), softmax");
    size_t gm = ct_pb_begin(out, MODEL_GRAPH);
    ct_pb_raw(out, b->nodes.buf, b->nodes.len);
    ct_pb_string(out, GRAPH_NAME, "cutrain");
    ct_pb_raw(out, b->inits.buf, b->inits.len);
    int64_t batch = b->spec->batch > 0 ? b->spec->batch : -1;
    int64_t in_dims[4] = {batch, g->input.c, g->input.h, g->input.w}, out_dims[2] = {batch, g->classes};
    value_info(out, GRAPH_INPUT, "pixels", ONNX_FLOAT, in_dims, 4);
    value_info(out, GRAPH_OUTPUT, "probabilities", ONNX_FLOAT, out_dims, 2);
    ct_pb_end(out, gm);
    size_t om = ct_pb_begin(out, MODEL_OPSET);
    ct_pb_string(out, OPSET_DOMAIN, "");
    ct_pb_int(out, OPSET_VERSION, b->spec->opset);
    ct_pb_end(out, om);
    char classes[32];
    snprintf(classes, sizeof classes, "%d", g->classes);
    metadata(out, "classes", classes);
    char *names = ct_export_class_names_json(net->ck);
    if (names)
        metadata(out, "class_names", names);
    else if (net->ck->n_classes)
        b->nomem = 1;
    free(names);
    metadata(out, "config", net->config_text);
    metadata(out, "input", "pixels: (N, C, H, W) float32 of 0..255 (uint8 values), normalised inside the model");
    metadata(out, "precision", b->elem == ONNX_FLOAT16 ? "fp16" : "fp32");
    char step[32];
    snprintf(step, sizeof step, "%lld", (long long)net->ck->step);
    metadata(out, "checkpoint_step", step);
}

ct_status ct_export_onnx(const ct_export_net *net, const ct_export_spec *spec, ct_pb *out, ct_err *err)
{
    if (spec->opset < CT_EXPORT_OPSET_MIN || spec->opset > CT_EXPORT_OPSET_MAX)
        return ct_fail(err, CT_ERR_USAGE, "ONNX opset %d is not one cutrain writes (%d to %d)", spec->opset,
                       CT_EXPORT_OPSET_MIN, CT_EXPORT_OPSET_MAX);
    const ct_graph *g = net->graph;
    /* the graph's values are the layers' names: two are taken by the model's input and output */
    for (int i = 0; i < g->n_layers; i++)
        if (strcmp(g->layers[i].cfg->name, "pixels") == 0 || strcmp(g->layers[i].cfg->name, "probabilities") == 0)
            return ct_fail(err, CT_ERR_CONFIG, "[%s]: the ONNX model's %s has this name; rename the layer to export it",
                           g->layers[i].cfg->name, g->layers[i].cfg->name[0] == 'p' && g->layers[i].cfg->name[1] == 'i'
                                                       ? "input" : "output");
    builder b = {.nodes = ct_pb_growing(), .inits = ct_pb_growing(), .spec = spec,
                 .elem = spec->fp16 ? ONNX_FLOAT16 : ONNX_FLOAT};
    value *vals = calloc((size_t)g->n_layers, sizeof *vals);
    if (!vals)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory writing the ONNX model");
    value input;
    emit_input(&b, net, &input);
    ct_status st = emit_layers(&b, net, vals, &input, err);
    if (st == CT_OK) {
        value last = alias(&b, &vals[g->n_layers - 1], g->classes);
        emit_output(&b, g, &last);
        free(last.perm);
        emit_model(&b, net, out);
        if (b.nomem || b.nodes.nomem || b.inits.nomem || out->nomem)
            st = ct_fail(err, CT_ERR_NOMEM, "out of memory writing the ONNX model");
    }
    for (int i = 0; i < g->n_layers; i++)
        free(vals[i].perm);
    free(vals);
    ct_pb_free(&b.nodes);
    ct_pb_free(&b.inits);
    return st;
}
