/* A layer of the network: its type's record (rules), its resolved inputs and shapes, and the
 * tensors bound to it for a batch size.
 *
 * Everything a layer type is lives in its record, ct_layer_def_<type> (engine/graph/layers/):
 * inputs it takes, whether it aliases its input or fuses an activation, its config keys, shape
 * inference and checks, parameter counts and initialisation, FLOPs and memory. Backends add
 * forward and backward per type (engine/cpu/<type>.c, engine/cuda/<type>.c); the list of types
 * is CT_LAYER_TYPES in base/types.h. */
#ifndef CT_LAYER_H
#define CT_LAYER_H

#include "base/rng.h"
#include "base/tensor.h"
#include "base/window.h"
#include "config/config.h"

#define CT_INPUT_NODE (-1)   /* producer index meaning "the network's input batch" */

struct ct_layer_def;
struct ct_key_table;
struct ct_value_ctx;

typedef struct ct_layer {
    const struct ct_layer_def *def;  /* the type's record */
    const ct_layer_config *cfg;      /* name, line, type options */
    ct_layer_type type;
    int index;
    int in[CT_MAX_INPUTS];           /* producer layers, CT_INPUT_NODE for the data */
    int n_in;
    ct_shape in_shapes[CT_MAX_INPUTS];
    ct_shape in_shape;               /* in_shapes[0], which most types read */
    ct_shape out;
    ct_activation act;               /* fused activation (def->fused_activation) or the activation layer's */
    ct_dtype dtype;                  /* of its activations (y, z) and their gradient dy: fp32, or in an
                                      * fp16 / bf16 run the half type unless pinned (`dtype = fp32`)
                                      * or the output layer (ct_graph_build) */
    int touches_half;                /* the layer or one of its producers is half (ct_graph_build):
                                      * the CPU runs it through its half path */
    int learns;                      /* it or a layer before it has parameters (ct_graph_build): only
                                      * then does backward deliver a gradient to its output */
    int wants_dx[CT_MAX_INPUTS];     /* backward computes the gradient at input k: its producer
                                      * learns (not the data, not a flatten of it) */

    /* Set by ct_graph_build: producer k's layer (NULL for the data), and the one layer that reads
     * this one's output, through one input, when exactly one does (NULL when none, several or the
     * loss do). A backend may fold a layer's activation gradient into its sole reader's backward
     * (the CPU's max pool applies relu's: ct_cpu_relu_grad_in_reader). */
    const struct ct_layer *src[CT_MAX_INPUTS];
    const struct ct_layer *sole_reader;

    /* convolution and pooling geometry (kernel, stride, leading pads) */
    int kh, kw, stride, pad_t, pad_l;

    /* Trainable parameters as element offsets into the network's flat parameter tensor (and the
     * gradient and moment tensors laid out alike), each a multiple of CT_TENSOR_ALIGN bytes:
     * w = weights (dense (units, in), conv (f, kh, kw, c)) or batch-norm gamma; b = bias or beta.
     * Non-trained state (batch-norm running mean then running variance) in the state tensor. */
    size_t w_off, w_count, b_off, b_count;
    size_t state_off, state_count;

    /* Bound by ct_graph_bind, NULL where unused. x[k] is producer k's y (the graph's input tensor
     * for the data); dx[k] its dy (NULL for the data). z is the pre-activation where a fused
     * activation needs it kept, else the same tensor as y. aux: argmax, dropout mask, saved
     * batch-norm statistics. w, b, dw, db, state: views into the flat parameter, gradient and
     * state tensors. */
    const ct_tensor *x[CT_MAX_INPUTS];
    ct_tensor *dx[CT_MAX_INPUTS];
    ct_tensor *y, *dy, *z, *aux;
    ct_tensor *w, *b, *dw, *db, *state;
    /* A half layer's weights and bias as its forward and backward read them: views into the
     * network's half copy of the parameters (ct_graph.params_half), NULL for fp32 layers and for
     * batch norm, whose parameters stay fp32. */
    ct_tensor *w_half, *b_half;

    /* Set by ct_graph_bind: how backward delivers dx[k]. Nothing is cleared before a step: a
     * backward writes dw and db (this layer is their one writer), and writes dx[k] when it is the
     * first writer of that buffer in backward order (dx_accumulate[k] = 0) or adds into it when a
     * later consumer of the same producer already wrote it (1): a tensor read by several layers,
     * a residual add's inputs, a layer that reads one tensor twice. */
    unsigned char dx_accumulate[CT_MAX_INPUTS];
} ct_layer;

