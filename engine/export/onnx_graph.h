/* The ONNX writer's pieces (engine/export/onnx*.c): onnx.proto's field numbers, the graph being
 * built (nodes and initializers, each in a growing protocol buffer) and the values that stand for
 * layers' outputs, with the operations that add nodes and initializers to it. */
#ifndef CT_ONNX_GRAPH_H
#define CT_ONNX_GRAPH_H

#include "export/export.h"

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

/* ---- initializers: "name" of dims, fp32 or the builder's type ---- */
void ct_onnx_init_floats_as(builder *b, int elem, const char *name, const int64_t *dims, int nd, const float *v,
                            size_t n);
void ct_onnx_init_floats(builder *b, const char *name, const int64_t *dims, int nd, const float *v, size_t n);
void ct_onnx_init_int64s(builder *b, const char *name, const int64_t *dims, int nd, const int64_t *v, size_t n);

/* ---- nodes: begin (inputs, output, op), attributes, end; named after their output ---- */
size_t ct_onnx_node_begin(builder *b, const char *op, const char *const *in, int n_in, const char *out);
void ct_onnx_node_end(builder *b, size_t m);
void ct_onnx_attr_int(builder *b, const char *name, int64_t v);
void ct_onnx_attr_float(builder *b, const char *name, float v);
void ct_onnx_attr_ints(builder *b, const char *name, const int64_t *v, int n);
/* A node of one or two inputs (in1 may be NULL) and no attributes. */
void ct_onnx_node2(builder *b, const char *op, const char *in0, const char *in1, const char *out);
/* "layer/what_N": a name no other value has. */
void ct_onnx_fresh_name(builder *b, char *name, const char *layer, const char *what);

/* ---- values ---- */
/* v as a new value (its own copy of the order). */
value ct_onnx_alias(builder *b, const value *v, int channels);
/* A rank-4 value of a (1, 1, c) tensor as (N, c). */
void ct_onnx_to_rank2(builder *b, value *v, const char *layer);
/* A rank-2 value in cutrain's order (a Gather when it has another). */
void ct_onnx_to_cutrain_order(builder *b, value *v, int channels, const char *layer);
/* A rank-2 value in cutrain's order as (N, c, 1, 1). */
void ct_onnx_to_rank4(builder *b, value *v, const char *layer);
/* The name of a layer's main operation's output: the layer's own when no activation follows. */
void ct_onnx_main_output(char *name, const char *layer, ct_activation act);
/* act applied to v, its output named after the layer. */
void ct_onnx_activation(builder *b, value *v, ct_activation act, const char *layer);

/* Every layer of net->graph into b (onnx_layers.c): vals[i] becomes layer i's value; input is the
 * normalised pixels. */
ct_status ct_onnx_emit_layers(builder *b, const ct_export_net *net, value *vals, value *input, ct_err *err);

#endif
