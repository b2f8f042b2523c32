/* Resampling a region to the output size: area-averaged on an axis that shrinks, bilinear on one
 * that grows, in integers so that every machine and thread gives the same bytes.
 *
 * Each axis maps output index i to a run of source indices with weights. Shrinking, output i
 * covers [i*in, (i+1)*in) and source j covers [j*out, (j+1)*out) on a grid of 1/out pixels, the
 * weight being their overlap; growing, the source position of i's centre is
 * ((2i+1)*in - out) / (2*out) pixels, split between its two neighbours. The exact weights are
 * rounded to 14-bit fixed point with the rounding error put on the largest, so that each output's
 * weights sum to exactly 1 << 14: a constant region stays exactly constant, and an equal size is a
 * copy. Every output of an axis gets the same number of taps (the longest run, the others padded
 * with zero weights), so that the inner loops have a fixed length.
 *
 * Two passes, on blocks of 8 output rows: first vertically, each row a weighted sum of whole
 * source rows (contiguous, so the compiler vectorises it) into 16-bit values with 8 fractional bits,
 * the 8 rows interleaved; then horizontally along the 8 rows at once (each weight and index serves
 * the 8 lanes of one vector), mirrored when asked. The second rounding costs nothing
 * visible, and the sums stay in range: a vertical sum is at most 255 << 14 before its shift by 6,
 * a horizontal one 65280 << 14 < 2^31. */
#include "data/image_decode.h"

#include <stdint.h>

#define FIX_BITS 14
#define FIX_ONE (1 << FIX_BITS)
#define MID_SHIFT 6                          /* vertical sums: 22 bits down to 16 (8 fractional) */
#define OUT_SHIFT (2 * FIX_BITS - MID_SHIFT) /* horizontal sums: back to 8 bits */

/* One axis' table: output i reads source indices start[i] .. start[i] + taps - 1 with the weights
 * weight[i * taps .. (i + 1) * taps). */
typedef struct axis_table {
    int32_t *start;
    int16_t *weight;
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
    size_t b = (size_t)out * sizeof(int32_t) + (size_t)out * (size_t)axis_taps(in, out) * sizeof(int16_t);
    return (b + 63) & ~(size_t)63;
}

/* One weight of exact value v / denom in 14-bit fixed point. */
static int16_t fix_weight(int64_t v, int64_t denom)
{
    return (int16_t)((v * FIX_ONE + denom / 2) / denom);
}

/* Puts what the rounded weights w[0..n) miss of FIX_ONE on the largest of them. */
static void fix_sum(int16_t *w, int n)
{
    int32_t sum = 0;
    int big = 0;
    for (int k = 0; k < n; k++) {
        sum += w[k];
        if (w[k] > w[big])
            big = k;
    }
    w[big] = (int16_t)(w[big] + (FIX_ONE - sum));
}

