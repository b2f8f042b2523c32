/* The fp16 and bf16 kernels of kernels/ (the *_dt launchers, casts, the loss scale, the unscale
 * pass, the optimizers' scaler verdict and half weight copy, the scaler update) against references
 * computed here on the host: the same half inputs widened to fp32 (exactly), the fp32 kernel's
 * operations in its order, and one rounding to the half type with engine/base/half.h (round to
 * nearest even, as the GPU's __float2half_rn / __float2bfloat16_rn).
 *
 * Bit for bit (the half result is a single rounding of an fp32 value the host forms with the same
 * operations): casts (every fp16 and bf16 pattern widened; fp32 specials, ties, overflow, subnormals
 * and random bit patterns narrowed), add, accumulate (every pair of dtypes), bias + activation and
 * activations for linear, relu and leaky, the activations' gradients except gelu's, dropout (masks
 * too), padding and cropping, max and average pooling forward and backward, column sums (the
 * widened half values sum exactly in double, in any order), the scaled loss gradient, the unscale
 * pass, SGD with a scaler (against the CPU's ct_cpu_sgd_step) and every half weight copy.
 * Within one unit in the last place of the half type (ULP_TRANSCENDENTAL): sigmoid, tanh and gelu
 * forward and gelu's gradient, where the device's expf, tanhf and erfcf may differ from the host
 * libm's in the fp32 value's last bits, which moves the rounding by one half ulp at most when it sits
 * near a rounding boundary (gelu's gradient with accumulation also gets 1e-6 absolute for the
 * device's possible FMA contraction of its expression).
 * NaN fails every check unless the reference is NaN too (its payload is not compared: the GPU may
 * return a canonical NaN). The loss scaler: the unscale pass counts exactly the inf and NaN planted
 * (plus the overflow a scale below 1 makes); the optimizers change no bit when the verdict is
 * non-zero; Adam's in-kernel t and bias corrections equal the host's; the scaler's sequence of
 * skips, halvings and doublings equals ct_scaler_update run on the host.
 * Exits 77 (skipped) without a GPU or without the CUDA backend. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifdef CUTRAIN_HAVE_CUDA

#include <cuda_runtime.h>

#include "base/half.h"
#include "base/rng.h"
#include "base/scaler.h"
#include "base/tensor.h"
#include "base/types.h"
#include "cpu/cpu_ops.h"
#include "kernels/kernels.h"
#include "tests/gpu_test.h"

#define INVALID ((int)cudaErrorInvalidValue)
#define F32 CT_DTYPE_F32
#define F16 CT_DTYPE_F16
#define BF16 CT_DTYPE_BF16
#define ULP_TRANSCENDENTAL 1

static const int half_types[2] = { F16, BF16 };

static ct_rng rng = { 777 };

static float uniform(float lo, float hi) { return lo + (hi - lo) * ct_rng_uniform(&rng); }

static const char *dt_name(int dt) { return dt == F32 ? "fp32" : dt == F16 ? "fp16" : "bf16"; }

static size_t dt_size(int dt) { return dt == F32 ? 4 : 2; }

/* ---- host values of any of the three types ---- */

static uint16_t to_half(float f, int dt) { return dt == F16 ? ct_f16_from_f32(f) : ct_bf16_from_f32(f); }

static float from_half(uint16_t h, int dt) { return dt == F16 ? ct_f32_from_f16(h) : ct_f32_from_bf16(h); }

/* element i of a host buffer of dtype dt, widened */
static float hget(const void *p, int dt, long i)
{
    return dt == F32 ? ((const float *)p)[i] : from_half(((const uint16_t *)p)[i], dt);
}

