/* The CPU backend's kernels: plain functions over float32 NHWC buffers, the reference every
 * other backend is tested against.
 *
 * Conventions:
 *  - activations are NHWC; dense weights are (out, in) row-major as in PyTorch's Linear;
 *    conv weights are (F, KH, KW, C), cuDNN's NHWC filter layout.
 *  - backward WRITES its parameter gradients (dw, db, dgamma, dbeta: one writer per step) and
 *    writes or, with `accumulate`, adds into dx: a tensor read by several layers gets its
 *    gradient written by the first consumer in backward order and added to by the others, so
 *    nothing is cleared per step. Writing computes 0 + v where an addition would compute
 *    dx + v, the arithmetic of adding into a cleared buffer: the bits are those of clearing
 *    first (a -0 comes out +0 either way); only the matrix products' beta = 0 may leave a -0
 *    where beta = 1 over zeros gave +0. A NULL dx skips it.
 *  - nothing here allocates; workspaces are passed in. OpenBLAS does matrix products, OpenMP the
 *    rest.
 *  - a layer type's kernels live in its file (engine/cpu/<type>.c) with its ops; those several
 *    types share (activations, bias, accumulation) in elementwise.c. */
#ifndef CT_CPU_OPS_H
#define CT_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "base/types.h"
#include "base/window.h"

/* `keep ? a : b` by masking the bits: the same value as the conditional, but with no branch for
 * the compiler to keep, so the loops around it vectorise (a branch on the sign of each element,
 * as in relu's gradient, is mispredicted half the time). */
