// Elementwise kernels: bias + activation, activations and their gradients, residual add, gradient
// accumulation, bias gradients (column sums), dropout, and the zero padding cuDNN cannot express.
// All are bandwidth-bound, so they read and write each element once and index with 32 bits when
// the size allows (64-bit division is slow on the GPU). bias + activation also uses 16-byte loads;
// the others rely on plain 4-byte loads, which a warp already coalesces into whole cache lines.
//
// Where the CPU backend computes the same thing, the arithmetic follows its order with the _rn
// intrinsics, which the compiler never fuses into an FMA: the CPU build (C11, no -ffast-math)
// does not fuse either, so both give the same bits wherever no libm function is involved.
//
// Every kernel is a template over the storage types of its tensors (kernels/dtype.cuh): fp16 and
// bf16 values are widened to fp32, computed on exactly as the fp32 kernel computes, and rounded
// once on store. The float4 paths serve fp32 only; half tensors take the scalar loops.

#include <climits>
#include <cstdint>

#include <cuda_runtime.h>

#include "base/rng.h"
#include "base/types.h"
#include "kernels.h"
#include "dtype.cuh"
#include "launch.cuh"

// The launchers take the activation as a plain int; these pin the values they rely on.
static_assert(CT_ACT_LINEAR == 0 && CT_ACT_RELU == 1 && CT_ACT_LEAKY == 2 && CT_ACT_SIGMOID == 3 &&
                  CT_ACT_TANH == 4 && CT_ACT_GELU == 5 && CT_ACT_COUNT == 6,
              "kernels.h documents these ct_activation values");

namespace {

using namespace ct_launch;
using ct_half::narrow;
using ct_half::widen;

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// ---- one grid-stride loop for every simple elementwise kernel ----

// f(i) for i in [0, n); f is a small struct of pointers and scalars with a templated
// __device__ operator(), so each kernel below is written once for both index widths.
template <typename Index, typename F>
__global__ void map_kernel(Index n, F f)
{
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        f(i);
}

// largest: the largest index f forms (default n - 1), which picks the index width.
template <typename F>
int launch_map(long long n, cudaStream_t s, const F &f, long long largest = -1)
{
    const unsigned blocks = blocks_for(n);
    if (n <= INT_MAX && largest < INT_MAX)
        map_kernel<unsigned, F><<<blocks, kThreads, 0, s>>>((unsigned)n, f);
    else
        map_kernel<unsigned long long, F><<<blocks, kThreads, 0, s>>>((unsigned long long)n, f);
    return (int)cudaGetLastError();
}

// ---- activations ----

__device__ __forceinline__ float activate(float x, int act)
{
    switch (act) {
    case CT_ACT_RELU:
        return x < 0.0f ? 0.0f : x;  // not fmaxf(x, 0): that turns NaN into 0 and hides it
    case CT_ACT_LEAKY:
        return x < 0.0f ? CT_LEAKY_SLOPE * x : x;
    case CT_ACT_SIGMOID: {
        // The CPU backend's form: exp's argument is never positive, so it never overflows, and
        // very negative x keeps its tiny result instead of rounding 1 / (1 + inf) to 0.
        if (x >= 0.0f)
            return 1.0f / (1.0f + expf(-x));
        const float e = expf(x);  // NaN lands here and stays NaN
        return e / (1.0f + e);
    }
    case CT_ACT_TANH:
        return tanhf(x);
    case CT_ACT_GELU:
        // x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): the erfc form has no
        // cancellation for negative x, where 1 + erf(...) loses most of its digits.
        return 0.5f * x * erfcf(-x * kInvSqrt2);
    default:
        return x;
    }
}

// act'(x) * dy, from the output y for relu, leaky, sigmoid and tanh and from the input x for gelu.
// relu and leaky test y > 0, which holds exactly when x > 0 (NaN in either gives no gradient).
__device__ __forceinline__ float activation_grad(float x, float y, float dy, int act)
{
    switch (act) {
    case CT_ACT_RELU:
        return y > 0.0f ? dy : 0.0f;
    case CT_ACT_LEAKY:
        return y > 0.0f ? dy : __fmul_rn(CT_LEAKY_SLOPE, dy);
    case CT_ACT_SIGMOID:  // dy s (1 - s), in the CPU's order
        return __fmul_rn(__fmul_rn(dy, y), __fsub_rn(1.0f, y));
    case CT_ACT_TANH:     // dy (1 - t^2)
        return __fmul_rn(dy, __fsub_rn(1.0f, __fmul_rn(y, y)));
    case CT_ACT_GELU: {   // Phi(x) + x phi(x), Phi in the erfc form as in activate()
        const float cdf = 0.5f * erfcf(-x * kInvSqrt2);
        return dy * (cdf + x * kInvSqrt2Pi * expf(-0.5f * x * x));
    }
    default:
        return dy;
    }
}

// z: (total / c, c) T; bias: (c) B or NULL; y: like z, either z itself or apart from it.
// v = z + bias; y = act(v); z = v as well when y is apart (the pre-activation kept) and a bias
// changed it. One pass: each element read once and written once (twice when kept).
template <typename Index, typename T, typename B>
__global__ void bias_act_kernel(T *z, const B *bias, T *y, Index total, Index c, int act)
{
    const bool keep = y != z && bias;
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        float v = widen(z[i]);
        if (bias)
            v += widen(bias[i % c]);
        if (keep)
            z[i] = narrow<T>(v);
        y[i] = narrow<T>(activate(v, act));
    }
}

