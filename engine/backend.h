/* The backend vtable: memory, layer forward/backward, loss and optimizer, in the manner of ggml's
 * backends. Nothing above this interface knows which backend runs. All pointers passed to the ops
 * are backend memory from alloc(). Ops enqueue work in order on the backend's compute stream;
 * only download, read_metrics, all_finite and elapsed wait for it. */
#ifndef CT_BACKEND_H
#define CT_BACKEND_H

#include "graph/layer.h"

typedef struct ct_backend ct_backend;

/* What device-side augmentation needs of data/dataset.h's ct_augment (the engine does not see
 * data/): crop padding, flip, and the normalisation folded to x * scale + bias per channel. */
typedef struct ct_augment_params {
    int crop_pad, flip, channels;
    float scale[CT_MAX_CHANNELS], bias[CT_MAX_CHANNELS];
} ct_augment_params;

/* The optimizer over the flat parameter buffer: fixed for a run. What changes every step (the
 * learning rate, Adam's step count) comes through set_step, so that a captured step replays. */
typedef struct ct_optim_step {
    ct_optimizer kind;
    float *params, *grads, *m, *v;  /* m: momentum or Adam's first moment; v: Adam's second */
    size_t count;
    float momentum, beta1, beta2, epsilon, weight_decay;
    int nesterov;
} ct_optim_step;

/* What differs from one step to the next. A backend that replays a captured step keeps these in
 * device memory, which the captured kernels read; set_step updates them in stream order. */
typedef struct ct_step_scalars {
    float lr;
    long t;                  /* step number from 1 */
    float bias1, bias2;      /* Adam's bias corrections 1 - beta1^t, 1 - beta2^t (ct_adam_bias) */
    uint64_t dropout_seed;   /* dropout masks of this step: ct_uniform(seed, layer index, i) */
} ct_step_scalars;

/* One batch handed to input_submit. */
typedef struct ct_input_batch {
    int n;
    ct_shape shape;               /* per sample */
    const float *x;               /* (n, h, w, c) fp32, ready; or NULL with x_u8 */
    const uint8_t *x_u8;          /* (n, h, w, c) uint8 as stored, for device-side augmentation */
    const int32_t *y;             /* (n) */
    const ct_augment_params *aug; /* with x_u8: crop, flip and normalisation */
    int augment;                  /* with x_u8: 1 = draw crops and flips, 0 = normalise only */
    uint64_t augment_seed;
} ct_input_batch;

/* The work of one training step, run directly or captured once and replayed (run_step). */
typedef ct_status (*ct_step_fn)(void *ctx, ct_err *err);

