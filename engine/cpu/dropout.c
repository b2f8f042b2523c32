/* Inverted dropout: kept elements scaled by 1/(1-rate) in training, the identity in evaluation. */
#include <string.h>

#include "base/rng.h"
#include "cpu/cpu_backend.h"

/* Scale for kept elements; a rate of 1 drops everything, so nothing is left to scale. */
static float keep_scale(float rate) { return rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f; }

// x, y, mask: (n); the mask depends only on (seed, stream, first + i), never on threading
static void dropout_forward_from(const float *x, float *y, uint8_t *mask, size_t n, float rate, uint64_t seed,
                                 uint64_t stream, uint64_t first)
{
    const float inv_keep = keep_scale(rate);
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        uint8_t keep = ct_uniform(seed, stream, first + i) >= rate;
        mask[i] = keep;
        y[i] = ct_cpu_select(keep, x[i] * inv_keep, 0.0f);
    }
}

void ct_cpu_dropout_forward(const float *x, float *y, uint8_t *mask, size_t n, float rate,
                            uint64_t seed, uint64_t stream)
{
    dropout_forward_from(x, y, mask, n, rate, seed, stream, 0);
}

// dy, mask, dx: (n)
void ct_cpu_dropout_backward(const float *dy, const uint8_t *mask, float *dx, size_t n, float rate,
                             int accumulate)
{
    const float inv_keep = keep_scale(rate);
    /* two loops and a select rather than tests inside one, so that each vectorises */
    if (accumulate) {
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) dx[i] = dx[i] + ct_cpu_select(mask[i], dy[i] * inv_keep, 0.0f);
    } else {
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) dx[i] = 0.0f + ct_cpu_select(mask[i], dy[i] * inv_keep, 0.0f);
    }
}

/* The mask (aux, uint8) of the last training forward. */
static uint8_t *mask_of(const ct_layer *l) { return (uint8_t *)l->aux->data; }

/* Each layer draws from its own stream (its index) of the step's seed, so masks differ between
 * layers and steps but replay exactly; element i of the global batch draws draw i whichever
 * replica holds it. */
// x, y: (n, out) fp32; aux: (n, out) uint8
static ct_status dropout_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)err;
    const ct_step_scalars *s = &ct_cpu_of(be)->step;
    /* a replica's slice draws the elements of its samples' places in the global batch */
    if (training)
        dropout_forward_from(ct_f32(l->x[0]), ct_f32(l->y), mask_of(l), ct_cpu_out_count(l, n), l->cfg->rate,
                             s->dropout_seed, (uint64_t)l->index, (uint64_t)s->first_sample * ct_cpu_out_count(l, 1));
    else
        memcpy(l->y->data, l->x[0]->data, ct_tensor_rows_bytes(l->y, n));
    return CT_OK;
}

// dy: (n, out) fp32; dx: like dy or NULL, written or added to (l->dx_accumulate); aux: (n, out) uint8
static ct_status dropout_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    (void)be; (void)err;
    if (l->dx[0])
        ct_cpu_dropout_backward(ct_f32(l->dy), mask_of(l), ct_f32(l->dx[0]), ct_cpu_out_count(l, n), l->cfg->rate,
                                l->dx_accumulate[0]);
    return CT_OK;
}

const ct_layer_ops ct_cpu_dropout_ops = {
    .forward = dropout_forward,
    .backward = dropout_backward,
    .workspace_bytes = NULL,
};