// z, y: (total4 / c4, c4) float4, i.e. (rows, c) with c % 4 == 0; bias: (c4) float4 or NULL; as
// bias_act_kernel
template <typename Index>
__global__ void bias_act_vec4_kernel(float4 *z, const float4 *bias, float4 *y, Index total4, Index c4, int act)
{
    const bool keep = y != z && bias;
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < total4; i += stride) {
        float4 v = z[i];
        if (bias) {
            const float4 b = bias[i % c4];
            v.x += b.x; v.y += b.y; v.z += b.z; v.w += b.w;
        }
        if (keep)
            z[i] = v;
        v.x = activate(v.x, act);
        v.y = activate(v.y, act);
        v.z = activate(v.z, act);
        v.w = activate(v.w, act);
        y[i] = v;
    }
}

// x, y: (n) T; y may equal x
template <typename T> struct ActForward {
    const T *x;
    T *y;
    int act;
    template <typename I> __device__ void operator()(I i) const { y[i] = narrow<T>(activate(widen(x[i]), act)); }
};

// x (NULL unless gelu), y (NULL for linear and gelu), dy, dx: (n) T
template <typename T> struct ActBackward {
    const T *x, *y, *dy;
    T *dx;
    int act, accumulate;
    template <typename I> __device__ void operator()(I i) const
    {
        const float d = activation_grad(x ? widen(x[i]) : 0.0f, y ? widen(y[i]) : 0.0f, widen(dy[i]), act);
        dx[i] = narrow<T>(__fadd_rn(accumulate ? widen(dx[i]) : 0.0f, d));
    }
};

// ---- add, accumulate, casts ----

// a, b, y: (n) T; y may equal a or b
template <typename T> struct Add {
    const T *a, *b;
    T *y;
    template <typename I> __device__ void operator()(I i) const { y[i] = narrow<T>(widen(a[i]) + widen(b[i])); }
};

// dy: (n) D; dx: (n) X (the output layer's dy is fp32 and its dx half)
template <typename D, typename X> struct Accumulate {
    const D *dy;
    X *dx;
    bool accumulate;
    template <typename I> __device__ void operator()(I i) const
    {
        dx[i] = narrow<X>(__fadd_rn(accumulate ? widen(dx[i]) : 0.0f, widen(dy[i])));
    }
};

// x: (n) S; y: (n) D = x rounded to D (exact when D is the wider type)
template <typename S, typename D> struct Cast {
    const S *x;
    D *y;
    template <typename I> __device__ void operator()(I i) const { y[i] = narrow<D>(widen(x[i])); }
};

