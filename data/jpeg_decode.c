/* JPEG through libjpeg-turbo's libjpeg API, decoding only what a region needs: DCT scaling first
 * (the IDCT itself outputs 1/2, 1/4 or 1/8 size), then, in the scaled image, the rows above the
 * region are skipped (jpeg_skip_scanlines), the columns outside it are not decoded
 * (jpeg_crop_scanline, which widens the columns to iMCU boundaries: the exact ones are taken from
 * what it returns), and decoding stops below it (jpeg_abort_decompress).
 *
 * libjpeg reports errors through error_exit, which must not return: ours keeps the message and
 * longjmps back to the call that started the work, which then resets the decompressor with
 * jpeg_abort_decompress so that it decodes the next image. Warnings about corrupt data (libjpeg
 * otherwise carries on and pads a truncated file with grey) are errors too, save a few that are
 * harmless and common in real collections. */
#include <setjmp.h>
#include <stdio.h>   /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "data/image_internal.h"
#include "data/jpeg_huffman.h"

typedef struct jpeg_fail_mgr {
    struct jpeg_error_mgr pub;   /* first: libjpeg's err pointer is cast back to this */
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jpeg_fail_mgr;

struct ct_jpeg_reader {
    struct jpeg_decompress_struct d;
    jpeg_fail_mgr fail;
    ct_image_buf rows;   /* the decoded rows, output_width x output_components each */
    ct_jpeg_huffman *huff;
};

static void on_error_exit(j_common_ptr c)
{
    jpeg_fail_mgr *f = (jpeg_fail_mgr *)c->err;
    c->err->format_message(c, f->msg);
    longjmp(f->jump, 1);
}

/* Warnings that say nothing is wrong with the pixels: stray bytes between segments, a sequential
 * file with odd scan parameters, an unusual progression, an Adobe transform or JFIF version libjpeg
 * does not know, a broken ICC profile (ignored here anyway). */
static int harmless_warning(int code)
{
    return code == JWRN_EXTRANEOUS_DATA || code == JWRN_NOT_SEQUENTIAL || code == JWRN_BOGUS_PROGRESSION ||
           code == JWRN_ADOBE_XFORM || code == JWRN_JFIF_MAJOR || code == JWRN_BOGUS_ICC;
}

static void on_emit_message(j_common_ptr c, int level)
{
    /* level -1 is a warning; 0 and up are trace messages, which are dropped */
    if (level < 0 && !harmless_warning(c->err->msg_code))
        on_error_exit(c);
}

static void on_output_message(j_common_ptr c)
{
    (void)c;   /* the library never prints */
}

ct_status ct_jpeg_reader_new(ct_jpeg_reader **out, ct_err *err)
{
    *out = NULL;
    ct_jpeg_reader *j = calloc(1, sizeof *j);
    if (!j)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for a JPEG decoder");
    j->d.err = jpeg_std_error(&j->fail.pub);
    j->fail.pub.error_exit = on_error_exit;
    j->fail.pub.emit_message = on_emit_message;
    j->fail.pub.output_message = on_output_message;
    if (setjmp(j->fail.jump)) {   /* jpeg_create_decompress fails only when out of memory */
        ct_fail(err, CT_ERR_NOMEM, "cannot make a JPEG decoder: %s", j->fail.msg);
        jpeg_destroy_decompress(&j->d);
        free(j);
        return CT_ERR_NOMEM;
    }
    jpeg_create_decompress(&j->d);
    ct_status st = ct_jpeg_huffman_new(&j->huff, err);
    if (st != CT_OK) {
        ct_jpeg_reader_free(j);
        return st;
    }
    *out = j;
    return CT_OK;
}

void ct_jpeg_reader_free(ct_jpeg_reader *j)
{
    if (!j)
        return;
    jpeg_destroy_decompress(&j->d);
    ct_image_buf_free(&j->rows);
    ct_jpeg_huffman_free(j->huff);
    free(j);
}

static void fill_info(const struct jpeg_decompress_struct *d, ct_image_info *info)
{
    info->kind = CT_IMAGE_JPEG;
    info->width = (int)d->image_width;
    info->height = (int)d->image_height;
    info->channels = d->num_components;
    info->progressive = d->progressive_mode ? 1 : 0;
}

/* Reads the header; called under the reader's setjmp. */
static ct_status read_header(ct_jpeg_reader *j, const uint8_t *bytes, size_t n, ct_err *err)
{
    jpeg_mem_src(&j->d, bytes, (unsigned long)n);
    if (jpeg_read_header(&j->d, TRUE) != JPEG_HEADER_OK)
        return ct_fail(err, CT_ERR_DATA, "JPEG: the file holds tables but no image");
    return CT_OK;
}

ct_status ct_jpeg_read_info(ct_jpeg_reader *j, const uint8_t *bytes, size_t n, ct_image_info *info, ct_err *err)
{
    if (setjmp(j->fail.jump)) {
        jpeg_abort_decompress(&j->d);
        return ct_fail(err, CT_ERR_DATA, "JPEG: %s", j->fail.msg);
    }
    ct_status st = read_header(j, bytes, n, err);
    if (st == CT_OK)
        fill_info(&j->d, info);
    jpeg_abort_decompress(&j->d);
    return st;
}

/* CMYK (as libjpeg gives it, YCCK already turned into CMYK) to RGB or grey, in place along a row.
 * Photoshop, and libjpeg when it writes CMYK, store the inks inverted and say so with an Adobe
 * marker: then R = C * K / 255 with the stored values, else the inks are plain. */
// row: (n, 4) uint8 in, (n, channels) uint8 out
static void cmyk_row(uint8_t *row, int n, int channels, int inverted)
{
    for (int i = 0; i < n; i++) {
        unsigned c = row[4 * i], m = row[4 * i + 1], y = row[4 * i + 2], k = row[4 * i + 3];
        if (!inverted) {
            c = 255 - c;
            m = 255 - m;
            y = 255 - y;
            k = 255 - k;
        }
        unsigned r = (c * k + 127) / 255, g = (m * k + 127) / 255, b = (y * k + 127) / 255;
        if (channels == 1) {
            row[i] = ct_image_luma(r, g, b);
        } else {
            row[3 * i] = (uint8_t)r;
            row[3 * i + 1] = (uint8_t)g;
            row[3 * i + 2] = (uint8_t)b;
        }
    }
}

/* ceil(a * s / 8) for a >= 0 */
static int scaled_ceil(int a, int s)
{
    return (int)(((long long)a * s + 7) / 8);
}

/* Decodes the region; called under the reader's setjmp, so libjpeg's errors leave from anywhere
 * in here. */
// px: (about r->h * s / 8, about r->w * s / 8, channels) uint8 in j->rows, s the DCT scale in eighths
static ct_status decode(ct_jpeg_reader *j, const uint8_t *bytes, size_t n, const ct_image_region *r, int out_w,
                        int out_h, int channels, const ct_image_decode_options *opt, ct_image_pixels *px,
                        ct_err *err)
{
    struct jpeg_decompress_struct *d = &j->d;
    ct_status st = read_header(j, bytes, n, err);
    if (st != CT_OK)
        return st;
    st = ct_image_check_header((int)d->image_width, (int)d->image_height, r, opt->max_pixels, err);
    if (st != CT_OK)
        return st;
    int cmyk = d->jpeg_color_space == JCS_CMYK || d->jpeg_color_space == JCS_YCCK;
    d->out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    int s = opt->dct_scale ? ct_image_jpeg_scale_eighths(r->w, r->h, out_w, out_h) : 8;
    d->scale_num = (unsigned)s;
    d->scale_denom = 8;
    jpeg_start_decompress(d);

    /* the region in the scaled image: every scaled pixel it touches */
    int width = (int)d->output_width, height = (int)d->output_height;
    int x0 = (int)((long long)r->x * s / 8), x1 = scaled_ceil(r->x + r->w, s);
    int y0 = (int)((long long)r->y * s / 8), y1 = scaled_ceil(r->y + r->h, s);
    if (x1 > width)
        x1 = width;
    if (y1 > height)
        y1 = height;

    JDIMENSION xoff = 0, cols = (JDIMENSION)width;
    if (opt->region && (x0 > 0 || x1 < width)) {
        /* One column more on each side than the region needs: the crop's first and last columns
         * are upsampled (4:2:0, 4:2:2) as image edges, without their outer neighbours' chroma. */
        int c0 = x0 > 0 ? x0 - 1 : x0, c1 = x1 < width ? x1 + 1 : x1;
        xoff = (JDIMENSION)c0;
        cols = (JDIMENSION)(c1 - c0);
        jpeg_crop_scanline(d, &xoff, &cols);   /* widens the left side to an iMCU boundary */
    }
    if (!opt->libjpeg_huffman && ct_jpeg_huffman_suits(d))
        ct_jpeg_huffman_install(j->huff, d, xoff);
    int first = opt->region ? y0 : 0, last = opt->region ? y1 : height;
    size_t stride = (size_t)d->output_width * (size_t)d->output_components;
    st = ct_image_buf_grow(&j->rows, (size_t)(last - first) * stride, err);
    if (st != CT_OK)
        return st;
    if (first > 0) {
        JDIMENSION skipped = jpeg_skip_scanlines(d, (JDIMENSION)first);
        if (skipped != (JDIMENSION)first)
            return ct_fail(err, CT_ERR_DATA, "JPEG: skipped %u of the %d rows above the region", skipped, first);
    }
    while ((int)d->output_scanline < last) {
        JSAMPROW rows[8];
        int k = 0;
        for (; k < 8 && (int)d->output_scanline + k < last; k++)
            rows[k] = j->rows.p + (size_t)((int)d->output_scanline + k - first) * stride;
        if (jpeg_read_scanlines(d, rows, (JDIMENSION)k) == 0)
            return ct_fail(err, CT_ERR_DATA, "JPEG: no data for row %u", d->output_scanline);
    }

    uint8_t *top = j->rows.p + (size_t)(y0 - first) * stride;
    size_t col = (size_t)(x0 - (int)xoff);
    if (cmyk) {
        /* whole decoded rows (the crop's margin too), so the region's columns land at col * channels */
        for (int y = y0; y < y1; y++)
            cmyk_row(top + (size_t)(y - y0) * stride, (int)d->output_width, channels, d->saw_Adobe_marker);
    }
    px->p = top + col * (size_t)channels;
    px->w = x1 - x0;
    px->h = y1 - y0;
    px->stride = stride;
    jpeg_abort_decompress(d);   /* below the region nothing is decoded */
    return CT_OK;
}

ct_status ct_jpeg_decode(ct_jpeg_reader *j, const uint8_t *bytes, size_t n, const ct_image_region *r, int out_w,
                         int out_h, int channels, const ct_image_decode_options *opt, ct_image_pixels *px,
                         ct_err *err)
{
    if (setjmp(j->fail.jump)) {
        jpeg_abort_decompress(&j->d);
        return ct_fail(err, CT_ERR_DATA, "JPEG: %s", j->fail.msg);
    }
    ct_status st = decode(j, bytes, n, r, out_w, out_h, channels, opt, px, err);
    if (st != CT_OK)
        jpeg_abort_decompress(&j->d);
    return st;
}

int ct_image_jpeg_scale_eighths(int region_w, int region_h, int out_w, int out_h)
{
    /* the scaled region is at least floor(region * s / 8) pixels, whatever its offset */
    for (int s = 1; s < 8; s *= 2)
        if ((long long)region_w * s / 8 >= out_w && (long long)region_h * s / 8 >= out_h)
            return s;
    return 8;
}
