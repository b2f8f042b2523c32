/* Helpers of the CUDA layer types (layer_common.h). */
#include <string.h>

#include "cuda/layer_common.h"

enum { STAGE_ALIGN = 256 };

static size_t stage_round(size_t bytes) { return (bytes + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN; }

static const char *layer_name(const ct_layer *l)
{
    return l->cfg ? l->cfg->name : ct_layer_type_name(l->type);
}

static int known_dtype(ct_dtype t) { return t == CT_DTYPE_F32 || t == CT_DTYPE_F16 || t == CT_DTYPE_BF16; }

ct_status ct_cuda_check_layer(const ct_layer *l, int n, ct_err *err)
{
    if (n < 0)
        return ct_fail(err, CT_ERR_INTERNAL, "[%s] negative batch %d", layer_name(l), n);
    const ct_tensor *all[CT_MAX_INPUTS + 1];
    int count = 0;
    all[count++] = l->y;
    for (int k = 0; k < l->n_in; k++)
        all[count++] = l->x[k];
    ct_dtype seen_half = CT_DTYPE_F32;  /* the first fp16 or bf16 tensor's dtype; fp32: none yet */
    for (int i = 0; i < count; i++) {
        ct_dtype t = all[i] ? all[i]->dtype : l->dtype;
        if (!known_dtype(t))
            return ct_fail(err, CT_ERR_BACKEND, "[%s] the CUDA backend runs fp32, fp16 and bf16 layers (this one "
                                                "has %s tensors)", layer_name(l), ct_dtype_name(t));
        if (ct_dtype_is_half(t)) {
            if (seen_half != CT_DTYPE_F32 && seen_half != t)
                return ct_fail(err, CT_ERR_BACKEND, "[%s] mixes %s and %s tensors", layer_name(l),
                               ct_dtype_name(seen_half), ct_dtype_name(t));
            seen_half = t;
        }
    }
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

// z, y: (n, out) l->dtype
ct_status ct_cuda_apply_activation(ct_backend *be, const ct_layer *l, int n, ct_err *err)
{
    if (l->act != CT_ACT_LINEAR)
        CT_CUDA_CHECK(ct_launch_activation_forward_dt(l->z->data, l->y->data, ct_cuda_out_count(l, n), (int)l->act,
                                                      (int)l->y->dtype, ct_cuda_of(be)->compute), err);
    return CT_OK;
}

/* relu, leaky, sigmoid and tanh read y, gelu z (which is then kept apart from y): a layer keeps
 * no pre-activation unless its gradient needs it. */
// dy, z, y: (n, out) l->dtype; *dz: dy or the scratch (n, out) l->dtype
ct_status ct_cuda_preactivation_grad(ct_backend *be, const ct_layer *l, int n, const void **dz, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    *dz = l->dy ? l->dy->data : NULL;
    if (l->act == CT_ACT_LINEAR)
        return CT_OK;
    long count = ct_cuda_out_count(l, n);
    size_t bytes = (size_t)count * ct_cuda_elem(l->dy);
    if (!cu->scratch || cu->scratch_size < bytes)
        return ct_fail(err, CT_ERR_INTERNAL, "the %zu-byte scratch cannot hold a %ld-value activation gradient",
                       cu->scratch_size, count);
    CT_CUDA_CHECK(ct_launch_activation_backward_dt(l->z->data, l->y->data, l->dy->data, cu->scratch, count,
                                                   (int)l->act, 0, (int)l->dy->dtype, cu->compute), err);
    *dz = cu->scratch;
    return CT_OK;
}

/* ---- staging ---- */

size_t ct_cuda_stage_need(const ct_layer *l, int n)
{
    if (!l->touches_half)
        return 0;
    size_t bytes = 0;
    for (int k = 0; k < l->n_in; k++)
        bytes += 2 * stage_round((size_t)n * ct_shape_size(l->in_shapes[k]) * sizeof(float));
    bytes += stage_round(l->w_count * sizeof(float));
    return bytes;
}

void ct_cuda_stage_begin(ct_cuda *cu, size_t from, ct_cuda_stage *s)
{
    char *base = cu->workspace;
    size_t size = cu->workspace ? cu->workspace_size : 0;
    from = stage_round(from);
    s->next = base && from <= size ? base + from : NULL;
    s->end = base ? base + size : NULL;
}

ct_status ct_cuda_stage_take(ct_cuda_stage *s, size_t bytes, void **out, ct_err *err)
{
    *out = NULL;
    size_t rounded = stage_round(bytes);
    if (!s->next || (size_t)(s->end - s->next) < rounded)
        return ct_fail(err, CT_ERR_INTERNAL, "the shared workspace has no room for %zu bytes of dtype staging",
                       bytes);
    *out = s->next;
    s->next += rounded;
    return CT_OK;
}

// x[k]: (n, in_k) any dtype -> *out: (n, in_k) dtype
ct_status ct_cuda_input_as(ct_backend *be, const ct_layer *l, int k, int n, ct_dtype dtype, ct_cuda_stage *s,
                           const void **out, ct_err *err)
{
    const ct_tensor *x = l->x[k];
    *out = x ? x->data : NULL;
    if (!x || x->dtype == dtype)
        return CT_OK;
    long count = ct_cuda_in_count(l, k, n);
    void *copy = NULL;
    ct_status st = ct_cuda_stage_take(s, (size_t)count * ct_dtype_size(dtype), &copy, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_cast(x->data, copy, count, (int)x->dtype, (int)dtype, ct_cuda_of(be)->compute), err);
    *out = copy;
    return CT_OK;
}

// dx[k]: (n, in_k) its producer's dtype; *out: (n, in_k) dtype
ct_status ct_cuda_grad_begin(const ct_layer *l, int k, int n, ct_dtype dtype, ct_cuda_stage *s, void **out,
                             int *accumulate, ct_err *err)
{
    ct_tensor *dx = l->dx[k];
    *out = NULL;
    *accumulate = 0;
    if (!dx)
        return CT_OK;
    if (dx->dtype == dtype) {
        *out = dx->data;
        *accumulate = l->dx_accumulate[k];
        return CT_OK;
    }
    return ct_cuda_stage_take(s, (size_t)ct_cuda_in_count(l, k, n) * ct_dtype_size(dtype), out, err);
}

// g: (n, in_k) dtype -> dx[k]: (n, in_k) its dtype, written or added to (l->dx_accumulate)
ct_status ct_cuda_grad_end(ct_backend *be, const ct_layer *l, int k, int n, ct_dtype dtype, const void *g,
                           ct_err *err)
{
    ct_tensor *dx = l->dx[k];
    if (!dx || !g || g == dx->data)
        return CT_OK;
    CT_CUDA_CHECK(ct_launch_accumulate_dt(g, dx->data, ct_cuda_in_count(l, k, n), l->dx_accumulate[k], (int)dtype,
                                          (int)dx->dtype, ct_cuda_of(be)->compute), err);
    return CT_OK;
}

size_t ct_cuda_stage_workspace(ct_backend *be, const ct_layer *l, int n)
{
    (void)be;
    return ct_cuda_stage_need(l, n);
}

ct_status ct_cuda_forward_input(ct_backend *be, const ct_layer *l, int n, const void **x, ct_err *err)
{
    ct_status st = ct_cuda_check_layer(l, n, err);
    if (st != CT_OK)
        return st;
    ct_cuda_stage s;
    ct_cuda_stage_begin(ct_cuda_of(be), 0, &s);
    return ct_cuda_input_as(be, l, 0, n, l->dtype, &s, x, err);
}

ct_status ct_cuda_backward_grad(ct_backend *be, const ct_layer *l, int n, void **dx, int *accumulate, ct_err *err)
{
    ct_cuda_stage s;
    ct_cuda_stage_begin(ct_cuda_of(be), 0, &s);
    return ct_cuda_grad_begin(l, 0, n, l->dtype, &s, dx, accumulate, err);
}
