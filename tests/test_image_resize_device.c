/* The device resampler of decode = gpu (kernels/image_resize.cu) without a GPU: its host copy,
 * the kernel's arithmetic pixel for pixel, against the CPU decoder's resampler
 * (data/image_resize.c) on Fashion-MNIST mosaics, grey and colour, shrinking, enlarging, mixed,
 * flipped, off-centre regions and a row pitch wider than the image. The two use the same geometry
 * with float against 15-bit fixed-point weights: every byte within 1 of the CPU's. Also its
 * refusals. Skips (77) in a build without the CUDA backend, which has no kernels. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifdef CUTRAIN_HAVE_CUDA

#include "data/image_decode.h"
#include "kernels/kernels.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "tests/test_image_enc.h"
#pragma GCC diagnostic pop

enum { W = 112, H = 84, PITCH = 3 * W + 20 };

static void compare(const uint8_t *img, int c, int rx, int ry, int rw, int rh, int flip, int ow, int oh)
{
    uint8_t *want = malloc((size_t)ow * oh * c), *got = malloc((size_t)ow * oh * c);
    void *scratch = malloc(ct_image_resize_scratch(rw, rh, ow, oh, c));
    ct_image_resize(img + (size_t)ry * PITCH + (size_t)rx * c, rw, rh, PITCH, c, flip, want, ow, oh, scratch);
    CHECK(ct_resize_region_u8_host(img, W, H, PITCH, c, rx, ry, rw, rh, flip, got, ow, oh) == 0);
    int worst = 0;
    long differ = 0;
    for (size_t k = 0; k < (size_t)ow * oh * c; k++) {
        int d = abs((int)got[k] - (int)want[k]);
        worst = d > worst ? d : worst;
        differ += d != 0;
    }
    CHECK_MSG(worst <= 1, "c %d region %d,%d %dx%d flip %d -> %dx%d: largest difference %d (%ld bytes differ)", c, rx,
              ry, rw, rh, flip, ow, oh, worst, differ);
    free(want);
    free(got);
    free(scratch);
}

int main(void)
{
    uint8_t *images = enc_fmnist(12);
    if (!images)
        return 1;
    uint8_t mosaic[W * H];
    enc_tile(images, 0, 4, 3, mosaic);
    /* grey in a pitch of PITCH bytes, and colour (R the image, G its negative, B a ramp) */
    uint8_t *grey = calloc((size_t)PITCH * H, 1), *rgb = calloc((size_t)PITCH * H, 1);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t v = mosaic[y * W + x];
            grey[(size_t)y * PITCH + x] = v;
            uint8_t *p = rgb + (size_t)y * PITCH + 3 * x;
            p[0] = v;
            p[1] = (uint8_t)(255 - v);
            p[2] = (uint8_t)(x * 255 / (W - 1));
        }
    static const int cases[][7] = {
        /* rx, ry, rw, rh, flip, out_w, out_h */
        {0, 0, W, H, 0, 32, 32},     /* shrink both, whole image */
        {0, 0, W, H, 1, 32, 32},     /* flipped */
        {7, 5, 61, 43, 0, 28, 28},   /* off-centre, odd sizes */
        {7, 5, 61, 43, 1, 40, 40},   /* shrink x, grow y... */
        {30, 20, 20, 15, 0, 48, 40}, /* grow both */
        {30, 20, 20, 15, 1, 48, 40},
        {0, 0, W, H, 0, W, H},       /* equal: a copy */
        {1, 2, 100, 9, 0, 50, 30},   /* shrink x, grow y */
        {0, 0, 1, 1, 0, 8, 8},       /* one pixel */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int *k = cases[i];
        compare(grey, 1, k[0], k[1], k[2], k[3], k[4], k[5], k[6]);
        compare(rgb, 3, k[0], k[1], k[2], k[3], k[4], k[5], k[6]);
    }
    /* an equal size is an exact copy, mirrored when flipped */
    uint8_t out[W * H];
    CHECK(ct_resize_region_u8_host(grey, W, H, PITCH, 1, 0, 0, W, H, 1, out, W, H) == 0);
    int same = 1;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            same &= out[y * W + x] == grey[(size_t)y * PITCH + (W - 1 - x)];
    CHECK(same);
    /* refusals: a region outside the image, a short pitch, bad channels */
    CHECK(ct_resize_region_u8_host(grey, W, H, PITCH, 1, 1, 0, W, H, 0, out, 8, 8) != 0);
    CHECK(ct_resize_region_u8_host(grey, W, H, W - 1, 1, 0, 0, W, H, 0, out, 8, 8) != 0);
    CHECK(ct_resize_region_u8_host(grey, W, H, PITCH, 5, 0, 0, 4, 4, 0, out, 8, 8) != 0);
    CHECK(ct_resize_region_u8_host(grey, W, H, PITCH, 1, 0, 0, 0, 4, 0, out, 8, 8) != 0);
    free(grey);
    free(rgb);
    free(images);
    return ct_test_done();
}

#else

#include "tests/no_cuda_main.h"

#endif
