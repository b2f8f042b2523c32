/* The image decoder (data/image_decode.h) on real images: Fashion-MNIST mosaics encoded here as
 * JPEG (baseline 4:4:4 and 4:2:0, progressive, grey, CMYK, YCCK) and PNG (grey, RGB, RGBA, palette
 * with tRNS, 16-bit, interlaced); decoded whole, by region, DCT-scaled, mirrored; broken files. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "data/image_decode.h"
#include "tests/test_image_enc.h"
#include "tests/test_util.h"

#define W 224   /* 8 x 6 tiles of 28 */
#define H 168

static uint8_t grey[W * H], rgb[W * H * 3], alpha[W * H];

typedef struct sample {
    const char *name;
    enc_buf file;
    ct_image_kind kind;
    int channels;         /* in the file, as read_info reports */
    int progressive;
    const uint8_t *orig;  /* what it should decode to, (H, W, orig_c) */
    int orig_c;
    double tol;           /* mean absolute error allowed against orig (0: exact) */
} sample;

static ct_image_decoder *new_decoder_with(int region, int dct_scale, long max_pixels, int libjpeg_huffman)
{
    ct_image_decode_options opt = {region, dct_scale, max_pixels, libjpeg_huffman};
    ct_image_decoder *d = NULL;
    ct_err err;
    ct_err_clear(&err);
    CHECK_MSG(ct_image_decoder_new(&d, &opt, &err) == CT_OK, "%s", err.msg);
    return d;
}

static ct_image_decoder *new_decoder(int region, int dct_scale, long max_pixels)
{
    return new_decoder_with(region, dct_scale, max_pixels, 0);
}

static double mean_abs(const uint8_t *a, const uint8_t *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += abs((int)a[i] - (int)b[i]);
    return s / (double)n;
}

/* out: (h, w, c) uint8 of region (x, y, w, h) of img: (H, W, c) */
static void crop(const uint8_t *img, int c, int x, int y, int w, int h, uint8_t *out)
{
    for (int r = 0; r < h; r++)
        memcpy(out + (size_t)r * w * c, img + ((size_t)(y + r) * W + x) * c, (size_t)w * c);
}

static ct_status decode(ct_image_decoder *d, const enc_buf *f, ct_image_region r, int ow, int oh, int c, uint8_t *out,
                        ct_err *err)
{
    ct_err_clear(err);
    return ct_image_decode_region(d, f->p, f->n, &r, ow, oh, c, out, err);
}

static void to_grey(const uint8_t *src, uint8_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (uint8_t)((19595u * src[3 * i] + 38470u * src[3 * i + 1] + 7471u * src[3 * i + 2] + 32768u) >> 16);
}

