/* Residual add of two equal-shaped inputs, with a fused activation. */
#include "cpu/cpu_backend.h"

// a, b, y: (n); y may alias a or b
void ct_cpu_add_forward(const float *a, const float *b, float *y, size_t n)
{
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

// x[0], x[1], z, y: (n, out) fp32
static ct_status add_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)be; (void)training; (void)err;
    ct_cpu_add_forward(ct_f32(l->x[0]), ct_f32(l->x[1]), ct_f32(l->z), ct_cpu_out_count(l, n));
    ct_cpu_fused_activation_forward(l, n, NULL);
    return CT_OK;
}

/* Both inputs get the whole gradient; either may be the data (no dx). Inputs in order, so that
 * add(a, a) writes a's gradient through dx[0] and adds the second share through dx[1]. */
// dy, dx[0], dx[1]: (n, out) fp32, each written or added to (l->dx_accumulate)
static ct_status add_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    (void)err;
    const float *dz = ct_cpu_preactivation_grad(be, l, n);
    for (int i = 0; i < 2; i++)
        if (l->dx[i])
            ct_cpu_accumulate(dz, ct_f32(l->dx[i]), ct_cpu_out_count(l, n), l->dx_accumulate[i]);
    return CT_OK;
}

const ct_layer_ops ct_cpu_add_ops = {
    .forward = add_forward,
    .backward = add_backward,
    .workspace_bytes = NULL,
};
