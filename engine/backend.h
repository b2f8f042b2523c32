/* A backend: what runs on a device (device.h). Per-layer-type forward and backward tables, the
 * loss with its metric accumulators, the optimizer, the input staging and the step runner. Nothing
 * above this interface knows which backend runs. Ops enqueue work in order on the device's
 * compute stream; only read_metrics, all_finite and input_wait may wait for it.
 *
 * A backend owns its workspace and scratch: the network asks how much it needs (the layer ops'
 * workspace_bytes, ct_graph_backend_sizes) and hands it the sizes (reserve), it never writes the
 * backend's fields. */
#ifndef CT_BACKEND_H
#define CT_BACKEND_H

#include "base/scaler.h"
#include "base/tensor.h"
#include "data/encoded.h"    /* the compressed images of decode = gpu */
#include "data/settings.h"   /* CT_MAX_CHANNELS, the bound of device-side augmentation's channels */
#include "device.h"

typedef struct ct_backend ct_backend;
/* A layer of the network (graph/layer.h), which the per-type ops take: the network sits above
 * this interface, and the backends that implement the ops include it. */
typedef struct ct_layer ct_layer;

/* What device-side augmentation needs of data/'s ct_augment: crop padding, flip, and the
 * normalisation folded to x * norm_scale + norm_bias per channel. */
typedef struct ct_augment_params {
    int crop_pad, flip, channels;
    float norm_scale[CT_MAX_CHANNELS], norm_bias[CT_MAX_CHANNELS];
} ct_augment_params;

/* The optimizer over the flat parameter tensor: fixed for a run. What changes every step (the
 * learning rate, Adam's step count) comes through set_step, so that a captured step replays. */
typedef struct ct_optim_step {
    ct_optimizer kind;
    ct_tensor *params, *grads, *m, *v;   /* m: momentum or Adam's first moment; v: Adam's second */
    float momentum, beta1, beta2, epsilon, weight_decay;
    int nesterov;
    /* fp16 / bf16 runs: the half copy of params (same layout), rewritten as round(w) after an
     * applied update; NULL in fp32. */
    ct_tensor *params_half;
    /* fp16 runs: the backend's loss scaler (scaler_set) decides. Any non-finite gradient the
     * unscale pass counted skips the update (weights, moments, the half copy untouched); else
     * Adam's t is the scaler's applied_steps + 1, its bias corrections (float)(1 - pow(beta, t))
     * formed in double by the optimizer itself (not set_step's), as fp32's are on the CPU and in
     * the CUDA kernels; then ct_scaler_update. 0: set_step's t and corrections. */
    int scaled;
} ct_optim_step;

/* What differs from one step to the next. A backend that replays a captured step keeps these in
 * device memory, which the captured kernels read; set_step updates them in stream order. */
typedef struct ct_step_scalars {
    float lr;
    long t;                  /* step number from 1 */
    float bias1, bias2;      /* Adam's bias corrections 1 - beta1^t, 1 - beta2^t (ct_adam_bias) */
    uint64_t dropout_seed;   /* dropout masks of this step: ct_uniform(seed, layer index, i) */
    long first_sample;       /* the global batch's index of this replica's first sample: element i
                              * of its slice draws as element first_sample * (per sample) + i of
                              * the global batch, so N replicas drop what one would. 0 with one
                              * replica; the CUDA backend, which runs one, ignores it */
    int samples;             /* the global batch's samples, over every replica: sync_bn's running
                              * variance is unbiased by its rows, which a replayed step reads here
                              * (the CUDA backend), not from the capture of a replica's slice */
} ct_step_scalars;

