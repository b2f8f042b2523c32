/* The CUDA kernels' launchers: the only door from host code into the .cu files of kernels/.
 *
 * Conventions:
 *  - plain C types only, so C11 host code includes this header without CUDA headers;
 *  - `stream` is a cudaStream_t passed as void * (NULL: the default stream);
 *  - every launcher only enqueues work: no allocation, no host synchronisation, so each one can be
 *    captured in a CUDA graph;
 *  - the return value is a cudaError_t as int: 0 on success, cudaErrorInvalidValue (1) for bad
 *    arguments (checked on the host before launching), else what cudaGetLastError reported after
 *    the launch. Errors inside a kernel surface at the next synchronising call, as always in CUDA;
 *  - empty work (0 rows, 0 elements) launches nothing and returns 0;
 *  - activations use the values of ct_activation in engine/base/types.h;
 *  - a gradient launcher with `accumulate` adds into dx when it is 1 and writes it when 0 (the
 *    first writer of a gradient in backward order: nothing is cleared before a step), writing
 *    0 + v rather than v so that the bits are those of adding into a cleared buffer, the CPU
 *    backend's (engine/cpu/cpu_ops.h). Parameter gradients (column sums) are always written.
 *
 * Mixed precision (dtypes): a launcher named *_dt is the general form of the fp32 launcher without
 * the suffix, which is the _dt launcher with every dtype CT_DTYPE_F32 and gives the bits it gave
 * before the _dt forms existed. Data pointers of a _dt launcher are void *; each tensor that may be
 * half has its dtype, a value of ct_dtype (engine/base/tensor.h: 0 CT_DTYPE_F32, 1 CT_DTYPE_F16,
 * 2 CT_DTYPE_BF16; anything else is cudaErrorInvalidValue), passed as an int after the other
 * arguments and just before `stream`, in the order the tensors come in the argument list; tensors
 * documented as fp32 (parameters' gradients, optimizer state, losses) stay float *.
 * The arithmetic rule for half tensors: every value read is widened to fp32 (exactly), computed on
 * exactly as the fp32 kernel does, in the same order, and rounded to the stored type once, on
 * store, to nearest even (CUDA's __float2half_rn / __float2bfloat16_rn, engine/base/half.h on the
 * host). So a half result is the fp32 kernel's result on the widened inputs, rounded: the host
 * reproduces it bit for bit (with half.h) wherever the fp32 kernel uses only IEEE-rounded +, -, *, /
 * and sqrt, and within one unit in the last place of the half type where it calls a
 * transcendental (sigmoid, tanh, gelu: the fp32 value may differ from the host libm's in its last
 * bits, which moves the half rounding only when it lies that close to a rounding boundary). NaN stays NaN but its payload is not promised
 * (the GPU's conversion may return a canonical NaN where half.h keeps the payload's top bits).
 * Half tensors need only their type's 2-byte alignment: the half paths use scalar loads. */
#ifndef CT_KERNELS_H
#define CT_KERNELS_H

/* Pooling takes the window geometry the CPU code and the layers use (plain C). */
#include "base/window.h"
/* The loss scaler's state, which the loss, the unscale pass and the optimizers read in device memory. */
#include "base/scaler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The per-step scalars in device memory, written by the backend before each step (in stream
 * order) and read by the captured kernels, so that a replayed CUDA graph sees this step's values. */
typedef struct ct_device_step {
    float lr;
    float bias1, bias2;             /* Adam's bias corrections 1 - beta1^t, 1 - beta2^t */
    int samples;                    /* the global batch's samples, over every replica (sync_bn's
                                     * running variance is unbiased by its rows) */
    unsigned long long dropout_seed;
    unsigned long long first_sample; /* the global batch's index of the replica's first sample */
} ct_device_step;

/* ---- elementwise (kernels/elementwise.cu) ---- */

/* y: (rows, c) fp32, in place; bias: (c) fp32 or NULL.
 * y = act(y + bias), act a ct_activation (0 linear, 1 relu, 2 leaky 0.1, 3 sigmoid, 4 tanh,
 * 5 gelu with erf). NaN propagates through every activation, so finite checks still see it. */