// ---- column sums ----

// A block is kSumCols columns by kSumRows row lanes: lane (tx, ty) sums rows ty, ty + kSumRows, ...
// of column tx in double (as the CPU backend does), then the block adds its row lanes in a fixed
// tree. No atomics and a launch shape that depends only on (rows, c), so the same input gives the
// same bits every run (a replayed CUDA graph must match a direct step bit for bit).
// The cost: only ceil(c / 32) blocks, so a tall, narrow dy keeps few SMs busy; see the launcher.
constexpr int kSumCols = 32;
constexpr int kSumRows = 32;

// dy: (rows, c) T; column col = blockIdx.x * kSumCols + tx summed over rows [first, last) in the
// order above; the result is valid in the row-0 lanes. Every thread of the block must call it.
template <typename T>
__device__ double block_column_sum(const T *dy, long long first, long long last, int c, long long col)
{
    __shared__ double part[kSumRows][kSumCols];  // a warp is one ty: it touches one contiguous row
    const int tx = threadIdx.x, ty = threadIdx.y;
    double acc = 0.0;
    if (col < c) {
#pragma unroll 4
        for (long long r = first + ty; r < last; r += kSumRows)
            acc += widen(dy[r * c + col]);
    }
    part[ty][tx] = acc;
    __syncthreads();
    for (int span = kSumRows / 2; span > 0; span /= 2) {
        if (ty < span)
            part[ty][tx] += part[ty + span][tx];
        __syncthreads();
    }
    return part[0][tx];
}

// dy: (rows, c) T; db: (c) fp32 = column sums
template <typename T>
__global__ void __launch_bounds__(kSumCols * kSumRows)
column_sums_kernel(const T *dy, float *db, long long rows, int c)
{
    const long long col = (long long)blockIdx.x * kSumCols + threadIdx.x;
    const double sum = block_column_sum(dy, 0, rows, c, col);
    if (threadIdx.y == 0 && col < c)
        db[col] = (float)sum;
}

// The tall case (a convolution's bias: rows = n * oh * ow, few columns) in two deterministic
// passes: each chunk of rows sums its columns into a double partial, then one thread per column
// adds the partials in chunk order. No atomics, so the same input gives the same bits every run.

// dy: (rows, c) T; partials: (chunks, c) double; rows_per_chunk rows per blockIdx.y
template <typename T>
__global__ void __launch_bounds__(kSumCols * kSumRows)
column_partials_kernel(const T *dy, double *partials, long long rows, int c, long long rows_per_chunk)
{
    const long long col = (long long)blockIdx.x * kSumCols + threadIdx.x;
    const long long first = (long long)blockIdx.y * rows_per_chunk;
    const long long last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
    const double sum = block_column_sum(dy, first, last, c, col);
    if (threadIdx.y == 0 && col < c)
        partials[(long long)blockIdx.y * c + col] = sum;
}

// partials: (chunks, c) double; db: (c) = their column sums, in chunk order
__global__ void column_partials_sum_kernel(const double *partials, float *db, int chunks, int c)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= c)
        return;
    double acc = 0.0;
    for (int k = 0; k < chunks; k++)
        acc += partials[(long long)k * c + col];
    db[col] = (float)acc;
}

// ---- dropout ----

// x, y: (n) T; mask: (n); the seed is read on the device, so a replayed graph draws this step's mask
template <typename T> struct DropoutForward {
    const T *x;
    T *y;
    unsigned char *mask;
    const ct_device_step *step;
    unsigned long long stream_id;
    long per_sample;     // elements per sample: a replica's element i draws as the global batch's
    float rate, inv_keep;
    template <typename I> __device__ void operator()(I i) const
    {
        const uint64_t global = step->first_sample * (uint64_t)per_sample + (uint64_t)i;
        const bool keep = ct_uniform(step->dropout_seed, stream_id, global) >= rate;
        mask[i] = keep;
        y[i] = narrow<T>(keep ? __fmul_rn(widen(x[i]), inv_keep) : 0.0f);
    }
};

