// Elementwise kernels: bias + activation, activations and their gradients, residual add, gradient
// accumulation, bias gradients (column sums), dropout, and the zero padding cuDNN cannot express.
// All are bandwidth-bound, so they read and write each element once and index with 32 bits when
// the size allows (64-bit division is slow on the GPU). bias + activation also uses 16-byte loads;
// the others rely on plain 4-byte loads, which a warp already coalesces into whole cache lines.
//
// Where the CPU backend computes the same thing, the arithmetic follows its order with the _rn
// intrinsics, which the compiler never fuses into an FMA: the CPU build (C11, no -ffast-math)
// does not fuse either, so both give the same bits wherever no libm function is involved.

#include <climits>
#include <cstdint>

#include <cuda_runtime.h>

#include "base/rng.h"
#include "base/types.h"
#include "kernels.h"
#include "launch.cuh"

// The launchers take the activation as a plain int; these pin the values they rely on.
static_assert(CT_ACT_LINEAR == 0 && CT_ACT_RELU == 1 && CT_ACT_LEAKY == 2 && CT_ACT_SIGMOID == 3 &&
                  CT_ACT_TANH == 4 && CT_ACT_GELU == 5 && CT_ACT_COUNT == 6,
              "kernels.h documents these ct_activation values");

namespace {

using namespace ct_launch;

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

// z: (total / c, c); bias: (c) or NULL; y: like z, either z itself or apart from it.
// v = z + bias; y = act(v); z = v as well when y is apart (the pre-activation kept) and a bias
// changed it. One pass: each element read once and written once (twice when kept).
template <typename Index>
__global__ void bias_act_kernel(float *z, const float *bias, float *y, Index total, Index c, int act)
{
    const bool keep = y != z && bias;
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        float v = z[i];
        if (bias)
            v += bias[i % c];
        if (keep)
            z[i] = v;
        y[i] = activate(v, act);
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

// x, y: (n); y may equal x
struct ActForward {
    const float *x;
    float *y;
    int act;
    template <typename I> __device__ void operator()(I i) const { y[i] = activate(x[i], act); }
};

// x (NULL unless gelu), y (NULL for linear and gelu), dy, dx: (n)
struct ActBackward {
    const float *x, *y, *dy;
    float *dx;
    int act, accumulate;
    template <typename I> __device__ void operator()(I i) const
    {
        const float d = activation_grad(x ? x[i] : 0.0f, y ? y[i] : 0.0f, dy[i], act);
        dx[i] = __fadd_rn(accumulate ? dx[i] : 0.0f, d);
    }
};

// ---- add, accumulate ----

// a, b, y: (n); y may equal a or b
struct Add {
    const float *a, *b;
    float *y;
    template <typename I> __device__ void operator()(I i) const { y[i] = a[i] + b[i]; }
};

// dy, dx: (n)
struct Accumulate {
    const float *dy;
    float *dx;
    bool accumulate;
    template <typename I> __device__ void operator()(I i) const { dx[i] = __fadd_rn(accumulate ? dx[i] : 0.0f, dy[i]); }
};

// ---- column sums ----

// A block is kSumCols columns by kSumRows row lanes: lane (tx, ty) sums rows ty, ty + kSumRows, ...
// of column tx in double (as the CPU backend does), then the block adds its row lanes in a fixed
// tree. No atomics and a launch shape that depends only on (rows, c), so the same input gives the
// same bits every run (a replayed CUDA graph must match a direct step bit for bit).
// The cost: only ceil(c / 32) blocks, so a tall, narrow dy keeps few SMs busy; see the launcher.
constexpr int kSumCols = 32;
constexpr int kSumRows = 32;

// dy: (rows, c); column col = blockIdx.x * kSumCols + tx summed over rows [first, last) in the
// order above; the result is valid in the row-0 lanes. Every thread of the block must call it.
__device__ double block_column_sum(const float *dy, long long first, long long last, int c, long long col)
{
    __shared__ double part[kSumRows][kSumCols];  // a warp is one ty: it touches one contiguous row
    const int tx = threadIdx.x, ty = threadIdx.y;
    double acc = 0.0;
    if (col < c) {
#pragma unroll 4
        for (long long r = first + ty; r < last; r += kSumRows)
            acc += dy[r * c + col];
    }
    part[ty][tx] = acc;
    __syncthreads();
    for (int half = kSumRows / 2; half > 0; half /= 2) {
        if (ty < half)
            part[ty][tx] += part[ty + half][tx];
        __syncthreads();
    }
    return part[0][tx];
}

// dy: (rows, c); db: (c) = column sums
__global__ void __launch_bounds__(kSumCols * kSumRows)
column_sums_kernel(const float *dy, float *db, long long rows, int c)
{
    const long long col = (long long)blockIdx.x * kSumCols + threadIdx.x;
    const double sum = block_column_sum(dy, 0, rows, c, col);
    if (threadIdx.y == 0 && col < c)
        db[col] = (float)sum;
}

// The tall case (a convolution's bias: rows = n * oh * ow, few columns) in two deterministic
// passes: each chunk of rows sums its columns into a double partial, then one thread per column
// adds the partials in chunk order. No atomics, so the same input gives the same bits every run.

// dy: (rows, c); partials: (chunks, c) double; rows_per_chunk rows per blockIdx.y
__global__ void __launch_bounds__(kSumCols * kSumRows)
column_partials_kernel(const float *dy, double *partials, long long rows, int c, long long rows_per_chunk)
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

// x, y, mask: (n); the seed is read on the device, so a replayed graph draws this step's mask
struct DropoutForward {
    const float *x;
    float *y;
    unsigned char *mask;
    const ct_device_step *step;
    unsigned long long stream_id;
    float rate, scale;
    template <typename I> __device__ void operator()(I i) const
    {
        const bool keep = ct_uniform(step->dropout_seed, stream_id, (uint64_t)i) >= rate;
        mask[i] = keep;
        y[i] = keep ? __fmul_rn(x[i], scale) : 0.0f;
    }
};

// dy, mask, dx: (n)
struct DropoutBackward {
    const float *dy;
    const unsigned char *mask;
    float *dx;
    float scale;
    bool accumulate;
    template <typename I> __device__ void operator()(I i) const
    {
        dx[i] = __fadd_rn(accumulate ? dx[i] : 0.0f, mask[i] ? __fmul_rn(dy[i], scale) : 0.0f);
    }
};

// The CPU backend's keep_scale: a rate of 1 drops everything, so nothing is left to scale.
float keep_scale(float rate) { return rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f; }

// ---- padding ----

// x: (n, h, w, c); xp: (n, hp, wp, c), every element written. An xp row (wp * c floats) starts
// with the w * c floats of x's row when its y < h, and is zero elsewhere.
struct PadNhwc {
    const float *x;
    float *xp;
    long long h, hp, row, rowp;  // row = w * c, rowp = wp * c
    template <typename I> __device__ void operator()(I i) const
    {
        const I r = i / (I)rowp, k = i - r * (I)rowp;
        const I s = r / (I)hp, yy = r - s * (I)hp;
        xp[i] = yy < (I)h && k < (I)row ? x[(s * (I)h + yy) * (I)row + k] : 0.0f;
    }
};

// dxp: (n, hp, wp, c); dx: (n, h, w, c) = (accumulate ? dx : 0) + its top-left corner
struct CropAccumulateNhwc {
    const float *dxp;
    float *dx;
    long long h, hp, row, rowp;
    bool accumulate;
    template <typename I> __device__ void operator()(I i) const
    {
        const I r = i / (I)row, k = i - r * (I)row;
        const I s = r / (I)h, yy = r - s * (I)h;
        dx[i] = __fadd_rn(accumulate ? dx[i] : 0.0f, dxp[(s * (I)hp + yy) * (I)rowp + k]);
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

}  // namespace

// y: (rows, c) fp32; bias: (c) fp32 or NULL
// z: (rows, c) fp32; bias: (c) or NULL; y: (rows, c), z itself or apart from it
extern "C" int ct_launch_bias_activation_keep(float *z, const float *bias, float *y, long rows, int c, int act,
                                              void *stream)
{
    if (rows < 0 || c <= 0 || !valid_act(act) || (rows > 0 && (!z || !y)))
        return (int)cudaErrorInvalidValue;
    if (rows == 0 || (act == CT_ACT_LINEAR && !bias && y == z))
        return (int)cudaSuccess;  // nothing to add, nothing to apply
    if (rows > LLONG_MAX / c)
        return (int)cudaErrorInvalidValue;
    const long long total = (long long)rows * c;
    cudaStream_t s = (cudaStream_t)stream;
    if (c % 4 == 0 && aligned16(z) && aligned16(y) && (!bias || aligned16(bias))) {
        const long long total4 = total / 4;
        const unsigned blocks = blocks_for(total4);
        if (total4 <= INT_MAX)
            bias_act_vec4_kernel<unsigned><<<blocks, kThreads, 0, s>>>(
                (float4 *)z, (const float4 *)bias, (float4 *)y, (unsigned)total4, (unsigned)(c / 4), act);
        else
            bias_act_vec4_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(
                (float4 *)z, (const float4 *)bias, (float4 *)y, (unsigned long long)total4,
                (unsigned long long)(c / 4), act);
    } else {
        const unsigned blocks = blocks_for(total);
        if (total <= INT_MAX)
            bias_act_kernel<unsigned><<<blocks, kThreads, 0, s>>>(z, bias, y, (unsigned)total, (unsigned)c, act);
        else
            bias_act_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(
                z, bias, y, (unsigned long long)total, (unsigned long long)c, act);
    }
    return (int)cudaGetLastError();
}

// y: (rows, c) fp32, in place; bias: (c) or NULL
extern "C" int ct_launch_bias_activation_forward(float *y, const float *bias, long rows, int c, int act,
                                                 void *stream)
{
    return ct_launch_bias_activation_keep(y, bias, y, rows, c, act, stream);
}

// x, y: (n) fp32
extern "C" int ct_launch_activation_forward(const float *x, float *y, long n, int act, void *stream)
{
    if (n < 0 || !valid_act(act) || (n > 0 && (!x || !y)))
        return (int)cudaErrorInvalidValue;
    if (n == 0 || (act == CT_ACT_LINEAR && x == y))
        return (int)cudaSuccess;
    if (act == CT_ACT_LINEAR)  // a copy, in stream order; no host synchronisation
        return (int)cudaMemcpyAsync(y, x, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                                    (cudaStream_t)stream);
    return launch_map(n, (cudaStream_t)stream, ActForward{x, y, act});
}

// x, y, dy, dx: (n) fp32; x needed by gelu, y by relu, leaky, sigmoid and tanh
extern "C" int ct_launch_activation_backward(const float *x, const float *y, const float *dy, float *dx,
                                             long n, int act, int accumulate, void *stream)
{
    if (n < 0 || !valid_act(act))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    const bool needs_x = act == CT_ACT_GELU;
    const bool needs_y = act != CT_ACT_LINEAR && act != CT_ACT_GELU;
    if (!dy || !dx || (needs_x && !x) || (needs_y && !y))
        return (int)cudaErrorInvalidValue;
    // Pass only what the activation reads, so the kernel never touches a buffer it was not promised.
    return launch_map(n, (cudaStream_t)stream,
                      ActBackward{needs_x ? x : nullptr, needs_y ? y : nullptr, dy, dx, act, accumulate != 0});
}

// a, b, y: (n) fp32
extern "C" int ct_launch_add(const float *a, const float *b, float *y, long n, void *stream)
{
    if (n < 0 || (n > 0 && (!a || !b || !y)))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    return launch_map(n, (cudaStream_t)stream, Add{a, b, y});
}

// dy, dx: (n) fp32
extern "C" int ct_launch_accumulate(const float *dy, float *dx, long n, int accumulate, void *stream)
{
    if (n < 0 || (n > 0 && (!dy || !dx)))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    return launch_map(n, (cudaStream_t)stream, Accumulate{dy, dx, accumulate != 0});
}

// Both column-sum launchers' checks: a cudaError_t to return at once, or -1 to go on.
static int column_sums_args(const float *dy, const float *db, long rows, int c)
{
    if (rows < 0 || c <= 0 || (rows > 0 && (!dy || !db)) || (rows > 0 && rows > LLONG_MAX / c))
        return (int)cudaErrorInvalidValue;
    return rows == 0 ? (int)cudaSuccess : -1;
}

// dy: (rows, c) fp32; db: (c) fp32
extern "C" int ct_launch_column_sums(const float *dy, float *db, long rows, int c, void *stream)
{
    const int bad = column_sums_args(dy, db, rows, c);
    if (bad >= 0)
        return bad;
    // Determinism without a workspace limits this to one block per 32 columns: fine for dense
    // layers' bias gradients (rows = batch), slow for a convolution's (rows = n * h * w) with few
    // channels, which should use cuDNN's backward-bias or a launcher with a partials workspace.
    const unsigned blocks = (unsigned)((c + kSumCols - 1) / kSumCols);
    column_sums_kernel<<<blocks, dim3(kSumCols, kSumRows), 0, (cudaStream_t)stream>>>(dy, db, (long long)rows, c);
    return (int)cudaGetLastError();
}

// dy: (rows, c) fp32; db: (c) fp32; workspace: scratch for the partial sums
extern "C" int ct_launch_column_sums_tall(const float *dy, float *db, long rows, int c, void *workspace,
                                          size_t workspace_bytes, void *stream)
{
    const int bad = column_sums_args(dy, db, rows, c);
    if (bad >= 0)
        return bad;
    // about 512 rows per chunk, at most 1024 chunks: enough blocks to fill the GPU, few partials
    long long chunks = ((long long)rows + 511) / 512;
    if (chunks > 1024)
        chunks = 1024;
    const size_t need = (size_t)chunks * (size_t)c * sizeof(double);
    if (chunks < 2 || !workspace || workspace_bytes < need || ((uintptr_t)workspace & 7u))
        return ct_launch_column_sums(dy, db, rows, c, stream);  // one pass is as good, or all we can do
    const long long per_chunk = ((long long)rows + chunks - 1) / chunks;
    cudaStream_t s = (cudaStream_t)stream;
    const dim3 grid((unsigned)((c + kSumCols - 1) / kSumCols), (unsigned)chunks);
    column_partials_kernel<<<grid, dim3(kSumCols, kSumRows), 0, s>>>(dy, (double *)workspace, (long long)rows, c,
                                                                      per_chunk);
    column_partials_sum_kernel<<<(unsigned)((c + 255) / 256), 256, 0, s>>>((const double *)workspace, db,
                                                                           (int)chunks, c);
    return (int)cudaGetLastError();
}

// x, y: (n) fp32; mask: (n); step: device memory
extern "C" int ct_launch_dropout_forward(const float *x, float *y, unsigned char *mask, long n, float rate,
                                         const ct_device_step *step, unsigned long long stream_id, void *stream)
{
    if (n < 0 || !(rate >= 0.0f && rate <= 1.0f))  // NaN fails too
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    if (!x || !y || !mask || !step)
        return (int)cudaErrorInvalidValue;
    return launch_map(n, (cudaStream_t)stream, DropoutForward{x, y, mask, step, stream_id, rate, keep_scale(rate)});
}

// dy, mask, dx: (n)
extern "C" int ct_launch_dropout_backward(const float *dy, const unsigned char *mask, float *dx, long n,
                                          float rate, int accumulate, void *stream)
{
    if (n < 0 || !(rate >= 0.0f && rate <= 1.0f))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    if (!dy || !mask || !dx)
        return (int)cudaErrorInvalidValue;
    return launch_map(n, (cudaStream_t)stream, DropoutBackward{dy, mask, dx, keep_scale(rate), accumulate != 0});
}

// x: (n, h, w, c) -> xp: (n, hp, wp, c)
extern "C" int ct_launch_pad_nhwc(const float *x, float *xp, int n, int h, int w, int c, int hp, int wp,
                                  void *stream)
{
    if (n < 0 || h < 0 || w < 0 || c < 0 || hp < h || wp < w)
        return (int)cudaErrorInvalidValue;
    const long long total = volume(n, hp, wp, c);  // >= the size of x, since hp >= h and wp >= w
    if (total == 0)
        return (int)cudaSuccess;
    if (total < 0 || !xp || (!x && volume(n, h, w, c) > 0))
        return (int)cudaErrorInvalidValue;
    return launch_map(total, (cudaStream_t)stream,
                      PadNhwc{x, xp, h, hp, (long long)w * c, (long long)wp * c});
}

// dxp: (n, hp, wp, c); dx: (n, h, w, c)
extern "C" int ct_launch_crop_accumulate_nhwc(const float *dxp, float *dx, int n, int h, int w, int c, int hp,
                                              int wp, int accumulate, void *stream)
{
    if (n < 0 || h < 0 || w < 0 || c < 0 || hp < h || wp < w)
        return (int)cudaErrorInvalidValue;
    const long long total = volume(n, h, w, c);
    if (total == 0)
        return (int)cudaSuccess;
    // dxp's size bounds every index the kernel forms, so it must fit too
    if (total < 0 || volume(n, hp, wp, c) < 0 || !dxp || !dx)
        return (int)cudaErrorInvalidValue;
    return launch_map(total, (cudaStream_t)stream,
                      CropAccumulateNhwc{dxp, dx, h, hp, (long long)w * c, (long long)wp * c, accumulate != 0},
                      volume(n, hp, wp, c) - 1);
}