int ct_launch_bias_activation_forward(float *y, const float *bias, long rows, int c, int act,
                                      void *stream);

/* The same with the pre-activation kept apart, for a layer whose activation's gradient needs its
 * input (gelu): z: (rows, c) fp32, the layer's product, read; bias: (c) fp32 or NULL; y: (rows, c)
 * fp32, either z itself (then exactly ct_launch_bias_activation_forward) or not overlapping it.
 * In one pass: v = z + bias; y = act(v); and z = v when y is apart. */
int ct_launch_bias_activation_keep(float *z, const float *bias, float *y, long rows, int c, int act,
                                   void *stream);
/* The same two with z, y: (rows, c) `dtype`; bias: (c) `bias_dtype` (the fp32 master or its half
 * copy) or NULL. v = widen(z) + widen(bias) in fp32; z = round(v) when kept; y = round(act(v)).
 * The float4 path serves fp32 with an fp32 bias only. */
int ct_launch_bias_activation_forward_dt(void *y, const void *bias, long rows, int c, int act, int dtype,
                                         int bias_dtype, void *stream);
int ct_launch_bias_activation_keep_dt(void *z, const void *bias, void *y, long rows, int c, int act, int dtype,
                                      int bias_dtype, void *stream);


/* x, y: (n) fp32; y = act(x); y may equal x. */
int ct_launch_activation_forward(const float *x, float *y, long n, int act, void *stream);
/* x, y: (n) dtype. Linear with y apart from x is a device-to-device copy of the bits. */
int ct_launch_activation_forward_dt(const void *x, void *y, long n, int act, int dtype, void *stream);

/* x: the activation's input, y: its output, dy, dx: (n) fp32.
 * dx = (accumulate ? dx : 0) + dy * act'(x). relu and leaky read y (y > 0 exactly when x > 0), so
 * a producer that fused the activation into its epilogue need not keep x (x may be NULL for
 * them); sigmoid and tanh read y; gelu reads x. */
int ct_launch_activation_backward(const float *x, const float *y, const float *dy, float *dx, long n,
                                  int act, int accumulate, void *stream);
/* x, y, dy, dx: (n) dtype; the sum (accumulate ? dx : 0) + dy * act'(x) formed in fp32, rounded once. */
int ct_launch_activation_backward_dt(const void *x, const void *y, const void *dy, void *dx, long n, int act,
                                     int accumulate, int dtype, void *stream);

/* a, b, y: (n); y = a + b (y may equal a or b). */
int ct_launch_add(const float *a, const float *b, float *y, long n, void *stream);
/* a, b, y: (n) dtype */
int ct_launch_add_dt(const void *a, const void *b, void *y, long n, int dtype, void *stream);

/* dy, dx: (n); dx = (accumulate ? dx : 0) + dy. */
int ct_launch_accumulate(const float *dy, float *dx, long n, int accumulate, void *stream);
/* dy: (n) dy_dtype; dx: (n) dx_dtype; the two may differ (the fp32 output layer's dx is half while
 * its dy is fp32, and the reverse at a half layer feeding it). */
int ct_launch_accumulate_dt(const void *dy, void *dx, long n, int accumulate, int dy_dtype, int dx_dtype,
                            void *stream);

/* x: (n) x_dtype; y: (n) y_dtype = x rounded to y_dtype (to nearest even; exact when widening).
 * The same dtype is a copy of the bits (nothing when y == x). Used for the inputs and the half
 * weight copy's first fill (the optimizers keep it up to date after that). */
int ct_launch_cast(const void *x, void *y, long n, int x_dtype, int y_dtype, void *stream);

/* dy: (rows, c); db: (c) = column sums of dy (written: a bias gradient has one writer per step),
 * summed in double in a fixed order (no atomics: the same input gives the same bits every run).
 * One block per 32 columns: right for dense layers' bias gradients (rows = batch). */
