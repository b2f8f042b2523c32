/* Window geometry shared by the CPU code, the layer records and the CUDA kernels (plain C, no
 * engine types, so kernels/kernels.h can include it). */
#ifndef CT_WINDOW_H
#define CT_WINDOW_H

/* A convolution or pooling window sliding over an NHWC batch. Pools read c channels and write
 * as many (f = c); a convolution writes f filters. */
typedef struct ct_window_geom {
    int n, h, w, c;          /* input */
    int f;                   /* output channels */
    int kh, kw, stride;      /* window and step */
    int pad_t, pad_l;        /* zero padding before the first row and column (after is implied) */
    int oh, ow;              /* output */
} ct_window_geom;

/* The kernel taps [*k0, *k1) of a window whose first tap is at input index `start` that land inside
 * an input of length `len`; the rest read padding. */
static inline void ct_window_taps(int start, int k, int len, int *k0, int *k1)
{
    *k0 = start < 0 ? (-start < k ? -start : k) : 0;
    *k1 = len - start < k ? len - start : k;
    if (*k1 < *k0) *k1 = *k0;
}

/* Output size and leading pad of one spatial dimension: same = ceil(in / stride) with the total
 * pad split as TensorFlow does (the extra on the bottom/right), valid = no padding. */
static inline void ct_window_dim(int in, int k, int stride, int same, int *out, int *pad_before)
{
    if (same) {
        *out = (in + stride - 1) / stride;
        int total = (*out - 1) * stride + k - in;
        *pad_before = total > 0 ? total / 2 : 0;
    } else {
        *out = in >= k ? (in - k) / stride + 1 : 0;
        *pad_before = 0;
    }
}

#endif