// dy, dx: (n) T; mask: (n)
template <typename T> struct DropoutBackward {
    const T *dy;
    const unsigned char *mask;
    T *dx;
    float inv_keep;
    bool accumulate;
    template <typename I> __device__ void operator()(I i) const
    {
        dx[i] = narrow<T>(__fadd_rn(accumulate ? widen(dx[i]) : 0.0f, mask[i] ? __fmul_rn(widen(dy[i]), inv_keep) : 0.0f));
    }
};

// The CPU backend's keep_scale: a rate of 1 drops everything, so nothing is left to scale.
float keep_scale(float rate) { return rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f; }

// ---- padding ----

// x: (n, h, w, c) T; xp: (n, hp, wp, c) T, every element written. An xp row (wp * c values)
// starts with the w * c values of x's row when its y < h, and is zero elsewhere. A copy: no
// rounding, the bits move as they are.
template <typename T> struct PadNhwc {
    const T *x;
    T *xp;
    long long h, hp, row, rowp;  // row = w * c, rowp = wp * c
    template <typename I> __device__ void operator()(I i) const
    {
        const I r = i / (I)rowp, k = i - r * (I)rowp;
        const I s = r / (I)hp, yy = r - s * (I)hp;
        xp[i] = yy < (I)h && k < (I)row ? x[(s * (I)h + yy) * (I)row + k] : narrow<T>(0.0f);
    }
};

// dxp: (n, hp, wp, c) T; dx: (n, h, w, c) T = (accumulate ? dx : 0) + its top-left corner
template <typename T> struct CropAccumulateNhwc {
    const T *dxp;
    T *dx;
    long long h, hp, row, rowp;
    bool accumulate;
    template <typename I> __device__ void operator()(I i) const
    {
        const I r = i / (I)row, k = i - r * (I)row;
        const I s = r / (I)h, yy = r - s * (I)h;
        dx[i] = narrow<T>(__fadd_rn(accumulate ? widen(dx[i]) : 0.0f, widen(dxp[(s * (I)hp + yy) * (I)rowp + k])));
    }
};

bool valid_act(int act) { return act >= 0 && act < CT_ACT_COUNT; }

// n * h * w * c for non-negative ints, or -1 when it does not fit in a long long.
long long volume(int n, int h, int w, int c)
{
    const int dims[4] = {n, h, w, c};
    long long v = 1;
    for (int d : dims) {
        if (d == 0)
            return 0;
        if (v > LLONG_MAX / d)
            return -1;
        v *= d;
    }
    return v;
}


// Both column-sum launchers' checks: a cudaError_t to return at once, or -1 to go on.
int column_sums_args(const void *dy, const float *db, long rows, int c, int dtype)
{
    if (!ct_half::valid(dtype) || rows < 0 || c <= 0 || (rows > 0 && (!dy || !db)) ||
        (rows > 0 && rows > LLONG_MAX / c))
        return (int)cudaErrorInvalidValue;
    return rows == 0 ? (int)cudaSuccess : -1;
}

// Launches the column sums of one pass; the arguments checked.
int column_sums_one_pass(const void *dy, float *db, long rows, int c, int dtype, cudaStream_t s)
{
    // Determinism without a workspace limits this to one block per 32 columns: fine for dense
    // layers' bias gradients (rows = batch), slow for a convolution's (rows = n * h * w) with few
    // channels, which should use cuDNN's backward-bias or a launcher with a partials workspace.
    const unsigned blocks = (unsigned)((c + kSumCols - 1) / kSumCols);
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        column_sums_kernel<T><<<blocks, dim3(kSumCols, kSumRows), 0, s>>>((const T *)dy, db, (long long)rows, c);
        return (int)cudaGetLastError();
    });
}

}  // namespace