int ct_launch_column_sums(const float *dy, float *db, long rows, int c, void *stream);
/* The same for tall matrices (a convolution's bias gradient: rows = n * oh * ow, few columns), in
 * two deterministic passes through `workspace` (up to 1024 * c doubles, 8-byte aligned); falls
 * back to ct_launch_column_sums when the workspace is too small or the matrix short. */
int ct_launch_column_sums_tall(const float *dy, float *db, long rows, int c, void *workspace,
                               size_t workspace_bytes, void *stream);
/* The same two with dy: (rows, c) dtype (half activations' gradients); db stays (c) fp32: the
 * widened values summed in double as above. */
int ct_launch_column_sums_dt(const void *dy, float *db, long rows, int c, int dtype, void *stream);
int ct_launch_column_sums_tall_dt(const void *dy, float *db, long rows, int c, void *workspace,
                                  size_t workspace_bytes, int dtype, void *stream);

/* Inverted dropout, the CPU backend's masks exactly: element i is kept when
 * ct_uniform(step->dropout_seed, stream_id, i) >= rate (engine/base/rng.h), and kept values are
 * scaled by 1 / (1 - rate). x, y: (n) fp32; mask: (n) 1 kept, 0 dropped. step: device memory. */
int ct_launch_dropout_forward(const float *x, float *y, unsigned char *mask, long n, float rate,
                              const ct_device_step *step, unsigned long long stream_id, void *stream);
/* dy, mask, dx: (n); dx = (accumulate ? dx : 0) + (mask ? dy / (1 - rate) : 0) */
int ct_launch_dropout_backward(const float *dy, const unsigned char *mask, float *dx, long n, float rate,
                               int accumulate, void *stream);
/* The same two with x, y, dy, dx: (n) dtype; the masks are the fp32 launchers' bit for bit (they
 * depend on the seed and the index only). With per_sample (elements per sample) > 0, element i
 * draws as element step->first_sample * per_sample + i: a replica's slice takes the masks of its
 * samples' places in the global batch, as the CPU backend's do. */
int ct_launch_dropout_forward_dt(const void *x, void *y, unsigned char *mask, long n, float rate,
                                 const ct_device_step *step, unsigned long long stream_id, long per_sample, int dtype,
                                 void *stream);
int ct_launch_dropout_backward_dt(const void *dy, const unsigned char *mask, void *dx, long n, float rate,
                                  int accumulate, int dtype, void *stream);

/* Zero padding at the bottom and right, for the asymmetric 'same' padding that cuDNN cannot
 * express: x (n, h, w, c) -> xp (n, hp, wp, c), hp >= h, wp >= w, x in the top-left corner,
 * zeros elsewhere (xp is fully written). */
int ct_launch_pad_nhwc(const float *x, float *xp, int n, int h, int w, int c, int hp, int wp, void *stream);
/* The gradient back through it: dx (n, h, w, c) = (accumulate ? dx : 0) + dxp[:, :h, :w, :] of
 * dxp (n, hp, wp, c). */
int ct_launch_crop_accumulate_nhwc(const float *dxp, float *dx, int n, int h, int w, int c, int hp, int wp,
                                   int accumulate, void *stream);
/* The same two with x, xp, dxp, dx in dtype. */
int ct_launch_pad_nhwc_dt(const void *x, void *xp, int n, int h, int w, int c, int hp, int wp, int dtype,
                          void *stream);
int ct_launch_crop_accumulate_nhwc_dt(const void *dxp, void *dx, int n, int h, int w, int c, int hp, int wp,
                                      int accumulate, int dtype, void *stream);

/* ---- pooling (kernels/pool.cu), the CPU backend's semantics exactly ---- */

/* d: input (n, h, w, c), window kh x kw every `stride`, padding before (pad_t, pad_l), output
 * (n, oh, ow, c): a pool writes as many channels as it reads, so d->f must equal d->c.
 * x: (n, h, w, c); y, argmax: (n, oh, ow, c). The window is clipped to the input (padding never
 * read); its first cell seeds the max and later cells replace it only when strictly greater;
 * argmax is the index within the sample's (h, w, c) volume; a window wholly in the padding gives
 * 0 and argmax -1. */