typedef struct ct_backend_ops {
    const char *name;
    /* Zeroed memory, or NULL. */
    void *(*alloc)(ct_backend *be, size_t bytes);
    void (*free)(ct_backend *be, void *ptr);
    ct_status (*upload)(ct_backend *be, void *dst, const void *src, size_t bytes, ct_err *err);
    ct_status (*download)(ct_backend *be, void *dst, const void *src, size_t bytes, ct_err *err);
    ct_status (*zero)(ct_backend *be, void *ptr, size_t bytes, ct_err *err);
    /* Backend memory to backend memory, in stream order. */
    ct_status (*copy)(ct_backend *be, void *dst, const void *src, size_t bytes, ct_err *err);
    /* Bytes of shared workspace the layer needs for a batch of n (im2col, pad copies, cuDNN and
     * cuBLASLt algorithms). */
    size_t (*workspace_bytes)(ct_backend *be, const ct_layer *l, int n);

    /* Input staging. input_reserve (once, at bind) sizes the host buffers for the largest batch.
     * input_host gives the host buffers to assemble the next batch into (pinned memory on the GPU;
     * it waits only for the copy that last read them). input_commit moves them into the
     * network's fixed input buffers, asynchronously and in order before the next step's work. */
    ct_status (*input_reserve)(ct_backend *be, size_t x_bytes, size_t y_bytes, ct_err *err);
    ct_status (*input_host)(ct_backend *be, float **host_x, int32_t **host_y, ct_err *err);
    ct_status (*input_commit)(ct_backend *be, float *dst_x, int32_t *dst_y, size_t x_bytes,
                              size_t y_bytes, ct_err *err);

    /* Host memory for the input pipeline's ring, callable from any thread (pinned and portable on
     * the GPU, so copies from it overlap; plain aligned memory on the CPU). NULL on failure. */
    void *(*host_alloc)(ct_backend *be, size_t bytes);
    void (*host_free)(ct_backend *be, void *ptr);
    /* A batch assembled elsewhere (the pipeline's ring) into the network's fixed input buffers, in
     * stream order before the next step's work: fp32 samples, or uint8 ones augmented and
     * normalised on the device (b->x_u8). *ticket names the copy: input_wait(ticket) returns once
     * the copy has read the host memory, which may then be reused. */
    ct_status (*input_submit)(ct_backend *be, const ct_input_batch *b, float *dst_x, int32_t *dst_y,
                              long *ticket, ct_err *err);
    ct_status (*input_wait)(ct_backend *be, long ticket, ct_err *err);

    /* The scalars of the step about to run (before run_step or the ops of an uncaptured step). */
    ct_status (*set_step)(ct_backend *be, const ct_step_scalars *s, ct_err *err);
    /* Runs fn(ctx): directly, or (with graphs on) captured the second time `key` is seen and
     * replayed from then on. The first run of a key is direct, so that setup-time work (cuDNN's
     * algorithm search, cuBLASLt plans) happens outside any capture. fn must enqueue the same
     * work for the same key every time; key identifies the batch shape. */
    ct_status (*run_step)(ct_backend *be, int key, ct_step_fn fn, void *ctx, ct_err *err);

    /* x -> y for n samples; `training` selects batch statistics and dropout (seeded by set_step). */
    ct_status (*forward)(ct_backend *be, ct_layer *l, int n, int training, ct_err *err);
    /* dy -> (adds into) dx, dw, db. */
    ct_status (*backward)(ct_backend *be, ct_layer *l, int n, ct_err *err);
    /* Softmax cross-entropy over logits (n, k); writes dlogits = (p - onehot) / n (unless NULL)
     * and adds the loss sum and correct count to the backend's metric accumulators. */
    ct_status (*loss)(ct_backend *be, const float *logits, const int32_t *labels, float *dlogits,
                      int n, int k, ct_err *err);
    /* Reads (and with reset, clears) the metric accumulators: waits for queued work. */
    ct_status (*read_metrics)(ct_backend *be, double *loss_sum, long *correct, int reset, ct_err *err);
    /* Without waiting: the accumulators as of the last completed snapshot (with the `tag` given
     * when that snapshot was requested; *tag_out = -1 when none has completed), then requests a
     * new snapshot tagged `tag`. For progress displays that must not stall the stream. */
    ct_status (*peek_metrics)(ct_backend *be, long tag, double *loss_sum, long *correct, long *tag_out,
                              ct_err *err);
    /* Uses the learning rate and step count of set_step. */
    ct_status (*optimizer_step)(ct_backend *be, const ct_optim_step *step, ct_err *err);
    /* 1 when all n floats are finite (waits; for diagnosing a failure, not for the step). */
    int (*all_finite)(ct_backend *be, const float *x, size_t n);
    /* Timing in stream order: mark(slot) records a point; elapsed waits for slot b and returns
     * the milliseconds from a to b (CUDA events on the GPU, the clock on the CPU). 4 slots. */
    ct_status (*mark)(ct_backend *be, int slot, ct_err *err);
    ct_status (*elapsed)(ct_backend *be, int a, int b, double *ms, ct_err *err);
    void (*destroy)(ct_backend *be);
} ct_backend_ops;

struct ct_backend {
    const ct_backend_ops *ops;
    void *workspace;        /* shared by all layers, sized by the network builder */
    size_t workspace_size;
    float *scratch;         /* (n, largest layer output): gradient before a fused activation */
    int host_memory;        /* 1 when reading results back costs nothing (the CPU) */
    int graphs;             /* 1 while run_step captures and replays (0 after a capture failed) */
    char note[256];         /* why graphs were turned off, when they were */
    void *impl;             /* backend-private state */
};

enum { CT_BACKEND_MARKS = 4 };

ct_status ct_cpu_backend_create(ct_backend **out, ct_err *err);

#ifdef CUTRAIN_HAVE_CUDA
typedef struct ct_cuda_options {
    int device;              /* CUDA ordinal among the visible devices */
    int graphs;              /* 1: run_step captures and replays CUDA graphs */
    int allow_tf32;          /* 1: cuDNN convolutions may use TF32 (PyTorch's default); matrix
                              * products stay in full fp32 either way, as PyTorch's do */
} ct_cuda_options;
ct_status ct_cuda_backend_create(ct_backend **out, const ct_cuda_options *opt, ct_err *err);
#endif

#endif