/* element i of a host buffer of dtype dt = v, rounded to dt */
static void hset(void *p, int dt, long i, float v)
{
    if (dt == F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = to_half(v, dt);
}

static void *hbuf(long n, int dt) { return xmalloc((size_t)n * dt_size(dt)); }

/* n random values in [lo, hi), rounded to dt (so the host and the device read the same) */
static void *hrand(long n, int dt, float lo, float hi)
{
    void *p = hbuf(n, dt);
    for (long i = 0; i < n; i++)
        hset(p, dt, i, uniform(lo, hi));
    return p;
}

static int is_nan_bits(const void *p, int dt, long i) { return isnan(hget(p, dt, i)); }

static uint32_t bits_at(const void *p, int dt, long i)
{
    if (dt == F32) {
        uint32_t u;
        memcpy(&u, (const float *)p + i, 4);
        return u;
    }
    return ((const uint16_t *)p)[i];
}

/* A monotone integer image of a half (or fp32) value's bits: adjacent values differ by 1 (the two
 * zeros map to 0), so the difference of two images counts the ulps between them. */
static long long ordered(uint32_t bits, int dt)
{
    const uint32_t sign = dt == F32 ? 0x80000000u : 0x8000u;
    return (bits & sign) ? -(long long)(bits & ~sign) : (long long)bits;
}

/* One CHECK: got and want (both of dtype dt, n values) within max_ulp units of dt's last place or
 * abs_tol apart; equal bits when max_ulp == 0 and abs_tol == 0. A NaN passes only against a NaN. */
static void check_vals(const char *what, const void *got, const void *want, long n, int dt, int max_ulp,
                       double abs_tol)
{
    long bad = 0, first = -1;
    for (long i = 0; i < n; i++) {
        const int gn = is_nan_bits(got, dt, i), wn = is_nan_bits(want, dt, i);
        int ok;
        if (gn || wn) {
            ok = gn && wn;
        } else {
            const uint32_t gb = bits_at(got, dt, i), wb = bits_at(want, dt, i);
            long long d = ordered(gb, dt) - ordered(wb, dt);
            if (d < 0)
                d = -d;
            ok = d <= max_ulp || fabs((double)hget(got, dt, i) - (double)hget(want, dt, i)) <= abs_tol;
        }
        if (!ok) {
            if (first < 0)
                first = i;
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %ld of %ld values differ (%s, max %d ulp); first [%ld]: got %.9g (0x%x), want %.9g (0x%x)",
              what, bad, n, dt_name(dt), max_ulp, first, first >= 0 ? hget(got, dt, first) : 0.0,
              first >= 0 ? bits_at(got, dt, first) : 0u, first >= 0 ? hget(want, dt, first) : 0.0,
              first >= 0 ? bits_at(want, dt, first) : 0u);
}

static void check_exact(const char *what, const void *got, const void *want, long n, int dt)
{
    check_vals(what, got, want, n, dt, 0, 0.0);
}

/* ---- device helpers ---- */

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    GPU_OK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static void h2d(void *dst, const void *src, size_t bytes, cudaStream_t s)
{
    GPU_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    GPU_OK(cudaStreamSynchronize(s));
}

static void d2h(void *dst, const void *src, size_t bytes, cudaStream_t s)
{
    GPU_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    GPU_OK(cudaStreamSynchronize(s));
}

static void sync_launch(const char *what, int rc, cudaStream_t s)
{
    CHECK_MSG(rc == 0, "%s: launcher returned %d (%s)", what, rc, cudaGetErrorString((cudaError_t)rc));
    GPU_OK(cudaStreamSynchronize(s));
}

/* A device copy of a host buffer of n values of dt. */
static void *dev_copy(const void *h, long n, int dt, cudaStream_t s)
{
    void *d = dev_alloc((size_t)n * dt_size(dt));
    h2d(d, h, (size_t)n * dt_size(dt), s);
    return d;
}

/* A device buffer of n values of dt filled with a poison pattern (0xff bytes: NaN in all three), so
 * that a value the kernel failed to write shows up as a NaN. */
static void *dev_poisoned(long n, int dt, cudaStream_t s)
{
    void *d = dev_alloc((size_t)n * dt_size(dt));
    GPU_OK(cudaMemsetAsync(d, 0xff, (size_t)n * dt_size(dt), s));
    GPU_OK(cudaStreamSynchronize(s));
    return d;
}

/* The device buffer back into fresh host memory. */
static void *host_copy(const void *d, long n, int dt, cudaStream_t s)
{
    void *h = hbuf(n, dt);
    d2h(h, d, (size_t)n * dt_size(dt), s);
    return h;
}

static ct_device_step *g_step;
static ct_scaler *g_scaler;

static void set_step(cudaStream_t s, float lr, float bias1, float bias2, unsigned long long seed)
{
    ct_device_step h;
    memset(&h, 0, sizeof h);
    h.lr = lr;
    h.bias1 = bias1;
    h.bias2 = bias2;
    h.dropout_seed = seed;
    h2d(g_step, &h, sizeof h, s);
}

static ct_scaler make_scaler(float loss_scale, int nonfinite, int growth_steps, long long applied)
{
    ct_scaler sc;
    memset(&sc, 0, sizeof sc);
    sc.loss_scale = loss_scale;
    sc.nonfinite = nonfinite;
    sc.growth_steps = growth_steps;
    sc.applied_steps = applied;
    return sc;
}

static ct_scaler get_scaler(cudaStream_t s)
{
    ct_scaler sc;
    d2h(&sc, g_scaler, sizeof sc, s);
    return sc;
}

static void put_scaler(const ct_scaler *sc, cudaStream_t s) { h2d(g_scaler, sc, sizeof *sc, s); }

/* ---- casts ---- */

static void test_cast(cudaStream_t s)
{
    /* every fp16 and bf16 pattern widened, and narrowed to the other half type */
    const long all = 65536;
    for (int k = 0; k < 2; k++) {
        const int dt = half_types[k], other = half_types[1 - k];
        uint16_t *h = xmalloc((size_t)all * 2);
        for (long i = 0; i < all; i++)
            h[i] = (uint16_t)i;
        float *want = hbuf(all, F32);
        void *want_other = hbuf(all, other);
        for (long i = 0; i < all; i++) {
            want[i] = from_half(h[i], dt);
            hset(want_other, other, i, want[i]);
        }
        void *dh = dev_copy(h, all, dt, s);
        void *df = dev_poisoned(all, F32, s), *dother = dev_poisoned(all, other, s);
        char what[96];
        snprintf(what, sizeof what, "cast %s -> fp32, every pattern", dt_name(dt));
        sync_launch(what, ct_launch_cast(dh, df, all, dt, F32, s), s);
        float *got = host_copy(df, all, F32, s);
        check_exact(what, got, want, all, F32);
        snprintf(what, sizeof what, "cast %s -> %s, every pattern", dt_name(dt), dt_name(other));
        sync_launch(what, ct_launch_cast(dh, dother, all, dt, other, s), s);
        void *got_other = host_copy(dother, all, other, s);
        check_exact(what, got_other, want_other, all, other);
        /* the same type: the bits as they are, NaN payloads included */
        void *dsame = dev_poisoned(all, dt, s);
        sync_launch("cast to the same type", ct_launch_cast(dh, dsame, all, dt, dt, s), s);
        void *got_same = host_copy(dsame, all, dt, s);
        CHECK_MSG(memcmp(got_same, h, (size_t)all * 2) == 0, "cast %s -> %s is not a copy of the bits", dt_name(dt),
                  dt_name(dt));
        GPU_OK(cudaFree(dh));
        GPU_OK(cudaFree(df));
        GPU_OK(cudaFree(dother));
        GPU_OK(cudaFree(dsame));
        free(h), free(want), free(want_other), free(got), free(got_other), free(got_same);
    }

    /* fp32 narrowed: specials, ties at both types' rounding points, fp16's overflow threshold and
     * subnormals, then random bit patterns (every exponent) */
    const float special[] = {
        0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-45f,
        65504.0f, 65519.0f, 65519.996f, 65520.0f, -65520.0f, 65536.0f, 1e10f,
        1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-20f, 1.0f - 0x1p-12f, /* fp16 ties */
        1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, 256.5f,             /* bf16 ties */
        0x1p-24f, 0x1p-25f, 3 * 0x1p-25f, 0x1.8p-24f, 0x1p-26f, 0x1p-14f, 0x1.ffcp-15f,   /* fp16 subnormals */
        0x1p-126f, 0x1p-133f, 0x1.01p-130f,                                              /* fp32 subnormals */
        3.14159265f, -2.71828182f, 0.1f, 1.0f / 3.0f,
    };
    const long nspecial = (long)(sizeof special / sizeof special[0]);
    const long n = 1000003;
    float *x = hbuf(n, F32);
    for (long i = 0; i < n; i++) {
        if (i < nspecial) {
            x[i] = special[i];
        } else {
            uint32_t u = (uint32_t)ct_rng_next(&rng);
            if (i % 4 == 0)  /* a quarter near 1, where training values live */
                u = (u & 0x807fffffu) | ((uint32_t)(112 + (u >> 23) % 32) << 23);
            memcpy(x + i, &u, 4);
        }
    }
    void *dx = dev_copy(x, n, F32, s);
    for (int k = 0; k < 2; k++) {
        const int dt = half_types[k];
        void *want = hbuf(n, dt);
        for (long i = 0; i < n; i++)
            hset(want, dt, i, x[i]);
        void *dy = dev_poisoned(n, dt, s);
        char what[96];
        snprintf(what, sizeof what, "cast fp32 -> %s (specials, ties, random bits)", dt_name(dt));
        sync_launch(what, ct_launch_cast(dx, dy, n, F32, dt, s), s);
        void *got = host_copy(dy, n, dt, s);
        check_exact(what, got, want, n, dt);
        /* and 1 element, 3 elements: no vector path to get wrong at the tail */
        GPU_OK(cudaFree(dy));
        free(want), free(got);
    }
    GPU_OK(cudaFree(dx));
    free(x);
}

/* ---- add, accumulate ---- */

static void test_add_accumulate(cudaStream_t s)
{
    const long n = 100003;
    for (int k = 0; k < 2; k++) {
        const int dt = half_types[k];
        void *a = hrand(n, dt, -4.0f, 4.0f), *b = hrand(n, dt, -4.0f, 4.0f), *want = hbuf(n, dt);
        for (long i = 0; i < n; i++)
            hset(want, dt, i, hget(a, dt, i) + hget(b, dt, i));
        void *da = dev_copy(a, n, dt, s), *db = dev_copy(b, n, dt, s), *dy = dev_poisoned(n, dt, s);
        char what[96];
        snprintf(what, sizeof what, "add %s", dt_name(dt));
        sync_launch(what, ct_launch_add_dt(da, db, dy, n, dt, s), s);
        void *got = host_copy(dy, n, dt, s);
        check_exact(what, got, want, n, dt);
        free(got);
        snprintf(what, sizeof what, "add %s in place (y = a)", dt_name(dt));
        sync_launch(what, ct_launch_add_dt(da, db, da, n, dt, s), s);
        got = host_copy(da, n, dt, s);
        check_exact(what, got, want, n, dt);
        GPU_OK(cudaFree(da));
        GPU_OK(cudaFree(db));
        GPU_OK(cudaFree(dy));
        free(a), free(b), free(want), free(got);
    }

    /* every pair of dtypes: the output layer's dx is half while its dy is fp32, and the reverse */
    const int types[3] = { F32, F16, BF16 };
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            const int ddt = types[i], xdt = types[j];
            for (int acc = 0; acc <= 1; acc++) {
                void *dy = hrand(n, ddt, -2.0f, 2.0f), *dx0 = hrand(n, xdt, -2.0f, 2.0f), *want = hbuf(n, xdt);
                hset(dy, ddt, 0, -0.0f);  /* 0 + -0 is +0: the kernel writes 0 + v, not v */
                for (long e = 0; e < n; e++)
                    hset(want, xdt, e, (acc ? hget(dx0, xdt, e) : 0.0f) + hget(dy, ddt, e));
                void *ddy = dev_copy(dy, n, ddt, s), *ddx = dev_copy(dx0, n, xdt, s);
                char what[96];
                snprintf(what, sizeof what, "accumulate dy %s -> dx %s, accumulate=%d", dt_name(ddt), dt_name(xdt), acc);
                sync_launch(what, ct_launch_accumulate_dt(ddy, ddx, n, acc, ddt, xdt, s), s);
                void *got = host_copy(ddx, n, xdt, s);
                check_exact(what, got, want, n, xdt);
                GPU_OK(cudaFree(ddy));
                GPU_OK(cudaFree(ddx));
                free(dy), free(dx0), free(want), free(got);
            }
        }
    }
}

/* ---- activations ---- */

static const float kInvSqrt2 = 0.70710678118654752f;
static const float kInvSqrt2Pi = 0.39894228040143268f;