int ct_launch_maxpool_forward(const ct_window_geom *d, const float *x, float *y, int *argmax, void *stream);
/* dy, argmax: (n, oh, ow, c); dx (n, h, w, c) = (accumulate ? dx : 0) + dy at each argmax, as a
 * gather (each input cell adds the windows that picked it, in a fixed order): deterministic even
 * where windows overlap, and every cell written. */
int ct_launch_maxpool_backward(const ct_window_geom *d, const float *dy, const int *argmax, float *dx,
                               int accumulate, void *stream);
/* Average over the window's cells inside the input (padding not counted). */
int ct_launch_avgpool_forward(const ct_window_geom *d, const float *x, float *y, void *stream);
/* dx = (accumulate ? dx : 0) + dy / count spread over each window's cells inside the input. */
int ct_launch_avgpool_backward(const ct_window_geom *d, const float *dy, float *dx, int accumulate,
                               void *stream);
/* The same four with x, y, dy, dx in dtype (argmax stays int): comparisons, sums and the
 * division by the count in fp32 on the widened values, each output rounded once. */
int ct_launch_maxpool_forward_dt(const ct_window_geom *d, const void *x, void *y, int *argmax, int dtype,
                                 void *stream);
int ct_launch_maxpool_backward_dt(const ct_window_geom *d, const void *dy, const int *argmax, void *dx,
                                  int accumulate, int dtype, void *stream);
int ct_launch_avgpool_forward_dt(const ct_window_geom *d, const void *x, void *y, int dtype, void *stream);
int ct_launch_avgpool_backward_dt(const ct_window_geom *d, const void *dy, void *dx, int accumulate, int dtype,
                                  void *stream);

/* ---- optimizers (kernels/optim.cu), torch.optim's formulas as the CPU backend's ---- */

/* w, g: (n) fp32; vel: (n) fp32 momentum buffer, zeroed before the first step, or NULL when
 * momentum == 0. The learning rate is step->lr (device memory). PyTorch's SGD (dampening 0):
 *   g' = g + weight_decay * w
 *   vel = momentum * vel + g'                       (only when momentum != 0)
 *   upd = momentum == 0 ? g' : nesterov ? g' + momentum * vel : vel
 *   w -= lr * upd
 * each product and sum rounded on its own in that order (no FMA), as the CPU backend's
 * ct_cpu_sgd_step: the same inputs give its bits. The decay product is formed even when
 * weight_decay == 0, as the CPU does.
 * Nesterov needs momentum != 0 and momentum != 0 needs vel: else cudaErrorInvalidValue. */
int ct_launch_sgd_step(float *w, const float *g, float *vel, long n, const ct_device_step *step,
                       float momentum, int nesterov, float weight_decay, void *stream);

/* w, g, m, v: (n) fp32; lr, bias1, bias2 from step (device memory). decoupled = 0: Adam with L2
 * (g' = g + wd * w); decoupled = 1: AdamW (w *= 1 - lr * wd first). Then
 *   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
 *   w -= (lr / bias1) * m / (sqrt(v) * (1 / sqrt(bias2)) + eps)
 * with lr / bias1 and 1 / sqrt(bias2) formed in double and rounded once, as ct_cpu_adam_step. */
int ct_launch_adam_step(float *w, const float *g, float *m, float *v, long n, const ct_device_step *step,
                        float beta1, float beta2, float eps, float weight_decay, int decoupled, void *stream);

/* Mixed precision's forms of the two (the plain launchers are these with scaler = w_half = NULL).
 * w, g and the moments stay fp32 (the masters); lr is still step->lr.
 * scaler: the loss scaler in device memory, or NULL. When given, every thread reads its verdict
 * first: scaler->nonfinite != 0 (the unscale pass found an inf or NaN gradient) and the kernel
 * changes nothing at all (w, vel, m, v, w_half keep their bits). Else the update runs, and Adam
 * takes t = scaler->applied_steps + 1 with bias corrections (float)(1 - pow(beta, t)) formed in
 * double in the kernel, as the CPU backend's ct_cpu_adam_step (step->bias1, bias2 are not read),
 * so a skipped step does not advance t. ct_launch_scaler_update must run after it in stream order.
 * w_half: (n) half_dtype (CT_DTYPE_F16 or CT_DTYPE_BF16, else cudaErrorInvalidValue), or NULL:
 * after the update w_half[i] = round(w[i]), the half copy the forward pass reads; half_dtype is
 * ignored without it. */
