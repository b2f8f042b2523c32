// Reductions over flat buffers: the count of non-finite values, which the trainer reads back
// asynchronously to skip a step (mixed precision) or stop on a diverged loss.
// Bandwidth-bound: 16-byte loads when the buffer is aligned, 32-bit indices when the size allows,
// one atomic per block into the device counter (an integer sum, so its order does not matter).
// Also the mixed-precision unscale pass, which multiplies the fp32 gradients by 1 / scale and
// counts the non-finite results into the loss scaler's verdict in the same read.

#include <climits>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels.h"
#include "launch.cuh"

namespace {

using namespace ct_launch;
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// All exponent bits set: inf or NaN. Tested on the bits, not with isfinite, which fast-math
// builds may fold to true.
__device__ __forceinline__ unsigned nonfinite(float v)
{
    return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
}

// Adds this thread's count into *count: a warp sum, a block sum, then one atomic per block.
// Every thread of the block must call it (it synchronises the block).
__device__ __forceinline__ void block_add(unsigned bad, unsigned *count)
{
    __shared__ unsigned warp_sums[kThreads / kWarp];
    for (int off = kWarp / 2; off > 0; off >>= 1)
        bad += __shfl_down_sync(kFullMask, bad, off);
    if (threadIdx.x % kWarp == 0)
        warp_sums[threadIdx.x / kWarp] = bad;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned total = 0;
        for (int w = 0; w < kThreads / kWarp; w++)
            total += warp_sums[w];
        if (total)  // the common case, all finite, touches the counter not at all
            atomicAdd(count, total);
    }
}

// x: (n) fp32; count: (1)
template <typename Index>
__global__ void __launch_bounds__(kThreads) count_nonfinite_kernel(const float *x, Index n, unsigned *count)
{
    unsigned bad = 0;
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        bad += nonfinite(x[i]);
    block_add(bad, count);
}

// x: (n) fp32, 16-byte aligned; the n / 4 whole float4s go through the loop, the n % 4 last
// elements to the first threads, so one launch covers any n.
template <typename Index>
__global__ void __launch_bounds__(kThreads) count_nonfinite_vec4_kernel(const float *x, Index n, unsigned *count)
{
    const Index n4 = n / 4;
    const Index tid = (Index)blockIdx.x * blockDim.x + threadIdx.x;
    const Index stride = (Index)gridDim.x * blockDim.x;
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    unsigned bad = 0;
    for (Index i = tid; i < n4; i += stride) {
        const float4 v = x4[i];
        bad += nonfinite(v.x) + nonfinite(v.y) + nonfinite(v.z) + nonfinite(v.w);
    }
    const Index t = n4 * 4 + tid;
    if (t < n)
        bad += nonfinite(x[t]);
    block_add(bad, count);
}

// g: (n) fp32, in place; scaler: (1). g *= 1 / scale, and the non-finite results counted.
// Counted after the multiply: that is what the optimizer would read, and a fixed scale below 1
// (an inverse above 1) can overflow a finite gradient into inf, which must skip the step too. inf
// and NaN stay non-finite through a multiply by a positive finite inverse, so none is missed.
template <typename Index>
__global__ void __launch_bounds__(kThreads) unscale_kernel(float *g, Index n, ct_scaler *scaler)
{
    const float inv = 1.0f / scaler->loss_scale;  // once per thread, IEEE division (not an approximation)
    unsigned bad = 0;
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = __fmul_rn(g[i], inv);
        g[i] = v;
        bad += nonfinite(v);
    }
    block_add(bad, (unsigned *)&scaler->nonfinite);
}

// g: (n) fp32, 16-byte aligned; as unscale_kernel, float4s then the n % 4 tail
template <typename Index>
__global__ void __launch_bounds__(kThreads) unscale_vec4_kernel(float *g, Index n, ct_scaler *scaler)
{
    const float inv = 1.0f / scaler->loss_scale;
    const Index n4 = n / 4;
    const Index tid = (Index)blockIdx.x * blockDim.x + threadIdx.x;
    const Index stride = (Index)gridDim.x * blockDim.x;
    float4 *g4 = reinterpret_cast<float4 *>(g);
    unsigned bad = 0;
    for (Index i = tid; i < n4; i += stride) {
        float4 v = g4[i];
        v.x = __fmul_rn(v.x, inv);
        v.y = __fmul_rn(v.y, inv);
        v.z = __fmul_rn(v.z, inv);
        v.w = __fmul_rn(v.w, inv);
        g4[i] = v;
        bad += nonfinite(v.x) + nonfinite(v.y) + nonfinite(v.z) + nonfinite(v.w);
    }
    const Index t = n4 * 4 + tid;
    if (t < n) {
        const float v = __fmul_rn(g[t], inv);
        g[t] = v;
        bad += nonfinite(v);
    }
    block_add(bad, (unsigned *)&scaler->nonfinite);
}

}  // namespace

// g: (n) fp32, in place; scaler: (1) device memory, its nonfinite added to
extern "C" int ct_launch_unscale_gradients(float *g, long n, ct_scaler *scaler, void *stream)
{
    if (n < 0 || (n > 0 && (!g || !scaler)))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    cudaStream_t s = (cudaStream_t)stream;
    const long long total = (long long)n;
    if (aligned16(g)) {
        const unsigned blocks = blocks_for(total / 4 > 0 ? total / 4 : 1);
        if (total <= INT_MAX)
            unscale_vec4_kernel<unsigned><<<blocks, kThreads, 0, s>>>(g, (unsigned)total, scaler);
        else
            unscale_vec4_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(g, (unsigned long long)total, scaler);
    } else {
        const unsigned blocks = blocks_for(total);
        if (total <= INT_MAX)
            unscale_kernel<unsigned><<<blocks, kThreads, 0, s>>>(g, (unsigned)total, scaler);
        else
            unscale_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(g, (unsigned long long)total, scaler);
    }
    return (int)cudaGetLastError();
}

// x: (n) fp32; count: (1) device counter, added to
extern "C" int ct_launch_count_nonfinite(const float *x, long n, unsigned *count, void *stream)
{
    if (n < 0 || (n > 0 && (!x || !count)))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    cudaStream_t s = (cudaStream_t)stream;
    const long long total = (long long)n;
    if (aligned16(x)) {
        const unsigned blocks = blocks_for(total / 4 > 0 ? total / 4 : 1);
        if (total <= INT_MAX)
            count_nonfinite_vec4_kernel<unsigned><<<blocks, kThreads, 0, s>>>(x, (unsigned)total, count);
        else
            count_nonfinite_vec4_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(
                x, (unsigned long long)total, count);
    } else {
        const unsigned blocks = blocks_for(total);
        if (total <= INT_MAX)
            count_nonfinite_kernel<unsigned><<<blocks, kThreads, 0, s>>>(x, (unsigned)total, count);
        else
            count_nonfinite_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(x, (unsigned long long)total,
                                                                                   count);
    }
    return (int)cudaGetLastError();
}