// z, y: (rows, c) dtype, y z itself or apart from it; bias: (c) bias_dtype or NULL
extern "C" int ct_launch_bias_activation_keep_dt(void *z, const void *bias, void *y, long rows, int c, int act,
                                                 int dtype, int bias_dtype, void *stream)
{
    if (!ct_half::valid(dtype) || !ct_half::valid(bias_dtype) || rows < 0 || c <= 0 || !valid_act(act) ||
        (rows > 0 && (!z || !y)))
        return (int)cudaErrorInvalidValue;
    if (rows == 0 || (act == CT_ACT_LINEAR && !bias && y == z))
        return (int)cudaSuccess;  // nothing to add, nothing to apply
    if (rows > LLONG_MAX / c)
        return (int)cudaErrorInvalidValue;
    const long long total = (long long)rows * c;
    cudaStream_t s = (cudaStream_t)stream;
    if (dtype == CT_DTYPE_F32 && bias_dtype == CT_DTYPE_F32 && c % 4 == 0 && aligned16(z) && aligned16(y) &&
        (!bias || aligned16(bias))) {
        const long long total4 = total / 4;
        const unsigned blocks = blocks_for(total4);
        if (total4 <= INT_MAX)
            bias_act_vec4_kernel<unsigned><<<blocks, kThreads, 0, s>>>(
                (float4 *)z, (const float4 *)bias, (float4 *)y, (unsigned)total4, (unsigned)(c / 4), act);
        else
            bias_act_vec4_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(
                (float4 *)z, (const float4 *)bias, (float4 *)y, (unsigned long long)total4,
                (unsigned long long)(c / 4), act);
        return (int)cudaGetLastError();
    }
    const unsigned blocks = blocks_for(total);
    return ct_half::with2(dtype, bias_dtype, [&](auto tt, auto tb) {
        using T = CT_TYPE_OF(tt);
        using B = CT_TYPE_OF(tb);
        if (total <= INT_MAX)
            bias_act_kernel<unsigned, T, B><<<blocks, kThreads, 0, s>>>((T *)z, (const B *)bias, (T *)y,
                                                                        (unsigned)total, (unsigned)c, act);
        else
            bias_act_kernel<unsigned long long, T, B><<<blocks, kThreads, 0, s>>>(
                (T *)z, (const B *)bias, (T *)y, (unsigned long long)total, (unsigned long long)c, act);
        return (int)cudaGetLastError();
    });
}

// z: (rows, c) fp32; bias: (c) fp32 or NULL; y: (rows, c) fp32, z itself or apart from it
extern "C" int ct_launch_bias_activation_keep(float *z, const float *bias, float *y, long rows, int c, int act,
                                              void *stream)
{
    return ct_launch_bias_activation_keep_dt(z, bias, y, rows, c, act, CT_DTYPE_F32, CT_DTYPE_F32, stream);
}

// y: (rows, c) dtype, in place; bias: (c) bias_dtype or NULL
extern "C" int ct_launch_bias_activation_forward_dt(void *y, const void *bias, long rows, int c, int act, int dtype,
                                                    int bias_dtype, void *stream)
{
    return ct_launch_bias_activation_keep_dt(y, bias, y, rows, c, act, dtype, bias_dtype, stream);
}

// y: (rows, c) fp32, in place; bias: (c) fp32 or NULL
extern "C" int ct_launch_bias_activation_forward(float *y, const float *bias, long rows, int c, int act,
                                                 void *stream)
{
    return ct_launch_bias_activation_keep_dt(y, bias, y, rows, c, act, CT_DTYPE_F32, CT_DTYPE_F32, stream);
}

// x, y: (n) dtype
extern "C" int ct_launch_activation_forward_dt(const void *x, void *y, long n, int act, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || n < 0 || !valid_act(act) || (n > 0 && (!x || !y)))
        return (int)cudaErrorInvalidValue;
    if (n == 0 || (act == CT_ACT_LINEAR && x == y))
        return (int)cudaSuccess;
    cudaStream_t s = (cudaStream_t)stream;
    if (act == CT_ACT_LINEAR)  // a copy, in stream order; no host synchronisation
        return (int)cudaMemcpyAsync(y, x, (size_t)n * ct_half::bytes(dtype), cudaMemcpyDeviceToDevice, s);
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        return launch_map(n, s, ActForward<T>{(const T *)x, (T *)y, act});
    });
}