int ct_launch_sgd_step_dt(float *w, const float *g, float *vel, long n, const ct_device_step *step, float momentum,
                          int nesterov, float weight_decay, const ct_scaler *scaler, void *w_half, int half_dtype,
                          void *stream);
int ct_launch_adam_step_dt(float *w, const float *g, float *m, float *v, long n, const ct_device_step *step,
                           float beta1, float beta2, float eps, float weight_decay, int decoupled,
                           const ct_scaler *scaler, void *w_half, int half_dtype, void *stream);

/* s: (1) device memory. One thread runs ct_scaler_update (engine/base/scaler.h): counts the step
 * applied or skipped, halves or doubles the scale, clears the verdict. Enqueue it after every
 * optimizer launch of the step (they read the verdict it clears) and before the next step's loss. */
int ct_launch_scaler_update(ct_scaler *s, void *stream);

/* ---- reductions (kernels/reduce.cu) ---- */

/* x: (n) fp32; *count (device) += the number of NaN or infinite elements. */
int ct_launch_count_nonfinite(const float *x, long n, unsigned *count, void *stream);

/* The loss scaler's unscale pass. g: (n) fp32 parameter gradients, in place; scaler: (1) device
 * memory. inv = 1.0f / scaler->loss_scale (IEEE division, once per thread); g = g * inv; then the number
 * of inf or NaN values AFTER the multiply is added to scaler->nonfinite (one atomicAdd per block
 * that found any): what is counted is what the optimizer would read, including a finite gradient
 * that a fixed scale below 1 overflows; inf and NaN stay non-finite through the multiply. Several
 * launches (one per gradient buffer) add into the same verdict. */
int ct_launch_unscale_gradients(float *g, long n, ct_scaler *scaler, void *stream);

/* ---- input augmentation (kernels/augment.cu) ---- */

/* src: (n, h, w, c) uint8, the batch's samples in batch order as stored (ct_make_batch_u8);
 * dst: (n, h, w, c) fp32, every element written; scale, bias: (c) fp32 in HOST memory (copied into
 * the launch's arguments, so the caller's arrays may change once this returns), c <= 4.
 * The CPU batcher's crop, flip and normalisation bit for bit: dst equals what ct_make_batch
 * (data/batch.c) writes for the same samples, with crop_pad and flip those of its ct_augment,
 * scale[c] = 1 / (255 * std[c]) and bias[c] = -mean[c] / std[c] computed in float, and the same
 * augmenting and augment_seed. Sample i of src draws r = ct_hash3(augment_seed, first_sample + i, 0),
 * first_sample being src's place in the batch the pipeline made (a replica's slice of the global
 * batch draws what one replica drawing the whole batch would); with
 * span = 2 * crop_pad + 1 its window origin in the image padded by crop_pad zero pixels is
 * dy = (r & 0xffff) % span, dx = ((r >> 16) & 0xffff) % span, and the window is mirrored when
 * flip && ((r >> 32) & 1); then dst = (float)pixel * norm_scale[c] + norm_bias[c], rounded after the multiply
 * and after the add (no FMA), the padding read as pixel 0. augmenting = 0 (evaluation): no crop
 * and no flip, only the normalisation. Negative sizes or crop_pad, c > 4, a sample of more than
 * INT_MAX elements, a negative first_sample, or NULL pointers with work to do: cudaErrorInvalidValue. */
int ct_launch_augment_u8(const unsigned char *src, float *dst, int n, int h, int w, int c, int crop_pad,
                         int flip, int augmenting, const float *norm_scale, const float *norm_bias,
                         unsigned long long augment_seed, long first_sample, void *stream);

/* ---- decoded images (kernels/image_resize.cu; [data] decode = gpu) ---- */

