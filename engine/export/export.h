/* Taking a trained network out of cutrain (docs/export.md): the inference network as an ONNX model
 * (onnx.c) and the weights as safetensors (safetensors.c), both from a checkpoint's fp32 masters and
 * the network's built graph, never from a backend. Above checkpoint/, below api/. */
#ifndef CT_EXPORT_H
#define CT_EXPORT_H

#include "base/protobuf.h"
#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "graph/graph.h"

/* The opsets the ONNX writer emits: from 13 (Softmax over one axis, as the output needs) to 21,
 * the newest the tests check with onnx's checker and onnxruntime. */
#define CT_EXPORT_OPSET_MIN 13
#define CT_EXPORT_OPSET_MAX 21

/* What an export reads: the built graph (shapes, geometry, offsets), [data] for the input
 * normalisation, the checkpoint (already checked against the graph by ct_export_check), the config as
 * text and the checkpoint's name for messages. */
typedef struct ct_export_net {
    const ct_graph *graph;
    const ct_data_settings *data;
    const ct_checkpoint *ck;
    const char *config_text;
    const char *source;
    const size_t *packed_off;   /* per layer: where its weights start in ck->params (its biases follow) */
} ct_export_net;

typedef struct ct_export_spec {
    int opset;          /* CT_EXPORT_OPSET_MIN .. MAX */
    int batch;          /* the input's batch dimension, 0: dynamic ("N") */
    int fp16;           /* half weights and computation (the output stays fp32) */
} ct_export_spec;

/* Checks that ck holds the network's layers (names, types, shapes, counts) and fills packed_off
 * (n_layers entries). */
ct_status ct_export_check(const ct_graph *g, const ct_checkpoint *ck, const char *source, size_t *packed_off,
                          ct_err *err);

/* The ONNX ModelProto into a growing buffer. Fails naming the layer it cannot express. */
ct_status ct_export_onnx(const ct_export_net *net, const ct_export_spec *spec, ct_pb *out, ct_err *err);
/* The safetensors file's bytes into a growing buffer. */
ct_status ct_export_safetensors(const ct_export_net *net, int fp16, ct_pb *out, ct_err *err);

/* One fp32 tensor of a safetensors file: data holds count values of the shape's nd dimensions. */
typedef struct ct_st_tensor {
    char name[CT_MAX_NAME + 16];
    const float *data;
    size_t count;
    int64_t shape[4];
    int nd;
} ct_st_tensor;

/* A safetensors file of t[0..n) (F32, or F16 with fp16) in that order, its __metadata__ the n_meta
 * pairs meta[2 i] = meta[2 i + 1], into a growing buffer. */
ct_status ct_safetensors_write(const ct_st_tensor *t, size_t n, const char *const *meta, size_t n_meta, int fp16,
                               ct_pb *out, ct_err *err);

/* The config as ini text (sections and their keys as read, --set overrides applied); malloc'd. */
char *ct_export_config_text(const ct_ini *ini);

/* Class names for the metadata: the checkpoint's (an image folder's) as a JSON array, else NULL. */
char *ct_export_class_names_json(const ct_checkpoint *ck);
/* s as a JSON string, quotes included, into a growing buffer. */
void ct_export_json_string(ct_pb *o, const char *s);

#endif
