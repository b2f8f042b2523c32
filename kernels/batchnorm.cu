// Batch norm step by step, for what cuDNN's legacy batch norm does not do (engine/cuda/batchnorm.c):
// sync_bn, whose trainer averages per-channel figures over the replicas between the pieces (cuDNN
// takes no outside statistics), and bf16, in training and in evaluation (cuDNN does not document
// bf16 for those calls; PyTorch routes bf16 batch norm to kernels of its own too). Each follows the
// CPU backend (engine/cpu/batchnorm.c; its synced path in training, its forward_eval in evaluation):
// per-channel sums in double over the rows, the per-channel figures formed in double and rounded to
// fp32 once, the elementwise passes in fp32 with the _rn intrinsics in the CPU's order (never fused
// into an FMA), each stored value rounded to its dtype once, as cpu/half.c rounds. The sums' order
// differs from the CPU's (its 16 chunks summed by OpenMP threads), so results agree to rounding, not
// bit for bit.
//
// The sums: a block is kCols channels by kLanes row lanes over one chunk of rows; lane (tx, ty) sums
// rows ty, ty + kLanes, ... of its channel, the block adds its lanes in a fixed tree and writes the
// chunk's partial; a second kernel adds the partials in chunk order, one thread per channel, and
// finishes the channel's figures. No atomics and a launch shape set by (rows, c) and the workspace's
// size, so the same input gives the same bits every run (and in a replayed CUDA graph).

#include <climits>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels.h"
#include "dtype.cuh"
#include "launch.cuh"

namespace {

using namespace ct_launch;
using ct_half::narrow;
using ct_half::widen;

constexpr int kCols = 32;
constexpr int kLanes = 32;
constexpr long long kChunkRows = 512;   // about this many rows per chunk
constexpr long long kMaxChunks = 1024;

// What a pass sums per channel j over rows i (m: a per-channel centre):
//   Mean: s1 = sum x                       (s2 unused)
//   Var:  s2 = sum (x - m)^2               (s1 unused)
//   Back: s1 = sum dy, s2 = sum dy (x - m)
enum Mode { kMean, kVar, kBack };

// x, dy: (rows, c) T (dy only for kBack); m: (c) fp32 (not for kMean); partials: (chunks, 2c) double,
// the chunk's s1 then s2; rows_per_chunk rows per blockIdx.y
template <int M, typename T>
__global__ void __launch_bounds__(kCols * kLanes)
partial_sums_kernel(const T *x, const T *dy, const float *m, double *partials, long long rows, int c,
                    long long rows_per_chunk)
{
    __shared__ double p1[kLanes][kCols], p2[kLanes][kCols];  // a warp is one ty: one contiguous row
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long col = (long long)blockIdx.x * kCols + tx;
    const long long first = (long long)blockIdx.y * rows_per_chunk;
    const long long last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
    double a1 = 0.0, a2 = 0.0;
    if (col < c) {
        const double centre = M == kMean ? 0.0 : (double)m[col];
        for (long long r = first + ty; r < last; r += kLanes) {
            const double xv = widen(x[r * c + col]);
            if (M == kMean) {
                a1 += xv;
            } else if (M == kVar) {
                const double u = xv - centre;
                a2 += u * u;
            } else {
                const double g = widen(dy[r * c + col]);
                a1 += g;
                a2 += g * (xv - centre);
            }
        }
    }
    p1[ty][tx] = a1;
    p2[ty][tx] = a2;
    __syncthreads();
    for (int span = kLanes / 2; span > 0; span /= 2) {
        if (ty < span) {
            p1[ty][tx] += p1[ty + span][tx];
            p2[ty][tx] += p2[ty + span][tx];
        }
        __syncthreads();
    }
    if (ty == 0 && col < c) {
        double *out = partials + (long long)blockIdx.y * 2 * c;
        out[col] = p1[0][tx];
        out[c + col] = p2[0][tx];
    }
}

// The per-channel figures from the double sums s1, s2 (the CPU's, rounded to fp32 once).
struct MeanFinish {
    float *mean;
    long long rows;
    __device__ void operator()(int j, double s1, double) const { mean[j] = rows ? (float)(s1 / rows) : 0.0f; }
};
struct VarFinish {
    float *var;
    long long rows;
    __device__ void operator()(int j, double, double s2) const { var[j] = rows ? (float)(s2 / rows) : 0.0f; }
};
struct BackFinish {
    float *sums, *dgamma, *dbeta;
    const float *invstd;
    int c;
    __device__ void operator()(int j, double s1, double s2) const
    {
        if (dgamma)
            dgamma[j] = (float)(s2 * (double)invstd[j]);
        if (dbeta)
            dbeta[j] = (float)s1;
        sums[j] = (float)s1;
        sums[c + j] = (float)s2;
    }
};

// partials: (chunks, 2c) double, added in chunk order (none: 0); one thread per channel
template <typename F>
__global__ void finish_kernel(const double *partials, int chunks, int c, F f)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= c)
        return;
    double s1 = 0.0, s2 = 0.0;
    for (int k = 0; k < chunks; k++) {
        s1 += partials[(long long)k * 2 * c + j];
        s2 += partials[(long long)k * 2 * c + c + j];
    }
    f(j, s1, s2);
}