/* One batch for input_submit, in host memory from the device's host_alloc. */
typedef struct ct_input_batch {
    int n;
    ct_shape shape;               /* per sample */
    const float *x;               /* (n, h, w, c) fp32, ready; or NULL with x_u8 */
    const uint8_t *x_u8;          /* (n, h, w, c) uint8 as stored, for device-side augmentation */
    const int32_t *y;             /* (n) */
    const ct_augment_params *aug; /* with x_u8: crop, flip and normalisation */
    int augment;                  /* with x_u8: 1 = draw crops and flips, 0 = normalise only */
    uint64_t augment_seed;
    long first_sample;            /* x's place in the pipeline's batch (a replica's slice): its
                                   * samples draw their crops and flips by that place */
    /* decode = gpu (with x_u8; NULL otherwise): the pipeline's whole batch, of which this one is
     * samples first_sample .. first_sample + n - 1. Those with a size are decoded by the backend's
     * image decoder (image_decoder) from their compressed bytes, cropped, resized and flipped as
     * their entry says, into their place of x_u8's batch on the device; x_u8 holds the others. The
     * compressed bytes are read until input_wait(ticket) returns. */
    const ct_encoded_batch *encoded;
} ct_input_batch;

/* Forward and backward of one layer type on one backend. */
typedef struct ct_layer_ops {
    /* x -> y for n samples; `training` selects batch statistics and dropout (seeded by set_step). */
    ct_status (*forward)(ct_backend *be, ct_layer *l, int n, int training, ct_err *err);
    /* dy -> dx, dw, db for n samples. Writes dw and db, and writes dx[k] or adds into it as
     * l->dx_accumulate[k] says (the first writer of a gradient in backward order writes it):
     * nothing is cleared before a step, so every element of the n samples' gradients must be
     * written. */
    ct_status (*backward)(ct_backend *be, ct_layer *l, int n, ct_err *err);
    /* Bytes of the shared workspace the layer needs at batch n (im2col, pad copies, cuDNN and
     * cuBLASLt algorithms); NULL when none. */
    size_t (*workspace_bytes)(ct_backend *be, const ct_layer *l, int n);
} ct_layer_ops;

/* The work of one training step, run directly or captured once and replayed (run_step). */
typedef ct_status (*ct_step_fn)(void *ctx, ct_err *err);

/* What a captured step is specific to, so that run_step replays a capture only for the work it
 * recorded: the step function, the bound network whose buffers it reads and writes (its
 * ct_graph), and the batch size. Whatever else a capture reads comes through set_step or stays
 * put while the network is bound: the backend's own buffers change only at reserve, which drops
 * every capture, and a network's only at ct_graph_free and ct_graph_bind, which call forget. */
typedef struct ct_step_key {
    ct_step_fn fn;
    const void *net;
    int n;
} ct_step_key;