static uint8_t *axis_build(axis_table *t, int in, int out, uint8_t *mem)
{
    t->taps = axis_taps(in, out);
    t->start = (int32_t *)(void *)mem;
    t->weight = (int16_t *)(void *)(t->start + out);
    int grow = out > in;
    int64_t denom = grow ? 2 * (int64_t)out : in;
    for (int64_t i = 0; i < out; i++) {
        int16_t *w = t->weight + i * t->taps;
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

/* The two loops that take the time, also built for AVX2 (its 32-bit multiply is one instruction;
 * SSE2, the x86-64 baseline, emulates it in five) and picked at load time where the CPU has it.
 * Integer arithmetic: both versions give the same bytes. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CT_HOT_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define CT_HOT_LOOP
#endif

size_t ct_image_resize_scratch(int src_w, int src_h, int out_w, int out_h, int channels)
{
    /* BLOCK vertically resampled rows (16-bit), one row of sums, the two tables */
    size_t mid_len = (size_t)src_w * (size_t)channels;
    return mid_len * BLOCK * sizeof(uint16_t) + mid_len * sizeof(int32_t) + axis_bytes(src_w, out_w) +
           axis_bytes(src_h, out_h) + 128;
}

// src: `taps` rows of (len) uint8, `stride` bytes apart; mid: (len, BLOCK) uint16 with 8 fractional
// bits, this row's values at lane `lane`
CT_HOT_LOOP static void vertical_row(const uint8_t *src, size_t stride, const int16_t *w, int taps, size_t len, int32_t *acc,
                         uint16_t *mid, int lane)
{
    int32_t w0 = w[0];
    for (size_t k = 0; k < len; k++)
        acc[k] = (1 << (MID_SHIFT - 1)) + w0 * (int32_t)src[k];
    for (int j = 1; j < taps; j++) {
        const uint8_t *r = src + (size_t)j * stride;
        int32_t wj = w[j];
        if (wj == 0)
            continue;
        for (size_t k = 0; k < len; k++)
            acc[k] += wj * (int32_t)r[k];
    }
    for (size_t k = 0; k < len; k++)
        mid[k * BLOCK + (size_t)lane] = (uint16_t)(acc[k] >> MID_SHIFT);
}

// mid: (src_w, channels, BLOCK) uint16; out: `rows` rows of (out_w, channels) uint8, out_len bytes
// apart, mirrored when flip. The BLOCK rows share every weight and index, so each multiply-add
// covers all of them at once (the loops over `lane` are what the compiler vectorises).
CT_HOT_LOOP static void horizontal_block(const uint16_t *mid, const axis_table *ax, int out_w, int channels, int flip,
                             uint8_t *out, size_t out_len, int rows)
{
    size_t c = (size_t)channels;
    int taps = ax->taps;
    for (int i = 0; i < out_w; i++) {
        const int16_t *w = ax->weight + (size_t)i * (size_t)taps;
        const uint16_t *p = mid + (size_t)ax->start[i] * c * BLOCK;
        size_t dst = (size_t)(flip ? out_w - 1 - i : i) * c;
        for (size_t ch = 0; ch < c; ch++) {
            int32_t v[BLOCK];
            for (int lane = 0; lane < BLOCK; lane++)
                v[lane] = 1 << (OUT_SHIFT - 1);
            for (int k = 0; k < taps; k++) {
                const uint16_t *q = p + ((size_t)k * c + ch) * BLOCK;
                int32_t wk = w[k];
                for (int lane = 0; lane < BLOCK; lane++)
                    v[lane] += wk * (int32_t)q[lane];
            }
            for (int lane = 0; lane < rows; lane++)
                out[(size_t)lane * out_len + dst + ch] = (uint8_t)(v[lane] >> OUT_SHIFT);
        }
    }
}

// src: (src_h, src_w, channels) uint8, rows src_stride bytes apart; out: (out_h, out_w, channels) uint8
void ct_image_resize(const uint8_t *src, int src_w, int src_h, size_t src_stride, int channels, int flip,
                     uint8_t *out, int out_w, int out_h, void *scratch)
{
    size_t mid_len = (size_t)src_w * (size_t)channels, out_len = (size_t)out_w * (size_t)channels;
    int32_t *acc = scratch;                                           /* (src_w, channels) */
    uint16_t *mid = (uint16_t *)(void *)(acc + mid_len);             /* (src_w, channels, BLOCK) */
    uint8_t *mem = (uint8_t *)(mid + mid_len * BLOCK);
    mem = (uint8_t *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    axis_table ax, ay;
    mem = axis_build(&ax, src_w, out_w, mem);
    axis_build(&ay, src_h, out_h, mem);

    for (int i0 = 0; i0 < out_h; i0 += BLOCK) {
        int rows = out_h - i0 < BLOCK ? out_h - i0 : BLOCK;
        for (int lane = 0; lane < rows; lane++) {
            int i = i0 + lane;
            vertical_row(src + (size_t)ay.start[i] * src_stride, src_stride, ay.weight + (size_t)i * (size_t)ay.taps,
                         ay.taps, mid_len, acc, mid, lane);
        }
        horizontal_block(mid, &ax, out_w, channels, flip, out + (size_t)i0 * out_len, out_len, rows);
    }
}