static void check_sample(const sample *s, ct_image_decoder *whole, ct_image_decoder *fast)
{
    ct_err err;
    static uint8_t full[W * H * 3], full2[W * H * 3], part[W * H * 3], ref[W * H * 3], expect[W * H * 3];
    int c = s->orig_c;

    CHECK_MSG(ct_image_sniff(s->file.p, s->file.n) == s->kind, "%s: sniffed %s", s->name,
              ct_image_kind_name(ct_image_sniff(s->file.p, s->file.n)));
    ct_image_info info;
    ct_err_clear(&err);
    CHECK_MSG(ct_image_read_info(fast, s->file.p, s->file.n, &info, &err) == CT_OK, "%s: %s", s->name, err.msg);
    CHECK_MSG(info.kind == s->kind && info.width == W && info.height == H && info.channels == s->channels &&
                  info.progressive == s->progressive,
              "%s: info %s %dx%d, %d channels, progressive %d", s->name, ct_image_kind_name(info.kind), info.width,
              info.height, info.channels, info.progressive);

    /* whole image, full size, no shortcut */
    ct_image_region all = {0, 0, W, H, 0};
    CHECK_MSG(decode(whole, &s->file, all, W, H, c, full, &err) == CT_OK, "%s: %s", s->name, err.msg);
    double mae = mean_abs(full, s->orig, (size_t)W * H * c);
    printf("%s: %zu bytes, mean abs error %.3f\n", s->name, s->file.n, mae);
    if (s->tol == 0)
        CHECK_MSG(memcmp(full, s->orig, (size_t)W * H * c) == 0, "%s: full decode differs (mean abs %.3f)", s->name,
                  mae);
    else
        CHECK_MSG(mae <= s->tol, "%s: mean abs error %.3f over %.2f", s->name, mae, s->tol);

    /* the same bytes again through the fast decoder, twice */
    CHECK(decode(fast, &s->file, all, W, H, c, full2, &err) == CT_OK);
    CHECK_MSG(memcmp(full, full2, (size_t)W * H * c) == 0, "%s: region decoder's whole image differs", s->name);
    memset(full2, 0, sizeof full2);
    CHECK(decode(fast, &s->file, all, W, H, c, full2, &err) == CT_OK);
    CHECK_MSG(memcmp(full, full2, (size_t)W * H * c) == 0, "%s: second decode differs", s->name);

    /* the other channel count: grey of the colour decode, colour replicated from grey */
    int c2 = 4 - c;
    CHECK_MSG(decode(whole, &s->file, all, W, H, c2, part, &err) == CT_OK, "%s: %s", s->name, err.msg);
    if (c == 3) {
        to_grey(full, expect, (size_t)W * H);
        /* PNG converts from the decoded RGB exactly; libjpeg takes luma from YCbCr directly */
        double g = mean_abs(part, expect, (size_t)W * H);
        CHECK_MSG(s->kind == CT_IMAGE_PNG ? g == 0 : g < 2.0, "%s: grey differs from luma of RGB by %.3f", s->name, g);
    } else {
        int same = 1;
        for (size_t i = 0; i < (size_t)W * H; i++)
            same &= part[3 * i] == full[i] && part[3 * i + 1] == full[i] && part[3 * i + 2] == full[i];
        CHECK_MSG(same, "%s: RGB of a grey image is not the grey replicated", s->name);
    }

    /* regions at full size: exactly the crop of the whole decode (libjpeg-turbo's crop and skip are
     * exact), also with edges that are not on an iMCU boundary, and at the image's borders */
    static const int regions[][4] = {{37, 21, 101, 77}, {0, 0, 17, 9}, {200, 150, 24, 18}, {8, 16, 16, 8},
                                     {1, 1, 222, 166}, {113, 0, 3, 168}, {32, 16, 40, 20},
                                     {48, 47, 17, 33}, {0, 100, 224, 1}};
    for (size_t k = 0; k < sizeof regions / sizeof regions[0]; k++) {
        ct_image_region r = {regions[k][0], regions[k][1], regions[k][2], regions[k][3], 0};
        ct_image_decoder *d = new_decoder(1, 0, 0);
        CHECK_MSG(decode(d, &s->file, r, r.w, r.h, c, part, &err) == CT_OK, "%s: %s", s->name, err.msg);
        ct_image_decoder_free(d);
        crop(full, c, r.x, r.y, r.w, r.h, ref);
        CHECK_MSG(memcmp(part, ref, (size_t)r.w * r.h * c) == 0, "%s: region %dx%d at (%d, %d) differs (mean abs %.3f)",
                  s->name, r.w, r.h, r.x, r.y, mean_abs(part, ref, (size_t)r.w * r.h * c));
        /* mirrored: the same pixels, each row reversed */
        r.flip = 1;
        CHECK(decode(whole, &s->file, r, r.w, r.h, c, part, &err) == CT_OK);
        int mirrored = 1;
        for (int y = 0; y < r.h; y++)
            for (int x = 0; x < r.w; x++)
                for (int ch = 0; ch < c; ch++)
                    mirrored &= part[((size_t)y * r.w + x) * c + ch] == ref[((size_t)y * r.w + r.w - 1 - x) * c + ch];
        CHECK_MSG(mirrored, "%s: flipped region is not the mirror image", s->name);
    }

    /* shrunk: with DCT scaling close to the area-resized whole decode, without it equal to it */
    static const int sizes[][6] = {{0, 0, W, H, 56, 42}, {0, 0, W, H, 28, 21}, {40, 24, 128, 96, 60, 45},
                                   {40, 24, 128, 96, 30, 20}};
    static uint8_t scratch[W * H * 3 * 4];
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        ct_image_region r = {sizes[k][0], sizes[k][1], sizes[k][2], sizes[k][3], 0};
        int ow = sizes[k][4], oh = sizes[k][5];
        crop(full, c, r.x, r.y, r.w, r.h, ref);
        ct_image_resize(ref, r.w, r.h, (size_t)r.w * c, c, 0, expect, ow, oh, scratch);
        CHECK(decode(fast, &s->file, r, ow, oh, c, part, &err) == CT_OK);
        double m = mean_abs(part, expect, (size_t)ow * oh * c);
        /* what a misalignment by one output pixel costs, for scale */
        double shifted = mean_abs(part + c, expect, (size_t)ow * oh * c - c);
        printf("  %s: %dx%d from %dx%d: mean abs %.3f, shifted %.3f\n", s->name, ow, oh, r.w, r.h, m, shifted);
        /* measured: under 1 for a whole 1/4 or 1/8 of a 4:4:4 file, up to about 10 where the DCT's
         * reduction is followed by an uneven one (64 to 60) or CMYK's products; a shift by one
         * pixel costs 25 to 60 */
        if (s->kind == CT_IMAGE_JPEG)
            CHECK_MSG(m < 0.3 * shifted, "%s: %dx%d from %dx%d: mean abs %.3f from the resized (shifted: %.3f)", s->name,
                      ow, oh, r.w, r.h, m, shifted);
        else
            CHECK_MSG(m == 0, "%s: %dx%d from %dx%d: mean abs %.3f from the resized", s->name, ow, oh, r.w, r.h, m);
        /* DCT scaling without the region shortcut: the same bytes (the crop is exact) */
        ct_image_decoder *scale_only = new_decoder(0, 1, 0);
        CHECK(decode(scale_only, &s->file, r, ow, oh, c, full2, &err) == CT_OK);
        CHECK_MSG(memcmp(part, full2, (size_t)ow * oh * c) == 0, "%s: DCT-scaled region differs from the same cut "
                  "from the whole scaled image", s->name);
        ct_image_decoder_free(scale_only);
        CHECK(decode(whole, &s->file, r, ow, oh, c, part, &err) == CT_OK);
        CHECK_MSG(memcmp(part, expect, (size_t)ow * oh * c) == 0, "%s: unscaled resize differs", s->name);
    }
}

