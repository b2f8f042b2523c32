// Elementwise kernels: bias + activation, and the SGD update over a flat parameter buffer.
// Both are bandwidth-bound, so they read and write each element once, use 16-byte loads when the
// layout allows, and index with 32 bits when the size allows (64-bit division is slow on the GPU).

#include <climits>
#include <cstdint>

#include <cuda_runtime.h>

#include "engine/types.h"
#include "kernels.h"

// The launchers take the activation as a plain int; these pin the values they rely on.
static_assert(CT_ACT_LINEAR == 0 && CT_ACT_RELU == 1 && CT_ACT_LEAKY == 2 && CT_ACT_SIGMOID == 3 &&
                  CT_ACT_TANH == 4 && CT_ACT_GELU == 5 && CT_ACT_COUNT == 6,
              "kernels.h documents these ct_activation values");

namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; the grid-stride loops do the rest.
// Keeping the grid bounded also keeps i + stride far from overflowing a 32-bit index.
constexpr long long kMaxBlocks = 8192;

unsigned blocks_for(long long work)
{
    long long b = (work + kThreads - 1) / kThreads;
    return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// ---- bias + activation ----

__device__ __forceinline__ float activate(float x, int act)
{
    switch (act) {
    case CT_ACT_RELU:
        return x < 0.0f ? 0.0f : x;  // not fmaxf(x, 0): that turns NaN into 0 and hides it
    case CT_ACT_LEAKY:
        return x < 0.0f ? CT_LEAKY_SLOPE * x : x;
    case CT_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-x));  // expf(-x) = inf for very negative x gives exactly 0
    case CT_ACT_TANH:
        return tanhf(x);
    case CT_ACT_GELU:
        // x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): the erfc form has no
        // cancellation for negative x, where 1 + erf(...) loses most of its digits.
        return 0.5f * x * erfcf(-x * 0.70710678118654752f);
    default:
        return x;
    }
}

// y: (total / c, c); bias: (c) or NULL
template <typename Index>
__global__ void bias_act_kernel(float *y, const float *bias, Index total, Index c, int act)
{
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        float v = y[i];
        if (bias)
            v += bias[i % c];
        y[i] = activate(v, act);
    }
}

// y: (total4 / c4, c4) float4, i.e. (rows, c) with c % 4 == 0; bias: (c4) float4 or NULL
template <typename Index>
__global__ void bias_act_vec4_kernel(float4 *y, const float4 *bias, Index total4, Index c4, int act)
{
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < total4; i += stride) {
        float4 v = y[i];
        if (bias) {
            const float4 b = bias[i % c4];
            v.x += b.x; v.y += b.y; v.z += b.z; v.w += b.w;
        }
        v.x = activate(v.x, act);
        v.y = activate(v.y, act);
        v.z = activate(v.z, act);
        v.w = activate(v.w, act);
        y[i] = v;
    }
}

// ---- SGD ----

struct SgdParams {
    float lr, momentum, weight_decay;
    int nesterov;
};

// One element of PyTorch's SGD; vel is read and written only when momentum != 0.
__device__ __forceinline__ float sgd_elem(float w, float g, float *vel, const SgdParams &p)
{
    // Skipping the product when weight_decay == 0 matches PyTorch, and keeps an inf weight from
    // turning the gradient into NaN through 0 * inf.
    float d = p.weight_decay != 0.0f ? fmaf(p.weight_decay, w, g) : g;
    if (p.momentum != 0.0f) {
        const float v = fmaf(p.momentum, *vel, d);
        *vel = v;
        d = p.nesterov ? fmaf(p.momentum, v, d) : v;
    }
    return fmaf(-p.lr, d, w);
}

// w, g, vel: (n); vel unused when momentum == 0
template <typename Index>
__global__ void sgd_kernel(float *w, const float *g, float *vel, Index n, SgdParams p)
{
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        w[i] = sgd_elem(w[i], g[i], vel ? vel + i : nullptr, p);
}

// w, g, vel: (n), 16-byte aligned; the n / 4 whole float4s go through the loop, the n % 4 last
// elements to the first threads, so one launch covers any n.
template <typename Index>
__global__ void sgd_vec4_kernel(float *w, const float *g, float *vel, Index n, SgdParams p)
{
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
        wv.x = sgd_elem(wv.x, gv.x, &vv.x, p);
        wv.y = sgd_elem(wv.y, gv.y, &vv.y, p);
        wv.z = sgd_elem(wv.z, gv.z, &vv.z, p);
        wv.w = sgd_elem(wv.w, gv.w, &vv.w, p);
        w4[i] = wv;
        if (v4)
            v4[i] = vv;
    }
    const Index t = n4 * 4 + tid;
    if (t < n)
        w[t] = sgd_elem(w[t], g[t], vel ? vel + t : nullptr, p);
}

}  // namespace

// y: (rows, c) fp32; bias: (c) fp32 or NULL
extern "C" int ct_launch_bias_activation_forward(float *y, const float *bias, long rows, int c, int act,
                                                 void *stream)
{
    if (rows < 0 || c <= 0 || act < 0 || act >= CT_ACT_COUNT || (rows > 0 && !y))
        return (int)cudaErrorInvalidValue;
    if (rows == 0 || (act == CT_ACT_LINEAR && !bias))
        return (int)cudaSuccess;  // nothing to add, nothing to apply
    if (rows > LLONG_MAX / c)
        return (int)cudaErrorInvalidValue;
    const long long total = (long long)rows * c;
    cudaStream_t s = (cudaStream_t)stream;
    if (c % 4 == 0 && aligned16(y) && (!bias || aligned16(bias))) {
        const long long total4 = total / 4;
        const unsigned blocks = blocks_for(total4);
        if (total4 <= INT_MAX)
            bias_act_vec4_kernel<unsigned><<<blocks, kThreads, 0, s>>>(
                (float4 *)y, (const float4 *)bias, (unsigned)total4, (unsigned)(c / 4), act);
        else
            bias_act_vec4_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(
                (float4 *)y, (const float4 *)bias, (unsigned long long)total4,
                (unsigned long long)(c / 4), act);
    } else {
        const unsigned blocks = blocks_for(total);
        if (total <= INT_MAX)
            bias_act_kernel<unsigned><<<blocks, kThreads, 0, s>>>(y, bias, (unsigned)total, (unsigned)c, act);
        else
            bias_act_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(
                y, bias, (unsigned long long)total, (unsigned long long)c, act);
    }
    return (int)cudaGetLastError();
}

// w, g: (n) fp32; vel: (n) fp32 or NULL when momentum == 0
extern "C" int ct_launch_sgd_step(float *w, const float *g, float *vel, long n, float lr, float momentum,
                                  int nesterov, float weight_decay, void *stream)
{
    if (n < 0 || (n > 0 && (!w || !g)))
        return (int)cudaErrorInvalidValue;
    if (momentum != 0.0f && n > 0 && !vel)
        return (int)cudaErrorInvalidValue;
    if (nesterov && momentum == 0.0f)
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    SgdParams p;
    p.lr = lr;
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
            sgd_vec4_kernel<unsigned><<<blocks, kThreads, 0, s>>>(w, g, vel, (unsigned)total, p);
        else
            sgd_vec4_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(w, g, vel,
                                                                            (unsigned long long)total, p);
    } else {
        const unsigned blocks = blocks_for(total);
        if (total <= INT_MAX)
            sgd_kernel<unsigned><<<blocks, kThreads, 0, s>>>(w, g, vel, (unsigned)total, p);
        else
            sgd_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(w, g, vel, (unsigned long long)total, p);
    }
    return (int)cudaGetLastError();
}
