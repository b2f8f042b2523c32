/* Encoding test images in memory with libjpeg's and libpng's write APIs: what the image decoder's
 * tests and the fuzz seeds start from. Errors in the encoders are the test's own bugs: they abort. */
#ifndef CT_TEST_IMAGE_ENC_H
#define CT_TEST_IMAGE_ENC_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

#include "data/dataset.h"
#include "tests/test_util.h"

typedef struct enc_buf {
    uint8_t *p;
    size_t n, cap;
} enc_buf;

/* Loads `count` Fashion-MNIST test images (count, 28, 28) into fresh memory; NULL when absent. */
static inline uint8_t *enc_fmnist(long count)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", ct_fmnist_dir());
    ct_dataset ds;
    ct_err err;
    ct_err_clear(&err);
    if (ct_idx_load(&ds, path, NULL, count, &err) != CT_OK || ds.count != count) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.msg);
        return NULL;
    }
    uint8_t *px = malloc((size_t)count * 784);
    memcpy(px, ds.images, (size_t)count * 784);
    ct_dataset_free(&ds);
    return px;
}

/* A cols x rows mosaic of 28x28 images starting at image `first`: (rows*28, cols*28) uint8. */
static inline void enc_tile(const uint8_t *images, int first, int cols, int rows, uint8_t *out)
{
    int w = cols * 28;
    for (int t = 0; t < cols * rows; t++)
        for (int y = 0; y < 28; y++)
            memcpy(out + (size_t)((t / cols) * 28 + y) * w + (t % cols) * 28,
                   images + (size_t)(first + t) * 784 + y * 28, 28);
}

/* kind: 0 baseline 4:4:4, 1 progressive 4:4:4, 2 baseline 4:2:0, 3 progressive 4:2:0, 4 baseline
 * 4:2:0 with a restart marker after each MCU row, 5 baseline 4:4:4 with one every 5 MCUs; px: (h, w, comps) in in_cs
 * (JCS_GRAYSCALE, JCS_RGB, JCS_CMYK); jpeg_cs: the colour space stored (JCS_YCCK for YCCK). */
static inline enc_buf enc_jpeg(const uint8_t *px, int w, int h, int comps, J_COLOR_SPACE in_cs, J_COLOR_SPACE jpeg_cs,
                        int kind, int quality)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *mem = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &mem, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = in_cs;
    jpeg_set_defaults(&c);
    jpeg_set_colorspace(&c, jpeg_cs);
    jpeg_set_quality(&c, quality, TRUE);
    if (kind < 2 || kind == 5)
        for (int i = 0; i < c.num_components; i++)
            c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
    if (kind == 1 || kind == 3)
        jpeg_simple_progression(&c);
    if (kind == 4)
        c.restart_in_rows = 1;     /* a restart marker after every MCU row */
    if (kind == 5)
        c.restart_interval = 5;    /* ... after every 5 MCUs, across rows */
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * w * comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    enc_buf b = {malloc(size), size, size};
    memcpy(b.p, mem, size);
    free(mem);
    return b;
}

static inline void enc_png_write(png_structp png, png_bytep data, size_t n)
{
    enc_buf *b = png_get_io_ptr(png);
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static inline void enc_png_flush(png_structp png) { (void)png; }

/* px: (h, w) rows of png_get_rowbytes bytes as libpng takes them for (type, depth); palette and
 * trns (npal entries) for PNG_COLOR_TYPE_PALETTE. */
static inline enc_buf enc_png(const uint8_t *px, int w, int h, int type, int depth, int interlace, const png_color *palette,
                       int npal, const uint8_t *trns)
{
    enc_buf b = {NULL, 0, 0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png)))
        abort();
    png_set_write_fn(png, &b, enc_png_write, enc_png_flush);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, type,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (palette)
        png_set_PLTE(png, info, palette, npal);
    if (trns)
        png_set_tRNS(png, info, trns, npal, NULL);
    png_write_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    png_bytep *rows = malloc((size_t)h * sizeof *rows);
    for (int y = 0; y < h; y++)
        rows[y] = (png_bytep)(px + (size_t)y * rowbytes);
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    return b;
}

#endif