/* the kernel's activate(), in fp32 with the host's libm */
static float act_f(float x, int act)
{
    switch (act) {
    case CT_ACT_RELU: return x < 0.0f ? 0.0f : x;
    case CT_ACT_LEAKY: return x < 0.0f ? CT_LEAKY_SLOPE * x : x;
    case CT_ACT_SIGMOID:
        if (x >= 0.0f)
            return 1.0f / (1.0f + expf(-x));
        else {
            const float e = expf(x);
            return e / (1.0f + e);
        }
    case CT_ACT_TANH: return tanhf(x);
    case CT_ACT_GELU: return 0.5f * x * erfcf(-x * kInvSqrt2);
    default: return x;
    }
}

/* the kernel's activation_grad() */
static float act_grad_f(float x, float y, float dy, int act)
{
    switch (act) {
    case CT_ACT_RELU: return y > 0.0f ? dy : 0.0f;
    case CT_ACT_LEAKY: return y > 0.0f ? dy : CT_LEAKY_SLOPE * dy;
    case CT_ACT_SIGMOID: return (dy * y) * (1.0f - y);
    case CT_ACT_TANH: return dy * (1.0f - y * y);
    case CT_ACT_GELU: {
        const float cdf = 0.5f * erfcf(-x * kInvSqrt2);
        return dy * (cdf + x * kInvSqrt2Pi * expf(-0.5f * x * x));
    }
    default: return dy;
    }
}

/* sigmoid, tanh and gelu call a transcendental: one ulp; the rest are exact */
static int act_ulp(int act) { return act >= CT_ACT_SIGMOID ? ULP_TRANSCENDENTAL : 0; }

static void test_bias_act_case(cudaStream_t s, long rows, int c, int act, int dt, int bias_dt, int with_bias, int keep)
{
    const long total = rows * c;
    void *z = hrand(total, dt, -6.0f, 6.0f), *b = hrand(c, bias_dt, -1.0f, 1.0f);
    void *want_y = hbuf(total, dt), *want_z = hbuf(total, dt);
    for (long i = 0; i < total; i++) {
        float v = hget(z, dt, i);
        if (with_bias)
            v += hget(b, bias_dt, i % c);
        hset(want_z, dt, i, v);
        hset(want_y, dt, i, act_f(v, act));
    }
    void *dz = dev_copy(z, total, dt, s), *db = dev_copy(b, c, bias_dt, s);
    void *dy = keep ? dev_poisoned(total, dt, s) : dz;
    char what[160];
    snprintf(what, sizeof what, "bias_act %s bias %s rows=%ld c=%d act=%d bias=%d keep=%d", dt_name(dt),
             dt_name(bias_dt), rows, c, act, with_bias, keep);
    sync_launch(what, keep ? ct_launch_bias_activation_keep_dt(dz, with_bias ? db : NULL, dy, rows, c, act, dt, bias_dt, s)
                           : ct_launch_bias_activation_forward_dt(dz, with_bias ? db : NULL, rows, c, act, dt, bias_dt, s),
                s);
    void *got = host_copy(dy, total, dt, s);
    check_vals(what, got, want_y, total, dt, act_ulp(act), 0.0);
    if (keep) {  /* the pre-activation kept: z + bias, rounded once */
        void *got_z = host_copy(dz, total, dt, s);
        char zwhat[200];
        snprintf(zwhat, sizeof zwhat, "%s (z kept)", what);
        check_exact(zwhat, got_z, with_bias ? want_z : z, total, dt);
        free(got_z);
    }
    if (keep)
        GPU_OK(cudaFree(dy));
    GPU_OK(cudaFree(dz));
    GPU_OK(cudaFree(db));
    free(z), free(b), free(want_y), free(want_z), free(got);
}

static void test_bias_act(cudaStream_t s)
{
    for (int k = 0; k < 2; k++) {
        const int dt = half_types[k];
        for (int act = 0; act < CT_ACT_COUNT; act++) {
            test_bias_act_case(s, 517, 24, act, dt, F32, 1, 0);
            test_bias_act_case(s, 517, 24, act, dt, dt, 1, 1);
            test_bias_act_case(s, 333, 13, act, dt, F32, 1, 1);
            test_bias_act_case(s, 333, 13, act, dt, dt, 0, 0);
        }
    }
}

static void test_activation_case(cudaStream_t s, long n, int act, int dt, int acc)
{
    /* y in the activation's range where it matters (the gradient formulas are read as functions of
     * y, but realistic values exercise realistic roundings) */
    void *x = hrand(n, dt, -6.0f, 6.0f), *dyv = hrand(n, dt, -2.0f, 2.0f), *dx0 = hrand(n, dt, -1.0f, 1.0f);
    void *y = hbuf(n, dt), *want_y = hbuf(n, dt), *want_dx = hbuf(n, dt);
    for (long i = 0; i < n; i++) {
        hset(want_y, dt, i, act_f(hget(x, dt, i), act));
        hset(y, dt, i, act_f(hget(x, dt, i), act));
    }
    for (long i = 0; i < n; i++) {
        const float d = act_grad_f(hget(x, dt, i), hget(y, dt, i), hget(dyv, dt, i), act);
        hset(want_dx, dt, i, (acc ? hget(dx0, dt, i) : 0.0f) + d);
    }
    void *dx_in = dev_copy(x, n, dt, s), *dy_out = dev_poisoned(n, dt, s);
    char what[128];
    snprintf(what, sizeof what, "activation_forward %s act=%d", dt_name(dt), act);
    sync_launch(what, ct_launch_activation_forward_dt(dx_in, dy_out, n, act, dt, s), s);
    void *got = host_copy(dy_out, n, dt, s);
    if (!acc)
        check_vals(what, got, want_y, n, dt, act_ulp(act), 0.0);
    free(got);

    void *d_y = dev_copy(y, n, dt, s), *d_dy = dev_copy(dyv, n, dt, s), *d_dx = dev_copy(dx0, n, dt, s);
    snprintf(what, sizeof what, "activation_backward %s act=%d accumulate=%d", dt_name(dt), act, acc);
    sync_launch(what, ct_launch_activation_backward_dt(dx_in, d_y, d_dy, d_dx, n, act, acc, dt, s), s);
    got = host_copy(d_dx, n, dt, s);
    const int gelu = act == CT_ACT_GELU;
    check_vals(what, got, want_dx, n, dt, gelu ? ULP_TRANSCENDENTAL : 0, gelu && acc ? 1e-6 : 0.0);
    GPU_OK(cudaFree(dx_in));
    GPU_OK(cudaFree(dy_out));
    GPU_OK(cudaFree(d_y));
    GPU_OK(cudaFree(d_dy));
    GPU_OK(cudaFree(d_dx));
    free(x), free(dyv), free(dx0), free(y), free(want_y), free(want_dx), free(got);
}

static void test_activation(cudaStream_t s)
{
    for (int k = 0; k < 2; k++)
        for (int act = 0; act < CT_ACT_COUNT; act++)
            for (int acc = 0; acc <= 1; acc++)
                test_activation_case(s, 100003, act, half_types[k], acc);
}

/* ---- dropout ---- */

