/* Dynamic loss scaling's state and its one decision, shared by the CPU backend and the CUDA
 * kernels so that both skip, halve and double at the same steps.
 *
 * The state lives in the backend's memory (device memory on a GPU) and is touched only in stream
 * order, inside the step: the loss multiplies dlogits by `scale`; one pass over the fp32
 * parameter gradients multiplies them by 1/scale and counts non-finite values into `nonfinite`;
 * the optimizer reads `nonfinite` (any: the update is skipped, weights, moments and the fp16/bf16
 * weight copy untouched) and `applied_steps` (Adam's t is applied_steps + 1); then
 * ct_scaler_update, run once (one thread on a GPU), applies the verdict and clears `nonfinite`.
 * Nothing is read back by the host inside a step; the host reads the state at epoch ends for the
 * log and into checkpoints.
 *
 * Dynamic (growth_steps > 0): halve on a skipped step (never below 1, as Keras), double after
 * growth_steps clean steps in a row, up to 2^24 (Keras and PyTorch: start 2^15, 2000 steps). Fixed
 * (growth_steps == 0, `loss_scale = NUMBER`): the scale never changes, and a step with a
 * non-finite gradient is still skipped rather than written into the weights. */
#ifndef CT_SCALER_H
#define CT_SCALER_H

#include <stdint.h>

#ifdef __CUDACC__
#define CT_HOST_DEVICE __host__ __device__
#else
#define CT_HOST_DEVICE
#endif

typedef struct ct_scaler {
    float loss_scale;        /* what dlogits are multiplied by */
    int32_t nonfinite;       /* inf or NaN gradient values found this step (the unscale pass) */
    int32_t clean_steps;     /* updates applied since the scale last changed */
    int32_t growth_steps;    /* the doubling interval; 0: a fixed scale */
    int64_t applied_steps;   /* optimizer updates applied: Adam's step count t */
    int64_t skipped_steps;   /* steps skipped for a non-finite gradient, since training began */
} ct_scaler;

#define CT_LOSS_SCALE_MIN 1.0f
#define CT_LOSS_SCALE_MAX 0x1p24f   /* doubling stops here, short of overflowing to inf */

/* After the optimizer has read the verdict: count the step, move the scale, clear the verdict. */
static inline CT_HOST_DEVICE void ct_scaler_update(ct_scaler *s)
{
    if (s->nonfinite) {
        s->skipped_steps++;
        s->clean_steps = 0;
        if (s->growth_steps > 0)
            s->loss_scale = s->loss_scale * 0.5f < CT_LOSS_SCALE_MIN ? CT_LOSS_SCALE_MIN : s->loss_scale * 0.5f;
    } else {
        s->applied_steps++;
        if (s->growth_steps > 0 && ++s->clean_steps >= s->growth_steps) {
            s->loss_scale = s->loss_scale * 2.0f > CT_LOSS_SCALE_MAX ? CT_LOSS_SCALE_MAX : s->loss_scale * 2.0f;
            s->clean_steps = 0;
        }
    }
    s->nonfinite = 0;
}

#endif
