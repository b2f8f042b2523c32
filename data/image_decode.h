/* Decoding one compressed image (JPEG or PNG) into a region of pixels, resized: what a worker does
 * for each sample of a folder of image files.
 *
 * The work is cut where the cost is. For JPEG the decoder (libjpeg-turbo through the libjpeg API)
 * decodes only the region asked for: the rows above it are skipped (jpeg_skip_scanlines), the
 * columns outside it are not decoded (jpeg_crop_scanline), decoding stops below it, and the DCT
 * itself scales by 1/2, 1/4 or 1/8 (scale_denom) as far as the region stays at least the output
 * size. What no shortcut avoids, the Huffman decoding of every row down to the region's bottom, is
 * done by cutrain's own decoder in libjpeg-turbo's place (data/jpeg_huffman.h). PNG (libpng) has
 * no such shortcuts: rows are decoded in turn, but only the region's columns are kept, and
 * decoding stops below it. The region is then resized (area-averaged when shrinking,
 * bilinear when enlarging) and mirrored when asked, in one pass, into the caller's buffer.
 *
 * A decoder holds one libjpeg decompressor, one libpng reader's buffers and the scratch rows, and
 * grows them to the largest image seen: a worker owns one, and decodes with no allocation per
 * image in steady state. Decoders are not shared between threads.
 *
 * Nothing here exits or prints: libjpeg's and libpng's errors return through setjmp, and the
 * decoder's reason is kept in err (CT_ERR_DATA), without the file name, which the caller adds. */
#ifndef CT_IMAGE_DECODE_H
#define CT_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum ct_image_kind { CT_IMAGE_UNKNOWN, CT_IMAGE_JPEG, CT_IMAGE_PNG } ct_image_kind;

/* What the bytes are, from their first bytes (at most 8 are looked at): never from a file name
 * (ImageNet holds a PNG named .JPEG). */
ct_image_kind ct_image_sniff(const uint8_t *bytes, size_t n);
const char *ct_image_kind_name(ct_image_kind kind);   /* "jpeg", "png", "not an image" */

/* The header: the image's size and what it holds, read without decoding pixels. */
typedef struct ct_image_info {
    ct_image_kind kind;
    int width, height;
    int channels;       /* in the file: 1 grey, 2 grey + alpha, 3 colour, 4 colour + alpha or CMYK */
    int progressive;    /* JPEG: progressive (no region shortcut below the DCT scaling) */
} ct_image_info;

/* The source region to decode, in the image's pixels: 0 <= x, 0 <= y, 1 <= w, 1 <= h,
 * x + w <= width, y + h <= height; flip mirrors it left to right. */
typedef struct ct_image_region {
    int x, y, w, h;
    int flip;
} ct_image_region;

/* Switches for measuring what the shortcuts save (`cutrain bench --input-only` reports the decode
 * share with each off); both on, and cutrain's Huffman decoder, by default. */
typedef struct ct_image_decode_options {
    int region;         /* JPEG: skip and crop to the region (0: decode the whole image) */
    int dct_scale;      /* JPEG: scale in the DCT (0: always decode at full size) */
    long max_pixels;    /* width x height above this is refused (0: no limit) */
    int libjpeg_huffman;   /* JPEG: libjpeg-turbo's own Huffman decoder rather than cutrain's (the
                            * pixels are the same: for tests and measuring) */
} ct_image_decode_options;

typedef struct ct_image_decoder ct_image_decoder;

/* opt NULL: both shortcuts on, no max_pixels. */
ct_status ct_image_decoder_new(ct_image_decoder **out, const ct_image_decode_options *opt, ct_err *err);
void ct_image_decoder_free(ct_image_decoder *d);   /* NULL is ignored */

/* Reads the header of `bytes` (the whole file) into info. A file that is not a JPEG or PNG, or
 * whose header is broken, fails with the decoder's reason. */
ct_status ct_image_read_info(ct_image_decoder *d, const uint8_t *bytes, size_t n, ct_image_info *info,
                             ct_err *err);

/* Decodes region r of the image in `bytes`, resizes it to out_w x out_h and mirrors it when
 * r->flip, into out.
 * out: (out_h, out_w, channels) uint8; channels 1 (luma, as libjpeg's and PNG's grey: 0.299 R +
 * 0.587 G + 0.114 B) or 3 (RGB; grey is replicated). Alpha is dropped (composited on black is not
 * done: the colour channels are kept as stored), 16-bit PNG samples are reduced to 8 bits,
 * palettes are expanded, CMYK and YCCK JPEGs are converted to RGB.
 * A truncated or corrupt file, or one over max_pixels, fails (CT_ERR_DATA) with the reason; out is
 * then undefined. libjpeg's warnings about corrupt data (it would go on and pad with grey) count
 * as failures, except those that leave the pixels intact (stray bytes between segments, unusual
 * scan parameters); a flaw below the region may go unnoticed, since decoding stops above it, and
 * so may one in a restart interval wholly above it (files with restart markers: such intervals are
 * passed over, not decoded).
 * A region outside the image, or channels other than 1 and 3, is the caller's mistake
 * (CT_ERR_USAGE). */
ct_status ct_image_decode_region(ct_image_decoder *d, const uint8_t *bytes, size_t n, const ct_image_region *r,
                                 int out_w, int out_h, int channels, uint8_t *out, ct_err *err);

/* The largest DCT reduction (8 = full size, 4, 2, 1 eighths) libjpeg-turbo would use for region r
 * so that the decoded region is still at least out_w x out_h: what decode_region picks when
 * dct_scale is on (exposed for its tests and the bench's report). */
int ct_image_jpeg_scale_eighths(int region_w, int region_h, int out_w, int out_h);

/* Resizes a region already in memory (the resampler decode_region uses; also the PNG path's).
 * src: (src_h, src_w, channels) uint8 with row stride src_stride bytes; out: (out_h, out_w,
 * channels) uint8. Area-averaged on each axis that shrinks, bilinear on each that grows; flip
 * mirrors the output. `scratch` holds at least ct_image_resize_scratch(...) bytes. */
size_t ct_image_resize_scratch(int src_w, int src_h, int out_w, int out_h, int channels);
void ct_image_resize(const uint8_t *src, int src_w, int src_h, size_t src_stride, int channels, int flip,
                     uint8_t *out, int out_w, int out_h, void *scratch);

#endif