// x, y: (n) fp32
extern "C" int ct_launch_activation_forward(const float *x, float *y, long n, int act, void *stream)
{
    return ct_launch_activation_forward_dt(x, y, n, act, CT_DTYPE_F32, stream);
}

// x, y, dy, dx: (n) dtype; x needed by gelu, y by relu, leaky, sigmoid and tanh
extern "C" int ct_launch_activation_backward_dt(const void *x, const void *y, const void *dy, void *dx, long n,
                                                int act, int accumulate, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || n < 0 || !valid_act(act))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    const bool needs_x = act == CT_ACT_GELU;
    const bool needs_y = act != CT_ACT_LINEAR && act != CT_ACT_GELU;
    if (!dy || !dx || (needs_x && !x) || (needs_y && !y))
        return (int)cudaErrorInvalidValue;
    // Pass only what the activation reads, so the kernel never touches a buffer it was not promised.
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        return launch_map(n, (cudaStream_t)stream,
                          ActBackward<T>{needs_x ? (const T *)x : nullptr, needs_y ? (const T *)y : nullptr,
                                         (const T *)dy, (T *)dx, act, accumulate != 0});
    });
}

// x, y, dy, dx: (n) fp32
extern "C" int ct_launch_activation_backward(const float *x, const float *y, const float *dy, float *dx,
                                             long n, int act, int accumulate, void *stream)
{
    return ct_launch_activation_backward_dt(x, y, dy, dx, n, act, accumulate, CT_DTYPE_F32, stream);
}

// a, b, y: (n) dtype
extern "C" int ct_launch_add_dt(const void *a, const void *b, void *y, long n, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || n < 0 || (n > 0 && (!a || !b || !y)))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        return launch_map(n, (cudaStream_t)stream, Add<T>{(const T *)a, (const T *)b, (T *)y});
    });
}

// a, b, y: (n) fp32
extern "C" int ct_launch_add(const float *a, const float *b, float *y, long n, void *stream)
{
    return ct_launch_add_dt(a, b, y, n, CT_DTYPE_F32, stream);
}

// dy: (n) dy_dtype; dx: (n) dx_dtype
extern "C" int ct_launch_accumulate_dt(const void *dy, void *dx, long n, int accumulate, int dy_dtype, int dx_dtype,
                                       void *stream)
{
    if (!ct_half::valid(dy_dtype) || !ct_half::valid(dx_dtype) || n < 0 || (n > 0 && (!dy || !dx)))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    return ct_half::with2(dy_dtype, dx_dtype, [&](auto td, auto tx) {
        using D = CT_TYPE_OF(td);
        using X = CT_TYPE_OF(tx);
        return launch_map(n, (cudaStream_t)stream, Accumulate<D, X>{(const D *)dy, (X *)dx, accumulate != 0});
    });
}

// dy, dx: (n) fp32
extern "C" int ct_launch_accumulate(const float *dy, float *dx, long n, int accumulate, void *stream)
{
    return ct_launch_accumulate_dt(dy, dx, n, accumulate, CT_DTYPE_F32, CT_DTYPE_F32, stream);
}

// x: (n) x_dtype; y: (n) y_dtype
extern "C" int ct_launch_cast(const void *x, void *y, long n, int x_dtype, int y_dtype, void *stream)
{
    if (!ct_half::valid(x_dtype) || !ct_half::valid(y_dtype) || n < 0 || (n > 0 && (!x || !y)))
        return (int)cudaErrorInvalidValue;
    if (n == 0 || (x_dtype == y_dtype && x == y))
        return (int)cudaSuccess;
    cudaStream_t s = (cudaStream_t)stream;
    if (x_dtype == y_dtype)  // the same type: the bits as they are, NaN payloads included
        return (int)cudaMemcpyAsync(y, x, (size_t)n * ct_half::bytes(x_dtype), cudaMemcpyDeviceToDevice, s);
    return ct_half::with2(x_dtype, y_dtype, [&](auto tx, auto ty) {
        using S = CT_TYPE_OF(tx);
        using D = CT_TYPE_OF(ty);
        return launch_map(n, s, Cast<S, D>{(const S *)x, (D *)y});
    });
}

