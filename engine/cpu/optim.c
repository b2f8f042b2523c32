/* Optimizer updates over one flat parameter buffer, following torch.optim's formulas. */
#include <math.h>

#include "base/half.h"
#include "base/tensor.h"
#include "cpu/cpu_ops.h"

// w, g, vel: (n); vel unused (may be NULL) when momentum is 0
void ct_cpu_sgd_step(float *w, const float *g, float *vel, size_t n, float lr, float momentum,
                     int nesterov, float weight_decay)
{
    if (momentum <= 0.0f || !vel) {
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) w[i] -= lr * (g[i] + weight_decay * w[i]);
        return;
    }
    /* vel starts at 0, so the first step's momentum * 0 + g equals PyTorch's buffer = g */
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] + weight_decay * w[i];
        vel[i] = momentum * vel[i] + gi;
        float step = nesterov ? gi + momentum * vel[i] : vel[i];
        w[i] -= lr * step;
    }
}

// w, g, m, v: (n); t: the step number, from 1
void ct_cpu_adam_step(float *w, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int decoupled, long t)
{
    /* Bias corrections in double (1 - beta^t is tiny on the first steps), rounded once, as the
     * trainer hands them to the GPU (ct_adam_bias). PyTorch's step is
     * w -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps); the divisions by constants are taken out of
     * the loop, leaving one square root and one division an element where there were four: those
     * made the update of fmnist_convnet's 3.3M parameters compute-bound (1.9 against 1.7 ms on 2
     * threads). kernels/optim.cu forms the same values. */
    const float bc1 = (float)(1.0 - pow(beta1, (double)t));
    const float bc2 = (float)(1.0 - pow(beta2, (double)t));
    const float step = (float)((double)lr / bc1);
    const float inv_sqrt_bc2 = (float)(1.0 / sqrt((double)bc2));
    const float l2 = decoupled ? 0.0f : weight_decay;
    const float shrink = decoupled ? 1.0f - lr * weight_decay : 1.0f;
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] + l2 * w[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        /* AdamW decays the weight before the Adam step, as PyTorch's w.mul_(1 - lr * wd) */
        w[i] = w[i] * shrink - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

// g: (n) fp32, scaled in place
long ct_cpu_unscale(float *g, size_t n, float inv_loss_scale)
{
    long bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad) if (n > CT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        g[i] *= inv_loss_scale;
        bad += !isfinite(g[i]);
    }
    return bad;
}

// w: (n) fp32; h: (n) fp16 or bf16 bits
void ct_cpu_round_params(const float *w, uint16_t *h, size_t n, int half_dtype)
{
    if (half_dtype == CT_DTYPE_F16) {
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) h[i] = ct_f16_from_f32(w[i]);
    } else {
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) h[i] = ct_bf16_from_f32(w[i]);
    }
}
