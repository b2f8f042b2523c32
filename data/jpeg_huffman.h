/* cutrain's own Huffman decoder for baseline JPEG, put in the place of libjpeg-turbo's inside its
 * decompressor: the rest (markers, IDCT and its scaling, upsampling, colour, cropping and skipping)
 * stays libjpeg-turbo's.
 *
 * Why: on ImageNet-like photographs the Huffman decoding is two thirds of a worker's time even
 * when only the crop is decoded, since every row above the crop's bottom must be entropy-decoded
 * at full width. This decoder takes a coefficient's code and its value bits in one table look-up
 * where they fit (libjpeg-turbo looks up the code, then reads the value bits), refills its bit
 * buffer eight bytes at a time where no 0xFF byte is among them, and does not store the
 * coefficients of blocks that libjpeg will not transform (outside the crop's columns). In files
 * with restart markers, the intervals that lie wholly in the rows skipped above the crop are not
 * decoded at all: the next marker is found by scanning for it (entropy-coded data holds no marker
 * bytes), which libjpeg-turbo's decoder, decoding every interval, does not do. The
 * coefficients it hands over are the same as libjpeg-turbo's for every valid stream, so the
 * pixels are bit-identical (tests/test_image_decode.c checks it on every case it decodes).
 *
 * It takes only what it can do, and libjpeg-turbo's own decoder does the rest: sequential 8-bit
 * Huffman-coded images in one interleaved scan, with or without restart markers
 * (ct_jpeg_huffman_suits); progressive and arithmetic-coded files, and baseline files with a scan
 * per component, go to libjpeg-turbo's.
 *
 * libjpeg's entropy-decoder interface (jpegint.h: two methods and a flag) and the restart-marker
 * method of its marker reader are internal to the library, but have not changed since IJG's
 * libjpeg 6b save for a method 3.0 added (lossless JPEG), which jpeg_huffman.c lays out by
 * libjpeg-turbo's version; cutrain links libjpeg-turbo statically, so the layout is that of the
 * version it was built with. */
#ifndef CT_JPEG_HUFFMAN_H
#define CT_JPEG_HUFFMAN_H
#include <stdio.h>   /* jpeglib.h needs FILE */

#include <jpeglib.h>

#include "base/status.h"

typedef struct ct_jpeg_huffman ct_jpeg_huffman;

/* One per JPEG reader: the decoding state and the derived tables, kept across images (they are
 * rebuilt only when an image's tables differ from the last one's). */
ct_status ct_jpeg_huffman_new(ct_jpeg_huffman **out, ct_err *err);
void ct_jpeg_huffman_free(ct_jpeg_huffman *h);   /* NULL is ignored */

/* Whether d's scan is one this decoder takes; call after jpeg_start_decompress. */
int ct_jpeg_huffman_suits(const struct jpeg_decompress_struct *d);

/* Takes over d's entropy decoding, before any row is read or skipped (after jpeg_crop_scanline,
 * whose xoffset it is given: the MCU columns left of it and right of d->output_width are decoded
 * but not stored). Holds until the decompressor is aborted or finished. */
void ct_jpeg_huffman_install(ct_jpeg_huffman *h, struct jpeg_decompress_struct *d, unsigned xoffset);

#endif