static void test_dropout(cudaStream_t s)
{
    const long n = 100003;
    const float rate = 0.3f;
    const unsigned long long seed = 0x0123456789abcdefULL, stream_id = 42;
    const float inv_keep = 1.0f / (1.0f - rate);  /* the kernels' keep_scale */
    for (int k = 0; k < 2; k++) {
        const int dt = half_types[k];
        void *x = hrand(n, dt, -3.0f, 3.0f), *dyv = hrand(n, dt, -3.0f, 3.0f), *dx0 = hrand(n, dt, -1.0f, 1.0f);
        void *want_y = hbuf(n, dt), *want_dx = hbuf(n, dt);
        unsigned char *want_mask = xmalloc((size_t)n);
        for (long i = 0; i < n; i++) {
            want_mask[i] = ct_uniform(seed, stream_id, (uint64_t)i) >= rate;
            hset(want_y, dt, i, want_mask[i] ? hget(x, dt, i) * inv_keep : 0.0f);
        }
        set_step(s, 0.0f, 1.0f, 1.0f, seed);
        void *dxv = dev_copy(x, n, dt, s), *dy = dev_poisoned(n, dt, s);
        unsigned char *dmask = dev_alloc((size_t)n);
        char what[96];
        snprintf(what, sizeof what, "dropout_forward %s", dt_name(dt));
        sync_launch(what, ct_launch_dropout_forward_dt(dxv, dy, dmask, n, rate, g_step, stream_id, 0, dt, s), s);
        void *got = host_copy(dy, n, dt, s);
        unsigned char *mask = xmalloc((size_t)n);
        d2h(mask, dmask, (size_t)n, s);
        CHECK_MSG(memcmp(mask, want_mask, (size_t)n) == 0, "%s: masks differ from the CPU's", what);
        check_exact(what, got, want_y, n, dt);
        free(got);
        for (int acc = 0; acc <= 1; acc++) {
            for (long i = 0; i < n; i++)
                hset(want_dx, dt, i,
                     (acc ? hget(dx0, dt, i) : 0.0f) + (want_mask[i] ? hget(dyv, dt, i) * inv_keep : 0.0f));
            void *d_dy = dev_copy(dyv, n, dt, s), *d_dx = dev_copy(dx0, n, dt, s);
            snprintf(what, sizeof what, "dropout_backward %s accumulate=%d", dt_name(dt), acc);
            sync_launch(what, ct_launch_dropout_backward_dt(d_dy, dmask, d_dx, n, rate, acc, dt, s), s);
            got = host_copy(d_dx, n, dt, s);
            check_exact(what, got, want_dx, n, dt);
            GPU_OK(cudaFree(d_dy));
            GPU_OK(cudaFree(d_dx));
            free(got);
        }
        GPU_OK(cudaFree(dxv));
        GPU_OK(cudaFree(dy));
        GPU_OK(cudaFree(dmask));
        free(x), free(dyv), free(dx0), free(want_y), free(want_dx), free(want_mask), free(mask);
    }
}

/* ---- padding ---- */

static void test_pad_crop_case(cudaStream_t s, int dt, int n, int h, int w, int c, int hp, int wp)
{
    const long in = (long)n * h * w * c, out = (long)n * hp * wp * c;
    void *x = hrand(in, dt, -2.0f, 2.0f), *want = hbuf(out, dt);
    void *dxp = hrand(out, dt, -2.0f, 2.0f), *dx0 = hrand(in, dt, -2.0f, 2.0f), *want_dx = hbuf(in, dt);
    for (int si = 0; si < n; si++)
        for (int y = 0; y < hp; y++)
            for (int xx = 0; xx < wp; xx++)
                for (int ch = 0; ch < c; ch++) {
                    const long o = (((long)si * hp + y) * wp + xx) * c + ch;
                    const float v = y < h && xx < w ? hget(x, dt, (((long)si * h + y) * w + xx) * c + ch) : 0.0f;
                    hset(want, dt, o, v);
                }
    void *d_x = dev_copy(x, in, dt, s), *d_xp = dev_poisoned(out, dt, s);
    char what[128];
    snprintf(what, sizeof what, "pad_nhwc %s %dx%dx%dx%d -> %dx%d", dt_name(dt), n, h, w, c, hp, wp);
    sync_launch(what, ct_launch_pad_nhwc_dt(d_x, d_xp, n, h, w, c, hp, wp, dt, s), s);
    void *got = host_copy(d_xp, out, dt, s);
    check_exact(what, got, want, out, dt);
    free(got);
    for (int acc = 0; acc <= 1; acc++) {
        for (int si = 0; si < n; si++)
            for (int y = 0; y < h; y++)
                for (int xx = 0; xx < w; xx++)
                    for (int ch = 0; ch < c; ch++) {
                        const long i = (((long)si * h + y) * w + xx) * c + ch;
                        const float g = hget(dxp, dt, (((long)si * hp + y) * wp + xx) * c + ch);
                        hset(want_dx, dt, i, (acc ? hget(dx0, dt, i) : 0.0f) + g);
                    }
        void *d_dxp = dev_copy(dxp, out, dt, s), *d_dx = dev_copy(dx0, in, dt, s);
        snprintf(what, sizeof what, "crop_accumulate_nhwc %s %dx%dx%dx%d <- %dx%d accumulate=%d", dt_name(dt), n, h,
                 w, c, hp, wp, acc);
        sync_launch(what, ct_launch_crop_accumulate_nhwc_dt(d_dxp, d_dx, n, h, w, c, hp, wp, acc, dt, s), s);
        got = host_copy(d_dx, in, dt, s);
        check_exact(what, got, want_dx, in, dt);
        GPU_OK(cudaFree(d_dxp));
        GPU_OK(cudaFree(d_dx));
        free(got);
    }
    GPU_OK(cudaFree(d_x));
    GPU_OK(cudaFree(d_xp));
    free(x), free(want), free(dxp), free(dx0), free(want_dx);
}

static void test_pad_crop(cudaStream_t s)
{
    for (int k = 0; k < 2; k++) {
        test_pad_crop_case(s, half_types[k], 3, 5, 7, 3, 6, 9);
        test_pad_crop_case(s, half_types[k], 2, 4, 4, 1, 4, 5);
        test_pad_crop_case(s, half_types[k], 64, 13, 13, 32, 14, 14);
    }
}

/* ---- pooling ---- */

static ct_window_geom pool_geom(int n, int h, int w, int c, int kh, int kw, int stride, int pad_t, int pad_l,
                                int oh, int ow)
{
    ct_window_geom g = { n, h, w, c, c, kh, kw, stride, pad_t, pad_l, oh, ow };
    return g;
}

static int clampi(int v, int hi) { return v < 0 ? 0 : v > hi ? hi : v; }

/* the window of output (oy, ox) clipped to the input, as the kernels' pool_window */
static void host_window(const ct_window_geom *d, int oy, int ox, int *y0, int *y1, int *x0, int *x1)
{
    const int ys = oy * d->stride - d->pad_t, xs = ox * d->stride - d->pad_l;
    *y0 = clampi(ys, d->h), *y1 = clampi(ys + d->kh, d->h), *x0 = clampi(xs, d->w), *x1 = clampi(xs + d->kw, d->w);
}

