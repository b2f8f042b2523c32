/* The network: layers in config order with resolved inputs and shapes (ct_graph_build), and the
 * tensors bound to them on a backend for a batch size (ct_graph_bind). Data flows config ->
 * graph -> replicas (each a bound graph with a backend on a device) -> trainer. */
#ifndef CT_GRAPH_H
#define CT_GRAPH_H

#include "backend.h"
#include "graph/layer.h"

typedef struct ct_graph {
    ct_layer *layers;
    int n_layers;
    ct_shape input;          /* per-sample input shape */
    int classes;
    size_t n_params;         /* trainable values: every layer's weights and biases (what a
                              * checkpoint stores, packed) */
    size_t param_span;       /* elements of the flat parameter, gradient and moment tensors: each
                              * layer's weights and biases start CT_TENSOR_ALIGN-aligned
                              * (w_off, b_off), zero padding between them */
    size_t n_state;          /* elements of non-trained state (batch-norm running statistics) */
    int classes_mismatch;    /* ct_graph_build failed as the last layer's width is not `classes`:
                              * the caller may add where that count came from */
    ct_precision precision;  /* [train] precision: the layers' dtypes follow it */
    ct_dtype compute_dtype;  /* the layers' dtype unless pinned to fp32: fp16 or bf16 in a mixed-precision
                              * run, fp32 otherwise */

    /* Bound by ct_graph_bind (backend memory). Flat tensors (params, grads, opt_m, opt_v of
     * param_span elements); opt_m, opt_v have NULL data when the optimizer keeps no such moment. */
    ct_backend *be;
    int batch;               /* the largest n a step may use */
    ct_tensor params, grads, opt_m, opt_v, state;
    /* fp16 / bf16 runs: the parameters rounded to the half type, laid out as params (param_span
     * elements, each layer's tensors at w_off and b_off), read by the half layers; rewritten from
     * params after every applied update and whenever params are set (init, checkpoint load). NULL
     * data in fp32 runs. */
    ct_tensor params_half;
    ct_tensor x;             /* (batch, input) */
    ct_tensor labels;        /* (batch) int32 */
    ct_tensor act_grads;     /* every layer's dy, one block (bytes, uint8), each CT_TENSOR_ALIGN-aligned
                              * and in its layer's dtype */
    ct_tensor *tensors;      /* the layers' tensors, which their pointers refer to */
    int n_tensors;
    void **owned;            /* allocations to free */
    int n_owned;
    size_t allocated;        /* bytes requested from the device so far */
} ct_graph;

/* What training allocates on the device for a batch size, by purpose (bytes): ct_graph_bind's
 * buffers, the backend's own, and the device allocator's rounding of each allocation to
 * CT_TENSOR_ALIGN, so that total is exactly what the allocator counts in use (base/devmem.h). */
typedef struct ct_memory_plan {
    size_t params;           /* parameters and their gradients (fp32 masters) */
    size_t params_half;      /* the half copy of the parameters (fp16 / bf16 runs) */
    size_t optimizer;        /* optimizer moments */
    size_t state;            /* batch-norm running statistics */
    size_t inputs;           /* the input batch and its labels */
    size_t activations;      /* outputs, pre-activations, argmax and dropout masks */
    size_t gradients;        /* activation gradients */
    size_t workspace;        /* the backend's workspace and scratch */
    size_t backend;          /* the backend's own buffers: input staging, per-step scalars (CUDA) */
    size_t padding;          /* each allocation rounded up to CT_TENSOR_ALIGN by the device allocator */
    size_t total;
    size_t by_dtype[CT_DTYPE_COUNT];  /* the same bytes by element type (the workspace, the backend's
                                       * own buffers and the padding as uint8) */
} ct_memory_plan;

/* Computes the plan without allocating (the network must be built). */
void ct_graph_plan(const ct_graph *g, ct_backend *be, int batch, ct_optimizer opt, ct_memory_plan *plan);
/* Adds to a plan what the device allocates beyond ct_graph_bind's requested bytes: the backend's
 * own buffers and the allocator's rounding (plan->backend, plan->padding, into total and uint8). Called
 * by ct_graph_plan, once the rest of the plan (plan->gradients among it) is filled. */
void ct_graph_plan_allocator(const ct_graph *g, ct_backend *be, int batch, ct_optimizer opt, ct_memory_plan *plan);

/* What backend be needs for network g at batch (its reserve): the largest per-layer workspace its
 * layer ops ask for and the largest layer output (the scratch), in bytes. */
void ct_graph_backend_sizes(const ct_graph *g, ct_backend *be, int batch, size_t *workspace, size_t *scratch);

/* The largest multiple of 8, at most batch_max, whose plan takes at most `budget` bytes; 0 when
 * batch 8 does not fit (or batch_max < 8). */
int ct_graph_max_batch(const ct_graph *g, ct_backend *be, ct_optimizer opt, size_t budget, int batch_max);

/* Resolves inputs, infers shapes and checks them (errors name the layer's line); gives each layer
 * its dtype from cfg->train.precision. */
ct_status ct_graph_build(ct_graph *g, const ct_config *cfg, ct_shape input, int classes, ct_err *err);
/* Allocates every tensor for batches up to `batch` on be's device, has the backend reserve its
 * workspace (dropping every captured step) and forget what it kept for a network at this address,
 * initialises parameters from `seed`. With a limit (bytes, 0 = none) a plan above it
 * is refused before anything is allocated, saying how much the batch needs. */
ct_status ct_graph_bind(ct_graph *g, ct_backend *be, int batch, ct_optimizer opt, uint64_t seed,
                        size_t limit, ct_err *err);
/* Sets the parameters from host values (g->param_span fp32, padding zero) and, in a half run,
 * their half copy: the one way parameters are set, so the copy always matches the masters. */
ct_status ct_graph_set_params(ct_graph *g, const float *host, ct_err *err);

/* Frees the network's buffers, after its backend has dropped the steps captured on them. */
void ct_graph_free(ct_graph *g);

/* Forward pass over n samples of g->x; the logits are the last layer's output. Dropout draws its
 * masks from the seed of the backend's last set_step. */
ct_status ct_graph_forward(ct_graph *g, int n, int training, ct_err *err);
/* Backward pass over n samples from the last layer's dy (the loss gradient, which the loss
 * writes). Writes every parameter gradient and every activation gradient it reaches, first writers
 * writing and later ones adding (ct_layer.dx_accumulate), so nothing is cleared before it; at
 * n = 0 the parameter gradients are zero. */
ct_status ct_graph_backward(ct_graph *g, int n, ct_err *err);
/* Called after layer i's backward, last layer first: its dw and db are final from then on (it is
 * their one writer), so they can be sent on while earlier layers run. At n = 0 it is called for
 * every layer after the gradients are zeroed. */
typedef ct_status (*ct_layer_done_fn)(void *ctx, int layer, ct_err *err);
/* ct_graph_backward, calling done (if not NULL) after each layer. */
ct_status ct_graph_backward_each(ct_graph *g, int n, ct_layer_done_fn done, void *ctx, ct_err *err);
/* ct_graph_forward, calling done (if not NULL) after each layer, first layer first (a trace's
 * per-layer times). */
ct_status ct_graph_forward_each(ct_graph *g, int n, int training, ct_layer_done_fn done, void *ctx, ct_err *err);

static inline ct_layer *ct_graph_output(ct_graph *g) { return &g->layers[g->n_layers - 1]; }

/* Bytes per sample kept for backward by layer i (output, pre-activation, aux). */
size_t ct_graph_activation_bytes(const ct_graph *g, int i);

#endif
