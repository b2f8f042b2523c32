/* Resampling a region to the output size: area-averaged on an axis that shrinks, bilinear on one
 * that grows, in integers so that every machine and thread gives the same bytes.
 *
 * Each axis maps output index i to a run of source indices with integer weights whose sum is the
 * axis' constant denominator: shrinking, output i covers [i*in, (i+1)*in) and source j covers
 * [j*out, (j+1)*out) on a grid of 1/out pixels, the weight being their overlap (sum: in);
 * growing, the source position of i's centre is ((2i+1)*in - out) / (2*out) pixels, split between
 * its two neighbours (sum: 2*out). A constant region therefore stays exactly constant, and an
 * equal size is a copy. The runs and weights are tabulated once per call, in the scratch. */
#include "data/image_decode.h"

#include <stdint.h>

/* One axis' table: output i reads source indices start[i] .. start[i] + count[i] - 1 with the
 * weights at weight + first[i]. */
typedef struct axis_table {
    int32_t *start, *count, *first;
    uint32_t *weight;
    uint32_t denom;
} axis_table;

/* The most weights an axis needs: a shrinking output spans at most in/out + 2 sources, so all of
 * them at most in + 2*out; a growing one 2. */
static size_t axis_weights(int in, int out)
{
    return (size_t)in + 2 * (size_t)out + 2;
}

static size_t axis_bytes(int in, int out)
{
    return 3 * (size_t)out * sizeof(int32_t) + axis_weights(in, out) * sizeof(uint32_t);
}

static uint8_t *axis_build(axis_table *t, int in, int out, uint8_t *mem)
{
    t->start = (int32_t *)(void *)mem;
    t->count = t->start + out;
    t->first = t->count + out;
    t->weight = (uint32_t *)(void *)(t->first + out);
    int grow = out > in;
    int64_t denom = grow ? 2 * (int64_t)out : in;
    t->denom = (uint32_t)denom;
    int32_t n = 0;
    for (int64_t i = 0; i < out; i++) {
        t->first[i] = n;
        if (grow) {
            int64_t num = (2 * i + 1) * in - out;
            if (num < 0)
                num = 0;
            int64_t j0 = num / denom, frac = num % denom;
            if (j0 >= in - 1) {   /* past the last centre: all weight on the last pixel */
                t->start[i] = in - 1;
                t->count[i] = 1;
                t->weight[n++] = (uint32_t)denom;
            } else {
                t->start[i] = (int32_t)j0;
                t->count[i] = 2;
                t->weight[n++] = (uint32_t)(denom - frac);
                t->weight[n++] = (uint32_t)frac;
            }
        } else {
            int64_t j0 = i * in / out, j1 = ((i + 1) * in - 1) / out;
            t->start[i] = (int32_t)j0;
            t->count[i] = (int32_t)(j1 - j0 + 1);
            for (int64_t j = j0; j <= j1; j++) {
                int64_t lo = i * in > j * out ? i * in : j * out;
                int64_t hi = (i + 1) * in < (j + 1) * out ? (i + 1) * in : (j + 1) * out;
                t->weight[n++] = (uint32_t)(hi - lo);
            }
        }
    }
    return mem + axis_bytes(in, out);
}

size_t ct_image_resize_scratch(int src_w, int src_h, int out_w, int out_h, int channels)
{
    size_t row_len = (size_t)out_w * (size_t)channels;
    /* horizontally resampled rows (weighted sums), one row of vertical sums, the two tables */
    return (size_t)src_h * row_len * sizeof(uint32_t) + row_len * sizeof(uint64_t) + axis_bytes(src_w, out_w) +
           axis_bytes(src_h, out_h) + 16;
}

// src: (src_h, src_w, channels) uint8, rows src_stride bytes apart; out: (out_h, out_w, channels) uint8
void ct_image_resize(const uint8_t *src, int src_w, int src_h, size_t src_stride, int channels, int flip,
                     uint8_t *out, int out_w, int out_h, void *scratch)
{
    size_t row_len = (size_t)out_w * (size_t)channels;
    uint64_t *acc = scratch;                                          /* (out_w, channels) */
    uint32_t *rows = (uint32_t *)(void *)(acc + row_len);            /* (src_h, out_w, channels) */
    uint8_t *mem = (uint8_t *)(rows + (size_t)src_h * row_len);
    axis_table ax, ay;
    mem = axis_build(&ax, src_w, out_w, mem);
    axis_build(&ay, src_h, out_h, mem);

    for (int y = 0; y < src_h; y++) {
        const uint8_t *s = src + (size_t)y * src_stride;
        uint32_t *t = rows + (size_t)y * row_len;
        for (int i = 0; i < out_w; i++) {
            const uint32_t *w = ax.weight + ax.first[i];
            const uint8_t *p = s + (size_t)ax.start[i] * (size_t)channels;
            uint32_t *dst = t + (size_t)(flip ? out_w - 1 - i : i) * (size_t)channels;
            int n = ax.count[i];
            if (channels == 3) {
                uint32_t r = 0, g = 0, b = 0;
                for (int k = 0; k < n; k++, p += 3) {
                    r += w[k] * p[0];
                    g += w[k] * p[1];
                    b += w[k] * p[2];
                }
                dst[0] = r, dst[1] = g, dst[2] = b;
            } else {
                for (int c = 0; c < channels; c++) {
                    uint32_t sum = 0;
                    for (int k = 0; k < n; k++)
                        sum += w[k] * p[(size_t)k * (size_t)channels + (size_t)c];
                    dst[c] = sum;
                }
            }
        }
    }

    /* rounding division by denom: a floating reciprocal's quotient is off by at most one (the sums
     * stay below 2^53), which one comparison each way corrects, so the result is the exact one */
    uint64_t denom = (uint64_t)ax.denom * ay.denom, half = denom / 2;
    double inv = 1.0 / (double)denom;
    for (int i = 0; i < out_h; i++) {
        const uint32_t *w = ay.weight + ay.first[i];
        const uint32_t *r = rows + (size_t)ay.start[i] * row_len;
        for (size_t k = 0; k < row_len; k++)
            acc[k] = (uint64_t)w[0] * r[k];
        for (int j = 1; j < ay.count[i]; j++) {
            r += row_len;
            for (size_t k = 0; k < row_len; k++)
                acc[k] += (uint64_t)w[j] * r[k];
        }
        uint8_t *o = out + (size_t)i * row_len;
        for (size_t k = 0; k < row_len; k++) {
            uint64_t x = acc[k] + half, q = (uint64_t)((double)x * inv);
            if (q * denom > x)
                q--;
            else if ((q + 1) * denom <= x)
                q++;
            o[k] = (uint8_t)q;
        }
    }
}
