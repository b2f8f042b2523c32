// Max and average pooling over NHWC activations with the CPU backend's semantics exactly
// (engine/cpu/pool.c): each window is clipped to the input first, so padding is never read, never
// wins a max and never counts in an average; the first maximum wins ties; a window wholly in the
// padding gives 0 (and argmax -1, so no gradient).
//
// One thread per output element forward, channels fastest so a warp reads consecutive floats.
// Backward is a gather, one thread per input element summing the windows that cover it in a fixed
// order, rather than a scatter with atomics: the result is the same every run, and equal to the
// CPU's, which adds the windows into dx in the same (oy, ox) order. The _rn intrinsics keep the
// compiler from fusing a multiply-add the CPU does in two roundings.
//
// Each kernel is a template over the activations' storage type (kernels/dtype.cuh): fp16 and bf16
// values are widened to fp32, compared and summed as the fp32 kernel does, and rounded on store.

#include <climits>

#include <cuda_runtime.h>

#include "kernels.h"
#include "dtype.cuh"
#include "launch.cuh"

namespace {

using namespace ct_launch;
using ct_half::narrow;
using ct_half::widen;

// A window clipped to the input: rows [y0, y1), columns [x0, x1); empty when y1 <= y0 or x1 <= x0.
struct Window {
    int y0, y1, x0, x1;
};

__device__ __forceinline__ int clamp_to(int v, int hi) { return v < 0 ? 0 : v > hi ? hi : v; }

__device__ __forceinline__ Window pool_window(const ct_window_geom &d, int oy, int ox)
{
    const int ys = oy * d.stride - d.pad_t, xs = ox * d.stride - d.pad_l;
    return Window{clamp_to(ys, d.h), clamp_to(ys + d.kh, d.h), clamp_to(xs, d.w), clamp_to(xs + d.kw, d.w)};
}

// The outputs whose windows cover input row (or column) i: [lo, hi], possibly empty. Window o
// spans [o * stride - pad, o * stride - pad + k), so o covers i when
// (i + pad - k) / stride < o <= (i + pad) / stride.
struct Cover {
    int lo, hi;
};

__device__ __forceinline__ Cover covering(int i, int pad, int k, int stride, int n_out)
{
    const int first = i + pad - k;  // o must exceed first / stride
    const int lo = first < 0 ? 0 : first / stride + 1;
    const int last = (i + pad) / stride;  // i + pad >= 0: pads are checked non-negative
    return Cover{lo, last < n_out - 1 ? last : n_out - 1};
}

// Splits a flat NHWC index into (sample, row, column, channel) of a (., rows, cols, c) tensor.
template <typename Index>
__device__ __forceinline__ void split_nhwc(Index i, int rows, int cols, int c, Index &s, int &y, int &x, int &ch)
{
    Index p = i / (Index)c;
    ch = (int)(i - p * (Index)c);
    Index q = p / (Index)cols;
    x = (int)(p - q * (Index)cols);
    s = q / (Index)rows;
    y = (int)(q - s * (Index)rows);
}

// x: (n, h, w, c) T; y: (n, oh, ow, c) T; argmax: (n, oh, ow, c)
template <typename Index, typename T>
__global__ void maxpool_forward_kernel(ct_window_geom d, const T *x, T *y, int *argmax, Index total)
{
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        Index s;
        int oy, ox, ch;
        split_nhwc(i, d.oh, d.ow, d.c, s, oy, ox, ch);
        const Window win = pool_window(d, oy, ox);
        if (win.y1 <= win.y0 || win.x1 <= win.x0) {
            y[i] = narrow<T>(0.0f);  // wholly in the padding: nothing to pick, and no gradient
            argmax[i] = -1;
            continue;
        }
        const T *xs = x + s * (Index)d.h * d.w * d.c;  // the sample; its volume fits an int
        int best_i = (win.y0 * d.w + win.x0) * d.c + ch;
        float best = widen(xs[best_i]);
        for (int iy = win.y0; iy < win.y1; iy++) {
            for (int ix = win.x0; ix < win.x1; ix++) {
                const int j = (iy * d.w + ix) * d.c + ch;
                const float v = widen(xs[j]);
                if (v > best) {  // strictly: the first maximum wins ties, and NaN never replaces
                    best = v;
                    best_i = j;
                }
            }
        }
        y[i] = narrow<T>(best);  // a value of T widened: rounding gives it back unchanged
        argmax[i] = best_i;
    }
}

// dy, argmax: (n, oh, ow, c); dx: (n, h, w, c) = (accumulate ? dx : 0) + dy of each window whose
// argmax is this cell; dy, dx in T
template <typename Index, typename T>
__global__ void maxpool_backward_kernel(ct_window_geom d, const T *dy, const int *argmax, T *dx,
                                        bool accumulate, Index total)
{
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        Index s;
        int iy, ix, ch;
        split_nhwc(i, d.h, d.w, d.c, s, iy, ix, ch);
        const int here = (iy * d.w + ix) * d.c + ch;  // the index the forward stored
        const Cover cy = covering(iy, d.pad_t, d.kh, d.stride, d.oh);
        const Cover cx = covering(ix, d.pad_l, d.kw, d.stride, d.ow);
        float acc = accumulate ? widen(dx[i]) : 0.0f;
        for (int oy = cy.lo; oy <= cy.hi; oy++) {
            for (int ox = cx.lo; ox <= cx.hi; ox++) {
                const Index o = ((s * (Index)d.oh + oy) * (Index)d.ow + ox) * (Index)d.c + ch;
                if (argmax[o] == here)
                    acc = __fadd_rn(acc, widen(dy[o]));
            }
        }
        dx[i] = narrow<T>(acc);
    }
}