static inline float ct_cpu_select(int keep, float a, float b)
{
    uint32_t ua, ub, mask = -(uint32_t)(keep != 0);
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    uint32_t u = (ua & mask) | (ub & ~mask);
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

/* Below this many elements an OpenMP parallel region costs more than it saves. */
#define CT_CPU_PAR_MIN 32768

/* ---- dense ---- */
/* x: (n, k); w: (m, k); b: (m) or NULL; y: (n, m) = x w^T + b; ws: ws_floats floats or NULL. With
 * fewer than ct_cpu_dense_workspace(n, m), the product goes straight into y (maybe slower: gemm.h). */
void ct_cpu_dense_forward(const float *x, const float *w, const float *b, float *y, int n, int k, int m, float *ws,
                          size_t ws_floats);
size_t ct_cpu_dense_workspace(int n, int m);
/* dy: (n, m); dx: (n, k) = (+= with accumulate) dy w; dw: (m, k) = dy^T x; db: (m) = column sums
 * of dy (NULL: none) */
void ct_cpu_dense_backward(const float *x, const float *w, const float *dy, float *dx, float *dw,
                           float *db, int n, int k, int m, int accumulate);

/* ---- conv2d (im2col + GEMM) ---- */
/* Floats of workspace the conv functions need (im2col of the whole batch). */
size_t ct_cpu_conv2d_workspace(const ct_window_geom *g);
/* x: (n, h, w, c); w: (f, kh, kw, c); b: (f) or NULL; y: (n, oh, ow, f); ws: workspace */
void ct_cpu_conv2d_forward(const ct_window_geom *g, const float *x, const float *w, const float *b,
                           float *y, float *ws);
/* dy: (n, oh, ow, f); dx = (+= with accumulate) ..., dw = ..., db = ... (dx or db may be NULL) */
void ct_cpu_conv2d_backward(const ct_window_geom *g, const float *x, const float *w, const float *dy,
                            float *dx, float *dw, float *db, float *ws, int accumulate);
/* 1 when at most a sixteenth of dz's count values are non-zero: the share at which the backward
 * below beats the dense kernels with room to spare (cpu/conv_sparse.c). */
int ct_cpu_grad_is_sparse(const float *dz, size_t count);
/* 1 when g's kernel rows (kw * c floats) hold a whole vector of 16: narrower ones leave the sparse
 * backward's loops scalar, slower than the dense kernels whatever the share (a first layer's 5x5
 * over one channel). */
int ct_cpu_conv2d_sparse_suits(const ct_window_geom *g);
size_t ct_cpu_conv2d_sparse_workspace_bytes(const ct_window_geom *g);
/* The same gradients as ct_cpu_conv2d_backward (dy there), from dz's non-zero entries alone: dx
 * (+= with accumulate), dw and db written, each may be NULL; ws: the bytes above. Sums run in
 * another order than the dense kernels', the same for any thread count. */
void ct_cpu_conv2d_sparse_backward(const ct_window_geom *g, const float *x, const float *w, const float *dz,
                                   float *dx, float *dw, float *db, void *ws, int accumulate);

/* ---- pooling (g->f, the output channels, equals g->c) ---- */
/* x: (n, h, w, c); y: (n, oh, ow, c); argmax: (n, oh, ow, c) index of the max within its sample's
 * (h, w, c) volume, for backward. Padding never wins. */
void ct_cpu_maxpool_forward(const ct_window_geom *g, const float *x, float *y, int32_t *argmax);
/* dx (n, h, w, c) = (+= with accumulate) dy routed to each window's maximum. relu_y: NULL, or the
 * pool's output y (n, oh, ow, c) when its input is a relu's output: then relu's gradient is applied
 * as well (dy routed only where the maximum is positive), the result relu's backward would give. */
void ct_cpu_maxpool_backward(const ct_window_geom *g, const float *dy, const int32_t *argmax, const float *relu_y,
                             float *dx, int accumulate);
/* Average over the window's cells inside the input (padding not counted). */
void ct_cpu_avgpool_forward(const ct_window_geom *g, const float *x, float *y);
/* dx (n, h, w, c) = (+= with accumulate) dy shared evenly over each window's input cells. */
void ct_cpu_avgpool_backward(const ct_window_geom *g, const float *dy, float *dx, int accumulate);

/* ---- batch norm: statistics per channel over rows = n*h*w ---- */
/* x, y: (rows, c); gamma, beta: (c); save_mean, save_invstd: (c) out, kept for backward;
 * running stats updated as run = (1 - momentum) * run + momentum * batch (unbiased variance),
 * PyTorch's convention. relu: y = max(0, the normalised x) in the same pass. */
void ct_cpu_batchnorm_forward_train(const float *x, const float *gamma, const float *beta, float *y,
                                    float *save_mean, float *save_invstd, float *run_mean,
                                    float *run_var, int rows, int c, float momentum, float eps, int relu);
/* y = gamma (x - run_mean) / sqrt(run_var + eps) + beta, with relu max(0, that) */
void ct_cpu_batchnorm_forward_eval(const float *x, const float *gamma, const float *beta,
                                   const float *run_mean, const float *run_var, float *y, int rows,
                                   int c, float eps, int relu);
/* dy: (rows, c), the output's gradient (with relu: after the fused relu, whose mask is recomputed
 * from x, gamma, beta and the saved statistics as forward_train computed it); dx = (+= with
 * accumulate) ...; dgamma, dbeta: (c) = ... */
void ct_cpu_batchnorm_backward(const float *x, const float *gamma, const float *beta, const float *dy,
                               const float *save_mean, const float *save_invstd, float *dx,
                               float *dgamma, float *dbeta, int rows, int c, int accumulate, int relu);

/* ---- elementwise, shared by several layer types ---- */
/* y = act(x), n elements; y may equal x */
void ct_cpu_activation_forward(ct_activation act, const float *x, float *y, size_t n);
/* dx = (accumulate ? dx : 0) + dy * act'(x); x is the activation's input, y its output. sigmoid
 * and tanh read y, gelu reads x, relu and leaky read x and accept y in its place
 * (ct_activation_grad_needs_input). */
void ct_cpu_activation_backward(ct_activation act, const float *x, const float *y, const float *dy,
                                float *dx, size_t n, int accumulate);
/* One pass for a layer's bias and fused activation: v = z + b (b NULL: v = z), y = act(v); z keeps
 * v where it is not y (gelu's pre-activation). y may equal z. */
void ct_cpu_bias_activation(ct_activation act, float *z, const float *b, float *y, size_t rows, int c);
/* Adds b to each row: y (rows, c) += b (c) */
void ct_cpu_add_bias(float *y, const float *b, size_t rows, int c);
/* Bias gradient: db (c) = column sums of dy (rows, c). */
void ct_cpu_column_sums(const float *dy, float *db, size_t rows, int c);
/* dx = (accumulate ? dx : 0) + dy */
void ct_cpu_accumulate(const float *dy, float *dx, size_t n, int accumulate);
/* 1 if all n values are finite */
int ct_cpu_all_finite(const float *x, size_t n);

/* ---- residual add ---- */
/* y = a + b */
void ct_cpu_add_forward(const float *a, const float *b, float *y, size_t n);

/* ---- dropout ---- */
/* Inverted dropout: keep element i when ct_uniform(seed, stream, i) >= rate, scale kept by
 * 1/(1-rate). mask: (n) 1 kept, 0 dropped. */
void ct_cpu_dropout_forward(const float *x, float *y, uint8_t *mask, size_t n, float rate,
                            uint64_t seed, uint64_t stream);
/* dx = (accumulate ? dx : 0) + dy * mask / (1 - rate) */
void ct_cpu_dropout_backward(const float *dy, const uint8_t *mask, float *dx, size_t n, float rate,
                             int accumulate);

/* ---- loss ---- */
/* logits: (n, k); labels: (n); dlogits: (n, k) = (softmax - onehot) * grad_scale (overwritten,
 * may be NULL); returns the summed loss; *correct gets the count of argmax == label. */
double ct_cpu_softmax_xent(const float *logits, const int32_t *labels, float *dlogits, int n, int k,
                           float grad_scale, long *correct);

/* ---- optimizers over one flat buffer ---- */
/* SGD with optional (heavy-ball or Nesterov) momentum and L2 weight decay folded into the
 * gradient, PyTorch's torch.optim.SGD. vel may be NULL when momentum is 0. */
void ct_cpu_sgd_step(float *w, const float *g, float *vel, size_t n, float lr, float momentum,
                     int nesterov, float weight_decay);
/* Adam (decoupled = 0, weight decay as L2 added to the gradient, torch.optim.Adam) or AdamW
 * (decoupled = 1, w -= lr * wd * w, torch.optim.AdamW). t: the step number, from 1. */
void ct_cpu_adam_step(float *w, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int decoupled, long t);
/* g (n) *= inv_loss_scale; returns how many of the results are not finite. */
long ct_cpu_unscale(float *g, size_t n, float inv_loss_scale);
/* h (n) = w rounded to fp16 (half = CT_DTYPE_F16) or bf16, to nearest even. */
void ct_cpu_round_params(const float *w, uint16_t *h, size_t n, int half_dtype);

#endif