/* cutrain's Huffman decoder (data/jpeg_huffman.c) against libjpeg-turbo's own: the same pixels for
 * random regions at every DCT scale, mirrored or not, and the same verdict on every truncation of
 * the file (the bytes too, where both decode it). */
static void check_huffman_parity(const sample *s)
{
    if (s->kind != CT_IMAGE_JPEG)
        return;
    ct_image_decoder *ours = new_decoder(1, 1, 0), *theirs = new_decoder_with(1, 1, 0, 1);
    static uint8_t a[W * H * 3], b[W * H * 3];
    ct_err err;
    uint64_t seed = 12345;
    int same = 0, cases = 300;
    for (int k = 0; k < cases; k++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(seed >> 32);
        ct_image_region r;
        r.w = 1 + (int)(u % W);
        r.h = 1 + (int)((u >> 8) % H);
        r.x = (int)((u >> 16) % (unsigned)(W - r.w + 1));
        r.y = (int)((u >> 20) % (unsigned)(H - r.h + 1));
        r.flip = (int)(u >> 31);
        /* outputs from the region's size down to an eighth of it: every DCT scale */
        int div = 1 << ((u >> 24) & 3), ow = r.w / div > 0 ? r.w / div : 1, oh = r.h / div > 0 ? r.h / div : 1;
        ct_status sa = decode(ours, &s->file, r, ow, oh, s->orig_c, a, &err);
        ct_status sb = decode(theirs, &s->file, r, ow, oh, s->orig_c, b, &err);
        same += sa == CT_OK && sb == CT_OK && memcmp(a, b, (size_t)ow * oh * s->orig_c) == 0;
    }
    CHECK_MSG(same == cases, "%s: %d of %d regions decode the same with libjpeg-turbo's Huffman decoder", s->name,
              same, cases);
    int agree = 0, tried = 0;
    ct_image_region all = {0, 0, W, H, 0};
    for (size_t n = s->file.n / 3; n < s->file.n; n += s->file.n / 23 + 1, tried++) {
        enc_buf cut = {s->file.p, n, n};
        ct_status sa = decode(ours, &cut, all, W, H, s->orig_c, a, &err);
        ct_status sb = decode(theirs, &cut, all, W, H, s->orig_c, b, &err);
        agree += sa == sb && (sa != CT_OK || memcmp(a, b, (size_t)W * H * s->orig_c) == 0);
    }
    CHECK_MSG(agree == tried, "%s: %d of %d truncations agree with libjpeg-turbo's Huffman decoder", s->name, agree,
              tried);
    printf("  %s: through both Huffman decoders, %d of %d regions and %d of %d truncations the same\n", s->name, same,
           cases, agree, tried);
    ct_image_decoder_free(ours);
    ct_image_decoder_free(theirs);
}

