// Input augmentation on the device: the CPU batcher's pad + random crop, horizontal flip and
// normalisation (data/batch.c) applied to a batch shipped as raw uint8, bit for bit.
//
// The draws follow batch.c's recipe exactly: sample i of the batch takes
//     r = ct_hash3(augment_seed, i, 0), span = 2 * crop_pad + 1,
//     dy = (r & 0xffff) % span, dx = ((r >> 16) & 0xffff) % span, flip = (r >> 32) & 1,
// and every output value is (float)pixel * norm_scale[c] + norm_bias[c] with the padding read as pixel 0.
// The CPU build (C11, no -ffast-math) rounds the multiply and the add separately; __fmul_rn and
// __fadd_rn are never contracted into an FMA, so the device rounds the same way.
//
// The kernel is bandwidth-bound (one byte in, four out per element): a thread writes consecutive
// elements of a sample's (h, w, c) volume (coalesced stores), and draws its sample's crop and flip
// once per sample rather than once per element.

#include <climits>
#include <cstdint>

#include <cuda_runtime.h>

#include "config/config.h"
#include "base/rng.h"
#include "kernels.h"
#include "launch.cuh"

namespace {

constexpr int kMaxChannels = 4;  // kernels.h documents c <= 4
static_assert(kMaxChannels == CT_MAX_CHANNELS, "the kernel's normalisation holds CT_MAX_CHANNELS channels");

using namespace ct_launch;  // kThreads, kMaxBlocks (which also keep e + stride below 2^32 here)
constexpr long long kMaxGridY = 65535;  // CUDA's limit on gridDim.y

// The host's folded normalisation, passed by value (kernel parameters live in constant memory).
struct Normalise {
    float norm_scale[kMaxChannels], norm_bias[kMaxChannels];
};

// The window origin in the padded image and the mirror flag, as batch.c's crop_plan.
struct Plan {
    int dy, dx, flip;
};

// batch.c's plan_for. span is 2 * crop_pad + 1 clamped to 65536: the operands are 16-bit, and
// v % S == v % 65536 == v for every v < 65536 once S >= 65536, so the 32-bit modulo is exact.
__device__ __forceinline__ Plan plan_for(unsigned long long seed, unsigned long long i, int augmenting, int crop_pad,
                                         unsigned span, int flip)
{
    Plan p = {0, 0, 0};
    if (!augmenting)
        return p;
    const uint64_t r = ct_hash3(seed, (uint64_t)i, 0);
    if (crop_pad > 0) {
        p.dy = (int)((unsigned)(r & 0xffffu) % span);
        p.dx = (int)((unsigned)((r >> 16) & 0xffffu) % span);
    }
    p.flip = flip ? (int)((r >> 32) & 1u) : 0;
    return p;
}

// src: (n, h, w, c) uint8; dst: (n, h, w, c) fp32, every element written.
// Grid x walks the elements of one sample (volume = h * w * c fits an int), grid y the samples.
// pad: the crop padding when augmenting, else 0; crop_pad, span, flip: the draw parameters.
__global__ void __launch_bounds__(kThreads)
augment_u8_kernel(const unsigned char *src, float *dst, unsigned n, int h, int w, int c, int pad, int crop_pad,
                  unsigned span, int flip, int augmenting, unsigned long long seed, unsigned long long first_sample,
                  Normalise norm)
{
    const unsigned volume = (unsigned)h * (unsigned)w * (unsigned)c;
    const unsigned row = (unsigned)w * (unsigned)c;
    const unsigned stride = gridDim.x * blockDim.x;
    const unsigned first = blockIdx.x * blockDim.x + threadIdx.x;
    if (first >= volume)
        return;
    for (unsigned s = blockIdx.y; s < n; s += gridDim.y) {
        const Plan p = plan_for(seed, first_sample + s, augmenting, crop_pad, span, flip);
        const unsigned char *img = src + (size_t)s * volume;  // (h, w, c)
        float *out = dst + (size_t)s * volume;                // (h, w, c)
        for (unsigned e = first; e < volume; e += stride) {
            const unsigned y = e / row, rem = e - y * row;
            const unsigned x = rem / (unsigned)c, ch = rem - x * (unsigned)c;
            // Source pixel in the unpadded image; outside it is padding (pixel 0). In 64 bits, so
            // that y + dy - pad cannot overflow even for absurd pads.
            const long long sy = (long long)y + p.dy - pad;
            const long long sx = (long long)(p.flip ? (unsigned)w - 1u - x : x) + p.dx - pad;
            const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
            const float v = inside ? (float)img[((size_t)sy * (unsigned)w + (size_t)sx) * (unsigned)c + ch]
                                   : 0.0f;
            out[e] = __fadd_rn(__fmul_rn(v, norm.norm_scale[ch]), norm.norm_bias[ch]);
        }
    }
}

// n * h * w * c for non-negative ints, or -1 when it does not fit in a long long.
long long volume4(int n, int h, int w, int c)
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

// src: (n, h, w, c) uint8; dst: (n, h, w, c) fp32; norm_scale, norm_bias: (c) fp32 in host memory
extern "C" int ct_launch_augment_u8(const unsigned char *src, float *dst, int n, int h, int w, int c, int crop_pad,
                                    int flip, int augmenting, const float *norm_scale, const float *norm_bias,
                                    unsigned long long augment_seed, long first_sample, void *stream)
{
    if (n < 0 || h < 0 || w < 0 || c < 0 || c > kMaxChannels || crop_pad < 0 || first_sample < 0)
        return (int)cudaErrorInvalidValue;
    const long long total = volume4(n, h, w, c);
    if (total == 0)
        return (int)cudaSuccess;
    const long long per_sample = volume4(1, h, w, c);
    if (total < 0 || per_sample > INT_MAX || !src || !dst || !norm_scale || !norm_bias)
        return (int)cudaErrorInvalidValue;

    Normalise norm = {};
    for (int ch = 0; ch < c; ch++) {
        norm.norm_scale[ch] = norm_scale[ch];
        norm.norm_bias[ch] = norm_bias[ch];
    }
    const long long span_full = 2LL * crop_pad + 1;
    const unsigned span = (unsigned)(span_full < 65536 ? span_full : 65536);
    augmenting = augmenting != 0;

    // x: blocks over one sample's elements; y: as many samples as keep the grid near kMaxBlocks.
    long long bx = (per_sample + kThreads - 1) / kThreads;
    if (bx > kMaxBlocks)
        bx = kMaxBlocks;
    long long by = kMaxBlocks / bx;
    if (by < 1)
        by = 1;
    if (by > n)
        by = n;
    if (by > kMaxGridY)
        by = kMaxGridY;
    const dim3 grid((unsigned)bx, (unsigned)by);
    augment_u8_kernel<<<grid, kThreads, 0, (cudaStream_t)stream>>>(src, dst, (unsigned)n, h, w, c,
                                                                   augmenting ? crop_pad : 0, crop_pad, span,
                                                                   flip != 0, augmenting, augment_seed,
                                                                   (unsigned long long)first_sample, norm);
    return (int)cudaGetLastError();
}
