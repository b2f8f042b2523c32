/* What the CUDA layer types (engine/cuda/<type>.c) share: the dtype check, error messages that
 * name the layer, the fused activation's two halves, and the staging of tensors whose dtype is not
 * the one the layer computes in.
 *
 * Mixed precision (the CPU half path, engine/cpu/half.c, is the reference): a layer computes in its
 * own dtype l->dtype, so its y, z and dy are already in it. An input of another dtype is cast into
 * the shared workspace first (an fp32 producer feeding a half layer: rounded to nearest even, as the
 * CPU rounds what a half layer reads; a half producer feeding an fp32 layer, the output layer or a
 * pinned one: widened, exactly). A gradient dx[k] of another dtype is computed into the workspace
 * in the layer's dtype and then written or added to dx[k] by ct_launch_accumulate_dt (fp32 sum,
 * one rounding). Where the CPU's fp32 op keeps an intermediate in fp32 that the GPU stores in half
 * (a half layer's gradient before its fused activation, a half gradient handed to an fp32
 * producer), the GPU rounds once more than the CPU: the parity tests' tolerances allow for it. */
#ifndef CT_CUDA_LAYER_COMMON_H
#define CT_CUDA_LAYER_COMMON_H

#include "cuda/cuda_internal.h"

/* Elements of the layer's output at batch n. */
static inline long ct_cuda_out_count(const ct_layer *l, int n)
{
    return (long)n * (long)ct_shape_size(l->out);
}

/* Elements of input k at batch n. */
static inline long ct_cuda_in_count(const ct_layer *l, int k, int n)
{
    return (long)n * (long)ct_shape_size(l->in_shapes[k]);
}

/* What every forward (and the backward of the library-backed types) checks first: n >= 0, and
 * tensors (y and every input) of fp32, fp16 or bf16 with at most one half type among them.
 * Failures name the layer. */
ct_status ct_cuda_check_layer(const ct_layer *l, int n, ct_err *err);

/* st, with the message a failure left in err prefixed by the layer's name. */
ct_status ct_cuda_named(const ct_layer *l, ct_status st, ct_err *err);

/* z, y: (n, out) l->dtype; y = act(z) for a layer that fuses an activation after its own work
 * (add; conv2d folds it into its bias pass, dense into its epilogue); nothing for linear. z is y
 * unless the activation's gradient needs the pre-activation (ct_layer_keeps_preactivation). */
ct_status ct_cuda_apply_activation(ct_backend *be, const ct_layer *l, int n, ct_err *err);

/* dy, z, y: (n, out) l->dtype. The gradient at the pre-activation into *dz (l->dtype): dy itself
 * for linear, else act' dy in the scratch (rounded once to l->dtype), act' taken from y (relu,
 * leaky, sigmoid, tanh) or z (gelu). */
ct_status ct_cuda_preactivation_grad(ct_backend *be, const ct_layer *l, int n, const void **dz, ct_err *err);

/* ---- staging in the shared workspace ---- */

/* A bump allocator over the workspace from byte `from` to its end; pieces 256-byte aligned. */
typedef struct ct_cuda_stage {
    char *next, *end;
} ct_cuda_stage;

/* Bytes a layer's staging may take at batch n: per input a copy of it and of its gradient (at
 * 4 bytes an element, the wider type), and a half copy of dw (conv2d's backward filter); 0 for a
 * layer with nothing half. Always a multiple of 256. */
size_t ct_cuda_stage_need(const ct_layer *l, int n);
void ct_cuda_stage_begin(ct_cuda *cu, size_t from, ct_cuda_stage *s);
/* bytes of the staging, or a failure when the workspace is too small. */
ct_status ct_cuda_stage_take(ct_cuda_stage *s, size_t bytes, void **out, ct_err *err);

/* x[k] as `dtype` ((n, in_k)): its own data when it has that dtype, else a cast copy in s. */
ct_status ct_cuda_input_as(ct_backend *be, const ct_layer *l, int k, int n, ct_dtype dtype, ct_cuda_stage *s,
                           const void **out, ct_err *err);

/* Where the gradient of input k, in `dtype`, is to go: dx[k] itself when it has that dtype
 * (*accumulate = l->dx_accumulate[k]), else a buffer in s (*accumulate = 0) that ct_cuda_grad_end
 * then writes or adds to dx[k]. *out = NULL when the input takes no gradient. */
ct_status ct_cuda_grad_begin(const ct_layer *l, int k, int n, ct_dtype dtype, ct_cuda_stage *s, void **out,
                             int *accumulate, ct_err *err);
// g: (n, in_k) dtype, from ct_cuda_grad_begin -> dx[k] written or added to (l->dx_accumulate)
ct_status ct_cuda_grad_end(ct_backend *be, const ct_layer *l, int k, int n, ct_dtype dtype, const void *g,
                           ct_err *err);

/* The opening of a one-input layer's forward: ct_cuda_check_layer, then x[0] as l->dtype (cast
 * into the staging when it has another). */
ct_status ct_cuda_forward_input(ct_backend *be, const ct_layer *l, int n, const void **x, ct_err *err);
/* The opening of a one-input layer's backward that reads no staged input: where the gradient of
 * x[0], in l->dtype, goes (ct_cuda_grad_begin, staging from the workspace's start). */
ct_status ct_cuda_backward_grad(ct_backend *be, const ct_layer *l, int n, void **dx, int *accumulate, ct_err *err);

/* Bytes of one element of t's dtype. */
static inline size_t ct_cuda_elem(const ct_tensor *t) { return ct_dtype_size(t->dtype); }



/* workspace_bytes of the types whose only workspace is their staging. */
size_t ct_cuda_stage_workspace(ct_backend *be, const ct_layer *l, int n);

/* The dtypes a CUDA layer type's ops take, as bits (1u << ct_dtype), one per type:
 * ct_cuda_<type>_dtypes in engine/cuda/<type>.c, next to its ops. */
#define CT_CUDA_DTYPE_BIT(t) (1u << (unsigned)(t))
#define CT_CUDA_DTYPES_ALL (CT_CUDA_DTYPE_BIT(CT_DTYPE_F32) | CT_CUDA_DTYPE_BIT(CT_DTYPE_F16) | \
                            CT_CUDA_DTYPE_BIT(CT_DTYPE_BF16))
#endif