static void fail_case(ct_image_decoder *d, const char *what, const uint8_t *p, size_t n, const char *want,
                      const enc_buf *good, const uint8_t *good_px)
{
    static uint8_t out[W * H * 3];
    ct_err err;
    ct_image_region all = {0, 0, W, H, 0};
    ct_err_clear(&err);
    ct_status st = ct_image_decode_region(d, p, n, &all, 56, 42, 3, out, &err);
    CHECK_MSG(st == CT_ERR_DATA, "%s: status %d (%s)", what, (int)st, err.msg);
    CHECK_MSG(ct_contains(err.msg, want), "%s: message lacks \"%s\": %s", what, want, err.msg);
    printf("%s: %s\n", what, err.msg);
    if (!good)
        return;
    /* the decoder still decodes a good image, to the same bytes as before */
    static uint8_t again[W * H * 3];
    CHECK_MSG(decode(d, good, all, W, H, 3, again, &err) == CT_OK, "%s: after it: %s", what, err.msg);
    CHECK_MSG(memcmp(again, good_px, (size_t)W * H * 3) == 0, "%s: the next good image decodes differently", what);
}

static void check_failures(const enc_buf *jpg, const enc_buf *prog, const enc_buf *png, const enc_buf *png_il)
{
    ct_image_decoder *d = new_decoder(1, 1, 0);
    static uint8_t good[W * H * 3];
    ct_err err;
    ct_image_region all = {0, 0, W, H, 0};
    CHECK(decode(d, jpg, all, W, H, 3, good, &err) == CT_OK);

    fail_case(d, "empty", jpg->p, 0, "empty", jpg, good);
    uint8_t junk[4096];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizeof junk; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        junk[i] = (uint8_t)x;
    }
    fail_case(d, "random bytes", junk, sizeof junk, "not a JPEG or PNG", jpg, good);
    junk[0] = 0xff, junk[1] = 0xd8, junk[2] = 0xff;
    fail_case(d, "JPEG signature then random bytes", junk, sizeof junk, "JPEG: ", jpg, good);
    fail_case(d, "JPEG truncated in its header", jpg->p, 40, "JPEG: ", jpg, good);
    fail_case(d, "JPEG truncated at half", jpg->p, jpg->n / 2, "Premature end", jpg, good);
    fail_case(d, "progressive JPEG truncated", prog->p, prog->n * 3 / 4, "Premature end", jpg, good);
    fail_case(d, "PNG truncated at half", png->p, png->n / 2, "truncated", jpg, good);
    fail_case(d, "interlaced PNG truncated", png_il->p, png_il->n - 100, "truncated", jpg, good);
    fail_case(d, "PNG truncated in its header", png->p, 20, "truncated", jpg, good);

    /* corrupt streams: a marker in the middle of the JPEG's entropy-coded data, a byte of the PNG's
     * image data (its CRC no longer matches) */
    uint8_t *bad = malloc(jpg->n > png->n ? jpg->n : png->n);
    memcpy(bad, jpg->p, jpg->n);
    bad[jpg->n / 2] = 0xff;
    bad[jpg->n / 2 + 1] = 0xd9;
    fail_case(d, "JPEG with EOI in its data", bad, jpg->n, "Corrupt JPEG data", jpg, good);
    memcpy(bad, png->p, png->n);
    bad[png->n / 2] ^= 0x55;
    fail_case(d, "PNG with a changed byte", bad, png->n, "CRC", jpg, good);
    free(bad);
    ct_image_decoder_free(d);

    /* over max_pixels: the figures in the message; read_info still reports the size */
    d = new_decoder(1, 1, 10000);
    fail_case(d, "JPEG over max_pixels", jpg->p, jpg->n, "224x168 = 37632 pixels, over the limit of 10000", NULL, NULL);
    ct_image_decoder_free(d);
    d = new_decoder(1, 1, 10000);
    /* good: a small crop still refuses, whatever the region */
    ct_image_region small = {0, 0, 8, 8, 0};
    uint8_t out[64 * 3];
    ct_err_clear(&err);
    CHECK(ct_image_decode_region(d, png->p, png->n, &small, 8, 8, 3, out, &err) == CT_ERR_DATA &&
          ct_contains(err.msg, "max_pixels"));
    ct_image_info info;
    CHECK(ct_image_read_info(d, jpg->p, jpg->n, &info, &err) == CT_OK && info.width == W);
    ct_err_clear(&err);
    CHECK(ct_image_read_info(d, jpg->p, 40, &info, &err) == CT_ERR_DATA && ct_contains(err.msg, "JPEG"));
    ct_err_clear(&err);
    CHECK(ct_image_read_info(d, junk + 3, 100, &info, &err) == CT_ERR_DATA && ct_contains(err.msg, "not a JPEG"));
    /* a caller's mistake is not bad data */
    ct_image_region outside = {200, 0, 30, 10, 0};
    ct_err_clear(&err);
    CHECK(ct_image_decode_region(d, png->p, png->n, &outside, 8, 8, 3, out, &err) == CT_ERR_USAGE ||
          ct_contains(err.msg, "max_pixels"));
    ct_image_decoder_free(d);
    d = new_decoder(1, 1, 0);
    ct_err_clear(&err);
    CHECK_MSG(ct_image_decode_region(d, png->p, png->n, &outside, 8, 8, 3, out, &err) == CT_ERR_USAGE &&
                  ct_contains(err.msg, "not inside the 224x168 image"),
              "%s", err.msg);
    ct_err_clear(&err);
    CHECK(ct_image_decode_region(d, jpg->p, jpg->n, &outside, 8, 8, 3, out, &err) == CT_ERR_USAGE);
    CHECK(ct_image_decode_region(d, jpg->p, jpg->n, &all, 8, 8, 2, out, &err) == CT_ERR_USAGE);
    ct_image_decoder_free(d);
}

