/* The image folder decode = gpu's tests decode (test_image_encoded.c on the CPU, test_gpu_nvjpeg.c
 * on the GPU): three classes of Fashion-MNIST mosaics, 84x56 pixels, made colourful (R the image,
 * G its negative, B a ramp across it) so that colour conversion is exercised, written at test time
 * as the kinds of file a folder holds: baseline JPEGs (4:4:4 and 4:2:0, quality 92), a baseline
 * grey JPEG (what the device decodes), and what the workers decode instead: a progressive JPEG, a
 * CMYK JPEG and a PNG. File j of a class is kind j % DF_KINDS. */
#ifndef CT_TEST_DECODE_FOLDER_H
#define CT_TEST_DECODE_FOLDER_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "tests/test_image_enc.h"
#pragma GCC diagnostic pop

enum { DF_W = 84, DF_H = 56, DF_KINDS = 6 };
enum { DF_BASELINE_444, DF_BASELINE_420, DF_GREY, DF_PROGRESSIVE, DF_PNG, DF_CMYK };

/* Whether the device decoder takes a file of this kind (the workers decode the others). */
static inline int df_on_device(int kind) { return kind <= DF_GREY; }

static inline int df_write(const char *path, const enc_buf *b)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(b->p, 1, b->n, f) == b->n;
    if (f)
        fclose(f);
    return ok;
}

/* root/<class c>/<j>.img for c < 3, j < per_class; images from `images` (Fashion-MNIST,
 * 6 per mosaic). Returns the files written (3 * per_class), or 0. */
static inline int df_make(const char *root, const uint8_t *images, int per_class)
{
    static const char *const classes[3] = {"boots", "coats", "shirts"};
    uint8_t grey[DF_W * DF_H], rgb[DF_W * DF_H * 3], cmyk[DF_W * DF_H * 4];
    mkdir(root, 0755);
    int written = 0;
    for (int c = 0; c < 3; c++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", root, classes[c]);
        mkdir(p, 0755);
        for (int j = 0; j < per_class; j++) {
            enc_tile(images, (c * per_class + j) * 6, 3, 2, grey);
            for (int k = 0; k < DF_W * DF_H; k++) {
                int x = k % DF_W;
                rgb[3 * k] = grey[k];
                rgb[3 * k + 1] = (uint8_t)(255 - grey[k]);
                rgb[3 * k + 2] = (uint8_t)(x * 255 / (DF_W - 1));
                for (int ch = 0; ch < 3; ch++)
                    cmyk[4 * k + ch] = (uint8_t)(255 - rgb[3 * k + ch]);
                cmyk[4 * k + 3] = 255;   /* Adobe's inverted CMYK: no black */
            }
            int kind = j % DF_KINDS;
            enc_buf b;
            if (kind == DF_BASELINE_444 || kind == DF_BASELINE_420 || kind == DF_PROGRESSIVE)
                b = enc_jpeg(rgb, DF_W, DF_H, 3, JCS_RGB, JCS_YCbCr, kind == DF_BASELINE_444 ? 0 : kind == DF_PROGRESSIVE ? 1 : 2,
                             92);
            else if (kind == DF_GREY)
                b = enc_jpeg(grey, DF_W, DF_H, 1, JCS_GRAYSCALE, JCS_GRAYSCALE, 0, 92);
            else if (kind == DF_CMYK)
                b = enc_jpeg(cmyk, DF_W, DF_H, 4, JCS_CMYK, JCS_CMYK, 0, 92);
            else
                b = enc_png(rgb, DF_W, DF_H, PNG_COLOR_TYPE_RGB, 8, 0, NULL, 0, NULL);
            snprintf(p, sizeof p, "%s/%s/%03d.img", root, classes[c], j);
            written += df_write(p, &b);
            free(b.p);
        }
    }
    return written;
}

/* The kind of the file at path (from its name's number), -1 when it is not one of df_make's. */
static inline int df_kind(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    int j;
    return slash && sscanf(slash + 1, "%d.img", &j) == 1 ? j % DF_KINDS : -1;
}

/* rm -r of what df_make wrote (two levels of plain names). */
static inline void df_remove(const char *root)
{
    DIR *d = opendir(root);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", root, e->d_name);
        DIR *s = opendir(p);
        struct dirent *f;
        while (s && (f = readdir(s)) != NULL) {
            if (f->d_name[0] == '.')
                continue;
            char q[1300];
            snprintf(q, sizeof q, "%s/%s", p, f->d_name);
            unlink(q);
        }
        if (s)
            closedir(s);
        rmdir(p);
    }
    if (d)
        closedir(d);
    rmdir(root);
}

#endif
