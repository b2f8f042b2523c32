/* What the image decoder's parts share (data/image_decoder.c dispatches to data/jpeg_decode.c and
 * data/png_decode.c): grow-only buffers, the decoded region handed to the resampler, the checks
 * every format makes on a header, and the colour conversions done outside the libraries. */
#ifndef CT_IMAGE_INTERNAL_H
#define CT_IMAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "data/image_decode.h"

/* A buffer that only grows: a decoder reaches its steady size after its largest image. */
typedef struct ct_image_buf {
    uint8_t *p;
    size_t cap;
} ct_image_buf;

ct_status ct_image_buf_grow(ct_image_buf *b, size_t need, ct_err *err);
void ct_image_buf_free(ct_image_buf *b);

/* A decoded region, before resizing: p is (h, w, channels) uint8 with rows stride bytes apart,
 * channels being those asked for (1 or 3). It points into the format reader's buffers. */
typedef struct ct_image_pixels {
    const uint8_t *p;
    int w, h;
    size_t stride;
} ct_image_pixels;

/* max_pixels and the region's bounds against a header's size (CT_ERR_DATA for the first, with the
 * figures; CT_ERR_USAGE for a region outside the image, a caller's mistake). */
ct_status ct_image_check_header(int width, int height, const ct_image_region *r, long max_pixels, ct_err *err);

/* libjpeg's luma weights (jdcolor.c: 0.29900, 0.58700, 0.11400 in 16-bit fixed point, rounded), so
 * that grey from PNG, CMYK and libjpeg's own RGB-to-grey agree. */
static inline uint8_t ct_image_luma(unsigned r, unsigned g, unsigned b)
{
    return (uint8_t)((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
}

/* Converts n pixels from src_c (1 grey or 3 RGB) to dst_c (1 or 3) channels; src == dst is allowed
 * when dst_c <= src_c (the pixels are walked forward). */
void ct_image_convert(const uint8_t *src, int src_c, uint8_t *dst, int dst_c, int n);

/* The JPEG reader: one libjpeg decompressor, reused, and the rows it decodes into. */
typedef struct ct_jpeg_reader ct_jpeg_reader;
ct_status ct_jpeg_reader_new(ct_jpeg_reader **out, ct_err *err);
void ct_jpeg_reader_free(ct_jpeg_reader *j);
ct_status ct_jpeg_read_info(ct_jpeg_reader *j, const uint8_t *bytes, size_t n, ct_image_info *info, ct_err *err);
ct_status ct_jpeg_decode(ct_jpeg_reader *j, const uint8_t *bytes, size_t n, const ct_image_region *r, int out_w,
                         int out_h, int channels, const ct_image_decode_options *opt, ct_image_pixels *px,
                         ct_err *err);

/* The PNG reader: libpng's reader is made per image (libpng has no reset), its rows are ours. */
typedef struct ct_png_reader ct_png_reader;
ct_status ct_png_reader_new(ct_png_reader **out, ct_err *err);
void ct_png_reader_free(ct_png_reader *p);
ct_status ct_png_read_info(ct_png_reader *p, const uint8_t *bytes, size_t n, ct_image_info *info, ct_err *err);
ct_status ct_png_decode(ct_png_reader *p, const uint8_t *bytes, size_t n, const ct_image_region *r, int channels,
                        const ct_image_decode_options *opt, ct_image_pixels *px, ct_err *err);

#endif