// dy: (rows, c) dtype; db: (c) fp32
extern "C" int ct_launch_column_sums_dt(const void *dy, float *db, long rows, int c, int dtype, void *stream)
{
    const int bad = column_sums_args(dy, db, rows, c, dtype);
    if (bad >= 0)
        return bad;
    return column_sums_one_pass(dy, db, rows, c, dtype, (cudaStream_t)stream);
}

// dy: (rows, c) fp32; db: (c) fp32
extern "C" int ct_launch_column_sums(const float *dy, float *db, long rows, int c, void *stream)
{
    return ct_launch_column_sums_dt(dy, db, rows, c, CT_DTYPE_F32, stream);
}

// dy: (rows, c) dtype; db: (c) fp32; workspace: scratch for the partial sums
extern "C" int ct_launch_column_sums_tall_dt(const void *dy, float *db, long rows, int c, void *workspace,
                                             size_t workspace_bytes, int dtype, void *stream)
{
    const int bad = column_sums_args(dy, db, rows, c, dtype);
    if (bad >= 0)
        return bad;
    cudaStream_t s = (cudaStream_t)stream;
    // about 512 rows per chunk, at most 1024 chunks: enough blocks to fill the GPU, few partials
    long long chunks = ((long long)rows + 511) / 512;
    if (chunks > 1024)
        chunks = 1024;
    const size_t need = (size_t)chunks * (size_t)c * sizeof(double);
    if (chunks < 2 || !workspace || workspace_bytes < need || ((uintptr_t)workspace & 7u))
        return column_sums_one_pass(dy, db, rows, c, dtype, s);  // one pass is as good, or all we can do
    const long long per_chunk = ((long long)rows + chunks - 1) / chunks;
    const dim3 grid((unsigned)((c + kSumCols - 1) / kSumCols), (unsigned)chunks);
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        column_partials_kernel<T><<<grid, dim3(kSumCols, kSumRows), 0, s>>>((const T *)dy, (double *)workspace,
                                                                           (long long)rows, c, per_chunk);
        column_partials_sum_kernel<<<(unsigned)((c + 255) / 256), 256, 0, s>>>((const double *)workspace, db,
                                                                               (int)chunks, c);
        return (int)cudaGetLastError();
    });
}

// dy: (rows, c) fp32; db: (c) fp32; workspace: scratch for the partial sums
extern "C" int ct_launch_column_sums_tall(const float *dy, float *db, long rows, int c, void *workspace,
                                          size_t workspace_bytes, void *stream)
{
    return ct_launch_column_sums_tall_dt(dy, db, rows, c, workspace, workspace_bytes, CT_DTYPE_F32, stream);
}

// x, y: (n) dtype; mask: (n); step: device memory
extern "C" int ct_launch_dropout_forward_dt(const void *x, void *y, unsigned char *mask, long n, float rate,
                                            const ct_device_step *step, unsigned long long stream_id,
                                            long per_sample, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || n < 0 || !(rate >= 0.0f && rate <= 1.0f))  // NaN fails too
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    if (!x || !y || !mask || !step)
        return (int)cudaErrorInvalidValue;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        return launch_map(n, (cudaStream_t)stream,
                          DropoutForward<T>{(const T *)x, (T *)y, mask, step, stream_id, per_sample, rate,
                                                            keep_scale(rate)});
    });
}

