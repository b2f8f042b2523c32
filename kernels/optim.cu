// Optimizer updates over one flat parameter buffer: SGD (plain, momentum, Nesterov) and Adam/AdamW,
// torch.optim's formulas. The learning rate and Adam's bias corrections are read from a
// ct_device_step in device memory, so a CUDA graph captured once replays with each step's values.
// Bandwidth-bound like the elementwise kernels: each element is read and written once, 32-bit
// indices when the size allows.
//
// Mixed precision: the master weights, gradients and moments stay fp32. The _dt launchers add an
// optional loss scaler (engine/base/scaler.h, device memory) whose verdict every thread reads
// before touching anything: a non-finite gradient this step (nonfinite != 0) leaves the weights,
// the moments and the half copy exactly as they were. And an optional fp16/bf16 copy of the
// weights, written by the update itself (w_half = round(w) after the step) so that no separate
// cast pass reads the weights again.

#include <climits>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "kernels.h"
#include "dtype.cuh"
#include "launch.cuh"

namespace {

using namespace ct_launch;
using ct_half::narrow;

// The optimizer kernels are templates over two choices fixed at launch: kScaled (a loss scaler is
// given) and H, the half copy's type, or NoCopy. Both compile away when absent, so the plain fp32
// launchers run exactly the kernels they ran before mixed precision existed.
struct NoCopy {};

// The scaler's verdict: true when this step's update must change nothing. Read by every thread
// (the verdict is final: the unscale pass ran before in stream order, and ct_scaler_update, which
// clears it, runs after).
template <bool kScaled> __device__ __forceinline__ bool skip_step(const ct_scaler *scaler)
{
    return kScaled && scaler->nonfinite != 0;
}

// The updated weight into the half copy, when there is one.
template <typename H> __device__ __forceinline__ void store_copy(H *w_half, size_t i, float w)
{
    w_half[i] = narrow<H>(w);
}
__device__ __forceinline__ void store_copy(NoCopy *, size_t, float) {}

// ---- SGD ----

struct SgdParams {
    float momentum, weight_decay;
    int nesterov;
};

// One element of PyTorch's SGD, in the CPU backend's order operation for operation
// (engine/cpu/optim.c, ct_cpu_sgd_step):
//   gi   = g + weight_decay * w
//   vel  = momentum * vel + gi                      (momentum only)
//   step = nesterov ? gi + momentum * vel : vel     (momentum only; else step = gi)
//   w    = w - lr * step
// The _rn intrinsics are never contracted into FMAs (fmaf rounds once where the CPU, built as C11
// without -ffp-contract, rounds the product and the sum apart), so the GPU gives the CPU's bits.
// Like the CPU, the decay product is formed even when weight_decay == 0: for a finite w,
// g + 0 * w == g, and skipping it would part from the CPU only on signed zeros and infinite
// weights. vel is read and written only when momentum != 0.
__device__ __forceinline__ float sgd_elem(float w, float g, float *vel, float lr, const SgdParams &p)
{
    const float gi = __fadd_rn(g, __fmul_rn(p.weight_decay, w));
    float step = gi;
    if (p.momentum != 0.0f) {
        const float v = __fadd_rn(__fmul_rn(p.momentum, *vel), gi);
        *vel = v;
        step = p.nesterov ? __fadd_rn(gi, __fmul_rn(p.momentum, v)) : v;
    }
    return __fsub_rn(w, __fmul_rn(lr, step));
}

// w, g, vel: (n) fp32; vel unused when momentum == 0; scaler or NULL; w_half: (n) H or NULL
template <typename Index, typename H, bool kScaled>
__global__ void sgd_kernel(float *w, const float *g, float *vel, Index n, const ct_device_step *step,
                           SgdParams p, const ct_scaler *scaler, H *w_half)
{
    if (skip_step<kScaled>(scaler))
        return;
    const float lr = step->lr;
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float wn = sgd_elem(w[i], g[i], vel ? vel + i : nullptr, lr, p);
        w[i] = wn;
        store_copy(w_half, i, wn);
    }
}

