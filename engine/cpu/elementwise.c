/* Elementwise kernels several layer types share: activations, bias, gradient accumulation, column
 * sums, and the finiteness check. */
#include <math.h>
#include <string.h>

#include "cpu/cpu_ops.h"

#define INV_SQRT2 0.70710678118654752f
#define INV_SQRT_2PI 0.39894228040143268f

static float sigmoid(float x)
{
    /* the branch keeps exp's argument non-positive, so it never overflows */
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

// x, y: (n); y may alias x
void ct_cpu_activation_forward(ct_activation act, const float *x, float *y, size_t n)
{
    switch (act) {
    case CT_ACT_RELU:
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case CT_ACT_LEAKY:
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : CT_LEAKY_SLOPE * x[i];
        break;
    case CT_ACT_SIGMOID:
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] = sigmoid(x[i]);
        break;
    case CT_ACT_TANH:
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
        break;
    case CT_ACT_GELU:
#pragma omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * INV_SQRT2));
        break;
    default: /* linear */
        if (y != x) memcpy(y, x, n * sizeof(float));
        break;
    }
}

/* d/dx of GELU(x) = x Phi(x): Phi(x) + x phi(x). */
static float gelu_grad(float x)
{
    float cdf = 0.5f * (1.0f + erff(x * INV_SQRT2));
    return cdf + x * INV_SQRT_2PI * expf(-0.5f * x * x);
}

static inline float relu_grad(float x, float dy) { return ct_cpu_select(x > 0.0f, dy, 0.0f); }
static inline float leaky_grad(float x, float dy) { return ct_cpu_select(x > 0.0f, dy, CT_LEAKY_SLOPE * dy); }

/* dx[i] = (accumulate ? dx[i] : 0) + (v), the value a backward writes (see cpu_ops.h): added to
 * dx, or to 0 for the first writer. Two loops rather than the test inside one, so that each
 * vectorises; 0 + v is kept (it turns a -0 into +0, as adding into a cleared buffer did).
 * Expects dx, n and accumulate in scope; v reads element i. */
#define WRITE_OR_ADD(v)                                                                   \
    do {                                                                                  \
        if (accumulate) {                                                                 \
            _Pragma("omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)")          \
            for (size_t i = 0; i < n; i++) dx[i] = dx[i] + (v);                           \
        } else {                                                                          \
            _Pragma("omp parallel for schedule(static) if (n > CT_CPU_PAR_MIN)")          \
            for (size_t i = 0; i < n; i++) dx[i] = 0.0f + (v);                            \
        }                                                                                 \
    } while (0)

// x (the input), y (the output), dy, dx: (n); dx = (accumulate ? dx : 0) + dy act'(x)
void ct_cpu_activation_backward(ct_activation act, const float *x, const float *y, const float *dy,
                                float *dx, size_t n, int accumulate)
{
    /* Sigmoid and tanh take their derivatives from y, so that a layer with a fused activation need
     * not keep its pre-activation (ct_activation_grad_needs_input): y holds exactly the value the
     * forward's sigmoid(x) / tanhf(x) gave, so the bits are those of recomputing it from x. relu and
     * leaky test x > 0, which a caller without the input may ask of y (y > 0 exactly when x > 0);
     * gelu needs x. */
    switch (act) {
    case CT_ACT_RELU:
        WRITE_OR_ADD(relu_grad(x[i], dy[i]));
        break;
    case CT_ACT_LEAKY:
        WRITE_OR_ADD(leaky_grad(x[i], dy[i]));
        break;
    case CT_ACT_SIGMOID:
        WRITE_OR_ADD(dy[i] * y[i] * (1.0f - y[i]));
        break;
    case CT_ACT_TANH:
        WRITE_OR_ADD(dy[i] * (1.0f - y[i] * y[i]));
        break;
    case CT_ACT_GELU:
        WRITE_OR_ADD(dy[i] * gelu_grad(x[i]));
        break;
    default: /* linear */
        ct_cpu_accumulate(dy, dx, n, accumulate);
        break;
    }
}