// x: (n, h, w, c) T; y: (n, oh, ow, c) T
template <typename Index, typename T>
__global__ void avgpool_forward_kernel(ct_window_geom d, const T *x, T *y, Index total)
{
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        Index s;
        int oy, ox, ch;
        split_nhwc(i, d.oh, d.ow, d.c, s, oy, ox, ch);
        const Window win = pool_window(d, oy, ox);
        const int count = (win.y1 - win.y0) * (win.x1 - win.x0);
        if (win.y1 <= win.y0 || win.x1 <= win.x0) {
            y[i] = narrow<T>(0.0f);
            continue;
        }
        const T *xs = x + s * (Index)d.h * d.w * d.c;
        float sum = 0.0f;  // row by row, as the CPU adds them
        for (int iy = win.y0; iy < win.y1; iy++)
            for (int ix = win.x0; ix < win.x1; ix++)
                sum += widen(xs[(iy * d.w + ix) * d.c + ch]);
        y[i] = narrow<T>(__fmul_rn(sum, 1.0f / (float)count));
    }
}

// dy: (n, oh, ow, c); dx: (n, h, w, c) = (accumulate ? dx : 0) + dy / count of each window covering
// this cell; dy, dx in T
template <typename Index, typename T>
__global__ void avgpool_backward_kernel(ct_window_geom d, const T *dy, T *dx, bool accumulate, Index total)
{
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        Index s;
        int iy, ix, ch;
        split_nhwc(i, d.h, d.w, d.c, s, iy, ix, ch);
        const Cover cy = covering(iy, d.pad_t, d.kh, d.stride, d.oh);
        const Cover cx = covering(ix, d.pad_l, d.kw, d.stride, d.ow);
        float acc = accumulate ? widen(dx[i]) : 0.0f;
        for (int oy = cy.lo; oy <= cy.hi; oy++) {
            for (int ox = cx.lo; ox <= cx.hi; ox++) {
                const Window win = pool_window(d, oy, ox);  // covers this cell, so not empty
                const float inv = 1.0f / (float)((win.y1 - win.y0) * (win.x1 - win.x0));
                const Index o = ((s * (Index)d.oh + oy) * (Index)d.ow + ox) * (Index)d.c + ch;
                acc = __fadd_rn(acc, __fmul_rn(widen(dy[o]), inv));
            }
        }
        dx[i] = narrow<T>(acc);
    }
}

// Checks the geometry; sets the element counts of x and y. False for bad dimensions (a pool
// writes as many channels as it reads: f == c), or a sample volume beyond an int (argmax stores
// indices within a sample as int).
bool check_dims(const ct_window_geom *d, long long *in_total, long long *out_total)
{
    if (!d || d->n < 0 || d->h < 0 || d->w < 0 || d->c <= 0 || d->f != d->c || d->kh <= 0 || d->kw <= 0 ||
        d->stride <= 0 || d->pad_t < 0 || d->pad_l < 0 || d->oh < 0 || d->ow < 0)
        return false;
    // Window corners are formed in int: keep oh * stride + kh, and the like, far from overflow.
    if ((long long)d->oh * d->stride + d->kh > INT_MAX / 2 || (long long)d->ow * d->stride + d->kw > INT_MAX / 2 ||
        (long long)d->h + d->pad_t > INT_MAX / 2 || (long long)d->w + d->pad_l > INT_MAX / 2)
        return false;
    const long long in_sample = (long long)d->h * d->w * d->c, out_sample = (long long)d->oh * d->ow * d->c;
    if (in_sample > INT_MAX || out_sample > INT_MAX)
        return false;
    *in_total = (long long)d->n * in_sample;  // int * (< 2^31) fits in a long long
    *out_total = (long long)d->n * out_sample;
    return true;
}

// Launches kernel<Index, T> over `work` elements with the narrowest index that holds every index
// formed (both tensors' sizes).
#define CT_POOL_LAUNCH(kernel, T, work, largest, s, ...)                                           \
    do {                                                                                         \
        const unsigned blocks_ = blocks_for(work);                                               \
        if ((largest) <= INT_MAX)                                                                \
            kernel<unsigned, T><<<blocks_, kThreads, 0, s>>>(__VA_ARGS__, (unsigned)(work));      \
        else                                                                                     \
            kernel<unsigned long long, T><<<blocks_, kThreads, 0, s>>>(__VA_ARGS__,              \
                                                                      (unsigned long long)(work)); \
    } while (0)

