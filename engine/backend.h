/* The backend vtable: memory, layer forward/backward, loss and optimizer, in the manner of ggml's
 * backends. Nothing above this interface knows which backend runs. All pointers passed to the ops
 * are backend memory from alloc(). Ops enqueue work; only read_metrics and download wait for it. */
#ifndef CT_BACKEND_H
#define CT_BACKEND_H

#include "layers/layer.h"

typedef struct ct_backend ct_backend;

/* Everything the optimizer kernel needs for one step over the flat parameter buffer. */
typedef struct ct_optim_step {
    ct_optimizer kind;
    float *params, *grads, *m, *v;  /* m: momentum or Adam's first moment; v: Adam's second */
    size_t count;
    float lr, momentum, beta1, beta2, epsilon, weight_decay;
    int nesterov;
    long t;                         /* step number from 1 (Adam bias correction) */
} ct_optim_step;

typedef struct ct_backend_ops {
    const char *name;
    /* Zeroed memory, or NULL. */
    void *(*alloc)(ct_backend *be, size_t bytes);
    void (*free)(ct_backend *be, void *ptr);
    ct_status (*upload)(ct_backend *be, void *dst, const void *src, size_t bytes, ct_err *err);
    ct_status (*download)(ct_backend *be, void *dst, const void *src, size_t bytes, ct_err *err);
    ct_status (*zero)(ct_backend *be, void *ptr, size_t bytes, ct_err *err);
    /* Bytes of shared workspace the layer needs for a batch of n (im2col, algorithms). */
    size_t (*workspace_bytes)(ct_backend *be, const ct_layer *l, int n);
    /* x -> y for n samples; `training` selects batch statistics and dropout; `seed` feeds the
     * dropout masks of this step. */
    ct_status (*forward)(ct_backend *be, ct_layer *l, int n, int training, uint64_t seed, ct_err *err);
    /* dy -> (adds into) dx, dw, db. */
    ct_status (*backward)(ct_backend *be, ct_layer *l, int n, ct_err *err);
    /* Softmax cross-entropy over logits (n, k); writes dlogits = (p - onehot) / n and adds the
     * loss sum and correct count to the backend's metric accumulators. */
    ct_status (*loss)(ct_backend *be, const float *logits, const int32_t *labels, float *dlogits,
                      int n, int k, ct_err *err);
    /* Reads (and with reset, clears) the metric accumulators: waits for queued work. */
    ct_status (*read_metrics)(ct_backend *be, double *loss_sum, long *correct, int reset, ct_err *err);
    ct_status (*optimizer_step)(ct_backend *be, const ct_optim_step *step, ct_err *err);
    /* 1 when all n floats are finite. */
    int (*all_finite)(ct_backend *be, const float *x, size_t n);
    void (*destroy)(ct_backend *be);
} ct_backend_ops;

struct ct_backend {
    const ct_backend_ops *ops;
    void *workspace;        /* shared by all layers, sized by the network builder */
    size_t workspace_size;
    float *scratch;         /* (n, largest layer output): gradient before a fused activation */
    int host_memory;        /* 1 when reading results back costs nothing (the CPU) */
    void *impl;             /* backend-private state */
};

ct_status ct_cpu_backend_create(ct_backend **out, ct_err *err);
#ifdef CUTRAIN_HAVE_CUDA
/* First slice: memory, loss and SGD/momentum on `device`; layers come with the CUDA backend issue. */
ct_status ct_cuda_backend_create(ct_backend **out, int device, ct_err *err);
#endif

#endif