static void test_pool_case(cudaStream_t s, ct_window_geom g, int dt)
{
    const long in = (long)g.n * g.h * g.w * g.c, out = (long)g.n * g.oh * g.ow * g.c;
    const long in_s = (long)g.h * g.w * g.c;
    /* few distinct values, so that windows hold ties (the first maximum must win) */
    void *x = hbuf(in, dt);
    for (long i = 0; i < in; i++)
        hset(x, dt, i, (float)(ct_rng_next(&rng) % 9) * 0.375f - 1.5f);
    void *dyv = hrand(out, dt, -2.0f, 2.0f), *dx0 = hrand(in, dt, -1.0f, 1.0f);
    void *want_max = hbuf(out, dt), *want_avg = hbuf(out, dt);
    int *want_arg = xmalloc((size_t)out * sizeof(int));
    for (int si = 0; si < g.n; si++)
        for (int oy = 0; oy < g.oh; oy++)
            for (int ox = 0; ox < g.ow; ox++)
                for (int ch = 0; ch < g.c; ch++) {
                    const long o = (((long)si * g.oh + oy) * g.ow + ox) * g.c + ch;
                    int y0, y1, x0, x1;
                    host_window(&g, oy, ox, &y0, &y1, &x0, &x1);
                    if (y1 <= y0 || x1 <= x0) {
                        hset(want_max, dt, o, 0.0f), hset(want_avg, dt, o, 0.0f);
                        want_arg[o] = -1;
                        continue;
                    }
                    int best_i = (y0 * g.w + x0) * g.c + ch;
                    float best = hget(x, dt, si * in_s + best_i), sum = 0.0f;
                    for (int iy = y0; iy < y1; iy++)
                        for (int ix = x0; ix < x1; ix++) {
                            const int j = (iy * g.w + ix) * g.c + ch;
                            const float v = hget(x, dt, si * in_s + j);
                            if (v > best)
                                best = v, best_i = j;
                            sum += v;
                        }
                    hset(want_max, dt, o, best);
                    want_arg[o] = best_i;
                    hset(want_avg, dt, o, sum * (1.0f / (float)((y1 - y0) * (x1 - x0))));
                }
    void *d_x = dev_copy(x, in, dt, s), *d_y = dev_poisoned(out, dt, s);
    int *d_arg = dev_alloc((size_t)out * sizeof(int));
    char what[160];
    snprintf(what, sizeof what, "maxpool_forward %s n=%d %dx%dx%d k=%dx%d s=%d pad=%d,%d", dt_name(dt), g.n, g.h, g.w,
             g.c, g.kh, g.kw, g.stride, g.pad_t, g.pad_l);
    sync_launch(what, ct_launch_maxpool_forward_dt(&g, d_x, d_y, d_arg, dt, s), s);
    void *got = host_copy(d_y, out, dt, s);
    int *arg = xmalloc((size_t)out * sizeof(int));
    d2h(arg, d_arg, (size_t)out * sizeof(int), s);
    check_exact(what, got, want_max, out, dt);
    CHECK_MSG(memcmp(arg, want_arg, (size_t)out * sizeof(int)) == 0, "%s: argmax differs", what);
    free(got);
    snprintf(what, sizeof what, "avgpool_forward %s n=%d %dx%dx%d k=%dx%d s=%d pad=%d,%d", dt_name(dt), g.n, g.h, g.w,
             g.c, g.kh, g.kw, g.stride, g.pad_t, g.pad_l);
    sync_launch(what, ct_launch_avgpool_forward_dt(&g, d_x, d_y, dt, s), s);
    got = host_copy(d_y, out, dt, s);
    check_exact(what, got, want_avg, out, dt);
    free(got);

    /* backward: the windows added into each cell in (oy, ox) order, as the kernels' gather */
    float *acc = xmalloc((size_t)in * sizeof(float));
    void *want_dx = hbuf(in, dt);
    h2d(d_arg, want_arg, (size_t)out * sizeof(int), s);
    void *d_dy = dev_copy(dyv, out, dt, s);
    for (int avg = 0; avg <= 1; avg++) {
        for (int a = 0; a <= 1; a++) {
            for (long i = 0; i < in; i++)
                acc[i] = a ? hget(dx0, dt, i) : 0.0f;
            for (int si = 0; si < g.n; si++)
                for (int oy = 0; oy < g.oh; oy++)
                    for (int ox = 0; ox < g.ow; ox++)
                        for (int ch = 0; ch < g.c; ch++) {
                            const long o = (((long)si * g.oh + oy) * g.ow + ox) * g.c + ch;
                            const float dy = hget(dyv, dt, o);
                            if (!avg) {
                                if (want_arg[o] >= 0)
                                    acc[si * in_s + want_arg[o]] += dy;
                                continue;
                            }
                            int y0, y1, x0, x1;
                            host_window(&g, oy, ox, &y0, &y1, &x0, &x1);
                            if (y1 <= y0 || x1 <= x0)
                                continue;
                            const float inv = 1.0f / (float)((y1 - y0) * (x1 - x0));
                            for (int iy = y0; iy < y1; iy++)
                                for (int ix = x0; ix < x1; ix++)
                                    acc[si * in_s + (iy * g.w + ix) * g.c + ch] += dy * inv;
                        }
            for (long i = 0; i < in; i++)
                hset(want_dx, dt, i, acc[i]);
            void *d_dx = dev_copy(dx0, in, dt, s);
            snprintf(what, sizeof what, "%s_backward %s n=%d %dx%dx%d k=%dx%d s=%d accumulate=%d", avg ? "avgpool" : "maxpool",
                     dt_name(dt), g.n, g.h, g.w, g.c, g.kh, g.kw, g.stride, a);
            sync_launch(what, avg ? ct_launch_avgpool_backward_dt(&g, d_dy, d_dx, a, dt, s)
                                  : ct_launch_maxpool_backward_dt(&g, d_dy, d_arg, d_dx, a, dt, s), s);
            got = host_copy(d_dx, in, dt, s);
            check_exact(what, got, want_dx, in, dt);
            GPU_OK(cudaFree(d_dx));
            free(got);
        }
    }
    GPU_OK(cudaFree(d_x));
    GPU_OK(cudaFree(d_y));
    GPU_OK(cudaFree(d_arg));
    GPU_OK(cudaFree(d_dy));
    free(x), free(dyv), free(dx0), free(want_max), free(want_avg), free(want_arg), free(arg), free(acc), free(want_dx);
}

static void test_pool(cudaStream_t s)
{
    for (int k = 0; k < 2; k++) {
        const int dt = half_types[k];
        test_pool_case(s, pool_geom(2, 7, 9, 3, 3, 3, 2, 1, 1, 4, 5), dt);   /* overlapping, padded all round */
        test_pool_case(s, pool_geom(2, 4, 4, 5, 2, 2, 2, 2, 0, 3, 2), dt);   /* a row of windows wholly in padding */
        test_pool_case(s, pool_geom(1, 6, 5, 1, 3, 3, 1, 1, 1, 6, 5), dt);   /* stride 1: up to 9 windows per cell */
        test_pool_case(s, pool_geom(3, 8, 8, 6, 2, 2, 3, 0, 0, 3, 3), dt);   /* cells in no window */
        test_pool_case(s, pool_geom(16, 26, 26, 32, 2, 2, 2, 0, 0, 13, 13), dt); /* fmnist_cnn's pooling */
    }
}

/* ---- column sums ---- */

static void test_column_sums_case(cudaStream_t s, long rows, int c, int tall, int dt)
{
    const long total = rows * c;
    void *dy = hrand(total, dt, -1.0f, 1.0f);
    /* Each widened half value has at most 11 significant bits between 2^-24 and 2^0 (bf16: 8 bits
     * from 2^-133 up, but uniform values below 2^-30 do not occur here), so the double sums of up
     * to 2^20 rows are exact in any order: the device's (float)sum must equal these bits. */
    float *want = hbuf(c, F32);
    for (int j = 0; j < c; j++) {
        double acc = 0.0;
        for (long r = 0; r < rows; r++)
            acc += hget(dy, dt, r * c + j);
        want[j] = (float)acc;
    }
    void *d_dy = dev_copy(dy, total, dt, s);
    float *d_db = dev_poisoned(c, F32, s);
    const size_t ws_bytes = (size_t)1024 * (size_t)c * sizeof(double);
    void *ws = tall ? dev_alloc(ws_bytes) : NULL;
    char what[96];
    snprintf(what, sizeof what, "column_sums%s %s rows=%ld c=%d", tall ? "_tall" : "", dt_name(dt), rows, c);
    sync_launch(what, tall ? ct_launch_column_sums_tall_dt(d_dy, d_db, rows, c, ws, ws_bytes, dt, s)
                           : ct_launch_column_sums_dt(d_dy, d_db, rows, c, dt, s), s);
    float *got = host_copy(d_db, c, F32, s);
    check_exact(what, got, want, c, F32);
    GPU_OK(cudaFree(d_dy));
    GPU_OK(cudaFree(d_db));
    if (ws)
        GPU_OK(cudaFree(ws));
    free(dy), free(want), free(got);
}

static void test_column_sums(cudaStream_t s)
{
    for (int k = 0; k < 2; k++) {
        const int dt = half_types[k];
        test_column_sums_case(s, 37, 13, 0, dt);
        test_column_sums_case(s, 4097, 70, 0, dt);
        test_column_sums_case(s, 5000, 70, 1, dt);
        test_column_sums_case(s, 173056, 32, 1, dt);  /* fmnist_cnn conv1's bias at batch 256 */
        test_column_sums_case(s, 100, 7, 1, dt);      /* short: the one-pass fallback */
    }
}

/* ---- the loss scale in the loss gradient ---- */

