/* PNG through libpng: no shortcut like JPEG's, so rows are decoded in turn from the top, only the
 * region's columns are kept, and decoding stops below the region. An interlaced file's rows are
 * complete only after its last pass, so it is decoded whole first.
 *
 * libpng's transforms bring every file to 8-bit grey or RGB: palettes expanded, grey below 8 bits
 * widened, 16-bit samples scaled (rounded) to 8, alpha and tRNS dropped (the colours are kept as
 * stored). Grey and RGB are then converted here, with libjpeg's luma weights.
 *
 * libpng reports errors through an error function that must not return: ours keeps the message
 * and longjmps to png_jmpbuf; warnings are dropped (the library never prints). libpng's reader
 * cannot be reset, so one is made per image; the rows it decodes into are ours and only grow. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "data/image_internal.h"

struct ct_png_reader {
    png_structp png;
    png_infop info;
    const uint8_t *bytes;   /* the file, read through read_bytes */
    size_t n, pos;
    char msg[256];
    ct_image_buf row;       /* one decoded row, or the whole image when interlaced */
    ct_image_buf row_ptrs;  /* the whole image's row pointers when interlaced */
    ct_image_buf region;    /* (h, w, channels): the region's columns, converted */
};

static void on_error(png_structp png, png_const_charp msg)
{
    ct_png_reader *p = png_get_error_ptr(png);
    snprintf(p->msg, sizeof p->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;   /* benign by definition (libpng has already dealt with it); never printed */
}

static void read_bytes(png_structp png, png_bytep out, size_t len)
{
    ct_png_reader *p = png_get_io_ptr(png);
    if (len > p->n - p->pos) {
        char msg[160];
        snprintf(msg, sizeof msg, "the file is truncated (%zu bytes; %zu more wanted at offset %zu)", p->n,
                 len, p->pos);
        png_error(png, msg);
    }
    memcpy(out, p->bytes + p->pos, len);
    p->pos += len;
}

ct_status ct_png_reader_new(ct_png_reader **out, ct_err *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? CT_OK : ct_fail(err, CT_ERR_NOMEM, "out of memory for a PNG decoder");
}

void ct_png_reader_free(ct_png_reader *p)
{
    if (!p)
        return;
    ct_image_buf_free(&p->row);
    ct_image_buf_free(&p->row_ptrs);
    ct_image_buf_free(&p->region);
    free(p);
}

static ct_status begin(ct_png_reader *p, const uint8_t *bytes, size_t n, ct_err *err)
{
    p->bytes = bytes;
    p->n = n;
    p->pos = 0;
    p->msg[0] = '\0';
    p->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, p, on_error, on_warning);
    p->info = p->png ? png_create_info_struct(p->png) : NULL;
    if (!p->info) {
        png_destroy_read_struct(&p->png, NULL, NULL);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for a PNG reader");
    }
    png_set_read_fn(p->png, p, read_bytes);
    return CT_OK;
}

static void end(ct_png_reader *p)
{
    png_destroy_read_struct(&p->png, &p->info, NULL);
}

static void fill_info(ct_png_reader *p, ct_image_info *info)
{
    png_read_info(p->png, p->info);
    int type = png_get_color_type(p->png, p->info);
    info->kind = CT_IMAGE_PNG;
    info->width = (int)png_get_image_width(p->png, p->info);
    info->height = (int)png_get_image_height(p->png, p->info);
    info->channels = png_get_channels(p->png, p->info);
    if (type == PNG_COLOR_TYPE_PALETTE)
        info->channels = png_get_valid(p->png, p->info, PNG_INFO_tRNS) ? 4 : 3;
    info->progressive = 0;
}

ct_status ct_png_read_info(ct_png_reader *p, const uint8_t *bytes, size_t n, ct_image_info *info, ct_err *err)
{
    ct_status st = begin(p, bytes, n, err);
    if (st != CT_OK)
        return st;
    if (setjmp(png_jmpbuf(p->png)))
        st = ct_fail(err, CT_ERR_DATA, "PNG: %s", p->msg);
    else
        fill_info(p, info);
    end(p);
    return st;
}

/* Decodes the region; called under png_jmpbuf, so libpng's errors leave from anywhere in here. */
static ct_status decode(ct_png_reader *p, const ct_image_region *r, int channels, const ct_image_decode_options *opt,
                        ct_image_pixels *px, ct_err *err)
{
    png_structp png = p->png;
    png_infop info = p->info;
    ct_image_info header;
    fill_info(p, &header);
    ct_status st = ct_image_check_header(header.width, header.height, r, opt->max_pixels, err);
    if (st != CT_OK)
        return st;

    int type = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16)
        png_set_scale_16(png);
    /* a palette's tRNS becomes alpha on expansion (grey's and RGB's stay aside): stripped too */
    if ((type & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_strip_alpha(png);
    int interlaced = png_get_interlace_type(png, info) != PNG_INTERLACE_NONE;
    if (interlaced)
        png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int src_c = png_get_channels(png, info);
    if ((src_c != 1 && src_c != 3) || png_get_bit_depth(png, info) != 8)
        return ct_fail(err, CT_ERR_INTERNAL, "PNG: transforms gave %d channels of %d bits, not 8-bit grey or RGB",
                       src_c, png_get_bit_depth(png, info));

    size_t rowbytes = png_get_rowbytes(png, info);
    size_t out_stride = (size_t)r->w * (size_t)channels;
    st = ct_image_buf_grow(&p->region, (size_t)r->h * out_stride, err);
    if (st != CT_OK)
        return st;
    if (interlaced) {
        int h = header.height;
        st = ct_image_buf_grow(&p->row, (size_t)h * rowbytes, err);
        if (st == CT_OK)
            st = ct_image_buf_grow(&p->row_ptrs, (size_t)h * sizeof(png_bytep), err);
        if (st != CT_OK)
            return st;
        png_bytepp rows = (png_bytepp)(void *)p->row_ptrs.p;
        for (int y = 0; y < h; y++)
            rows[y] = p->row.p + (size_t)y * rowbytes;
        png_read_image(png, rows);
        for (int y = 0; y < r->h; y++)
            ct_image_convert(rows[r->y + y] + (size_t)r->x * (size_t)src_c, src_c,
                             p->region.p + (size_t)y * out_stride, channels, r->w);
    } else {
        st = ct_image_buf_grow(&p->row, rowbytes, err);
        if (st != CT_OK)
            return st;
        for (int y = 0; y < r->y + r->h; y++) {
            png_read_row(png, p->row.p, NULL);
            if (y >= r->y)
                ct_image_convert(p->row.p + (size_t)r->x * (size_t)src_c, src_c,
                                 p->region.p + (size_t)(y - r->y) * out_stride, channels, r->w);
        }
    }
    px->p = p->region.p;
    px->w = r->w;
    px->h = r->h;
    px->stride = out_stride;
    return CT_OK;
}

ct_status ct_png_decode(ct_png_reader *p, const uint8_t *bytes, size_t n, const ct_image_region *r, int channels,
                        const ct_image_decode_options *opt, ct_image_pixels *px, ct_err *err)
{
    ct_status st = begin(p, bytes, n, err);
    if (st != CT_OK)
        return st;
    if (setjmp(png_jmpbuf(p->png)))
        st = ct_fail(err, CT_ERR_DATA, "PNG: %s", p->msg);
    else
        st = decode(p, r, channels, opt, px, err);
    end(p);
    return st;
}
