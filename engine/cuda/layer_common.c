/* Helpers of the CUDA layer types (layer_common.h). */
#include <string.h>

#include "cuda/layer_common.h"

static const char *layer_name(const ct_layer *l)
{
    return l->cfg ? l->cfg->name : ct_layer_type_name(l->type);
}

ct_status ct_cuda_check_layer(const ct_layer *l, int n, ct_err *err)
{
    if (n < 0)
        return ct_fail(err, CT_ERR_INTERNAL, "[%s] negative batch %d", layer_name(l), n);
    ct_dtype bad = l->y ? l->y->dtype : l->dtype;
    for (int k = 0; k < l->n_in && bad == CT_DTYPE_F32; k++)
        if (l->x[k])
            bad = l->x[k]->dtype;
    if (bad != CT_DTYPE_F32)
        return ct_fail(err, CT_ERR_BACKEND, "[%s] the CUDA backend runs fp32 layers only so far (this one has %s "
                                            "tensors)", layer_name(l), ct_dtype_name(bad));
    return CT_OK;
}

ct_status ct_cuda_named(const ct_layer *l, ct_status st, ct_err *err)
{
    if (st == CT_OK || !err)
        return st;
    char msg[sizeof err->msg];
    memcpy(msg, err->msg, sizeof msg);
    msg[sizeof msg - 1] = '\0';
    return ct_fail(err, st, "[%s] %s", layer_name(l), msg);
}

// z, y: (n, out) fp32
ct_status ct_cuda_apply_activation(ct_backend *be, const ct_layer *l, int n, ct_err *err)
{
    if (l->act != CT_ACT_LINEAR)
        CT_CUDA_CHECK(ct_launch_activation_forward(ct_f32(l->z), ct_f32(l->y), ct_cuda_out_count(l, n), (int)l->act,
                                                   ct_cuda_of(be)->compute), err);
    return CT_OK;
}

/* relu, leaky, sigmoid and tanh read y, gelu z (which is then kept apart from y): a layer keeps
 * no pre-activation unless its gradient needs it. */
// dy, z, y: (n, out) fp32; *dz: dy or the scratch (n, out)
ct_status ct_cuda_preactivation_grad(ct_backend *be, const ct_layer *l, int n, const float **dz, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    *dz = ct_f32(l->dy);
    if (l->act == CT_ACT_LINEAR)
        return CT_OK;
    long count = ct_cuda_out_count(l, n);
    if (!cu->scratch || cu->scratch_size < (size_t)count * sizeof(float))
        return ct_fail(err, CT_ERR_INTERNAL, "the %zu-byte scratch cannot hold a %ld-value activation gradient",
                       cu->scratch_size, count);
    CT_CUDA_CHECK(ct_launch_activation_backward(ct_f32(l->z), ct_f32(l->y), ct_f32(l->dy), cu->scratch, count,
                                                (int)l->act, 0, cu->compute), err);
    *dz = cu->scratch;
    return CT_OK;
}
