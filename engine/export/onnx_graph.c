/* The ONNX graph's building blocks (onnx_graph.h): initializers, nodes and their attributes, and
 * the values that stand for layers' outputs, with the orders a flatten leaves them in. */
#include "export/onnx_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"

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
void ct_onnx_init_floats_as(builder *b, int elem, const char *name, const int64_t *dims, int nd, const float *v,
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

void ct_onnx_init_floats(builder *b, const char *name, const int64_t *dims, int nd, const float *v, size_t n)
{
    ct_onnx_init_floats_as(b, b->elem, name, dims, nd, v, n);
}

void ct_onnx_init_int64s(builder *b, const char *name, const int64_t *dims, int nd, const int64_t *v, size_t n)
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
size_t ct_onnx_node_begin(builder *b, const char *op, const char *const *in, int n_in, const char *out)
{
    size_t m = ct_pb_begin(&b->nodes, GRAPH_NODE);
    for (int i = 0; i < n_in; i++)
        ct_pb_string(&b->nodes, NODE_INPUT, in[i]);
    ct_pb_string(&b->nodes, NODE_OUTPUT, out);
    ct_pb_string(&b->nodes, NODE_NAME, out);
    ct_pb_string(&b->nodes, NODE_OP, op);
    return m;
}

void ct_onnx_node_end(builder *b, size_t m)
{
    ct_pb_end(&b->nodes, m);
}

void ct_onnx_attr_int(builder *b, const char *name, int64_t v)
{
    size_t m = ct_pb_begin(&b->nodes, NODE_ATTR);
    ct_pb_string(&b->nodes, ATTR_NAME, name);
    ct_pb_int(&b->nodes, ATTR_TYPE, ATTR_TYPE_INT);
    ct_pb_int(&b->nodes, ATTR_I, v);
    ct_pb_end(&b->nodes, m);
}

void ct_onnx_attr_float(builder *b, const char *name, float v)
{
    size_t m = ct_pb_begin(&b->nodes, NODE_ATTR);
    ct_pb_string(&b->nodes, ATTR_NAME, name);
    ct_pb_int(&b->nodes, ATTR_TYPE, ATTR_TYPE_FLOAT);
    ct_pb_float(&b->nodes, ATTR_F, v);
    ct_pb_end(&b->nodes, m);
}

void ct_onnx_attr_ints(builder *b, const char *name, const int64_t *v, int n)
{
    size_t m = ct_pb_begin(&b->nodes, NODE_ATTR);
    ct_pb_string(&b->nodes, ATTR_NAME, name);
    ct_pb_int(&b->nodes, ATTR_TYPE, ATTR_TYPE_INTS);
    for (int i = 0; i < n; i++)
        ct_pb_int(&b->nodes, ATTR_INTS, v[i]);
    ct_pb_end(&b->nodes, m);
}

/* A node of one or two inputs and no attributes. */
void ct_onnx_node2(builder *b, const char *op, const char *in0, const char *in1, const char *out)
{
    const char *in[2] = {in0, in1};
    ct_onnx_node_end(b, ct_onnx_node_begin(b, op, in, in1 ? 2 : 1, out));
}

/* "layer/what_N": a name no other value has. */
void ct_onnx_fresh_name(builder *b, char *name, const char *layer, const char *what)
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
value ct_onnx_alias(builder *b, const value *v, int channels)
{
    value a = *v;
    a.perm = perm_dup(b, v->perm, channels);
    return a;
}

/* A rank-4 value of a (1, 1, c) tensor as (N, c): Flatten keeps the order, since h = w = 1. */
void ct_onnx_to_rank2(builder *b, value *v, const char *layer)
{
    if (v->rank == 2)
        return;
    char out[NAME_LEN];
    ct_onnx_fresh_name(b, out, layer, "flatten");
    size_t m = ct_onnx_node_begin(b, "Flatten", (const char *const[]){v->name}, 1, out);
    ct_onnx_attr_int(b, "axis", 1);
    ct_onnx_node_end(b, m);
    snprintf(v->name, NAME_LEN, "%s", out);
    v->rank = 2;
}

/* A rank-2 value in cutrain's order: Gather along the channels with the inverse of its order. */
void ct_onnx_to_cutrain_order(builder *b, value *v, int channels, const char *layer)
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
    ct_onnx_fresh_name(b, ind, layer, "order");
    int64_t dims[1] = {channels};
    ct_onnx_init_int64s(b, ind, dims, 1, idx, (size_t)channels);
    free(idx);
    ct_onnx_fresh_name(b, out, layer, "gather");
    size_t m = ct_onnx_node_begin(b, "Gather", (const char *const[]){v->name, ind}, 2, out);
    ct_onnx_attr_int(b, "axis", 1);
    ct_onnx_node_end(b, m);
    snprintf(v->name, NAME_LEN, "%s", out);
    free(v->perm);
    v->perm = NULL;
}