long long max_ll(long long a, long long b) { return a > b ? a : b; }

}  // namespace

// x: (n, h, w, c) dtype; y: (n, oh, ow, c) dtype; argmax: (n, oh, ow, c)
extern "C" int ct_launch_maxpool_forward_dt(const ct_window_geom *d, const void *x, void *y, int *argmax, int dtype,
                                            void *stream)
{
    long long in_total, out_total;
    if (!ct_half::valid(dtype) || !check_dims(d, &in_total, &out_total))
        return (int)cudaErrorInvalidValue;
    if (out_total == 0)
        return (int)cudaSuccess;
    if ((in_total > 0 && !x) || !y || !argmax)
        return (int)cudaErrorInvalidValue;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        CT_POOL_LAUNCH(maxpool_forward_kernel, T, out_total, max_ll(in_total, out_total), (cudaStream_t)stream, *d,
                       (const T *)x, (T *)y, argmax);
        return (int)cudaGetLastError();
    });
}

// x: (n, h, w, c) fp32; y, argmax: (n, oh, ow, c)
extern "C" int ct_launch_maxpool_forward(const ct_window_geom *d, const float *x, float *y, int *argmax,
                                         void *stream)
{
    return ct_launch_maxpool_forward_dt(d, x, y, argmax, CT_DTYPE_F32, stream);
}

// dy: (n, oh, ow, c) dtype; argmax: (n, oh, ow, c); dx: (n, h, w, c) dtype
extern "C" int ct_launch_maxpool_backward_dt(const ct_window_geom *d, const void *dy, const int *argmax, void *dx,
                                             int accumulate, int dtype, void *stream)
{
    long long in_total, out_total;
    if (!ct_half::valid(dtype) || !check_dims(d, &in_total, &out_total))
        return (int)cudaErrorInvalidValue;
    if (in_total == 0)
        return (int)cudaSuccess;
    if ((out_total > 0 && (!dy || !argmax)) || !dx)
        return (int)cudaErrorInvalidValue;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        CT_POOL_LAUNCH(maxpool_backward_kernel, T, in_total, max_ll(in_total, out_total), (cudaStream_t)stream, *d,
                       (const T *)dy, argmax, (T *)dx, accumulate != 0);
        return (int)cudaGetLastError();
    });
}

// dy, argmax: (n, oh, ow, c); dx: (n, h, w, c); fp32
extern "C" int ct_launch_maxpool_backward(const ct_window_geom *d, const float *dy, const int *argmax, float *dx,
                                          int accumulate, void *stream)
{
    return ct_launch_maxpool_backward_dt(d, dy, argmax, dx, accumulate, CT_DTYPE_F32, stream);
}

// x: (n, h, w, c) dtype; y: (n, oh, ow, c) dtype
extern "C" int ct_launch_avgpool_forward_dt(const ct_window_geom *d, const void *x, void *y, int dtype, void *stream)
{
    long long in_total, out_total;
    if (!ct_half::valid(dtype) || !check_dims(d, &in_total, &out_total))
        return (int)cudaErrorInvalidValue;
    if (out_total == 0)
        return (int)cudaSuccess;
    if ((in_total > 0 && !x) || !y)
        return (int)cudaErrorInvalidValue;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        CT_POOL_LAUNCH(avgpool_forward_kernel, T, out_total, max_ll(in_total, out_total), (cudaStream_t)stream, *d,
                       (const T *)x, (T *)y);
        return (int)cudaGetLastError();
    });
}

// x: (n, h, w, c) fp32; y: (n, oh, ow, c) fp32
extern "C" int ct_launch_avgpool_forward(const ct_window_geom *d, const float *x, float *y, void *stream)
{
    return ct_launch_avgpool_forward_dt(d, x, y, CT_DTYPE_F32, stream);
}

// dy: (n, oh, ow, c) dtype; dx: (n, h, w, c) dtype
extern "C" int ct_launch_avgpool_backward_dt(const ct_window_geom *d, const void *dy, void *dx, int accumulate,
                                             int dtype, void *stream)
{
    long long in_total, out_total;
    if (!ct_half::valid(dtype) || !check_dims(d, &in_total, &out_total))
        return (int)cudaErrorInvalidValue;
    if (in_total == 0)
        return (int)cudaSuccess;
    if ((out_total > 0 && !dy) || !dx)
        return (int)cudaErrorInvalidValue;
    return ct_half::with(dtype, [&](auto tag) {
        using T = CT_TYPE_OF(tag);
        CT_POOL_LAUNCH(avgpool_backward_kernel, T, in_total, max_ll(in_total, out_total), (cudaStream_t)stream, *d,
                       (const T *)dy, (T *)dx, accumulate != 0);
        return (int)cudaGetLastError();
    });
}

// dy: (n, oh, ow, c) fp32; dx: (n, h, w, c) fp32
extern "C" int ct_launch_avgpool_backward(const ct_window_geom *d, const float *dy, float *dx, int accumulate,
                                          void *stream)
{
    return ct_launch_avgpool_backward_dt(d, dy, dx, accumulate, CT_DTYPE_F32, stream);
}
