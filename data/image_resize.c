/* Resampling a region to the output size: area-averaged on an axis that shrinks, bilinear on one
 * that grows, in integers so that every machine and thread gives the same bytes.
 *
 * Each axis maps output index i to a run of source indices with weights. Shrinking, output i
 * covers [i*in, (i+1)*in) and source j covers [j*out, (j+1)*out) on a grid of 1/out pixels, the
 * weight being their overlap; growing, the source position of i's centre is
 * ((2i+1)*in - out) / (2*out) pixels, split between its two neighbours. The exact weights are
 * rounded to 15-bit fixed point with the rounding error put on the largest, so that each output's
 * weights sum to exactly 1 << 15: a constant region stays exactly constant, and an equal size is a
 * copy. Every output of an axis gets the same number of taps (the longest run, the others padded
 * with zero weights), so that the inner loops have a fixed length.
 *
 * Two passes, on blocks of 8 output rows, in 16-bit lanes (twice the values per vector of 32-bit
 * ones), each product the high half of a 16 x 16-bit multiply (one instruction per vector from SSE2
 * on): first vertically, each row a weighted sum of whole source rows, contiguous, so the compiler
 * vectorises it (a source value as v << 8 times a weight: v * weight with 7 fractional bits, the
 * sum at most 255 << 7), then the 8 rows interleaved; then horizontally along the 8 rows at once,
 * each output pixel's weights applied to the run of its sources' channels and rows (doubled to 8
 * fractional bits, times a weight: 7 again), mirrored when asked, and the 8 rows split apart. Each
 * product is truncated, under 1/128 of a level low; what they lose on average is added back before
 * the final rounding, so that the output is unbiased, a constant stays constant and a copy is
 * exact (a weight of 1 << 15 loses nothing). */
#include "data/image_decode.h"

#include <stdint.h>

#define FIX_BITS 15
#define FIX_ONE (1 << FIX_BITS)
#define MID_FRAC 7   /* fractional bits of the horizontal sums */

/* One axis' table: output i reads source indices start[i] .. start[i] + taps - 1 with the weights
 * weight[i * taps .. (i + 1) * taps). */
typedef struct axis_table {
    int32_t *start;
    uint16_t *weight;
    int taps;
} axis_table;

/* A run's length: a shrinking output spans at most ceil(in/out) + 1 sources, a growing one 2. */
static int axis_taps(int in, int out)
{
    int taps = out > in ? 2 : (in + out - 1) / out + 1;
    return taps < in ? taps : in;
}

static size_t axis_bytes(int in, int out)
{
    size_t b = (size_t)out * sizeof(int32_t) + (size_t)out * (size_t)axis_taps(in, out) * sizeof(uint16_t);
    return (b + 63) & ~(size_t)63;
}

/* One weight of exact value v / denom in 15-bit fixed point. */
static uint16_t fix_weight(int64_t v, int64_t denom)
{
    return (uint16_t)((v * FIX_ONE + denom / 2) / denom);
}

/* Puts what the rounded weights w[0..n) miss of FIX_ONE on the largest of them. */
static void fix_sum(uint16_t *w, int n)
{
    int32_t sum = 0;
    int big = 0;
    for (int k = 0; k < n; k++) {
        sum += w[k];
        if (w[k] > w[big])
            big = k;
    }
    w[big] = (uint16_t)(w[big] + (FIX_ONE - sum));
}

static uint8_t *axis_build(axis_table *t, int in, int out, uint8_t *mem)
{
    t->taps = axis_taps(in, out);
    t->start = (int32_t *)(void *)mem;
    t->weight = (uint16_t *)(void *)(t->start + out);
    int grow = out > in;
    int64_t denom = grow ? 2 * (int64_t)out : in;
    for (int64_t i = 0; i < out; i++) {
        uint16_t *w = t->weight + i * t->taps;
        int64_t j0, cnt = 0;
        for (int k = 0; k < t->taps; k++)
            w[k] = 0;
        if (grow) {
            int64_t num = (2 * i + 1) * in - out;
            if (num < 0)
                num = 0;
            int64_t frac = num % denom;
            j0 = num / denom;
            if (j0 >= in - 1) {   /* past the last centre: all weight on the last pixel */
                j0 = in - 1;
                w[cnt++] = FIX_ONE;
            } else {
                w[cnt++] = fix_weight(denom - frac, denom);
                w[cnt++] = fix_weight(frac, denom);
            }
        } else {
            int64_t j1 = ((i + 1) * in - 1) / out;
            j0 = i * in / out;
            for (int64_t j = j0; j <= j1; j++) {
                int64_t lo = i * in > j * out ? i * in : j * out;
                int64_t hi = (i + 1) * in < (j + 1) * out ? (i + 1) * in : (j + 1) * out;
                w[cnt++] = fix_weight(hi - lo, denom);
            }
        }
        fix_sum(w, (int)cnt);
        /* a run near the end starts earlier, its weights moved right, so that all taps are inside */
        int64_t shift = j0 + t->taps > in ? j0 + t->taps - in : 0;
        for (int64_t k = t->taps - 1; k >= 0; k--)
            w[k] = k >= shift ? w[k - shift] : 0;
        t->start[i] = (int32_t)(j0 - shift);
    }
    return mem + axis_bytes(in, out);
}

