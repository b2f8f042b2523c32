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
 *  - activations use the values of ct_activation in engine/types.h. */
#ifndef CT_KERNELS_H
#define CT_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise (kernels/elementwise.cu) ---- */

/* y: (rows, c) fp32, in place; bias: (c) fp32 or NULL.
 * y = act(y + bias), act a ct_activation (0 linear, 1 relu, 2 leaky 0.1, 3 sigmoid, 4 tanh,
 * 5 gelu with erf). NaN propagates through every activation, so finite checks still see it. */
int ct_launch_bias_activation_forward(float *y, const float *bias, long rows, int c, int act,
                                      void *stream);

/* w, g: (n) fp32; vel: (n) fp32 momentum buffer, zeroed before the first step, or NULL when
 * momentum == 0. PyTorch's SGD (dampening 0):
 *   g' = g + weight_decay * w
 *   vel = momentum * vel + g'                       (only when momentum != 0)
 *   step = momentum == 0 ? g' : nesterov ? g' + momentum * vel : vel
 *   w -= lr * step
 * A zeroed vel makes the first step vel = g', PyTorch's first-step buffer. Nesterov needs
 * momentum != 0 (as PyTorch insists) and momentum != 0 needs vel: else cudaErrorInvalidValue. */
int ct_launch_sgd_step(float *w, const float *g, float *vel, long n, float lr, float momentum,
                       int nesterov, float weight_decay, void *stream);

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

#ifdef __cplusplus
}
#endif

#endif