long long chunks_for(long long rows)
{
    const long long chunks = (rows + kChunkRows - 1) / kChunkRows;
    return chunks < kMaxChunks ? chunks : kMaxChunks;
}

bool bad_shape(long rows, int c) { return rows < 0 || c <= 0 || (rows > 0 && rows > LLONG_MAX / c); }

// The sums of mode M over x (and dy), then f per channel; the arguments checked by the caller.
template <int M, typename F>
int sums(const void *x, const void *dy, const float *m, long rows, int c, void *workspace, size_t workspace_bytes,
         int dtype, F f, cudaStream_t s)
{
    long long chunks = chunks_for(rows);
    if (chunks > 0) {
        const long long fit = (long long)(workspace_bytes / (2 * (size_t)c * sizeof(double)));
        if (chunks > fit)
            chunks = fit;
        if (chunks < 1 || !workspace || ((uintptr_t)workspace & 7u))
            return (int)cudaErrorInvalidValue;
    }
    double *partials = (double *)workspace;
    if (chunks > 0) {
        const long long per_chunk = ((long long)rows + chunks - 1) / chunks;
        const dim3 grid((unsigned)((c + kCols - 1) / kCols), (unsigned)chunks);
        const int rc = ct_half::with(dtype, [&](auto tag) {
            using T = CT_TYPE_OF(tag);
            partial_sums_kernel<M, T><<<grid, dim3(kCols, kLanes), 0, s>>>((const T *)x, (const T *)dy, m, partials,
                                                                          (long long)rows, c, per_chunk);
            return (int)cudaGetLastError();
        });
        if (rc != (int)cudaSuccess)
            return rc;
    }
    finish_kernel<F><<<(unsigned)((c + 255) / 256), 256, 0, s>>>(partials, (int)chunks, c, f);
    return (int)cudaGetLastError();
}

// ---- the per-channel figures of forward and backward (one thread per channel, in double) ----

// save_invstd: the variance in, invstd out; coef: (2c) scale then shift. The running variance is
// unbiased by n / (n - 1) for the batch's n rows: *samples * per_sample when samples is given (device
// memory read as the kernel runs, so that a replayed graph takes the step's global batch), else rows.
__global__ void normalise_coef_kernel(const float *gamma, const float *beta, const float *save_mean,
                                      float *save_invstd, float *run_mean, float *run_var, float *coef, int c,
                                      long long rows, const int *samples, long long per_sample, float momentum,
                                      float eps)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= c)
        return;
    const long long n = samples ? (long long)*samples * per_sample : rows;
    const double unbias = n > 1 ? (double)n / (double)(n - 1) : 1.0;  // one row has none: the biased 0
    const double mean = save_mean[j], var = save_invstd[j];
    const double invstd = 1.0 / sqrt(var + eps);
    save_invstd[j] = (float)invstd;
    run_mean[j] = (float)((1.0 - momentum) * run_mean[j] + momentum * mean);
    run_var[j] = (float)((1.0 - momentum) * run_var[j] + momentum * var * unbias);
    coef[j] = (float)(gamma[j] * invstd);
    coef[c + j] = (float)(beta[j] - mean * gamma[j] * invstd);
}