/* The weight of source pixel j in output pixel i along an axis, in doubles: the overlap of their
 * spans when shrinking, the triangle around the centre (clamped at the edges) when growing. */
static double ref_weight(int in, int out, int i, int j)
{
    if (out <= in) {
        double lo = fmax((double)i * in / out, j), hi = fmin((double)(i + 1) * in / out, j + 1);
        return hi > lo ? (hi - lo) * out / in : 0;
    }
    double pos = fmin(fmax((i + 0.5) * in / out - 0.5, 0), in - 1);
    return fmax(0, 1 - fabs(pos - j));
}

/* ct_image_resize against that reference, for uneven ratios: within rounding */
static void check_resize_reference(void)
{
    enum { SW = 37, SH = 23 };
    static uint8_t src[SW * SH * 3], out[90 * 60 * 3], scratch[1 << 20];
    for (int i = 0; i < SW * SH * 3; i++)
        src[i] = (uint8_t)((i * 2654435761u) >> 24);
    static const int sizes[][2] = {{10, 7}, {37, 23}, {5, 23}, {60, 40}, {90, 9}, {36, 22}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int ow = sizes[k][0], oh = sizes[k][1], worst = 0;
        CHECK(ct_image_resize_scratch(SW, SH, ow, oh, 3) <= sizeof scratch);
        ct_image_resize(src, SW, SH, SW * 3, 3, 0, out, ow, oh, scratch);
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++)
                for (int c = 0; c < 3; c++) {
                    double v = 0;
                    for (int j = 0; j < SH; j++)
                        for (int i = 0; i < SW; i++)
                            v += ref_weight(SH, oh, y, j) * ref_weight(SW, ow, x, i) * src[(j * SW + i) * 3 + c];
                    int d = abs((int)out[(y * ow + x) * 3 + c] - (int)lround(v));
                    worst = d > worst ? d : worst;
                }
        CHECK_MSG(worst <= 1, "resize %dx%d to %dx%d: off the reference by %d", SW, SH, ow, oh, worst);
    }
}

