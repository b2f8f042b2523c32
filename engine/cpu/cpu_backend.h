/* Private to the CPU backend: what the per-type files (engine/cpu/<type>.c) need from the backend
 * (backend.c), and the helpers of the types that fuse an activation. */
#ifndef CT_CPU_BACKEND_H
#define CT_CPU_BACKEND_H

#include "backend.h"
#include "cpu/cpu_ops.h"
#include "cpu/onednn.h"
#include "graph/layer.h"

/* The backend's state (be->impl). workspace and scratch come from reserve. */
typedef struct ct_cpu_state {
    float *workspace;        /* shared by all layers: im2col of the largest convolution, or oneDNN's
                              * scratchpads and weight copies */
    size_t workspace_bytes;  /* reserved */
    ct_cpu_dnnl *dnnl;       /* oneDNN's engine and primitives; NULL without oneDNN (onednn.h) */
    int winograd;            /* 1: oneDNN may run 3x3 convolutions as Winograd ([train] winograd) */
    int sparse_backward;     /* 1: a convolution whose output gradient is mostly zeros runs its
                              * backward over the non-zeros ([train] sparse_backward) */
    float *scratch;          /* (n, largest layer output): gradient before a fused activation */
    ct_step_scalars step;    /* of the step being run */
    ct_scaler scaler;        /* fp16's loss scaler, with loss_scaling on */
    int loss_scaling;        /* 1: the loss scales dlogits and unscale divides the gradients */
    float *f16_values;       /* (65536) the fp32 value of every fp16 bit pattern (ct_f32_from_f16):
                              * the half path widens by lookup */
    double loss_sum;         /* metric accumulators */
    long correct;
} ct_cpu_state;

static inline ct_cpu_state *ct_cpu_of(ct_backend *be) { return be->impl; }

/* Elements of the layer's output for a batch of n. */
static inline size_t ct_cpu_out_count(const ct_layer *l, int n) { return (size_t)n * ct_shape_size(l->out); }

/* The per-type ops, one file each, tabled by backend.c. */
#define CT_CPU_DECLARE_OPS(upper, lower) extern const ct_layer_ops ct_cpu_##lower##_ops;
CT_LAYER_TYPES(CT_CPU_DECLARE_OPS)
#undef CT_CPU_DECLARE_OPS
/* 1 when conv2d layer l runs on oneDNN at batch n, 0 on im2col (conv2d.c): what its passes ask,
 * for the tests that must know which path they checked; ct_cpu_conv2d_path names it: "im2col",
 * "onednn" (its direct kernels) or "winograd" (oneDNN's, in the forward). */
int ct_cpu_conv2d_on_onednn(ct_backend *be, const ct_layer *l, int n);
const char *ct_cpu_conv2d_path(ct_backend *be, const ct_layer *l, int n);
/* 1 when conv2d layer l's backward at batch n runs over the non-zeros of dz, its pre-activation
 * gradient (n, out) (cpu/conv_sparse.c): what the backward asks, for the tests as well. */
int ct_cpu_conv2d_backward_is_sparse(ct_backend *be, const ct_layer *l, int n, const float *dz);
/* Any type: its fp32 ops on fp32 copies of the layer's fp16 / bf16 tensors (half.c). */
extern const ct_layer_ops ct_cpu_half_ops;

/* Types with a fused activation (dense, conv2d, add) compute z and call this to finish, one pass
 * over the output: z += b (b: (out.c) or NULL), y = act(z); nothing when linear without a bias
 * (z is y). */
void ct_cpu_fused_activation_forward(const ct_layer *l, int n, const float *b);
/* The gradient at the pre-activation: dy itself for linear or where the reader applied the
 * activation's gradient (ct_cpu_relu_grad_in_reader), else act'(z) dy in the scratch (written:
 * nothing is cleared first); valid until the next layer's backward. */
const float *ct_cpu_preactivation_grad(ct_backend *be, const ct_layer *l, int n);
/* 1 when l (dense, conv2d or add, fp32) ends in relu and its sole reader is a max pool, whose
 * backward then applies relu's gradient as it routes (pool.c): l's dy arrives as the
 * pre-activation gradient, and l's own relu pass is skipped. Both sides ask this. */
int ct_cpu_relu_grad_in_reader(const ct_layer *l);

/* fn(ctx) with subnormal floats flushed to zero on the calling thread and its OpenMP team, each
 * thread's mode restored after (denormals.c). */
ct_status ct_cpu_run_flushed(ct_step_fn fn, void *ctx, ct_err *err);

#endif