// coef: (2c) scale then shift from the running statistics (the CPU's ct_cpu_batchnorm_forward_eval)
__global__ void inference_coef_kernel(const float *gamma, const float *beta, const float *run_mean,
                                      const float *run_var, float *coef, int c, float eps)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= c)
        return;
    const double k = gamma[j] / sqrt((double)run_var[j] + eps);
    coef[j] = (float)k;
    coef[c + j] = (float)(beta[j] - run_mean[j] * k);
}

// coef: (3c) k, a, b
__global__ void dx_coef_kernel(const float *gamma, const float *invstd, const float *sums, float *coef, int c,
                               long long rows)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= c)
        return;
    const double is = invstd[j];
    coef[j] = (float)(gamma[j] * is);
    coef[c + j] = (float)((double)sums[j] / rows);
    coef[2 * c + j] = (float)((double)sums[c + j] * is * is / rows);
}

// ---- elementwise passes over (rows, c) ----

// x, y: (rows, c) T; coef: (2c) scale, shift
template <typename T, typename Index>
__global__ void scale_shift_kernel(const T *x, T *y, const float *coef, Index n, int c)
{
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int j = (int)(i % (Index)c);
        y[i] = narrow<T>(__fadd_rn(__fmul_rn(widen(x[i]), coef[j]), coef[c + j]));
    }
}

// x, dy, dx: (rows, c) T; mean: (c); coef: (3c) k, a, b
template <typename T, typename Index>
__global__ void dx_kernel(const T *x, const T *dy, T *dx, const float *mean, const float *coef, Index n, int c,
                          int accumulate)
{
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int j = (int)(i % (Index)c);
        const float xc = __fmul_rn(__fsub_rn(widen(x[i]), mean[j]), coef[2 * c + j]);
        const float v = __fmul_rn(coef[j], __fsub_rn(__fsub_rn(widen(dy[i]), coef[c + j]), xc));
        dx[i] = narrow<T>(__fadd_rn(accumulate ? widen(dx[i]) : 0.0f, v));
    }
}

// f(blocks, narrow) for n = rows * c elements: narrow when a 32-bit index holds them
template <typename F>
int launch_elementwise(long long n, F f)
{
    return f(blocks_for(n), n <= INT_MAX);
}

// y = x * coef[j] + coef[c + j] over (rows, c) of dtype, rows > 0
int scale_shift(const void *x, void *y, const float *coef, long rows, int c, int dtype, cudaStream_t s)
{
    const long long n = (long long)rows * c;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        return launch_elementwise(n, [&](unsigned blocks, bool narrow_index) {
            if (narrow_index)
                scale_shift_kernel<T, unsigned><<<blocks, kThreads, 0, s>>>((const T *)x, (T *)y, coef, (unsigned)n, c);
            else
                scale_shift_kernel<T, unsigned long long><<<blocks, kThreads, 0, s>>>((const T *)x, (T *)y, coef,
                                                                                     (unsigned long long)n, c);
            return (int)cudaGetLastError();
        });
    });
}

}  // namespace

extern "C" size_t ct_bn_sums_workspace(long rows, int c)
{
    if (bad_shape(rows, c))
        return 0;
    return (size_t)chunks_for(rows) * 2 * (size_t)c * sizeof(double);
}

// x: (rows, c) dtype; mean: (c) fp32
extern "C" int ct_launch_bn_mean_dt(const void *x, float *mean, long rows, int c, void *workspace,
                                    size_t workspace_bytes, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || bad_shape(rows, c) || !mean || (rows > 0 && !x))
        return (int)cudaErrorInvalidValue;
    return sums<kMean>(x, nullptr, nullptr, rows, c, workspace, workspace_bytes, dtype,
                       MeanFinish{mean, (long long)rows}, (cudaStream_t)stream);
}

// x: (rows, c) dtype; mean, var: (c) fp32
extern "C" int ct_launch_bn_variance_dt(const void *x, const float *mean, float *var, long rows, int c,
                                        void *workspace, size_t workspace_bytes, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || bad_shape(rows, c) || !mean || !var || var == mean || (rows > 0 && !x))
        return (int)cudaErrorInvalidValue;
    return sums<kVar>(x, nullptr, mean, rows, c, workspace, workspace_bytes, dtype, VarFinish{var, (long long)rows},
                      (cudaStream_t)stream);
}

