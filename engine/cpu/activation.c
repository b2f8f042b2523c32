/* Activations: the activation layer's ops, and the fused activation that ends dense, conv2d and
 * add (the kernels themselves are in elementwise.c). */
#include "cpu/cpu_backend.h"

// z, y: (n, out) fp32; b: (out.c) or NULL
void ct_cpu_fused_activation_forward(const ct_layer *l, int n, const float *b)
{
    if (l->act != CT_ACT_LINEAR || b)
        ct_cpu_bias_activation(l->act, ct_f32(l->z), b, ct_f32(l->y), (size_t)n * l->out.h * l->out.w, l->out.c);
}

int ct_cpu_relu_grad_in_reader(const ct_layer *l)
{
    const ct_layer *r = l->sole_reader;
    /* batch norm folds its relu into its own passes; the half path stages copies of the tensors */
    return l->act == CT_ACT_RELU && r && r->type == CT_LAYER_MAXPOOL &&
           (l->type == CT_LAYER_DENSE || l->type == CT_LAYER_CONV2D || l->type == CT_LAYER_ADD) &&
           !l->touches_half && !r->touches_half;
}

// z, y, dy: (n, out) fp32; the result: (n, out), dy itself or the scratch
const float *ct_cpu_preactivation_grad(ct_backend *be, const ct_layer *l, int n)
{
    if (l->act == CT_ACT_LINEAR || ct_cpu_relu_grad_in_reader(l))
        return ct_f32(l->dy);
    float *scratch = ct_cpu_of(be)->scratch;
    ct_cpu_activation_backward(l->act, ct_f32(l->z), ct_f32(l->y), ct_f32(l->dy), scratch, ct_cpu_out_count(l, n), 0);
    return scratch;
}

// x, y: (n, out) fp32
static ct_status activation_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)be; (void)training; (void)err;
    ct_cpu_activation_forward(l->act, ct_f32(l->x[0]), ct_f32(l->y), ct_cpu_out_count(l, n));
    return CT_OK;
}

// x, y, dy: (n, out) fp32; dx: like x or NULL, written or added to (l->dx_accumulate)
static ct_status activation_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    (void)be; (void)err;
    if (l->dx[0])
        ct_cpu_activation_backward(l->act, ct_f32(l->x[0]), ct_f32(l->y), ct_f32(l->dy), ct_f32(l->dx[0]),
                                   ct_cpu_out_count(l, n), l->dx_accumulate[0]);
    return CT_OK;
}

const ct_layer_ops ct_cpu_activation_ops = {
    .forward = activation_forward,
    .backward = activation_backward,
    .workspace_bytes = NULL,
};