/* src: a decoded image, (src_h, src_w, c) uint8 interleaved, rows src_pitch bytes apart; dst:
 * (out_h, out_w, c) uint8. The region (rx, ry, rw, rh) of src resampled to out_w x out_h (each
 * axis area-averaged when it shrinks, bilinear when it grows, with data/image_resize.c's geometry
 * but float weights: within a rounding step of the CPU's bytes, not equal to them) and mirrored
 * left to right when flip. c 1..4; a region outside src or NULL pointers: cudaErrorInvalidValue. */
int ct_launch_resize_region_u8(const unsigned char *src, int src_w, int src_h, size_t src_pitch, int c, int rx,
                               int ry, int rw, int rh, int flip, unsigned char *dst, int out_w, int out_h,
                               void *stream);
/* The kernel's arithmetic run on the host, pixel for pixel the same bytes (host memory; no GPU
 * needed): what tests check the kernel's geometry with on a machine without one. */
int ct_resize_region_u8_host(const unsigned char *src, int src_w, int src_h, size_t src_pitch, int c, int rx, int ry,
                             int rw, int rh, int flip, unsigned char *dst, int out_w, int out_h);

/* ---- loss (kernels/loss.cu) ---- */

/* logits: (n, k) fp32; labels: (n) int in [0, k); dlogits: (n, k) fp32 or NULL (evaluation);
 * loss_sum: (1) fp32 device accumulator or NULL; correct: (1) device counter or NULL.
 * One kernel pass per row: a numerically stable softmax, then
 *   dlogits = (softmax - onehot(label)) * grad_scale      (overwritten, not accumulated)
 *   *loss_sum += -log softmax[label]                      (atomicAdd; the caller zeroes it)
 *   *correct  += argmax == label                          (first maximum wins ties)
 * Accumulating on the device lets the trainer read the loss back asynchronously every few steps
 * instead of synchronising each one. The float sum's last bits depend on the order of atomics.
 * A label outside [0, k) adds NaN to *loss_sum (so the loss check reports it) and leaves the
 * one-hot out of its row's gradient. */
int ct_launch_softmax_xent(const float *logits, const int *labels, float *dlogits, float *loss_sum,
                           unsigned *correct, int n, int k, float grad_scale, void *stream);
/* The same with the loss scale: scaler (1) in device memory, read by the kernel (a replayed graph
 * sees the current scale), or NULL (then exactly ct_launch_softmax_xent, bit for bit).
 *   dlogits = ((softmax - onehot(label)) * grad_scale) * scaler->loss_scale    (two roundings, in that order)
 * The logits stay fp32 (the output layer is fp32 in mixed precision); the loss is not scaled. */
int ct_launch_softmax_xent_scaled(const float *logits, const int *labels, float *dlogits, float *loss_sum,
                                  unsigned *correct, int n, int k, float grad_scale, const ct_scaler *scaler,
                                  void *stream);

/* ---- batchnorm.cu: batch norm step by step (sync_bn = on, and bf16: engine/cuda/batchnorm.c) ----
 *
 * The CPU backend's synced batch norm (engine/cpu/batchnorm.c) step by step, so that the trainer's
 * hook can average each per-channel figure over the replicas in between (with no hook, the batch
 * norm of one replica's own statistics: bf16, which cuDNN's legacy calls do not document), and its
 * evaluation from the running statistics. x, y, dy, dx: (rows, c)
 * NHWC in `dtype`; every per-channel vector (c) fp32. Per-channel sums are accumulated in double,
 * as the CPU does (the GPU's double is exact IEEE arithmetic, and these reductions are memory-bound),
 * over chunks of rows whose partial sums go to `workspace` and are then added in chunk order: no
 * atomics, a launch shape that depends only on (rows, c) and the workspace's size, so the same input
 * gives the same bits every run. rows may be 0 (a replica with no samples still takes part): the
 * per-channel results are then 0, as on the CPU, and nothing is read. */

/* Workspace bytes the per-channel sums of (rows, c) use at most (8-byte aligned). A smaller
 * workspace takes fewer, longer chunks; one with room for not even one chunk is refused. */