static float sigmoid_or_tanh(ct_activation act, float x) { return act == CT_ACT_SIGMOID ? sigmoid(x) : tanhf(x); }

// z, y: (rows, c), y may be z; b: (c) or NULL
void ct_cpu_bias_activation(ct_activation act, float *z, const float *b, float *y, size_t rows, int c)
{
    if (!b) {
        ct_cpu_activation_forward(act, z, y, rows * (size_t)c);
        return;
    }
    /* the bits of adding the bias and then activating in two passes: the same two roundings */
#pragma omp parallel for schedule(static) if (rows * (size_t)c > CT_CPU_PAR_MIN)
    for (size_t i = 0; i < rows; i++) {
        float *zr = z + i * (size_t)c, *yr = y + i * (size_t)c;
        switch (act) {
        case CT_ACT_LINEAR:
            for (int j = 0; j < c; j++) yr[j] = zr[j] + b[j];
            break;
        case CT_ACT_RELU:
            for (int j = 0; j < c; j++) {
                float v = zr[j] + b[j];
                yr[j] = v > 0.0f ? v : 0.0f;
            }
            break;
        case CT_ACT_LEAKY:
            for (int j = 0; j < c; j++) {
                float v = zr[j] + b[j];
                yr[j] = v > 0.0f ? v : CT_LEAKY_SLOPE * v;
            }
            break;
        case CT_ACT_GELU:
            /* gelu's gradient reads the pre-activation, which z keeps */
            for (int j = 0; j < c; j++) {
                float v = zr[j] + b[j];
                zr[j] = v;
                yr[j] = 0.5f * v * (1.0f + erff(v * INV_SQRT2));
            }
            break;
        default: /* sigmoid, tanh */
            for (int j = 0; j < c; j++) yr[j] = sigmoid_or_tanh(act, zr[j] + b[j]);
            break;
        }
    }
}

// y: (rows, c); b: (c)
void ct_cpu_add_bias(float *y, const float *b, size_t rows, int c)
{
#pragma omp parallel for schedule(static) if (rows * (size_t)c > CT_CPU_PAR_MIN)
    for (size_t i = 0; i < rows; i++) {
        float *row = y + i * (size_t)c;
        for (int j = 0; j < c; j++) row[j] += b[j];
    }
}

// dy, dx: (n)
void ct_cpu_accumulate(const float *dy, float *dx, size_t n, int accumulate)
{
    WRITE_OR_ADD(dy[i]);
}

/* Tests the exponent bits rather than calling isfinite, which -ffast-math may fold to 1. */
static int bits_finite(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (u & 0x7f800000u) != 0x7f800000u;
}

// x: (n)
int ct_cpu_all_finite(const float *x, size_t n)
{
    size_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad) if (n > CT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) bad += !bits_finite(x[i]);
    return bad == 0;
}

enum { SUM_BLOCK = 64 };

/* Summed in double, a block of columns at a time, so long batches don't lose precision; the cost
 * is negligible next to the matrix products that produced dy. */
// dy: (rows, c); db: (c) = column sums of dy
void ct_cpu_column_sums(const float *dy, float *db, size_t rows, int c)
{
    /* threads over blocks of columns: each sum is one thread's, in row order, whatever the count */
#pragma omp parallel for schedule(static) if (rows * (size_t)c > CT_CPU_PAR_MIN && c > SUM_BLOCK)
    for (int j0 = 0; j0 < c; j0 += SUM_BLOCK) {
        int nj = c - j0 < SUM_BLOCK ? c - j0 : SUM_BLOCK;
        double acc[SUM_BLOCK] = {0};
        for (size_t i = 0; i < rows; i++) {
            const float *row = dy + i * (size_t)c + j0;
            for (int j = 0; j < nj; j++) acc[j] += row[j];
        }
        /* the sums start from +0, so none is -0: writing gives the bits adding into a cleared db gave */
        for (int j = 0; j < nj; j++) db[j0 + j] = (float)acc[j];
    }
}
