/* The image decoder: sniffs the kind, lets the JPEG or PNG reader decode the region, and resizes
 * it into the caller's buffer. Everything it holds only grows, so a worker that keeps one decoder
 * reaches a steady state after its largest image. */
#include <stdio.h>
#include <stdlib.h>

#include "data/image_internal.h"

struct ct_image_decoder {
    ct_image_decode_options opt;
    ct_jpeg_reader *jpeg;
    ct_png_reader *png;
    ct_image_buf scratch;   /* the resampler's */
};

ct_status ct_image_buf_grow(ct_image_buf *b, size_t need, ct_err *err)
{
    if (need <= b->cap)
        return CT_OK;
    /* at least doubling, so a run of slightly larger images does not reallocate each time */
    size_t cap = b->cap * 2 > need ? b->cap * 2 : need;
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for %zu bytes of image rows", cap);
    b->p = p;
    b->cap = cap;
    return CT_OK;
}

void ct_image_buf_free(ct_image_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

ct_status ct_image_check_header(int width, int height, const ct_image_region *r, long max_pixels, ct_err *err)
{
    if (width < 1 || height < 1)
        return ct_fail(err, CT_ERR_DATA, "the image is %dx%d pixels", width, height);
    long long pixels = (long long)width * height;
    if (max_pixels > 0 && pixels > max_pixels)
        return ct_fail(err, CT_ERR_DATA, "the image is %dx%d = %lld pixels, over the limit of %ld (max_pixels)",
                       width, height, pixels, max_pixels);
    if (r->x < 0 || r->y < 0 || r->w < 1 || r->h < 1 || r->x > width - r->w || r->y > height - r->h)
        return ct_fail(err, CT_ERR_USAGE, "the region %dx%d at (%d, %d) is not inside the %dx%d image", r->w, r->h,
                       r->x, r->y, width, height);
    return CT_OK;
}

// src: (n, src_c) uint8; dst: (n, dst_c) uint8
void ct_image_convert(const uint8_t *src, int src_c, uint8_t *dst, int dst_c, int n)
{
    if (src_c == dst_c) {
        for (size_t i = 0; i < (size_t)n * (size_t)src_c; i++)
            dst[i] = src[i];
    } else if (src_c == 3) {
        for (int i = 0; i < n; i++)
            dst[i] = ct_image_luma(src[3 * i], src[3 * i + 1], src[3 * i + 2]);
    } else {
        for (int i = 0; i < n; i++)
            dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = src[i];
    }
}

ct_status ct_image_decoder_new(ct_image_decoder **out, const ct_image_decode_options *opt, ct_err *err)
{
    *out = NULL;
    ct_image_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for an image decoder");
    if (opt) {
        d->opt = *opt;
    } else {
        d->opt.region = 1;
        d->opt.dct_scale = 1;
    }
    ct_status st = ct_jpeg_reader_new(&d->jpeg, err);
    if (st == CT_OK)
        st = ct_png_reader_new(&d->png, err);
    if (st != CT_OK) {
        ct_image_decoder_free(d);
        return st;
    }
    *out = d;
    return CT_OK;
}

void ct_image_decoder_free(ct_image_decoder *d)
{
    if (!d)
        return;
    ct_jpeg_reader_free(d->jpeg);
    ct_png_reader_free(d->png);
    ct_image_buf_free(&d->scratch);
    free(d);
}

static ct_status not_an_image(const uint8_t *bytes, size_t n, ct_err *err)
{
    if (n == 0)
        return ct_fail(err, CT_ERR_DATA, "the file is empty, not a JPEG or PNG image");
    char head[3 * 8 + 1] = "";
    for (size_t i = 0, at = 0; i < n && i < 8; i++)
        at += (size_t)snprintf(head + at, sizeof head - at, "%s%02x", i ? " " : "", bytes[i]);
    return ct_fail(err, CT_ERR_DATA, "not a JPEG or PNG image (%zu bytes, starting %s)", n, head);
}

ct_status ct_image_read_info(ct_image_decoder *d, const uint8_t *bytes, size_t n, ct_image_info *info, ct_err *err)
{
    switch (ct_image_sniff(bytes, n)) {
    case CT_IMAGE_JPEG:
        return ct_jpeg_read_info(d->jpeg, bytes, n, info, err);
    case CT_IMAGE_PNG:
        return ct_png_read_info(d->png, bytes, n, info, err);
    default:
        return not_an_image(bytes, n, err);
    }
}

ct_status ct_image_decode_region(ct_image_decoder *d, const uint8_t *bytes, size_t n, const ct_image_region *r,
                                 int out_w, int out_h, int channels, uint8_t *out, ct_err *err)
{
    if (out_w < 1 || out_h < 1 || (channels != 1 && channels != 3))
        return ct_fail(err, CT_ERR_USAGE, "cannot decode to %dx%d pixels of %d channels (1 or 3)", out_w, out_h,
                       channels);
    ct_image_pixels px;
    ct_status st;
    switch (ct_image_sniff(bytes, n)) {
    case CT_IMAGE_JPEG:
        st = ct_jpeg_decode(d->jpeg, bytes, n, r, out_w, out_h, channels, &d->opt, &px, err);
        break;
    case CT_IMAGE_PNG:
        st = ct_png_decode(d->png, bytes, n, r, channels, &d->opt, &px, err);
        break;
    default:
        return not_an_image(bytes, n, err);
    }
    if (st != CT_OK)
        return st;
    st = ct_image_buf_grow(&d->scratch, ct_image_resize_scratch(px.w, px.h, out_w, out_h, channels), err);
    if (st != CT_OK)
        return st;
    ct_image_resize(px.p, px.w, px.h, px.stride, channels, r->flip, out, out_w, out_h, d->scratch.p);
    return CT_OK;
}