typedef struct ct_backend_ops {
    const char *name;
    /* Per layer type, indexed by ct_layer_type. */
    const ct_layer_ops *const *layers;
    /* Takes what the bound network needs: `workspace` bytes shared by the layers, `scratch`
     * bytes for a gradient before a fused activation, and input staging for batches of x_bytes
     * and y_bytes. Called again at a rebind; frees what an earlier call took. */
    ct_status (*reserve)(ct_backend *be, size_t workspace, size_t scratch, size_t x_bytes, size_t y_bytes,
                         ct_err *err);
    /* Device bytes the backend allocates besides the workspace and scratch (its own buffers, input
     * staging for batches of x_bytes and y_bytes), as the device's allocator counts them (each
     * allocation rounded to CT_TENSOR_ALIGN): the memory plan adds them. NULL: none. */
    size_t (*own_bytes)(ct_backend *be, size_t x_bytes, size_t y_bytes);

    /* A batch in host memory into the network's input tensors, in stream order before the next
     * step's work: fp32 samples, or uint8 ones augmented and normalised on the device (b->x_u8).
     * *ticket names the copy: input_wait(ticket) returns once the copy has read the host memory,
     * which may then be reused. Training, evaluation and bench all come through here. */
    ct_status (*input_submit)(ct_backend *be, const ct_input_batch *b, ct_tensor *x, ct_tensor *labels,
                              long *ticket, ct_err *err);
    ct_status (*input_wait)(ct_backend *be, long ticket, ct_err *err);
    /* decode = gpu: makes the backend's image decoder ready (loads its library, creates its state
     * and its own stream, outside any captured step), so that input_submit takes batches with
     * `encoded`. CT_OK with a line for the log in info (n bytes): what decodes and where; any
     * failure (CT_ERR_BACKEND) says why in err, and the caller decodes on the CPU or stops. NULL:
     * the backend has no image decoder (the CPU's). */
    ct_status (*image_decoder)(ct_backend *be, char *info, size_t n, ct_err *err);
    /* decode = gpu's CPU share (gpu_decode_cpu_share = auto): decodes enc's compressed images, the
     * whole batch, as input_submit would into a scratch buffer of its own, waits for them, and
     * gives the seconds taken (wall time, the host's part included); outside any step, at prepare.
     * shape: one sample's. NULL where image_decoder is. */
    ct_status (*image_decode_time)(ct_backend *be, const ct_encoded_batch *enc, ct_shape shape, double *seconds,
                                   ct_err *err);

    /* The scalars of the step about to run (before run_step or the ops of an uncaptured step). */
    ct_status (*set_step)(ct_backend *be, const ct_step_scalars *s, ct_err *err);
    /* Runs key->fn(ctx): directly, or (with graphs on) captured the second time `key` is seen
     * and replayed from then on. The first run of a key is direct, so that setup-time work
     * (cuDNN's algorithm search, cuBLASLt plans) happens outside any capture. key->fn must
     * enqueue the same work for the same key every time (ct_step_key says what a key covers). */
    ct_status (*run_step)(ct_backend *be, const ct_step_key *key, void *ctx, ct_err *err);
    /* Drops what the backend keeps for the bound network `net` (its ct_graph): captured steps,
     * which hold the addresses of its buffers. Called when the network's buffers are freed
     * (ct_graph_free) or replaced (ct_graph_bind); teardown, so it cannot fail. */
    void (*forget)(ct_backend *be, const void *net);

    /* Softmax cross-entropy over logits (n, k) fp32; writes dlogits = (p - onehot) * (1/n)
     * (unless NULL; with scaling on, ((p - onehot) * (1/n)) * scale, two roundings) and adds the loss sum and correct count to the backend's metric accumulators. */
    ct_status (*loss)(ct_backend *be, const ct_tensor *logits, const ct_tensor *labels, ct_tensor *dlogits,
                      int n, ct_err *err);
    /* Reads (and with reset, clears) the metric accumulators: waits for queued work. */
    ct_status (*read_metrics)(ct_backend *be, double *loss_sum, long *correct, int reset, ct_err *err);
    /* Without waiting: the accumulators as of the last completed snapshot (with the `tag` given
     * when that snapshot was requested; *tag_out = -1 when none has completed), then requests a
     * new snapshot tagged `tag`. For progress displays that must not stall the stream. */
    ct_status (*peek_metrics)(ct_backend *be, long tag, double *loss_sum, long *correct, long *tag_out,
                              ct_err *err);
    /* Uses the learning rate and step count of set_step (the step count of the scaler with
     * step->scaled). */
    ct_status (*optimizer_step)(ct_backend *be, const ct_optim_step *step, ct_err *err);

    /* Dynamic loss scaling (fp16; base/scaler.h). The state lives in the backend's memory and is
     * touched only in stream order inside the step; the host sets it before training and at a
     * checkpoint load, and reads it outside steps (epoch ends, checkpoints).
     * scaler_set: s is the state to start from; NULL turns scaling off (the default): the loss
     * writes unscaled gradients. */
    ct_status (*scaler_set)(ct_backend *be, const ct_scaler *s, ct_err *err);
    /* Waits for queued work and copies the state out. */
    ct_status (*scaler_get)(ct_backend *be, ct_scaler *out, ct_err *err);
    /* With scaling on: grads (flat fp32) *= 1 / scale, the non-finite values counted into the
     * scaler's nonfinite; one pass, after backward (and the all-reduce), before optimizer_step. */
    ct_status (*unscale)(ct_backend *be, ct_tensor *grads, ct_err *err);
    /* 1 when the first `count` elements of t are finite (waits; for diagnosing a failure, not for
     * the step). */
    int (*all_finite)(ct_backend *be, const ct_tensor *t, size_t count);
    void (*destroy)(ct_backend *be);
} ct_backend_ops;