// x, y: (n) fp32; mask: (n); step: device memory
extern "C" int ct_launch_dropout_forward(const float *x, float *y, unsigned char *mask, long n, float rate,
                                         const ct_device_step *step, unsigned long long stream_id, void *stream)
{
    return ct_launch_dropout_forward_dt(x, y, mask, n, rate, step, stream_id, 0, CT_DTYPE_F32, stream);
}

// dy, dx: (n) dtype; mask: (n)
extern "C" int ct_launch_dropout_backward_dt(const void *dy, const unsigned char *mask, void *dx, long n, float rate,
                                             int accumulate, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || n < 0 || !(rate >= 0.0f && rate <= 1.0f))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    if (!dy || !mask || !dx)
        return (int)cudaErrorInvalidValue;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        return launch_map(n, (cudaStream_t)stream,
                          DropoutBackward<T>{(const T *)dy, mask, (T *)dx, keep_scale(rate), accumulate != 0});
    });
}

// dy, dx: (n) fp32; mask: (n)
extern "C" int ct_launch_dropout_backward(const float *dy, const unsigned char *mask, float *dx, long n,
                                          float rate, int accumulate, void *stream)
{
    return ct_launch_dropout_backward_dt(dy, mask, dx, n, rate, accumulate, CT_DTYPE_F32, stream);
}

// x: (n, h, w, c) dtype -> xp: (n, hp, wp, c) dtype
extern "C" int ct_launch_pad_nhwc_dt(const void *x, void *xp, int n, int h, int w, int c, int hp, int wp, int dtype,
                                     void *stream)
{
    if (!ct_half::valid(dtype) || n < 0 || h < 0 || w < 0 || c < 0 || hp < h || wp < w)
        return (int)cudaErrorInvalidValue;
    const long long total = volume(n, hp, wp, c);  // >= the size of x, since hp >= h and wp >= w
    if (total == 0)
        return (int)cudaSuccess;
    if (total < 0 || !xp || (!x && volume(n, h, w, c) > 0))
        return (int)cudaErrorInvalidValue;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        return launch_map(total, (cudaStream_t)stream,
                          PadNhwc<T>{(const T *)x, (T *)xp, h, hp, (long long)w * c, (long long)wp * c});
    });
}

// x: (n, h, w, c) fp32 -> xp: (n, hp, wp, c) fp32
extern "C" int ct_launch_pad_nhwc(const float *x, float *xp, int n, int h, int w, int c, int hp, int wp,
                                  void *stream)
{
    return ct_launch_pad_nhwc_dt(x, xp, n, h, w, c, hp, wp, CT_DTYPE_F32, stream);
}

// dxp: (n, hp, wp, c) dtype; dx: (n, h, w, c) dtype
extern "C" int ct_launch_crop_accumulate_nhwc_dt(const void *dxp, void *dx, int n, int h, int w, int c, int hp,
                                                 int wp, int accumulate, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || n < 0 || h < 0 || w < 0 || c < 0 || hp < h || wp < w)
        return (int)cudaErrorInvalidValue;
    const long long total = volume(n, h, w, c);
    if (total == 0)
        return (int)cudaSuccess;
    // dxp's size bounds every index the kernel forms, so it must fit too
    if (total < 0 || volume(n, hp, wp, c) < 0 || !dxp || !dx)
        return (int)cudaErrorInvalidValue;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        return launch_map(total, (cudaStream_t)stream,
                          CropAccumulateNhwc<T>{(const T *)dxp, (T *)dx, h, hp, (long long)w * c, (long long)wp * c,
                                                accumulate != 0},
                          volume(n, hp, wp, c) - 1);
    });
}

// dxp: (n, hp, wp, c) fp32; dx: (n, h, w, c) fp32
extern "C" int ct_launch_crop_accumulate_nhwc(const float *dxp, float *dx, int n, int h, int w, int c, int hp,
                                              int wp, int accumulate, void *stream)
{
    return ct_launch_crop_accumulate_nhwc_dt(dxp, dx, n, h, w, c, hp, wp, accumulate, CT_DTYPE_F32, stream);
}
