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
#include "export/onnx_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"

/* The IR version that goes with an opset (onnx's docs/Versioning.md). */
static int ir_version_for(int opset)
{
    return opset <= 14 ? 7 : opset <= 18 ? 8 : opset <= 20 ? 9 : 10;
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
    ct_onnx_init_floats_as(b, ONNX_FLOAT, "pixels.scale", dims, 4, scale, (size_t)s.c);
    ct_onnx_init_floats_as(b, ONNX_FLOAT, "pixels.bias", dims, 4, bias, (size_t)s.c);
    ct_onnx_node2(b, "Mul", "pixels", "pixels.scale", "pixels/scaled");
    ct_onnx_node2(b, "Add", "pixels/scaled", "pixels.bias", "pixels/normalised");
    *in = (value){.name = "pixels/normalised", .rank = 4};
    if (b->elem == ONNX_FLOAT16) {
        size_t m = ct_onnx_node_begin(b, "Cast", (const char *const[]){"pixels/normalised"}, 1, "pixels/fp16");
        ct_onnx_attr_int(b, "to", ONNX_FLOAT16);
        ct_onnx_node_end(b, m);
        snprintf(in->name, NAME_LEN, "pixels/fp16");
    }
}

/* The last layer's value as (N, classes) in cutrain's order, fp32, then its softmax. */
static void emit_output(builder *b, const ct_graph *g, value *v)
{
    const char *layer = g->layers[g->n_layers - 1].cfg->name;
    ct_onnx_to_rank2(b, v, layer);
    ct_onnx_to_cutrain_order(b, v, g->classes, layer);
    const char *logits = v->name;
    if (b->elem == ONNX_FLOAT16) {
        size_t m = ct_onnx_node_begin(b, "Cast", (const char *const[]){v->name}, 1, "probabilities/logits");
        ct_onnx_attr_int(b, "to", ONNX_FLOAT);
        ct_onnx_node_end(b, m);
        logits = "probabilities/logits";
    }
    size_t m = ct_onnx_node_begin(b, "Softmax", (const char *const[]){logits}, 1, "probabilities");
    ct_onnx_attr_int(b, "axis", 1);
    ct_onnx_node_end(b, m);
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
    ct_status st = ct_onnx_emit_layers(&b, net, vals, &input, err);
    if (st == CT_OK) {
        value last = ct_onnx_alias(&b, &vals[g->n_layers - 1], g->classes);
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