static void check_resize(void)
{
    check_resize_reference();
    static uint8_t src[64 * 48 * 3], out[200 * 150 * 3], scratch[48 * 200 * 3 * 4 + 200 * 150 * 3 * 4];
    /* a constant image stays constant, shrinking, growing or both */
    static const int sizes[][2] = {{64, 48}, {13, 7}, {200, 150}, {100, 20}, {1, 1}, {64, 1}};
    memset(src, 77, sizeof src);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        CHECK(ct_image_resize_scratch(64, 48, sizes[k][0], sizes[k][1], 3) <= sizeof scratch);
        ct_image_resize(src, 64, 48, 64 * 3, 3, (int)k & 1, out, sizes[k][0], sizes[k][1], scratch);
        int same = 1;
        for (int i = 0; i < sizes[k][0] * sizes[k][1] * 3; i++)
            same &= out[i] == 77;
        CHECK_MSG(same, "constant image not constant at %dx%d", sizes[k][0], sizes[k][1]);
    }
    /* known cases: area averages and bilinear centres */
    uint8_t a[4] = {0, 10, 20, 30}, o[4];
    ct_image_resize(a, 4, 1, 4, 1, 0, o, 2, 1, scratch);
    CHECK(o[0] == 5 && o[1] == 25);
    ct_image_resize(a, 4, 1, 4, 1, 0, o, 1, 1, scratch);
    CHECK(o[0] == 15);
    ct_image_resize(a, 4, 1, 4, 1, 1, o, 3, 1, scratch);   /* thirds: (0*3+10)/4, (10+20)/2, (20+30*3)/4, mirrored */
    CHECK_MSG(o[2] == 3 && o[1] == 15 && o[0] == 28, "%d %d %d", o[0], o[1], o[2]);
    uint8_t b[2] = {0, 100};
    ct_image_resize(b, 2, 1, 2, 1, 0, o, 4, 1, scratch);
    CHECK_MSG(o[0] == 0 && o[1] == 25 && o[2] == 75 && o[3] == 100, "%d %d %d %d", o[0], o[1], o[2], o[3]);
    ct_image_resize(b, 1, 2, 1, 1, 0, o, 1, 4, scratch);   /* the same down a column */
    CHECK(o[0] == 0 && o[1] == 25 && o[2] == 75 && o[3] == 100);
    uint8_t q[4] = {0, 40, 80, 120}, q1;   /* 2x2 to 1x1: the mean */
    ct_image_resize(q, 2, 2, 2, 1, 0, &q1, 1, 1, scratch);
    CHECK(q1 == 60);
    /* equal size copies, honouring the stride; flip mirrors */
    for (int i = 0; i < 64 * 48 * 3; i++)
        src[i] = (uint8_t)(i * 7 + i / 13);
    ct_image_resize(src, 30, 20, 64 * 3, 3, 0, out, 30, 20, scratch);
    int same = 1, mirror = 1;
    for (int y = 0; y < 20; y++)
        same &= memcmp(out + y * 90, src + y * 192, 90) == 0;
    ct_image_resize(src, 30, 20, 64 * 3, 3, 1, out, 30, 20, scratch);
    for (int y = 0; y < 20; y++)
        for (int x = 0; x < 30; x++)
            mirror &= memcmp(out + y * 90 + x * 3, src + y * 192 + (29 - x) * 3, 3) == 0;
    CHECK(same && mirror);

    CHECK(ct_image_jpeg_scale_eighths(224, 168, 56, 42) == 2);
    CHECK(ct_image_jpeg_scale_eighths(224, 168, 28, 21) == 1);
    CHECK(ct_image_jpeg_scale_eighths(224, 168, 112, 84) == 4);
    CHECK(ct_image_jpeg_scale_eighths(224, 168, 113, 84) == 8);
    CHECK(ct_image_jpeg_scale_eighths(224, 168, 224, 168) == 8);
    CHECK(ct_image_jpeg_scale_eighths(500, 375, 224, 160) == 4);
    CHECK(ct_image_jpeg_scale_eighths(500, 375, 224, 224) == 8);
    CHECK(ct_image_jpeg_scale_eighths(224, 168, 300, 300) == 8);
}