#define BLOCK 8   /* output rows resampled horizontally together, one per SIMD lane */
_Static_assert(BLOCK == 8, "interleave_rows and split_lanes name eight rows");

/* The loops that take the time, also built for AVX2 where the CPU has it (picked at load time).
 * Integer arithmetic: every version gives the same bytes. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CT_HOT_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define CT_HOT_LOOP
#endif

/* a * w >> 16 on 16-bit lanes: the high half of the product, one instruction per vector (SSE2's
 * pmulhuw) where the compiler sees this pattern */
static inline uint16_t mul_high(uint16_t a, uint16_t w)
{
    return (uint16_t)(((uint32_t)a * (uint32_t)w) >> 16);
}

size_t ct_image_resize_scratch(int src_w, int src_h, int out_w, int out_h, int channels)
{
    /* BLOCK vertically resampled rows and their interleaved copy (16-bit), BLOCK horizontally
     * resampled rows interleaved and BLOCK spare output rows (8-bit), the two tables */
    size_t mid_len = (size_t)src_w * (size_t)channels, out_len = (size_t)out_w * (size_t)channels;
    return 2 * mid_len * BLOCK * sizeof(uint16_t) + 2 * out_len * BLOCK + axis_bytes(src_w, out_w) +
           axis_bytes(src_h, out_h) + 256;
}

// src: `taps` rows of (len) uint8, `stride` bytes apart; row: (len) uint16 with 7 fractional bits
CT_HOT_LOOP static void vertical_row(const uint8_t *src, size_t stride, const uint16_t *w, int taps, size_t len,
                                     uint16_t *restrict row)
{
    uint16_t w0 = w[0];
    for (size_t k = 0; k < len; k++)
        row[k] = mul_high((uint16_t)(src[k] << 8), w0);
    for (int j = 1; j < taps; j++) {
        const uint8_t *r = src + (size_t)j * stride;
        uint16_t wj = w[j];
        if (wj == 0)
            continue;
        for (size_t k = 0; k < len; k++)
            row[k] = (uint16_t)(row[k] + mul_high((uint16_t)(r[k] << 8), wj));
    }
}

// rows: BLOCK rows of (len) uint16 with 7 fractional bits, `len` apart; mid: (len, BLOCK) uint16 with
// 8 (the horizontal pass' multiplier then keeps 7). The eight named rows
// let the compiler see a group of eight stores and vectorise it with shuffles.
CT_HOT_LOOP static void interleave_rows(const uint16_t *rows, size_t len, uint16_t *restrict mid)
{
    const uint16_t *r0 = rows, *r1 = r0 + len, *r2 = r1 + len, *r3 = r2 + len, *r4 = r3 + len, *r5 = r4 + len,
                   *r6 = r5 + len, *r7 = r6 + len;
    for (size_t k = 0; k < len; k++) {
        uint16_t *m = mid + k * BLOCK;
        m[0] = (uint16_t)(r0[k] << 1);
        m[1] = (uint16_t)(r1[k] << 1);
        m[2] = (uint16_t)(r2[k] << 1);
        m[3] = (uint16_t)(r3[k] << 1);
        m[4] = (uint16_t)(r4[k] << 1);
        m[5] = (uint16_t)(r5[k] << 1);
        m[6] = (uint16_t)(r6[k] << 1);
        m[7] = (uint16_t)(r7[k] << 1);
    }
}

/* One output pixel's taps weigh its channels and the BLOCK rows alike: the c * BLOCK values of a
 * source pixel are one run of mid, each multiplied by the tap's weight, so the inner loops run over
 * that run (a compile-time length: c is 1 or 3). */
