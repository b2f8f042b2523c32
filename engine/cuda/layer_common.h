/* What the CUDA layer types (engine/cuda/<type>.c) share: the fp32 check, error messages that
 * name the layer, and the fused activation's two halves. */
#ifndef CT_CUDA_LAYER_COMMON_H
#define CT_CUDA_LAYER_COMMON_H

#include "cuda/cuda_internal.h"

/* Elements of the layer's output at batch n. */
static inline long ct_cuda_out_count(const ct_layer *l, int n)
{
    return (long)n * (long)ct_shape_size(l->out);
}

/* What every forward (and the backward of the library-backed types) checks first: n >= 0, and fp32
 * tensors (y and every input), the only ones the CUDA backend runs so far. Failures name the layer. */
ct_status ct_cuda_check_layer(const ct_layer *l, int n, ct_err *err);

/* st, with the message a failure left in err prefixed by the layer's name. */
ct_status ct_cuda_named(const ct_layer *l, ct_status st, ct_err *err);

/* z, y: (n, out) fp32; y = act(z) for a layer that fuses an activation after its own work (add;
 * conv2d folds it into its bias pass, dense into its epilogue); nothing for linear. z is y unless
 * the activation's gradient needs the pre-activation (ct_layer_keeps_preactivation): in place. */
ct_status ct_cuda_apply_activation(ct_backend *be, const ct_layer *l, int n, ct_err *err);

/* dy, z, y: (n, out) fp32. The gradient at the pre-activation into *dz: dy itself for linear,
 * else act' dy in the scratch, act' taken from y (relu, leaky, sigmoid, tanh) or z (gelu). */
ct_status ct_cuda_preactivation_grad(ct_backend *be, const ct_layer *l, int n, const float **dz, ct_err *err);

#endif