// w, g, vel: (n) fp32, 16-byte aligned; the n / 4 whole float4s go through the loop, the n % 4
// last elements to the first threads, so one launch covers any n. w_half: (n) H or NULL, written
// element by element (it needs only its type's alignment).
template <typename Index, typename H, bool kScaled>
__global__ void sgd_vec4_kernel(float *w, const float *g, float *vel, Index n, const ct_device_step *step,
                                SgdParams p, const ct_scaler *scaler, H *w_half)
{
    if (skip_step<kScaled>(scaler))
        return;
    const float lr = step->lr;
    const Index n4 = n / 4;
    const Index tid = (Index)blockIdx.x * blockDim.x + threadIdx.x;
    const Index stride = (Index)gridDim.x * blockDim.x;
    float4 *w4 = reinterpret_cast<float4 *>(w);
    const float4 *g4 = reinterpret_cast<const float4 *>(g);
    float4 *v4 = reinterpret_cast<float4 *>(vel);
    for (Index i = tid; i < n4; i += stride) {
        float4 wv = w4[i];
        const float4 gv = g4[i];
        float4 vv = v4 ? v4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        wv.x = sgd_elem(wv.x, gv.x, &vv.x, lr, p);
        wv.y = sgd_elem(wv.y, gv.y, &vv.y, lr, p);
        wv.z = sgd_elem(wv.z, gv.z, &vv.z, lr, p);
        wv.w = sgd_elem(wv.w, gv.w, &vv.w, lr, p);
        w4[i] = wv;
        if (v4)
            v4[i] = vv;
        store_copy(w_half, (size_t)i * 4, wv.x);
        store_copy(w_half, (size_t)i * 4 + 1, wv.y);
        store_copy(w_half, (size_t)i * 4 + 2, wv.z);
        store_copy(w_half, (size_t)i * 4 + 3, wv.w);
    }
    const Index t = n4 * 4 + tid;
    if (t < n) {
        const float wn = sgd_elem(w[t], g[t], vel ? vel + t : nullptr, lr, p);
        w[t] = wn;
        store_copy(w_half, t, wn);
    }
}

// ---- Adam / AdamW ----

struct AdamParams {
    float beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay;
    int decoupled;
};

// w, g, m, v: (n). The CPU backend's formula, operation for operation: the _rn intrinsics are
// never fused into FMAs, and IEEE division and square root are the defaults, so the GPU gives the
// CPU's bits for the same inputs. Four streams of plain loads already saturate memory, so no float4
// path: the update is memory-bound either way and this keeps it readable.
// scaler: NULL (bias corrections from step, as the host computed them) or the loss scaler (skip on
// its verdict; t = applied_steps + 1 and the corrections computed here, so that a skipped step does
// not advance t and no host write is needed per step). w_half: (n) H or NULL.
template <typename Index, typename H, bool kScaled>
__global__ void adam_kernel(float *w, const float *g, float *m, float *v, Index n, const ct_device_step *step,
                            AdamParams p, const ct_scaler *scaler, H *w_half)
{
    if (skip_step<kScaled>(scaler))
        return;
    const float lr = step->lr;
    float bias1, bias2;
    if (!kScaled) {
        bias1 = step->bias1;
        bias2 = step->bias2;
    } else {
        // In double and rounded once, as the CPU backend's ct_cpu_adam_step forms them, so that both
        // backends agree (CUDA's double pow is within 2 ulp of double: the float almost always
        // matches). Once per thread: cheap beside the loop.
        const double t = (double)(scaler->applied_steps + 1);
        bias1 = (float)(1.0 - pow((double)p.beta1, t));
        bias2 = (float)(1.0 - pow((double)p.beta2, t));
    }
    // lr / bias1 and 1 / sqrt(bias2) in double, rounded once, as the CPU takes them out of its loop
    const float step_size = (float)((double)lr / (double)bias1);
    const float inv_sqrt_bias2 = (float)(1.0 / sqrt((double)bias2));
    const float l2 = p.decoupled ? 0.0f : p.weight_decay;
    // AdamW decays the weight before the Adam step, as PyTorch's w.mul_(1 - lr * wd)
    const float shrink = p.decoupled ? __fsub_rn(1.0f, __fmul_rn(lr, p.weight_decay)) : 1.0f;
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float wi = w[i];
        // l2 == 0 skips the product as PyTorch does (an inf weight would make 0 * inf = NaN)
        const float gi = l2 != 0.0f ? __fadd_rn(g[i], __fmul_rn(l2, wi)) : g[i];
        const float mi = __fadd_rn(__fmul_rn(p.beta1, m[i]), __fmul_rn(p.one_minus_beta1, gi));
        const float vi = __fadd_rn(__fmul_rn(p.beta2, v[i]), __fmul_rn(__fmul_rn(p.one_minus_beta2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), inv_sqrt_bias2), p.eps);
        const float wn = __fsub_rn(__fmul_rn(wi, shrink), __fdiv_rn(__fmul_rn(step_size, mi), denom));
        w[i] = wn;
        store_copy(w_half, i, wn);
    }
}