// mid: (src_w, c, BLOCK) uint16 with 8 fractional bits; lanes: (out_w, c, BLOCK) uint8, mirrored when flip
static inline __attribute__((always_inline)) void horizontal_pixels(const uint16_t *mid, const axis_table *ax,
                                                                    int out_w, int flip, uint16_t start,
                                                                    uint8_t *restrict lanes, const int c)
{
    const int n = c * BLOCK;
    int taps = ax->taps;
    for (int i = 0; i < out_w; i++) {
        const uint16_t *w = ax->weight + (size_t)i * (size_t)taps;
        const uint16_t *p = mid + (size_t)ax->start[i] * (size_t)n;
        uint8_t *dst = lanes + (size_t)(flip ? out_w - 1 - i : i) * (size_t)n;
        uint16_t v[3 * BLOCK];
        for (int e = 0; e < n; e++)
            v[e] = start;
        for (int k = 0; k < taps; k++) {
            const uint16_t *q = p + (size_t)k * (size_t)n;
            uint16_t wk = w[k];
            for (int e = 0; e < n; e++)
                v[e] = (uint16_t)(v[e] + mul_high(q[e], wk));
        }
        for (int e = 0; e < n; e++)
            dst[e] = (uint8_t)(v[e] >> MID_FRAC);
    }
}

CT_HOT_LOOP static void horizontal_block(const uint16_t *mid, const axis_table *ax, int out_w, int channels, int flip,
                                         uint16_t start, uint8_t *restrict lanes)
{
    if (channels == 3)
        horizontal_pixels(mid, ax, out_w, flip, start, lanes, 3);
    else
        horizontal_pixels(mid, ax, out_w, flip, start, lanes, 1);
}

// lanes: (len, BLOCK) uint8; o0 .. o7: (len) uint8 each. Restrict parameters let the compiler
// vectorise the eight-way split with shuffles.
CT_HOT_LOOP static void split_lanes(const uint8_t *restrict lanes, size_t len, uint8_t *restrict o0,
                                    uint8_t *restrict o1, uint8_t *restrict o2, uint8_t *restrict o3,
                                    uint8_t *restrict o4, uint8_t *restrict o5, uint8_t *restrict o6,
                                    uint8_t *restrict o7)
{
    for (size_t k = 0; k < len; k++) {
        const uint8_t *l = lanes + k * BLOCK;
        o0[k] = l[0];
        o1[k] = l[1];
        o2[k] = l[2];
        o3[k] = l[3];
        o4[k] = l[4];
        o5[k] = l[5];
        o6[k] = l[6];
        o7[k] = l[7];
    }
}

// src: (src_h, src_w, channels) uint8, rows src_stride bytes apart; out: (out_h, out_w, channels) uint8
void ct_image_resize(const uint8_t *src, int src_w, int src_h, size_t src_stride, int channels, int flip,
                     uint8_t *out, int out_w, int out_h, void *scratch)
{
    size_t mid_len = (size_t)src_w * (size_t)channels, out_len = (size_t)out_w * (size_t)channels;
    uint8_t *mem = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint16_t *rows = (uint16_t *)(void *)mem;   /* (BLOCK, mid_len) */
    uint16_t *mid = rows + mid_len * BLOCK;      /* (mid_len, BLOCK) */
    uint8_t *lanes = (uint8_t *)(mid + mid_len * BLOCK);   /* (out_len, BLOCK) */
    uint8_t *spare = lanes + out_len * BLOCK;    /* (BLOCK, out_len): the last block's missing rows */
    mem = (uint8_t *)(((uintptr_t)(spare + out_len * BLOCK) + 63) & ~(uintptr_t)63);
    axis_table ax, ay;
    mem = axis_build(&ax, src_w, out_w, mem);
    axis_build(&ay, src_h, out_h, mem);
    /* the truncated products lose about half a unit (1/128 of a level) each, and every output has
     * about two thirds of its taps' weights non-zero: that much is given back before the final
     * rounding, under half a level, so an output never passes 255 and a copy stays exact */
    int half = 1 << (MID_FRAC - 1), back = (ax.taps + ay.taps) / 3;
    uint16_t start = (uint16_t)(half + (back < half ? back : half - 1));

    for (int i0 = 0; i0 < out_h; i0 += BLOCK) {
        int n = out_h - i0 < BLOCK ? out_h - i0 : BLOCK;
        uint8_t *o[BLOCK];
        for (int lane = 0; lane < BLOCK; lane++) {
            int i = i0 + (lane < n ? lane : n - 1);   /* missing rows repeat the last, into spare */
            vertical_row(src + (size_t)ay.start[i] * src_stride, src_stride, ay.weight + (size_t)i * (size_t)ay.taps,
                         ay.taps, mid_len, rows + (size_t)lane * mid_len);
            o[lane] = lane < n ? out + (size_t)(i0 + lane) * out_len : spare + (size_t)lane * out_len;
        }
        interleave_rows(rows, mid_len, mid);
        horizontal_block(mid, &ax, out_w, channels, flip, start, lanes);
        split_lanes(lanes, out_len, o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]);
    }
}