static void test_xent_scaled(cudaStream_t s)
{
    const int n = 301, k = 10;
    const long nk = (long)n * k;
    const float grad_scale = 1.0f / (float)n;
    float *logits = hrand(nk, F32, -5.0f, 5.0f);
    int *labels = xmalloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        labels[i] = (int)(ct_rng_next(&rng) % (uint64_t)k);
    float *d_logits = dev_copy(logits, nk, F32, s), *d_d = dev_poisoned(nk, F32, s);
    int *d_labels = dev_alloc((size_t)n * sizeof(int));
    h2d(d_labels, labels, (size_t)n * sizeof(int), s);
    float *d_loss = dev_alloc(sizeof(float));
    unsigned *d_correct = dev_alloc(sizeof(unsigned));

    GPU_OK(cudaMemsetAsync(d_loss, 0, sizeof(float), s));
    GPU_OK(cudaMemsetAsync(d_correct, 0, sizeof(unsigned), s));
    sync_launch("softmax_xent", ct_launch_softmax_xent(d_logits, d_labels, d_d, d_loss, d_correct, n, k, grad_scale, s), s);
    float *base = host_copy(d_d, nk, F32, s), loss0;
    unsigned correct0;
    d2h(&loss0, d_loss, sizeof loss0, s);
    d2h(&correct0, d_correct, sizeof correct0, s);

    /* NULL scaler: the plain launcher's bits */
    GPU_OK(cudaMemsetAsync(d_d, 0xff, (size_t)nk * sizeof(float), s));
    sync_launch("softmax_xent_scaled NULL",
                ct_launch_softmax_xent_scaled(d_logits, d_labels, d_d, NULL, NULL, n, k, grad_scale, NULL, s), s);
    float *got = host_copy(d_d, nk, F32, s);
    check_exact("softmax_xent_scaled NULL vs softmax_xent", got, base, nk, F32);
    free(got);

    const float loss_scales[2] = { 32768.0f, 3.0f };  /* a power of two, and one whose product rounds */
    float *want = hbuf(nk, F32);
    for (int t = 0; t < 2; t++) {
        ct_scaler sc = make_scaler(loss_scales[t], 0, 2000, 0);
        put_scaler(&sc, s);
        for (long i = 0; i < nk; i++)
            want[i] = base[i] * loss_scales[t];
        GPU_OK(cudaMemsetAsync(d_loss, 0, sizeof(float), s));
        GPU_OK(cudaMemsetAsync(d_correct, 0, sizeof(unsigned), s));
        GPU_OK(cudaMemsetAsync(d_d, 0xff, (size_t)nk * sizeof(float), s));
        char what[96];
        snprintf(what, sizeof what, "softmax_xent_scaled scale=%g", loss_scales[t]);
        sync_launch(what, ct_launch_softmax_xent_scaled(d_logits, d_labels, d_d, d_loss, d_correct, n, k, grad_scale,
                                                        g_scaler, s), s);
        got = host_copy(d_d, nk, F32, s);
        check_exact(what, got, want, nk, F32);
        float loss;
        unsigned correct;
        d2h(&loss, d_loss, sizeof loss, s);
        d2h(&correct, d_correct, sizeof correct, s);
        /* the loss is not scaled (its float sum's last bits follow the atomics' order) */
        CHECK_NEAR(loss, loss0, 1e-5 * fabs(loss0));
        CHECK(correct == correct0);
        free(got);
    }
    GPU_OK(cudaFree(d_logits));
    GPU_OK(cudaFree(d_d));
    GPU_OK(cudaFree(d_labels));
    GPU_OK(cudaFree(d_loss));
    GPU_OK(cudaFree(d_correct));
    free(logits), free(labels), free(base), free(want);
}

/* ---- the unscale pass ---- */

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_unscale_case(cudaStream_t s, long n, int offset, float loss_scale, int plant)
{
    float *g = hrand(n, F32, -1000.0f, 1000.0f), *want = hbuf(n, F32);
    const float bad[] = { NAN, INFINITY, -INFINITY, from_bits(0xffc00001u), from_bits(0x7f800001u) };
    const long where[] = { 0, n / 2, n - 1, n / 3, n - 2 };
    int planted = 0;
    for (int k = 0; k < 5 && plant; k++) {
        const long i = where[k];
        if (i >= 0 && i < n && isfinite(g[i])) {
            g[i] = bad[k];
            planted++;
        }
    }
    const float inv = 1.0f / loss_scale;
    int overflow = 0;
    if (loss_scale < 1.0f && n > 100) {  /* a finite gradient the inverse overflows: counted too */
        g[n / 4] = FLT_MAX;         /* n / 4 is none of the planted places */
        overflow = 1;
    }
    for (long i = 0; i < n; i++)
        want[i] = g[i] * inv;
    long nonfinite = 0;
    for (long i = 0; i < n; i++)
        nonfinite += !isfinite(want[i]);
    CHECK(nonfinite == planted + overflow);  /* the reference itself holds what was planted */
    float *d = dev_alloc((size_t)(n + offset) * sizeof(float));
    h2d(d + offset, g, (size_t)n * sizeof(float), s);
    const int start = 2;  /* the pass adds to the verdict: another buffer may have counted already */
    ct_scaler sc = make_scaler(loss_scale, start, 2000, 0);
    put_scaler(&sc, s);
    char what[128];
    snprintf(what, sizeof what, "unscale n=%ld offset=%d scale=%g planted=%d", n, offset, loss_scale, planted);
    sync_launch(what, ct_launch_unscale_gradients(d + offset, n, g_scaler, s), s);
    float *got = host_copy(d + offset, n, F32, s);
    check_exact(what, got, want, n, F32);
    ct_scaler after = get_scaler(s);
    CHECK_MSG(after.nonfinite == start + (int)nonfinite, "%s: nonfinite %d, want %d", what, (int)after.nonfinite,
              start + (int)nonfinite);
    CHECK(after.loss_scale == loss_scale && after.applied_steps == 0 && after.growth_steps == 2000);
    GPU_OK(cudaFree(d));
    free(g), free(want), free(got);
}

static void test_unscale(cudaStream_t s)
{
    for (int offset = 0; offset <= 1; offset++) {  /* float4 and scalar paths */
        test_unscale_case(s, 1000003, offset, 65536.0f, 1);
        test_unscale_case(s, 1000003, offset, 3.0f, 1);
        test_unscale_case(s, 1000003, offset, 0.5f, 1);  /* a fixed scale below 1 overflows FLT_MAX */
        test_unscale_case(s, 1000003, offset, 1024.0f, 0);
        test_unscale_case(s, 3, offset, 8.0f, 1);
        test_unscale_case(s, 1, offset, 8.0f, 1);
    }
}

/* ---- optimizers with the scaler and the half weight copy ---- */

/* One CHECK: the half copy holds round(w) for the device's own fp32 masters. */
static void check_copy(const char *what, const void *d_half, const float *d_w, long n, int dt, cudaStream_t s)
{
    float *w = host_copy(d_w, n, F32, s);
    void *got = host_copy(d_half, n, dt, s), *want = hbuf(n, dt);
    for (long i = 0; i < n; i++)
        hset(want, dt, i, w[i]);
    char cwhat[200];
    snprintf(cwhat, sizeof cwhat, "%s (half copy)", what);
    check_exact(cwhat, got, want, n, dt);
    free(w), free(got), free(want);
}

/* One CHECK: a device buffer holds exactly the bytes of a host one. */
static void check_unchanged(const char *what, const void *d, const void *h, size_t bytes, cudaStream_t s)
{
    unsigned char *got = xmalloc(bytes);
    d2h(got, d, bytes, s);
    CHECK_MSG(memcmp(got, h, bytes) == 0, "%s: changed on a skipped step", what);
    free(got);
}

