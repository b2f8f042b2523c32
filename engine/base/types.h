/* Small enums and shapes shared by config, layers, backends and tools. */
#ifndef CT_TYPES_H
#define CT_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* Per-sample shape of an activation, NHWC order; a flat vector is (1, 1, C). */
typedef struct ct_shape {
    int h, w, c;
} ct_shape;

static inline size_t ct_shape_size(ct_shape s) { return (size_t)s.h * s.w * s.c; }

typedef enum ct_activation {
    CT_ACT_LINEAR = 0,
    CT_ACT_RELU,
    CT_ACT_LEAKY,   /* slope 0.1 for x < 0, as in Darknet */
    CT_ACT_SIGMOID,
    CT_ACT_TANH,
    CT_ACT_GELU,    /* exact erf form, as PyTorch's default */
    CT_ACT_COUNT
} ct_activation;

#define CT_LEAKY_SLOPE 0.1f

/* The layer types, in the order their values are stored in checkpoints (append only). Each has a
 * record ct_layer_def_<name> (engine/graph/layers/), CPU ops ct_cpu_<name>_ops (engine/cpu/) and
 * CUDA ops ct_cuda_<name>_ops (engine/cuda/); the tables of all three are made from this list. */
#define CT_LAYER_TYPES(X) \
    X(DENSE, dense)       \
    X(CONV2D, conv2d)     \
    X(MAXPOOL, maxpool)   \
    X(AVGPOOL, avgpool)   \
    X(BATCHNORM, batchnorm) \
    X(DROPOUT, dropout)   \
    X(FLATTEN, flatten)   \
    X(ACTIVATION, activation) \
    X(ADD, add)           \
    X(CONCAT, concat)

#define CT_LAYER_ENUM(upper, lower) CT_LAYER_##upper,
typedef enum ct_layer_type { CT_LAYER_TYPES(CT_LAYER_ENUM) CT_LAYER_TYPE_COUNT } ct_layer_type;
#undef CT_LAYER_ENUM

/* The config's word for each layer type (`type = conv2d`), in enum order, NULL-terminated: the
 * one table of names, made from CT_LAYER_TYPES. */
extern const char *const ct_layer_type_names[CT_LAYER_TYPE_COUNT + 1];
const char *ct_layer_type_name(ct_layer_type t);

typedef enum ct_padding { CT_PAD_VALID = 0, CT_PAD_SAME } ct_padding;
typedef enum ct_init { CT_INIT_AUTO = 0, CT_INIT_HE, CT_INIT_GLOROT } ct_init;
typedef enum ct_optimizer { CT_OPT_SGD = 0, CT_OPT_MOMENTUM, CT_OPT_ADAM, CT_OPT_ADAMW } ct_optimizer;
/* "sgd", "momentum", "adam", "adamw"; "?" for a value out of range (a checkpoint's). */
const char *ct_optimizer_name(unsigned optimizer);
typedef enum ct_schedule { CT_SCHED_CONSTANT = 0, CT_SCHED_STEP, CT_SCHED_COSINE } ct_schedule;
/* [train] precision: fp32 throughout, or fp16 / bf16 activations with fp32 master weights. */
typedef enum ct_precision { CT_PREC_FP32 = 0, CT_PREC_FP16, CT_PREC_BF16 } ct_precision;
/* `precision = fp32 | fp16 | bf16`, in ct_precision order, NULL-terminated: the one table of these
 * words, for the config, messages and results. */
extern const char *const ct_precision_names[4];
const char *ct_precision_name(ct_precision p);
/* A layer's `dtype`: auto follows the precision; fp32 pins the layer (its activations) to fp32. */
typedef enum ct_layer_dtype { CT_LAYER_DTYPE_AUTO = 0, CT_LAYER_DTYPE_FP32 } ct_layer_dtype;
typedef enum ct_memory_mode { CT_MEMORY_GROW = 0, CT_MEMORY_PREALLOCATE, CT_MEMORY_LIMIT } ct_memory_mode;
/* [train] batch: a number, the largest that fits memory (max), or the fastest per image (auto). */
typedef enum ct_batch_mode { CT_BATCH_FIXED = 0, CT_BATCH_MAX, CT_BATCH_AUTO } ct_batch_mode;
/* [train] lr_scaling: how learning_rate follows the batch from base_batch. */
typedef enum ct_lr_scaling { CT_LR_SCALING_NONE = 0, CT_LR_SCALING_LINEAR, CT_LR_SCALING_SQRT } ct_lr_scaling;

/* "HxWxC", or "C" for a flat vector, into buf (n bytes); returns buf. */
char *ct_shape_text(ct_shape s, char *buf, size_t n);

const char *ct_activation_name(ct_activation a);
/* The activations' words in enum order, NULL-terminated (config and messages share it). */
extern const char *const ct_activation_names[CT_ACT_COUNT + 1];
/* `padding = valid | same`, in ct_padding order, NULL-terminated. */
extern const char *const ct_padding_names[3];

#endif