// The half copy's checks: true when (w_half, half_dtype) is usable (no copy, or an fp16/bf16 one).
bool copy_args_ok(const void *w_half, int half_dtype)
{
    return !w_half || half_dtype == CT_DTYPE_F16 || half_dtype == CT_DTYPE_BF16;
}

// f(Tag<H>{}, kScaled) with H the copy's type (NoCopy without one) and kScaled as a
// std::integral_constant<bool, ...>: every combination a kernel instantiation of its own.
template <typename F> int with_variant(const void *w_half, int half_dtype, const ct_scaler *scaler, F &&f)
{
    auto pick_copy = [&](auto scaled) {
        if (!w_half)
            return f(ct_half::Tag<NoCopy>{}, scaled);
        return ct_half::with(half_dtype, [&](auto tag) { return f(tag, scaled); });
    };
    if (scaler)
        return pick_copy(std::integral_constant<bool, true>{});
    return pick_copy(std::integral_constant<bool, false>{});
}

}  // namespace

// w, g: (n) fp32; vel: (n) fp32 or NULL when momentum == 0; step, scaler: device memory;
// w_half: (n) half_dtype or NULL
extern "C" int ct_launch_sgd_step_dt(float *w, const float *g, float *vel, long n, const ct_device_step *step,
                                     float momentum, int nesterov, float weight_decay, const ct_scaler *scaler,
                                     void *w_half, int half_dtype, void *stream)
{
    if (n < 0 || (n > 0 && (!w || !g || !step)) || !copy_args_ok(w_half, half_dtype))
        return (int)cudaErrorInvalidValue;
    if (momentum != 0.0f && n > 0 && !vel)
        return (int)cudaErrorInvalidValue;
    if (nesterov && momentum == 0.0f)
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    SgdParams p;
    p.momentum = momentum;
    p.weight_decay = weight_decay;
    p.nesterov = nesterov != 0;
    if (momentum == 0.0f)
        vel = nullptr;  // PyTorch keeps no buffer without momentum; never touch the caller's
    cudaStream_t s = (cudaStream_t)stream;
    const long long total = (long long)n;
    const bool vec4 = aligned16(w) && aligned16(g) && (!vel || aligned16(vel));
    return with_variant(w_half, half_dtype, scaler, [&](auto tag, auto scaled) {
        using H = CT_TYPE_OF(tag);
        constexpr bool S = decltype(scaled)::value;
        H *copy = (H *)w_half;
        if (vec4) {
            const unsigned blocks = blocks_for(total / 4 > 0 ? total / 4 : 1);
            if (total <= INT_MAX)
                sgd_vec4_kernel<unsigned, H, S><<<blocks, kThreads, 0, s>>>(w, g, vel, (unsigned)total, step, p,
                                                                            scaler, copy);
            else
                sgd_vec4_kernel<unsigned long long, H, S><<<blocks, kThreads, 0, s>>>(
                    w, g, vel, (unsigned long long)total, step, p, scaler, copy);
        } else {
            const unsigned blocks = blocks_for(total);
            if (total <= INT_MAX)
                sgd_kernel<unsigned, H, S><<<blocks, kThreads, 0, s>>>(w, g, vel, (unsigned)total, step, p, scaler,
                                                                       copy);
            else
                sgd_kernel<unsigned long long, H, S><<<blocks, kThreads, 0, s>>>(
                    w, g, vel, (unsigned long long)total, step, p, scaler, copy);
        }
        return (int)cudaGetLastError();
    });
}