int main(void)
{
    uint8_t *fm = enc_fmnist(144);
    if (!fm)
        return 1;
    enc_tile(fm, 0, 8, 6, grey);
    static uint8_t plane[W * H];
    for (int ch = 0; ch < 3; ch++) {
        enc_tile(fm, 48 * ch, 8, 6, plane);
        for (int i = 0; i < W * H; i++)
            rgb[3 * i + ch] = plane[i];
    }
    enc_tile(fm, 96, 8, 6, alpha);
    free(fm);

    check_resize();

    /* CMYK as Photoshop stores it (inverted, Adobe marker): K' = max(R, G, B), C' = R * 255 / K' */
    static uint8_t cmyk[W * H * 4], rgba[W * H * 4], rgb16[W * H * 6], pal_idx[W * H], pal_rgb[W * H * 3];
    for (int i = 0; i < W * H; i++) {
        int r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
        int k = r > g ? (r > b ? r : b) : (g > b ? g : b);
        cmyk[4 * i] = (uint8_t)(k ? (r * 255 + k / 2) / k : 0);
        cmyk[4 * i + 1] = (uint8_t)(k ? (g * 255 + k / 2) / k : 0);
        cmyk[4 * i + 2] = (uint8_t)(k ? (b * 255 + k / 2) / k : 0);
        cmyk[4 * i + 3] = (uint8_t)k;
        memcpy(rgba + 4 * i, rgb + 3 * i, 3);
        rgba[4 * i + 3] = alpha[i];
        for (int c = 0; c < 3; c++)
            rgb16[6 * i + 2 * c] = rgb16[6 * i + 2 * c + 1] = rgb[3 * i + c];   /* v * 257, big-endian */
    }
    /* a palette image: 64 levels of grey mapped to colours */
    png_color palette[64];
    uint8_t trns[64];
    for (int v = 0; v < 64; v++) {
        palette[v].red = (png_byte)(v * 4);
        palette[v].green = (png_byte)(255 - v * 4);
        palette[v].blue = (png_byte)(v * 2 + 60);
        trns[v] = (uint8_t)(v * 3);
    }
    for (int i = 0; i < W * H; i++) {
        pal_idx[i] = grey[i] / 4;
        pal_rgb[3 * i] = palette[pal_idx[i]].red;
        pal_rgb[3 * i + 1] = palette[pal_idx[i]].green;
        pal_rgb[3 * i + 2] = palette[pal_idx[i]].blue;
    }

    sample s[] = {
        {"jpeg baseline 4:4:4", enc_jpeg(rgb, W, H, 3, JCS_RGB, JCS_YCbCr, 0, 95), CT_IMAGE_JPEG, 3, 0, rgb, 3, 3.0},
        /* R, G and B are unrelated images: halving the chroma costs much more than on a photo */
        {"jpeg baseline 4:2:0", enc_jpeg(rgb, W, H, 3, JCS_RGB, JCS_YCbCr, 2, 95), CT_IMAGE_JPEG, 3, 0, rgb, 3, 20.0},
        {"jpeg progressive", enc_jpeg(rgb, W, H, 3, JCS_RGB, JCS_YCbCr, 1, 95), CT_IMAGE_JPEG, 3, 1, rgb, 3, 3.0},
        {"jpeg grey", enc_jpeg(grey, W, H, 1, JCS_GRAYSCALE, JCS_GRAYSCALE, 0, 95), CT_IMAGE_JPEG, 1, 0, grey, 1, 3.0},
        {"jpeg cmyk", enc_jpeg(cmyk, W, H, 4, JCS_CMYK, JCS_CMYK, 0, 95), CT_IMAGE_JPEG, 4, 0, rgb, 3, 3.0},
        {"jpeg ycck", enc_jpeg(cmyk, W, H, 4, JCS_CMYK, JCS_YCCK, 1, 95), CT_IMAGE_JPEG, 4, 1, rgb, 3, 3.0},
        {"png grey", enc_png(grey, W, H, PNG_COLOR_TYPE_GRAY, 8, 0, NULL, 0, NULL), CT_IMAGE_PNG, 1, 0, grey, 1, 0},
        {"png rgb", enc_png(rgb, W, H, PNG_COLOR_TYPE_RGB, 8, 0, NULL, 0, NULL), CT_IMAGE_PNG, 3, 0, rgb, 3, 0},
        {"png rgba", enc_png(rgba, W, H, PNG_COLOR_TYPE_RGB_ALPHA, 8, 0, NULL, 0, NULL), CT_IMAGE_PNG, 4, 0, rgb, 3, 0},
        {"png palette+tRNS", enc_png(pal_idx, W, H, PNG_COLOR_TYPE_PALETTE, 8, 0, palette, 64, trns), CT_IMAGE_PNG, 4, 0,
         pal_rgb, 3, 0},
        {"png 16-bit", enc_png(rgb16, W, H, PNG_COLOR_TYPE_RGB, 16, 0, NULL, 0, NULL), CT_IMAGE_PNG, 3, 0, rgb, 3, 0},
        {"png interlaced", enc_png(rgb, W, H, PNG_COLOR_TYPE_RGB, 8, 1, NULL, 0, NULL), CT_IMAGE_PNG, 3, 0, rgb, 3, 0},
        {"png grey interlaced", enc_png(grey, W, H, PNG_COLOR_TYPE_GRAY, 8, 1, NULL, 0, NULL), CT_IMAGE_PNG, 1, 0, grey,
         1, 0},
        {"jpeg 4:2:0 restart each row", enc_jpeg(rgb, W, H, 3, JCS_RGB, JCS_YCbCr, 4, 95), CT_IMAGE_JPEG, 3, 0, rgb, 3,
         20.0},
        {"jpeg 4:4:4 restart every 5 MCUs", enc_jpeg(rgb, W, H, 3, JCS_RGB, JCS_YCbCr, 5, 95), CT_IMAGE_JPEG, 3, 0, rgb,
         3, 3.0},
    };
    size_t ns = sizeof s / sizeof s[0];
    ct_image_decoder *whole = new_decoder(0, 0, 0), *fast = new_decoder(1, 1, 0);
    for (size_t i = 0; i < ns; i++) {
        check_sample(&s[i], whole, fast);
        check_huffman_parity(&s[i]);
    }
    check_failures(&s[0].file, &s[2].file, &s[7].file, &s[11].file);
    ct_image_decoder_free(whole);
    ct_image_decoder_free(fast);
    for (size_t i = 0; i < ns; i++)
        free(s[i].file.p);
    return ct_test_done();
}
