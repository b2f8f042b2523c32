// Optimizer updates over one flat parameter buffer: SGD (plain, momentum, Nesterov) and Adam/AdamW,
// torch.optim's formulas. The learning rate and Adam's bias corrections are read from a
// ct_device_step in device memory, so a CUDA graph captured once replays with each step's values.
// Bandwidth-bound like the elementwise kernels: each element is read and written once, 32-bit
// indices when the size allows.

#include <climits>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels.h"
#include "launch.cuh"

namespace {

using namespace ct_launch;

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

// w, g, vel: (n); vel unused when momentum == 0
template <typename Index>
__global__ void sgd_kernel(float *w, const float *g, float *vel, Index n, const ct_device_step *step,
                           SgdParams p)
{
    const float lr = step->lr;
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        w[i] = sgd_elem(w[i], g[i], vel ? vel + i : nullptr, lr, p);
}

// w, g, vel: (n), 16-byte aligned; the n / 4 whole float4s go through the loop, the n % 4 last
// elements to the first threads, so one launch covers any n.
template <typename Index>
__global__ void sgd_vec4_kernel(float *w, const float *g, float *vel, Index n, const ct_device_step *step,
                                SgdParams p)
{
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
    }
    const Index t = n4 * 4 + tid;
    if (t < n)
        w[t] = sgd_elem(w[t], g[t], vel ? vel + t : nullptr, lr, p);
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
template <typename Index>
__global__ void adam_kernel(float *w, const float *g, float *m, float *v, Index n, const ct_device_step *step,
                            AdamParams p)
{
    const float lr = step->lr, bias1 = step->bias1, bias2 = step->bias2;
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
        const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, bias2)), p.eps);
        w[i] = __fsub_rn(__fmul_rn(wi, shrink), __fdiv_rn(__fmul_rn(lr, __fdiv_rn(mi, bias1)), denom));
    }
}

}  // namespace

// w, g: (n) fp32; vel: (n) fp32 or NULL when momentum == 0; step: device memory
extern "C" int ct_launch_sgd_step(float *w, const float *g, float *vel, long n, const ct_device_step *step,
                                  float momentum, int nesterov, float weight_decay, void *stream)
{
    if (n < 0 || (n > 0 && (!w || !g || !step)))
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
    if (aligned16(w) && aligned16(g) && (!vel || aligned16(vel))) {
        const unsigned blocks = blocks_for(total / 4 > 0 ? total / 4 : 1);
        if (total <= INT_MAX)
            sgd_vec4_kernel<unsigned><<<blocks, kThreads, 0, s>>>(w, g, vel, (unsigned)total, step, p);
        else
            sgd_vec4_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(w, g, vel, (unsigned long long)total,
                                                                            step, p);
    } else {
        const unsigned blocks = blocks_for(total);
        if (total <= INT_MAX)
            sgd_kernel<unsigned><<<blocks, kThreads, 0, s>>>(w, g, vel, (unsigned)total, step, p);
        else
            sgd_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(w, g, vel, (unsigned long long)total,
                                                                       step, p);
    }
    return (int)cudaGetLastError();
}

// w, g, m, v: (n) fp32; step: device memory
extern "C" int ct_launch_adam_step(float *w, const float *g, float *m, float *v, long n, const ct_device_step *step,
                                   float beta1, float beta2, float eps, float weight_decay, int decoupled,
                                   void *stream)
{
    if (n < 0)
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
    if (n <= INT_MAX)
        adam_kernel<unsigned><<<blocks, kThreads, 0, s>>>(w, g, m, v, (unsigned)n, step, p);
    else
        adam_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(w, g, m, v, (unsigned long long)n, step, p);
    return (int)cudaGetLastError();
}
