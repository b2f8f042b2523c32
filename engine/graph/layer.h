/* A layer of the network graph: what its type computes, its shapes, where its parameters and
 * buffers live. Each layer type (one file in engine/layers/) defines shape inference, parameter
 * counts and initialisation, FLOPs and memory once; each backend implements forward/backward. */
#ifndef CT_LAYER_H
#define CT_LAYER_H

#include "config/config.h"
#include "base/rng.h"

#define CT_INPUT_NODE (-1)   /* producer index meaning "the network's input batch" */

typedef struct ct_layer {
    const ct_layer_config *cfg;  /* name, line, type options */
    ct_layer_type type;
    int index;
    int in[CT_MAX_INPUTS];       /* producer layers, CT_INPUT_NODE for the data */
    int n_in;
    ct_shape in_shape;           /* shape of in[0] (add checks in[1] equals it) */
    ct_shape out;
    ct_activation act;           /* fused activation (dense, conv2d, add) or the activation layer's */

    /* conv2d and pooling geometry */
    int kh, kw, stride, pad_t, pad_l;

    /* Trainable parameters as offsets (in floats) into the network's flat parameter buffer:
     * w = weights (dense (units, in), conv (f, kh, kw, c)) or batch-norm gamma; b = bias or beta. */
    size_t w_off, w_count, b_off, b_count;
    /* Non-trained state (batch-norm running mean then running variance) in the state buffer. */
    size_t state_off, state_count;

    /* Buffers bound by the network for a batch size (backend memory; NULL when unused), NHWC,
     * of type `dtype` (x, y, z, dy, dx: activations and their gradients; parameters stay fp32). */
    ct_dtype dtype;
    const float *x[CT_MAX_INPUTS];   /* inputs: producers' outputs */
    float *dx[CT_MAX_INPUTS];        /* producers' output gradients; NULL for the data input */
    float *y, *dy;                   /* output and its gradient: (n, out) */
    float *z;                        /* pre-activation when a fused activation needs it, else y */
    void *aux;                       /* argmax, dropout mask, saved batch-norm statistics */
    float *w, *b, *dw, *db, *state;
} ct_layer;

typedef struct ct_layer_kind {
    /* Sets out, geometry and parameter/state counts from cfg and in_shape; shape errors name
     * the layer's line. */
    ct_status (*infer)(ct_layer *l, const char *file, ct_err *err);
    /* Forward FLOPs for one sample (a multiply-add counts 2). */
    double (*flops)(const ct_layer *l);
    /* Bytes of aux per batch of n samples. */
    size_t (*aux_bytes)(const ct_layer *l, int n);
    /* Initial parameters (host memory) and state; NULL when the layer has none. */
    void (*init)(const ct_layer *l, float *w, float *b, float *state, ct_rng *rng);
} ct_layer_kind;

const ct_layer_kind *ct_layer_kind_of(ct_layer_type type);

/* True when a fused activation needs the pre-activation kept apart from the output. */
static inline int ct_layer_keeps_preactivation(const ct_layer *l)
{
    return (l->type == CT_LAYER_DENSE || l->type == CT_LAYER_CONV2D || l->type == CT_LAYER_ADD) &&
           l->act != CT_ACT_LINEAR;
}

/* Shared by dense and conv2d: He (relu-like) or Glorot uniform, per `init` and the activation. */
void ct_init_uniform_fan(float *w, size_t count, int fan_in, int fan_out, ct_init init,
                         ct_activation act, ct_rng *rng);

/* Output size and leading pad of one spatial dimension, for convolution and pooling windows. */
void ct_conv_dim(int in, int k, int stride, ct_padding padding, int *out, int *pad_before);

#endif