// x, y: (rows, c) dtype; gamma, beta, save_mean, save_invstd, run_mean, run_var: (c) fp32; coef: (2c);
// samples: (1) int32 in device memory or NULL
extern "C" int ct_launch_bn_normalise_dt(const void *x, void *y, const float *gamma, const float *beta,
                                         const float *save_mean, float *save_invstd, float *run_mean, float *run_var,
                                         float *coef, long rows, int c, const int *samples, long per_sample,
                                         float momentum, float eps, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || bad_shape(rows, c) || !gamma || !beta || !save_mean || !save_invstd ||
        !run_mean || !run_var || !coef || (rows > 0 && (!x || !y)) || (samples && per_sample < 1))
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    normalise_coef_kernel<<<(unsigned)((c + 255) / 256), 256, 0, s>>>(gamma, beta, save_mean, save_invstd, run_mean,
                                                                       run_var, coef, c, (long long)rows, samples,
                                                                       (long long)per_sample, momentum, eps);
    int rc = (int)cudaGetLastError();
    if (rc != (int)cudaSuccess || rows == 0)
        return rc;
    return scale_shift(x, y, coef, rows, c, dtype, s);
}

// x, y: (rows, c) dtype; gamma, beta, run_mean, run_var: (c) fp32; coef: (2c)
extern "C" int ct_launch_bn_inference_dt(const void *x, void *y, const float *gamma, const float *beta,
                                         const float *run_mean, const float *run_var, float *coef, long rows, int c,
                                         float eps, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || bad_shape(rows, c) || !gamma || !beta || !run_mean || !run_var || !coef ||
        (rows > 0 && (!x || !y)))
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    inference_coef_kernel<<<(unsigned)((c + 255) / 256), 256, 0, s>>>(gamma, beta, run_mean, run_var, coef, c, eps);
    int rc = (int)cudaGetLastError();
    if (rc != (int)cudaSuccess || rows == 0)
        return rc;
    return scale_shift(x, y, coef, rows, c, dtype, s);
}

// x, dy: (rows, c) dtype; mean, invstd: (c); sums: (2c); dgamma, dbeta: (c) or NULL
extern "C" int ct_launch_bn_backward_sums_dt(const void *x, const void *dy, const float *mean, const float *invstd,
                                             float *sums_out, float *dgamma, float *dbeta, long rows, int c,
                                             void *workspace, size_t workspace_bytes, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || bad_shape(rows, c) || !mean || !invstd || !sums_out || (rows > 0 && (!x || !dy)))
        return (int)cudaErrorInvalidValue;
    return sums<kBack>(x, dy, mean, rows, c, workspace, workspace_bytes, dtype,
                       BackFinish{sums_out, dgamma, dbeta, invstd, c}, (cudaStream_t)stream);
}

// x, dy, dx: (rows, c) dtype; gamma, mean, invstd: (c); sums: (2c); coef: (3c)
extern "C" int ct_launch_bn_backward_dx_dt(const void *x, const void *dy, const float *gamma, const float *mean,
                                           const float *invstd, const float *sums_in, void *dx, float *coef,
                                           long rows, int c, int accumulate, int dtype, void *stream)
{
    if (!ct_half::valid(dtype) || bad_shape(rows, c) || !gamma || !mean || !invstd || !sums_in || !coef ||
        (rows > 0 && (!x || !dy || !dx)))
        return (int)cudaErrorInvalidValue;
    if (rows == 0)
        return (int)cudaSuccess;
    cudaStream_t s = (cudaStream_t)stream;
    dx_coef_kernel<<<(unsigned)((c + 255) / 256), 256, 0, s>>>(gamma, invstd, sums_in, coef, c, (long long)rows);
    int rc = (int)cudaGetLastError();
    if (rc != (int)cudaSuccess)
        return rc;
    const long long n = (long long)rows * c;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        return launch_elementwise(n, [&](unsigned blocks, bool narrow_index) {
            if (narrow_index)
                dx_kernel<T, unsigned><<<blocks, kThreads, 0, s>>>((const T *)x, (const T *)dy, (T *)dx, mean, coef,
                                                                  (unsigned)n, c, accumulate);
            else
                dx_kernel<T, unsigned long long><<<blocks, kThreads, 0, s>>>(
                    (const T *)x, (const T *)dy, (T *)dx, mean, coef, (unsigned long long)n, c, accumulate);
            return (int)cudaGetLastError();
        });
    });
}
