// Resampling a decoded image's region to the output size on the device ([data] decode = gpu):
// what data/image_resize.c does on the CPU, with the same weights computed in float instead of
// 15-bit fixed point, so the bytes may differ by a rounding step (docs/gpu.md, "GPU decode"). A
// host copy of the same arithmetic (ct_resize_region_u8_host) lets tests check the geometry
// without a GPU.
#include <cuda_runtime.h>

#include "kernels/kernels.h"
#include "launch.cuh"

using namespace ct_launch;

namespace {

constexpr int kMaxChannels = 4;

// a * b + c rounded twice, never contracted into an FMA, so that the host reference gives the
// device's bytes (x86-64's baseline has no FMA for the host compiler to use either)
__host__ __device__ inline float mul_add(float a, float b, float c)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(__fmul_rn(a, b), c);
#else
    return a * b + c;
#endif
}

__host__ __device__ inline float mul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

// One axis: output index i of `out` reads source pixels [*j0, *j1] of `in`; weight(j) below.
// Shrinking, output i covers [i*in/out, (i+1)*in/out) of the source, each source pixel weighted by
// its overlap; growing, i's centre sits at ((2i+1)*in - out) / (2*out) source pixels, split between
// its two neighbours (all on the last pixel past the last centre).
struct Axis {
    int in, out;
    __host__ __device__ void span(int i, int *j0, int *j1) const
    {
        if (out > in) {
            long long num = (2LL * i + 1) * in - out;
            if (num < 0)
                num = 0;
            int j = (int)(num / (2LL * out));
            *j0 = j >= in - 1 ? in - 1 : j;
            *j1 = j >= in - 1 ? in - 1 : j + 1;
        } else {
            *j0 = (int)((long long)i * in / out);
            *j1 = (int)(((long long)(i + 1) * in - 1) / out);
        }
    }
    __host__ __device__ float weight(int i, int j) const
    {
        if (out > in) {
            long long num = (2LL * i + 1) * in - out;
            if (num < 0)
                num = 0;
            long long denom = 2LL * out, j0 = num / denom;
            if (j0 >= in - 1)
                return 1.0f;
            float frac = (float)(num % denom) / (float)denom;
            return j == j0 ? 1.0f - frac : frac;
        }
        long long lo = (long long)i * in > (long long)j * out ? (long long)i * in : (long long)j * out;
        long long hi = (long long)(i + 1) * in < (long long)(j + 1) * out ? (long long)(i + 1) * in
                                                                             : (long long)(j + 1) * out;
        return (float)(hi - lo) / (float)in;
    }
};

// Output pixel p (row-major over out_h x out_w) of the region, every channel: the kernel's work
// per thread, and the host reference's. src: rows of src_pitch bytes, (H, W, c) interleaved;
// dst: (out_h, out_w, c) uint8
__host__ __device__ inline void resize_pixel(const unsigned char *src, size_t src_pitch, int c, int rx, int ry,
                                             Axis ax, Axis ay, int flip, long long p, unsigned char *dst)
{
    const int oy = (int)(p / ax.out), ox = (int)(p % ax.out);
    const int sx = flip ? ax.out - 1 - ox : ox;   // the output column mirrored reads this one
    int x0, x1, y0, y1;
    ax.span(sx, &x0, &x1);
    ay.span(oy, &y0, &y1);
    float sum[kMaxChannels] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int j = y0; j <= y1; j++) {
        const float wy = ay.weight(oy, j);
        const unsigned char *row = src + (size_t)(ry + j) * src_pitch + (size_t)rx * c;
        for (int k = x0; k <= x1; k++) {
            const float w = mul(wy, ax.weight(sx, k));
            for (int ch = 0; ch < c; ch++)
                sum[ch] = mul_add(w, (float)row[(size_t)k * c + ch], sum[ch]);
        }
    }
    unsigned char *out = dst + (size_t)p * c;
    for (int ch = 0; ch < c; ch++) {
        float v = sum[ch] + 0.5f;
        out[ch] = (unsigned char)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
    }
}

__global__ void resize_region_kernel(const unsigned char *src, size_t src_pitch, int c, int rx, int ry, Axis ax,
                                     Axis ay, int flip, unsigned char *dst)
{
    const long long total = (long long)ax.out * ay.out;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < total;
         p += (long long)gridDim.x * blockDim.x)
        resize_pixel(src, src_pitch, c, rx, ry, ax, ay, flip, p, dst);
}

bool bad_region(const unsigned char *src, int src_w, int src_h, size_t src_pitch, int c, int rx, int ry, int rw,
                int rh, const unsigned char *dst, int out_w, int out_h)
{
    return !src || !dst || c < 1 || c > kMaxChannels || out_w < 1 || out_h < 1 || rw < 1 || rh < 1 || rx < 0 ||
           ry < 0 || rx + rw > src_w || ry + rh > src_h || src_pitch < (size_t)src_w * c;
}

}  // namespace

// src: (src_h, src_w, c) uint8 rows of src_pitch bytes; dst: (out_h, out_w, c) uint8
extern "C" int ct_launch_resize_region_u8(const unsigned char *src, int src_w, int src_h, size_t src_pitch, int c,
                                          int rx, int ry, int rw, int rh, int flip, unsigned char *dst, int out_w,
                                          int out_h, void *stream)
{
    if (bad_region(src, src_w, src_h, src_pitch, c, rx, ry, rw, rh, dst, out_w, out_h))
        return (int)cudaErrorInvalidValue;
    const Axis ax = {rw, out_w}, ay = {rh, out_h};
    resize_region_kernel<<<blocks_for((long long)out_w * out_h), kThreads, 0, (cudaStream_t)stream>>>(
        src, src_pitch, c, rx, ry, ax, ay, flip != 0, dst);
    return (int)cudaGetLastError();
}

// The same on the host, pixel for pixel (for testing the kernel's arithmetic without a GPU)
extern "C" int ct_resize_region_u8_host(const unsigned char *src, int src_w, int src_h, size_t src_pitch, int c,
                                        int rx, int ry, int rw, int rh, int flip, unsigned char *dst, int out_w,
                                        int out_h)
{
    if (bad_region(src, src_w, src_h, src_pitch, c, rx, ry, rw, rh, dst, out_w, out_h))
        return (int)cudaErrorInvalidValue;
    const Axis ax = {rw, out_w}, ay = {rh, out_h};
    for (long long p = 0; p < (long long)out_w * out_h; p++)
        resize_pixel(src, src_pitch, c, rx, ry, ax, ay, flip != 0, p, dst);
    return (int)cudaSuccess;
}