/* sync_bn: how a replica's batch norm averages per-channel figures over the replicas in a
 * training step. mean replaces v (count fp32 values in the backend's memory, each a mean or sum
 * over this replica's samples) with their mean over the replicas weighted by each one's samples,
 * which for per-sample means is the global batch's mean. total: the global batch's samples. */
typedef struct ct_bn_sync {
    ct_status (*mean)(void *ctx, float *v, int count, ct_err *err);
    void *ctx;
    int total;
} ct_bn_sync;

/* Several ranks stepping together: whether a step's capture is used must be the same on every
 * rank, as NCCL launches a captured collective only with the graphs of one capture on all of its
 * ranks, never with direct launches on some. run_step calls agree once per capture, after the
 * capture and before launching anything, with whether its own capture succeeded (why: the
 * failure, else NULL); agree waits for every rank's answer and fails, on every rank, unless all
 * succeeded. agree NULL (one rank): a failed capture falls back to direct launches. */
typedef struct ct_capture_agree {
    ct_status (*agree)(void *ctx, int captured, const char *why, ct_err *err);
    void *ctx;
} ct_capture_agree;

struct ct_backend {
    const ct_backend_ops *ops;
    ct_device *dev;          /* the device it runs on; not owned */
    int capture;             /* 1 while run_step captures and replays (0 after a capture failed) */
    char note[512];          /* what the backend changed on its own: why graphs were turned off,
                              * a nondeterministic algorithm where a deterministic one was asked
                              * for ("" when nothing); added to with ct_backend_add_note */
    void *impl;              /* backend-private state */
    ct_bn_sync bn_sync;      /* set by the trainer for the steps of sync_bn = on over several
                              * replicas (or one NCCL rank); mean NULL otherwise (each replica's
                              * own statistics) */
    ct_capture_agree capture_agree; /* set by the trainer around run_step over several ranks */
};

/* Appends text to be->note, after "; " when it holds one already; cut to fit. */
void ct_backend_add_note(ct_backend *be, const char *text);

/* What a backend takes from [train] when it is created (the registry passes it on; the CPU's
 * backend reads allow_winograd and allow_sparse_backward). */
typedef struct ct_backend_options {
    int capture;             /* 1: run_step captures and replays (CUDA graphs) */
    int allow_tf32;          /* 1: cuDNN convolutions may use TF32 (PyTorch's default); matrix
                              * products stay in full fp32 either way, as PyTorch's do */
    int deterministic;       /* 1: cuDNN convolutions run deterministic algorithms where one
                              * fits ([train] deterministic); 0: the fastest */
    int allow_winograd;      /* 1: the CPU's 3x3 stride-1 convolutions may run Winograd's
                              * F(4x4, 3x3) ([train] winograd) */
    int allow_sparse_backward; /* 1: the CPU's convolutions may run their backward over the
                              * non-zeros of a mostly-zero output gradient ([train] sparse_backward) */
} ct_backend_options;

/* The CPU backend on dev (a CPU device), which every build has, with opt (NULL: every option off,
 * the direct convolutions that the GPU parity tests take as their reference); a GPU's comes from
 * the registry (registry.h). */
ct_status ct_cpu_backend_create(ct_backend **out, ct_device *dev, const ct_backend_options *opt, ct_err *err);

#endif