size_t ct_bn_sums_workspace(long rows, int c);

/* mean[j] = (float)(sum_i x[i][j] / rows), 0 when rows is 0. */
int ct_launch_bn_mean_dt(const void *x, float *mean, long rows, int c, void *workspace, size_t workspace_bytes,
                         int dtype, void *stream);
/* var[j] = (float)(sum_i (x[i][j] - mean[j])^2 / rows), about the given (global) mean; 0 when rows
 * is 0. var may not be mean. */
int ct_launch_bn_variance_dt(const void *x, const float *mean, float *var, long rows, int c, void *workspace,
                             size_t workspace_bytes, int dtype, void *stream);
/* Training forward's end, given the global batch's mean (save_mean) and biased variance (held in
 * save_invstd, replaced): invstd = 1 / sqrt(var + eps) in double, save_invstd = invstd, running
 * mean and variance moved by momentum (the variance times n / (n - 1), 1 when n <= 1), then
 * y = x * scale + shift with scale = gamma invstd, shift = beta - mean gamma invstd (fp32, no
 * fused multiply-add, rounded to dtype once). coef: (2c) fp32 scratch for scale and shift. n, the
 * batch's rows: *samples * per_sample when samples is given (device memory, read when the kernel
 * runs: the global batch's samples, which a replayed graph must take from the step, not from its
 * capture; per_sample >= 1), else rows. */
int ct_launch_bn_normalise_dt(const void *x, void *y, const float *gamma, const float *beta, const float *save_mean,
                              float *save_invstd, float *run_mean, float *run_var, float *coef, long rows, int c,
                              const int *samples, long per_sample, float momentum, float eps, int dtype,
                              void *stream);
/* Evaluation: y = x * scale + shift with scale = gamma / sqrt(run_var + eps) and shift = beta -
 * run_mean scale, formed in double and rounded to fp32 once (the CPU's forward_eval), then the
 * normalise pass's arithmetic. coef: (2c) fp32 scratch for scale and shift. */
int ct_launch_bn_inference_dt(const void *x, void *y, const float *gamma, const float *beta, const float *run_mean,
                              const float *run_var, float *coef, long rows, int c, float eps, int dtype, void *stream);
/* Backward's per-channel sums: sums[j] = sum_i dy, sums[c + j] = sum_i dy (x - mean[j]) (sums:
 * (2c)); dgamma[j] = sums[c + j] invstd[j] and dbeta[j] = sums[j] (each written, from the double
 * sums; either may be NULL). */
int ct_launch_bn_backward_sums_dt(const void *x, const void *dy, const float *mean, const float *invstd, float *sums,
                                  float *dgamma, float *dbeta, long rows, int c, void *workspace,
                                  size_t workspace_bytes, int dtype, void *stream);
/* dx = (accumulate ? dx : 0) + k (dy - a - (x - mean) b) with k = gamma invstd, a = sums[j] / rows,
 * b = sums[c + j] invstd^2 / rows (formed in double, rounded to fp32 once each: `rows` is this
 * replica's own, sums the replicas' weighted mean). coef: (3c) fp32 scratch for k, a, b. */
int ct_launch_bn_backward_dx_dt(const void *x, const void *dy, const float *gamma, const float *mean,
                                const float *invstd, const float *sums, void *dx, float *coef, long rows, int c,
                                int accumulate, int dtype, void *stream);

/* ---- comm.cu: around NCCL's all-reduce (engine/cuda/comm_nccl.c) ---- */

/* One thread: *total = samples when total is given, then *counter += 1 with a system-wide fence
 * (counter: mapped host memory a host watchdog polls, or NULL). */
int ct_launch_comm_mark(unsigned *counter, int *total, int samples, void *stream);
/* t: (n) fp32 scaled in place by samples / *total (total: device memory, the sum of every rank's
 * samples; when it is 0, by 1 / size), so that summing the ranks' t gives the mean over the
 * global batch. */
int ct_launch_comm_share(float *t, long long n, const int *total, int samples, int size, void *stream);

#ifdef __cplusplus
}
#endif

#endif
