/* Resampling a region to the output size: area-averaged on an axis that shrinks, bilinear on one
 * that grows, in integers so that every machine and thread gives the same bytes.
 *
 * Each axis maps output index i to a few source indices with integer weights whose sum is the
 * axis' constant denominator: shrinking, output i covers [i*in, (i+1)*in) and source j covers
 * [j*out, (j+1)*out) on a grid of 1/out pixels, the weight being their overlap (sum: in);
 * growing, the source position of i's centre is ((2i+1)*in - out) / (2*out) pixels, split between
 * its two neighbours (sum: 2*out). A constant region therefore stays exactly constant, and an
 * equal size is a copy. */
#include "data/image_decode.h"

#include <stdint.h>

typedef struct axis_map {
    int64_t in, out;
    int64_t denom;
} axis_map;

static axis_map axis_init(int in, int out)
{
    axis_map a = {in, out, out > in ? 2 * (int64_t)out : in};
    return a;
}

/* The source span [*j0, *j1] of output i; weight_at gives each source index's weight. */
static void axis_span(const axis_map *a, int64_t i, int64_t *j0, int64_t *j1)
{
    if (a->out > a->in) {
        int64_t num = (2 * i + 1) * a->in - a->out;
        if (num < 0)
            num = 0;
        *j0 = num / a->denom;
        *j1 = *j0 + 1 < a->in ? *j0 + 1 : *j0;
    } else {
        *j0 = i * a->in / a->out;
        *j1 = ((i + 1) * a->in - 1) / a->out;
    }
}

static int64_t axis_weight(const axis_map *a, int64_t i, int64_t j)
{
    if (a->out > a->in) {
        int64_t num = (2 * i + 1) * a->in - a->out;
        if (num < 0)
            num = 0;
        int64_t j0 = num / a->denom, frac = num % a->denom;
        if (j0 >= a->in - 1)    /* past the last centre: all weight on the last pixel */
            return j == a->in - 1 ? a->denom : 0;
        return j == j0 ? a->denom - frac : frac;
    }
    int64_t lo = i * a->in > j * a->out ? i * a->in : j * a->out;
    int64_t hi = (i + 1) * a->in < (j + 1) * a->out ? (i + 1) * a->in : (j + 1) * a->out;
    return hi > lo ? hi - lo : 0;
}

size_t ct_image_resize_scratch(int src_w, int src_h, int out_w, int out_h, int channels)
{
    (void)src_w;
    (void)out_h;
    /* one horizontally resampled row per source row, as weighted sums */
    return (size_t)src_h * (size_t)out_w * (size_t)channels * sizeof(uint32_t);
}

// src: (src_h, src_w, channels) uint8, rows src_stride bytes apart; out: (out_h, out_w, channels) uint8
void ct_image_resize(const uint8_t *src, int src_w, int src_h, size_t src_stride, int channels, int flip,
                     uint8_t *out, int out_w, int out_h, void *scratch)
{
    uint32_t *rows = scratch;   /* (src_h, out_w, channels): sums scaled by ax.denom */
    axis_map ax = axis_init(src_w, out_w), ay = axis_init(src_h, out_h);
    size_t row_len = (size_t)out_w * (size_t)channels;

    for (int y = 0; y < src_h; y++) {
        const uint8_t *s = src + (size_t)y * src_stride;
        uint32_t *t = rows + (size_t)y * row_len;
        for (int i = 0; i < out_w; i++) {
            int64_t j0, j1;
            axis_span(&ax, i, &j0, &j1);
            uint32_t *dst = t + (size_t)(flip ? out_w - 1 - i : i) * (size_t)channels;
            for (int c = 0; c < channels; c++) {
                uint32_t acc = 0;
                for (int64_t j = j0; j <= j1; j++)
                    acc += (uint32_t)axis_weight(&ax, i, j) * s[j * channels + c];
                dst[c] = acc;
            }
        }
    }

    uint64_t denom = (uint64_t)ax.denom * (uint64_t)ay.denom;
    for (int i = 0; i < out_h; i++) {
        int64_t j0, j1;
        axis_span(&ay, i, &j0, &j1);
        uint8_t *o = out + (size_t)i * row_len;
        for (size_t k = 0; k < row_len; k++) {
            uint64_t acc = 0;
            for (int64_t j = j0; j <= j1; j++)
                acc += (uint64_t)axis_weight(&ay, i, j) * rows[(size_t)j * row_len + k];
            o[k] = (uint8_t)((acc + denom / 2) / denom);
        }
    }
}
