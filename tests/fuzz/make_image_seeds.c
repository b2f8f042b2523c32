// Writes tests/fuzz/corpus/image/: small JPEG and PNG variants of Fashion-MNIST images, the fuzz
// target's seeds (each well under 4 KB). Run by hand from the repository root when the seeds need
// remaking (the sources are those tools/fuzz.sh builds its data targets from):
//   cc -std=c11 -D_POSIX_C_SOURCE=200809L -I engine -I . tests/fuzz/make_image_seeds.c data/*.c
//      engine/base/rng.c engine/base/status.c -ljpeg -lpng16 -lz -lm -o /tmp/make_image_seeds
//   /tmp/make_image_seeds tests/fuzz/corpus/image
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/test_image_enc.h"

static const char *dir;

static void save(const char *name, enc_buf b)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b.p, 1, b.n, f) != b.n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    printf("%s: %zu bytes\n", path, b.n);
    free(b.p);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_image_seeds DIR\n");
        return 2;
    }
    dir = argv[1];
    uint8_t *fm = enc_fmnist(12);
    if (!fm)
        return 1;
    /* 28x28: grey is image 0; RGB puts images 1, 2, 3 in R, G, B; 56x56 tiles images 4..7 */
    static uint8_t grey[784], rgb[784 * 3], rgba[784 * 4], cmyk[784 * 4], rgb16[784 * 6], grey4[14 * 28];
    static uint8_t pal[784], tile[56 * 56], tile_rgb[56 * 56 * 3];
    memcpy(grey, fm, 784);
    for (int i = 0; i < 784; i++) {
        for (int c = 0; c < 3; c++) {
            uint8_t v = fm[(1 + c) * 784 + i];
            rgb[3 * i + c] = rgba[4 * i + c] = v;
            rgb16[6 * i + 2 * c] = rgb16[6 * i + 2 * c + 1] = v;
            cmyk[4 * i + c] = (uint8_t)(255 - v / 2);
        }
        rgba[4 * i + 3] = fm[4 * 784 + i];
        cmyk[4 * i + 3] = (uint8_t)(255 - fm[5 * 784 + i] / 4);
        pal[i] = grey[i] / 16;
    }
    for (int y = 0; y < 28; y++)
        for (int x = 0; x < 14; x++)
            grey4[y * 14 + x] = (uint8_t)((grey[y * 28 + 2 * x] & 0xf0) | grey[y * 28 + 2 * x + 1] >> 4);
    enc_tile(fm, 4, 2, 2, tile);
    for (int i = 0; i < 56 * 56; i++)
        tile_rgb[3 * i] = tile[i], tile_rgb[3 * i + 1] = (uint8_t)(255 - tile[i]), tile_rgb[3 * i + 2] = tile[i] / 2;
    png_color palette[16];
    uint8_t trns[16];
    for (int v = 0; v < 16; v++) {
        palette[v].red = (png_byte)(v * 17);
        palette[v].green = (png_byte)(255 - v * 17);
        palette[v].blue = (png_byte)(v * 8);
        trns[v] = (uint8_t)(v * 16);
    }
    free(fm);

    save("baseline.jpg", enc_jpeg(rgb, 28, 28, 3, JCS_RGB, JCS_YCbCr, 0, 90));
    save("baseline_420.jpg", enc_jpeg(tile_rgb, 56, 56, 3, JCS_RGB, JCS_YCbCr, 2, 75));
    save("progressive.jpg", enc_jpeg(rgb, 28, 28, 3, JCS_RGB, JCS_YCbCr, 1, 90));
    save("progressive_420.jpg", enc_jpeg(tile_rgb, 56, 56, 3, JCS_RGB, JCS_YCbCr, 3, 75));
    save("grey.jpg", enc_jpeg(grey, 28, 28, 1, JCS_GRAYSCALE, JCS_GRAYSCALE, 0, 90));
    save("cmyk.jpg", enc_jpeg(cmyk, 28, 28, 4, JCS_CMYK, JCS_CMYK, 0, 90));
    save("ycck.jpg", enc_jpeg(cmyk, 28, 28, 4, JCS_CMYK, JCS_YCCK, 1, 90));
    save("grey.png", enc_png(grey, 28, 28, PNG_COLOR_TYPE_GRAY, 8, 0, NULL, 0, NULL));
    save("grey4.png", enc_png(grey4, 28, 28, PNG_COLOR_TYPE_GRAY, 4, 0, NULL, 0, NULL));
    save("rgb.png", enc_png(rgb, 28, 28, PNG_COLOR_TYPE_RGB, 8, 0, NULL, 0, NULL));
    save("rgba.png", enc_png(rgba, 28, 28, PNG_COLOR_TYPE_RGB_ALPHA, 8, 0, NULL, 0, NULL));
    save("palette_trns.png", enc_png(pal, 28, 28, PNG_COLOR_TYPE_PALETTE, 8, 0, palette, 16, trns));
    save("rgb16.png", enc_png(rgb16, 28, 28, PNG_COLOR_TYPE_RGB, 16, 0, NULL, 0, NULL));
    save("interlaced.png", enc_png(rgb, 28, 28, PNG_COLOR_TYPE_RGB, 8, 1, NULL, 0, NULL));
    save("grey_tile_interlaced.png", enc_png(tile, 56, 56, PNG_COLOR_TYPE_GRAY, 8, 1, NULL, 0, NULL));
    return 0;
}