/* The rules of one layer type. */
typedef struct ct_layer_def {
    int min_inputs, max_inputs;      /* 1, 1 for a layer that reads one producer */
    int aliases_input;               /* the output is the input reinterpreted (flatten): no buffers */
    int fused_activation;            /* takes `activation =` and applies it to its own output */
    int batch_statistics;            /* normalises with statistics of the batch (batch norm): under
                                      * sync_bn its forward and backward are collectives */
    /* Config keys of this type beyond `type`, `input(s)` and a fused `activation`: a
     * NULL-terminated list of tables (config/table.h) whose rows leave `mask` 0; the config gives
     * each row the types whose records list its table, so types can share one (ct_weight_keys). */
    const struct ct_key_table *const *keys;
    /* Checks across keys once the section is read; NULL when there are none. */
    ct_status (*check_keys)(const struct ct_value_ctx *vc, const ct_layer_config *c);
    /* Checks l->in_shapes and sets l->out, the geometry and the parameter and state counts from
     * l->cfg; errors name the layer's line in `file`. */
    ct_status (*infer)(ct_layer *l, const char *file, ct_err *err);
    /* Forward FLOPs for one sample (a multiply-add counts 2). */
    double (*flops)(const ct_layer *l);
    /* Elements and dtype of aux for a batch of n; NULL when the type keeps none. */
    size_t (*aux_count)(const ct_layer *l, int n, ct_dtype *dtype);
    /* Initial parameters and state (host memory, fp32); NULL when the type has none. */
    void (*init)(const ct_layer *l, float *w, float *b, float *state, ct_rng *rng);
} ct_layer_def;

const ct_layer_def *ct_layer_def_of(ct_layer_type type);

/* True when act's gradient needs the activation's input: gelu's does; relu and leaky test
 * y > 0 (true exactly when x > 0), sigmoid's is y (1 - y) and tanh's 1 - y^2, from the output
 * alone; linear has none. Both backends compute them so (ct_cpu_activation_backward,
 * ct_launch_activation_backward). */
static inline int ct_activation_grad_needs_input(ct_activation act)
{
    return act == CT_ACT_GELU;
}

/* True when a fused activation needs the pre-activation kept apart from the output; else z is y
 * and the activation runs in place. */
/* 1 for the half types. */
static inline int ct_dtype_is_half(ct_dtype t) { return t == CT_DTYPE_F16 || t == CT_DTYPE_BF16; }

/* True when the layer computes from the half copy of its weights: a dense or conv2d layer whose
 * activations are half (batch norm keeps fp32 parameters, as its statistics). */
static inline int ct_layer_reads_half_weights(const ct_layer *l)
{
    return ct_dtype_is_half(l->dtype) && (l->type == CT_LAYER_DENSE || l->type == CT_LAYER_CONV2D) && l->w_count;
}

static inline int ct_layer_keeps_preactivation(const ct_layer *l)
{
    return l->def->fused_activation && ct_activation_grad_needs_input(l->act);
}

/* What the types with parameters share (layers/params.c). Dense and conv2d: `bias = on|off` and
 * `init = auto|he|glorot`. */
extern const struct ct_key_table ct_weight_keys;
/* Shared by dense, conv2d and batchnorm (the types with parameters): `dtype = auto | fp32`. */
extern const struct ct_key_table ct_dtype_keys;

/* Shared by dense and conv2d: He (relu-like) or Glorot uniform, per `init` and the activation. */
void ct_init_uniform_fan(float *w, size_t count, int fan_in, int fan_out, ct_init init,
                         ct_activation act, ct_rng *rng);

/* The layer's window geometry for a batch of n (conv2d, pools). */
static inline ct_window_geom ct_layer_window(const ct_layer *l, int n)
{
    return (ct_window_geom){n, l->in_shape.h, l->in_shape.w, l->in_shape.c, l->out.c, l->kh, l->kw,
                            l->stride, l->pad_t, l->pad_l, l->out.h, l->out.w};
}

#endif