/* A rank-2 value of a (1, 1, c) tensor, in cutrain's order, as (N, c, 1, 1). */
void ct_onnx_to_rank4(builder *b, value *v, const char *layer)
{
    if (v->rank == 4)
        return;
    char shape[NAME_LEN], out[NAME_LEN];
    ct_onnx_fresh_name(b, shape, layer, "shape");
    int64_t dims[1] = {4}, s[4] = {0, -1, 1, 1};
    ct_onnx_init_int64s(b, shape, dims, 1, s, 4);
    ct_onnx_fresh_name(b, out, layer, "reshape");
    ct_onnx_node2(b, "Reshape", v->name, shape, out);
    snprintf(v->name, NAME_LEN, "%s", out);
    v->rank = 4;
}

/* ---- activations ---- */

/* The name of a layer's main operation's output: the layer's own when no activation follows. */
void ct_onnx_main_output(char *name, const char *layer, ct_activation act)
{
    snprintf(name, NAME_LEN, act == CT_ACT_LINEAR ? "%s" : "%s/pre", layer);
}

/* A scalar constant of the builder's type. */
static void init_scalar(builder *b, const char *name, float v)
{
    ct_onnx_init_floats(b, name, NULL, 0, &v, 1);
}

/* act applied to v, its output named after the layer. gelu is ONNX's Gelu from opset 20, before it
 * the same erf form spelt out: x * 0.5 * (1 + erf(x / sqrt(2))). */
void ct_onnx_activation(builder *b, value *v, ct_activation act, const char *layer)
{
    if (act == CT_ACT_LINEAR)
        return;
    char out[NAME_LEN];
    snprintf(out, NAME_LEN, "%s", layer);
    switch (act) {
    case CT_ACT_RELU:
        ct_onnx_node2(b, "Relu", v->name, NULL, out);
        break;
    case CT_ACT_LEAKY: {
        size_t m = ct_onnx_node_begin(b, "LeakyRelu", (const char *const[]){v->name}, 1, out);
        ct_onnx_attr_float(b, "alpha", 0.1f);
        ct_onnx_node_end(b, m);
        break;
    }
    case CT_ACT_SIGMOID:
        ct_onnx_node2(b, "Sigmoid", v->name, NULL, out);
        break;
    case CT_ACT_TANH:
        ct_onnx_node2(b, "Tanh", v->name, NULL, out);
        break;
    case CT_ACT_GELU:
        if (b->spec->opset >= 20) {
            ct_onnx_node2(b, "Gelu", v->name, NULL, out);   /* approximate = "none": the erf form */
        } else {
            char k[NAME_LEN], one[NAME_LEN], half[NAME_LEN], t1[NAME_LEN], t2[NAME_LEN], t3[NAME_LEN],
                t4[NAME_LEN];
            ct_onnx_fresh_name(b, k, layer, "rsqrt2");
            ct_onnx_fresh_name(b, one, layer, "one");
            ct_onnx_fresh_name(b, half, layer, "half");
            init_scalar(b, k, 0.70710678118654752440f);   /* 1 / sqrt(2) */
            init_scalar(b, one, 1.0f);
            init_scalar(b, half, 0.5f);
            ct_onnx_fresh_name(b, t1, layer, "gelu");
            ct_onnx_fresh_name(b, t2, layer, "gelu");
            ct_onnx_fresh_name(b, t3, layer, "gelu");
            ct_onnx_fresh_name(b, t4, layer, "gelu");
            ct_onnx_node2(b, "Mul", v->name, k, t1);
            ct_onnx_node2(b, "Erf", t1, NULL, t2);
            ct_onnx_node2(b, "Add", t2, one, t3);
            ct_onnx_node2(b, "Mul", v->name, t3, t4);
            ct_onnx_node2(b, "Mul", t4, half, out);
        }
        break;
    default:
        break;
    }
    snprintf(v->name, NAME_LEN, "%s", out);
}