static void test_sgd_case(cudaStream_t s, long n, int offset, float momentum, int nesterov, float wd, int dt)
{
    const float lr = 0.05f;
    float *w = hrand(n, F32, -1.0f, 1.0f), *vel = xmalloc((size_t)n * sizeof(float)), *g = hbuf(n, F32);
    memset(vel, 0, (size_t)n * sizeof(float));
    float *d_w = dev_alloc((size_t)(n + offset) * 4), *d_g = dev_alloc((size_t)(n + offset) * 4);
    float *d_v = dev_alloc((size_t)(n + offset) * 4);
    void *d_half = dev_poisoned(n + offset, dt, s);
    h2d(d_w + offset, w, (size_t)n * 4, s);
    h2d(d_v + offset, vel, (size_t)n * 4, s);
    char what[160];
    snprintf(what, sizeof what, "sgd scaler n=%ld offset=%d momentum=%g nesterov=%d wd=%g copy %s", n, offset,
             momentum, nesterov, wd, dt_name(dt));
    void *half_at = (char *)d_half + (size_t)offset * dt_size(dt);
    for (int t = 1; t <= 3; t++) {
        for (long i = 0; i < n; i++)
            g[i] = uniform(-1.0f, 1.0f);
        h2d(d_g + offset, g, (size_t)n * 4, s);
        set_step(s, lr * (float)t, 1.0f, 1.0f, 0);
        ct_scaler sc = make_scaler(1024.0f, 0, 2000, t - 1);
        put_scaler(&sc, s);
        sync_launch(what, ct_launch_sgd_step_dt(d_w + offset, d_g + offset, momentum != 0.0f ? d_v + offset : NULL, n,
                                                g_step, momentum, nesterov, wd, g_scaler, half_at, dt, s), s);
        ct_cpu_sgd_step(w, g, momentum != 0.0f ? vel : NULL, (size_t)n, lr * (float)t, momentum, nesterov, wd);
    }
    float *got = host_copy(d_w + offset, n, F32, s);
    check_exact(what, got, w, n, F32);  /* the CPU's bits, as the fp32 kernel's */
    free(got);
    if (momentum != 0.0f) {
        got = host_copy(d_v + offset, n, F32, s);
        check_exact(what, got, vel, n, F32);
        free(got);
    }
    check_copy(what, half_at, d_w + offset, n, dt, s);

    /* a non-finite verdict: nothing moves, not a bit */
    float *w_before = host_copy(d_w, n + offset, F32, s), *v_before = host_copy(d_v, n + offset, F32, s);
    void *h_before = host_copy(d_half, n + offset, dt, s);
    for (long i = 0; i < n; i++)
        g[i] = uniform(-1.0f, 1.0f);
    h2d(d_g + offset, g, (size_t)n * 4, s);
    ct_scaler sc = make_scaler(1024.0f, 7, 2000, 3);
    put_scaler(&sc, s);
    sync_launch(what, ct_launch_sgd_step_dt(d_w + offset, d_g + offset, momentum != 0.0f ? d_v + offset : NULL, n,
                                            g_step, momentum, nesterov, wd, g_scaler, half_at, dt, s), s);
    check_unchanged("sgd w", d_w, w_before, (size_t)(n + offset) * 4, s);
    check_unchanged("sgd vel", d_v, v_before, (size_t)(n + offset) * 4, s);
    check_unchanged("sgd half copy", d_half, h_before, (size_t)(n + offset) * dt_size(dt), s);
    GPU_OK(cudaFree(d_w));
    GPU_OK(cudaFree(d_g));
    GPU_OK(cudaFree(d_v));
    GPU_OK(cudaFree(d_half));
    free(w), free(vel), free(g), free(w_before), free(v_before), free(h_before);
}

static void test_sgd_scaler(cudaStream_t s)
{
    for (int k = 0; k < 2; k++) {
        const int dt = half_types[k];
        for (int offset = 0; offset <= 1; offset++) {  /* float4 and scalar kernels */
            test_sgd_case(s, 100003, offset, 0.0f, 0, 0.0f, dt);
            test_sgd_case(s, 100003, offset, 0.9f, 0, 1e-4f, dt);
            test_sgd_case(s, 100003, offset, 0.9f, 1, 5e-4f, dt);
            test_sgd_case(s, 7, offset, 0.9f, 1, 0.0f, dt);  /* the float4 kernel's tail */
        }
    }
}

static void test_adam_case(cudaStream_t s, long n, float wd, int decoupled, int dt)
{
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, lr = 1e-2f;
    float *w = hrand(n, F32, -1.0f, 1.0f), *m = xmalloc((size_t)n * 4), *v = xmalloc((size_t)n * 4), *g = hbuf(n, F32);
    memset(m, 0, (size_t)n * 4);
    memset(v, 0, (size_t)n * 4);
    /* two device copies: one with the scaler (t from applied_steps, corrections in the kernel), one
     * through the plain launcher with the host's corrections: the two must agree bit for bit */
    float *dw[2], *dm[2], *dv[2];
    for (int k = 0; k < 2; k++) {
        dw[k] = dev_copy(w, n, F32, s);
        dm[k] = dev_copy(m, n, F32, s);
        dv[k] = dev_copy(v, n, F32, s);
    }
    float *dg = dev_alloc((size_t)n * 4);
    void *d_half = dev_poisoned(n, dt, s);
    char what[160];
    snprintf(what, sizeof what, "adam scaler n=%ld wd=%g decoupled=%d copy %s", n, wd, decoupled, dt_name(dt));
    const long first_t = 3;  /* a resumed run: applied_steps 2 before the first update here */
    for (long t = first_t; t < first_t + 4; t++) {
        for (long i = 0; i < n; i++)
            g[i] = uniform(-1.0f, 1.0f);
        h2d(dg, g, (size_t)n * 4, s);
        /* NaN corrections in the step: the scaled kernel must not read them */
        set_step(s, lr, NAN, NAN, 0);
        ct_scaler sc = make_scaler(4096.0f, 0, 2000, t - 1);
        put_scaler(&sc, s);
        sync_launch(what, ct_launch_adam_step_dt(dw[0], dg, dm[0], dv[0], n, g_step, b1, b2, eps, wd, decoupled,
                                                 g_scaler, d_half, dt, s), s);
        set_step(s, lr, (float)(1.0 - pow(b1, (double)t)), (float)(1.0 - pow(b2, (double)t)), 0);
        sync_launch(what, ct_launch_adam_step(dw[1], dg, dm[1], dv[1], n, g_step, b1, b2, eps, wd, decoupled, s), s);
        ct_cpu_adam_step(w, g, m, v, (size_t)n, lr, b1, b2, eps, wd, decoupled, t);
    }
    const float *want[3] = { w, m, v };
    float *const *dev[3] = { dw, dm, dv };
    const char *names[3] = { "w", "m", "v" };
    for (int k = 0; k < 3; k++) {
        float *a = host_copy(dev[k][0], n, F32, s), *b = host_copy(dev[k][1], n, F32, s);
        char kwhat[200];
        snprintf(kwhat, sizeof kwhat, "%s (%s: scaled vs plain launcher)", what, names[k]);
        check_exact(kwhat, a, b, n, F32);
        /* against the CPU: close, as the existing Adam test (the fp32 kernel's own bits vs the CPU
         * are test_gpu_kernels' business) */
        long bad = 0;
        for (long i = 0; i < n; i++)
            bad += !(fabs((double)a[i] - (double)want[k][i]) <= 1e-5 * fabs((double)want[k][i]) + 1e-7);
        CHECK_MSG(bad == 0, "%s (%s): %ld values beyond 1e-5 of the CPU's", what, names[k], bad);
        free(a), free(b);
    }
    check_copy(what, d_half, dw[0], n, dt, s);

    /* skipped: w, m, v and the copy keep their bits */
    float *w_before = host_copy(dw[0], n, F32, s), *m_before = host_copy(dm[0], n, F32, s),
          *v_before = host_copy(dv[0], n, F32, s);
    void *h_before = host_copy(d_half, n, dt, s);
    ct_scaler sc = make_scaler(4096.0f, 1, 2000, 10);
    put_scaler(&sc, s);
    sync_launch(what, ct_launch_adam_step_dt(dw[0], dg, dm[0], dv[0], n, g_step, b1, b2, eps, wd, decoupled, g_scaler,
                                             d_half, dt, s), s);
    check_unchanged("adam w", dw[0], w_before, (size_t)n * 4, s);
    check_unchanged("adam m", dm[0], m_before, (size_t)n * 4, s);
    check_unchanged("adam v", dv[0], v_before, (size_t)n * 4, s);
    check_unchanged("adam half copy", d_half, h_before, (size_t)n * dt_size(dt), s);
    for (int k = 0; k < 2; k++) {
        GPU_OK(cudaFree(dw[k]));
        GPU_OK(cudaFree(dm[k]));
        GPU_OK(cudaFree(dv[k]));
    }
    GPU_OK(cudaFree(dg));
    GPU_OK(cudaFree(d_half));
    free(w), free(m), free(v), free(g), free(w_before), free(m_before), free(v_before), free(h_before);
}

static void test_adam_scaler(cudaStream_t s)
{
    for (int k = 0; k < 2; k++) {
        test_adam_case(s, 100003, 0.0f, 0, half_types[k]);
        test_adam_case(s, 100003, 1e-2f, 0, half_types[k]);
        test_adam_case(s, 100003, 1e-1f, 1, half_types[k]);
        test_adam_case(s, 5, 1e-2f, 1, half_types[k]);
    }
}

/* ---- the scaler's update ---- */

static int same_scaler(const ct_scaler *a, const ct_scaler *b)
{
    return memcmp(&a->loss_scale, &b->loss_scale, sizeof a->loss_scale) == 0 && a->nonfinite == b->nonfinite &&
           a->clean_steps == b->clean_steps && a->growth_steps == b->growth_steps &&
           a->applied_steps == b->applied_steps && a->skipped_steps == b->skipped_steps;
}