// w, g: (n) fp32; vel: (n) fp32 or NULL when momentum == 0; step: device memory
extern "C" int ct_launch_sgd_step(float *w, const float *g, float *vel, long n, const ct_device_step *step,
                                  float momentum, int nesterov, float weight_decay, void *stream)
{
    return ct_launch_sgd_step_dt(w, g, vel, n, step, momentum, nesterov, weight_decay, nullptr, nullptr,
                                 CT_DTYPE_F32, stream);
}

// w, g, m, v: (n) fp32; step, scaler: device memory; w_half: (n) half_dtype or NULL
extern "C" int ct_launch_adam_step_dt(float *w, const float *g, float *m, float *v, long n,
                                      const ct_device_step *step, float beta1, float beta2, float eps,
                                      float weight_decay, int decoupled, const ct_scaler *scaler, void *w_half,
                                      int half_dtype, void *stream)
{
    if (n < 0 || !copy_args_ok(w_half, half_dtype))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    if (!w || !g || !m || !v || !step)
        return (int)cudaErrorInvalidValue;
    AdamParams p;
    p.beta1 = beta1;
    p.beta2 = beta2;
    p.one_minus_beta1 = 1.0f - beta1;  // rounded once, as the CPU's (1.0f - beta1)
    p.one_minus_beta2 = 1.0f - beta2;
    p.eps = eps;
    p.weight_decay = weight_decay;
    p.decoupled = decoupled != 0;
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned blocks = blocks_for(n);
    return with_variant(w_half, half_dtype, scaler, [&](auto tag, auto scaled) {
        using H = CT_TYPE_OF(tag);
        constexpr bool S = decltype(scaled)::value;
        H *copy = (H *)w_half;
        if (n <= INT_MAX)
            adam_kernel<unsigned, H, S><<<blocks, kThreads, 0, s>>>(w, g, m, v, (unsigned)n, step, p, scaler, copy);
        else
            adam_kernel<unsigned long long, H, S><<<blocks, kThreads, 0, s>>>(w, g, m, v, (unsigned long long)n, step,
                                                                              p, scaler, copy);
        return (int)cudaGetLastError();
    });
}

// w, g, m, v: (n) fp32; step: device memory
extern "C" int ct_launch_adam_step(float *w, const float *g, float *m, float *v, long n, const ct_device_step *step,
                                   float beta1, float beta2, float eps, float weight_decay, int decoupled,
                                   void *stream)
{
    return ct_launch_adam_step_dt(w, g, m, v, n, step, beta1, beta2, eps, weight_decay, decoupled, nullptr, nullptr,
                                  CT_DTYPE_F32, stream);
}

namespace {

// s: (1) device memory; one thread: the update is a handful of scalar operations
__global__ void scaler_update_kernel(ct_scaler *s) { ct_scaler_update(s); }

}  // namespace

// s: (1) ct_scaler, device memory
extern "C" int ct_launch_scaler_update(ct_scaler *s, void *stream)
{
    if (!s)
        return (int)cudaErrorInvalidValue;
    scaler_update_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(s);
    return (int)cudaGetLastError();
}