/* Steps of: unscale over a gradient with verdict[i] NaNs planted, a scaled SGD step, the update;
 * the device's state against ct_scaler_update on the host after each, and the weights untouched
 * on each skipped step. Returns the number of times the scale went up and down. */
static void run_scaler_sequence(cudaStream_t s, const char *name, ct_scaler start, const int *verdict, int steps,
                                int *ups, int *downs)
{
    const long n = 4099;
    float *g = hbuf(n, F32), *w = hrand(n, F32, -1.0f, 1.0f);
    float *d_g = dev_alloc((size_t)n * 4), *d_w = dev_copy(w, n, F32, s);
    ct_scaler host = start;
    put_scaler(&host, s);
    set_step(s, 0.01f, 1.0f, 1.0f, 0);
    *ups = *downs = 0;
    for (int i = 0; i < steps; i++) {
        for (long e = 0; e < n; e++)
            g[e] = uniform(-1.0f, 1.0f) * host.loss_scale;
        for (int k = 0; k < verdict[i]; k++)
            g[(k * 977L) % n] = k % 2 ? INFINITY : NAN;
        h2d(d_g, g, (size_t)n * 4, s);
        float *w_before = host_copy(d_w, n, F32, s);
        sync_launch(name, ct_launch_unscale_gradients(d_g, n, g_scaler, s), s);
        sync_launch(name, ct_launch_sgd_step_dt(d_w, d_g, NULL, n, g_step, 0.0f, 0, 0.0f, g_scaler, NULL, F16, s), s);
        sync_launch(name, ct_launch_scaler_update(g_scaler, s), s);
        if (verdict[i])
            check_unchanged(name, d_w, w_before, (size_t)n * 4, s);
        const float before = host.loss_scale;
        host.nonfinite += verdict[i];
        ct_scaler_update(&host);
        *ups += host.loss_scale > before;
        *downs += host.loss_scale < before;
        ct_scaler dev = get_scaler(s);
        CHECK_MSG(same_scaler(&dev, &host),
                  "%s step %d: device scale %g nonfinite %d clean %d applied %lld skipped %lld; host scale %g clean %d "
                  "applied %lld skipped %lld", name, i, dev.loss_scale, (int)dev.nonfinite, (int)dev.clean_steps,
                  (long long)dev.applied_steps, (long long)dev.skipped_steps, host.loss_scale, (int)host.clean_steps,
                  (long long)host.applied_steps, (long long)host.skipped_steps);
        free(w_before);
    }
    GPU_OK(cudaFree(d_g));
    GPU_OK(cudaFree(d_w));
    free(g), free(w);
}

static void test_scaler_update(cudaStream_t s)
{
    int ups, downs;
    /* dynamic, growth every 3 clean steps: doublings, a skip in the middle of a run (the count
     * restarts), skips in a row (halvings) */
    const int seq[] = { 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 1, 1, 1, 0, 0, 0, 0 };
    const int nseq = (int)(sizeof seq / sizeof seq[0]);
    run_scaler_sequence(s, "scaler dynamic", make_scaler(32768.0f, 0, 3, 0), seq, nseq, &ups, &downs);
    CHECK_MSG(ups == 3 && downs == 4, "scaler dynamic: %d doublings, %d halvings; want 3 and 4", ups, downs);
    /* at the ceiling: doubling stops at 2^24 */
    const int clean[] = { 0, 0, 0, 0 };
    run_scaler_sequence(s, "scaler ceiling", make_scaler(0x1p23f, 0, 1, 0), clean, 4, &ups, &downs);
    CHECK(ups == 1 && downs == 0);
    /* at the floor: halving stops at 1 */
    const int skips[] = { 1, 2, 1, 1 };
    run_scaler_sequence(s, "scaler floor", make_scaler(4.0f, 0, 2000, 0), skips, 4, &ups, &downs);
    CHECK(ups == 0 && downs == 2);
    /* fixed: the scale never moves, the skips are still skipped and counted */
    const int mixed[] = { 0, 1, 0, 0, 5, 0 };
    run_scaler_sequence(s, "scaler fixed", make_scaler(128.0f, 0, 0, 0), mixed, 6, &ups, &downs);
    CHECK(ups == 0 && downs == 0);
    ct_scaler end = get_scaler(s);
    CHECK(end.skipped_steps == 2 && end.applied_steps == 4 && end.loss_scale == 128.0f && end.nonfinite == 0);
}

/* ---- argument checks ---- */

static void test_bad_args(cudaStream_t s)
{
    void *d = dev_alloc(64);
    float *f = d;
    CHECK(ct_launch_cast(d, d, 4, F32, 3, s) == INVALID);  /* CT_DTYPE_I32: no kernel */
    CHECK(ct_launch_cast(d, d, 4, -1, F16, s) == INVALID);
    CHECK(ct_launch_cast(NULL, NULL, 0, F32, F16, s) == 0);
    CHECK(ct_launch_add_dt(d, d, d, 4, 3, s) == INVALID);
    CHECK(ct_launch_accumulate_dt(d, d, 4, 1, F16, 7, s) == INVALID);
    CHECK(ct_launch_accumulate_dt(NULL, NULL, 0, 1, F16, F32, s) == 0);
    CHECK(ct_launch_bias_activation_forward_dt(d, d, 2, 2, CT_ACT_RELU, F16, 3, s) == INVALID);
    CHECK(ct_launch_activation_forward_dt(d, d, 4, CT_ACT_RELU, 4, s) == INVALID);
    CHECK(ct_launch_activation_backward_dt(d, d, d, d, 4, CT_ACT_RELU, 0, 3, s) == INVALID);
    CHECK(ct_launch_column_sums_dt(d, f, 2, 2, 3, s) == INVALID);
    CHECK(ct_launch_dropout_backward_dt(d, d, d, 4, 0.5f, 0, 3, s) == INVALID);
    CHECK(ct_launch_pad_nhwc_dt(d, d, 1, 1, 1, 1, 1, 1, 3, s) == INVALID);
    ct_window_geom g = pool_geom(1, 2, 2, 1, 2, 2, 2, 0, 0, 1, 1);
    CHECK(ct_launch_maxpool_forward_dt(&g, d, d, d, 3, s) == INVALID);
    CHECK(ct_launch_avgpool_backward_dt(&g, d, d, 0, 3, s) == INVALID);
    /* the half copy must be fp16 or bf16; without a copy its dtype is not read */
    CHECK(ct_launch_sgd_step_dt(f, f, NULL, 4, g_step, 0.0f, 0, 0.0f, NULL, d, F32, s) == INVALID);
    CHECK(ct_launch_adam_step_dt(f, f, f, f, 4, g_step, 0.9f, 0.999f, 1e-8f, 0.0f, 0, NULL, d, 3, s) == INVALID);
    GPU_OK(cudaMemsetAsync(d, 0, 64, s));
    sync_launch("sgd without a copy, dtype ignored",
                ct_launch_sgd_step_dt(f, f, NULL, 4, g_step, 0.0f, 0, 0.0f, NULL, NULL, 99, s), s);
    CHECK(ct_launch_unscale_gradients(f, 4, NULL, s) == INVALID);
    CHECK(ct_launch_unscale_gradients(NULL, 0, NULL, s) == 0);
    CHECK(ct_launch_scaler_update(NULL, s) == INVALID);
    GPU_OK(cudaFree(d));
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    cudaStream_t s;
    GPU_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    g_step = dev_alloc(sizeof *g_step);
    g_scaler = dev_alloc(sizeof *g_scaler);
    test_cast(s);
    test_add_accumulate(s);
    test_bias_act(s);
    test_activation(s);
    test_dropout(s);
    test_pad_crop(s);
    test_pool(s);
    test_column_sums(s);
    test_xent_scaled(s);
    test_unscale(s);
    test_sgd_scaler(s);
    test_adam_scaler(s);
    test_scaler_update(s);
    test_bad_args(s);
    GPU_OK(cudaFree(g_step));
    GPU_OK(cudaFree(g_scaler));
    GPU_OK(cudaStreamDestroy(s));
    return ct_test_done();
}

#else

#include "tests/no_cuda_main.h"

#endif
