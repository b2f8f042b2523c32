/* libFuzzer target for the image decoder (data/image_decode.h): arbitrary bytes as a JPEG or PNG
 * file. The header is read, then a region derived from it is decoded twice to a small size: with
 * the region and DCT-scaling shortcuts (JPEG) and without them (both through cutrain's Huffman
 * decoder, data/jpeg_huffman.c, where the scan suits it), by two decoders kept across runs
 * as a worker keeps its own, so that a failure leaving a decoder in a bad state shows up on the
 * next input. The libraries themselves are not instrumented; what is fuzzed is our use of them
 * (error returns, region arithmetic, buffers, the resampler) and our own Huffman decoder. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/status.h"
#include "data/image_decode.h"

/* Enough for every seed; bounds what a forged header makes the decoders allocate. */
#define FUZZ_MAX_PIXELS (1L << 22)

static ct_image_decoder *fast, *whole;

static void make_decoders(void)
{
    ct_err err;
    ct_image_decode_options on = {1, 1, FUZZ_MAX_PIXELS, 0}, off = {0, 0, FUZZ_MAX_PIXELS, 0};   /* cutrain's Huffman decoder */
    if (ct_image_decoder_new(&fast, &on, &err) != CT_OK || ct_image_decoder_new(&whole, &off, &err) != CT_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fast)
        make_decoders();
    ct_err err;
    ct_err_clear(&err);
    ct_image_info info;
    if (ct_image_read_info(fast, data, size, &info, &err) != CT_OK) {
        if (err.status != CT_ERR_DATA || !err.msg[0])
            abort();   /* a bad file is bad data, with a reason */
        return 0;
    }
    if (info.width < 1 || info.height < 1 || info.channels < 1 || info.channels > 4 ||
        info.kind != ct_image_sniff(data, size))
        abort();

    /* the middle half of the image, mirrored when the width is odd, to at most 7x5 */
    ct_image_region r = {info.width / 4, info.height / 4, info.width / 2, info.height / 2, info.width & 1};
    if (r.w < 1)
        r.w = 1;
    if (r.h < 1)
        r.h = 1;
    int ow = r.w < 7 ? r.w : 7, oh = r.h < 5 ? r.h : 5, c = info.channels == 1 ? 1 : 3;
    uint8_t out[2][7 * 5 * 3];
    ct_status st[2];
    ct_image_decoder *d[2] = {fast, whole};
    for (int k = 0; k < 2; k++) {
        ct_err_clear(&err);
        st[k] = ct_image_decode_region(d[k], data, size, &r, ow, oh, c, out[k], &err);
        if (st[k] != CT_OK && (st[k] != CT_ERR_DATA || !err.msg[0]))
            abort();
        if (st[k] == CT_OK) {
            /* ASan and MSan-style touch of every output byte */
            volatile unsigned sum = 0;
            for (int i = 0; i < ow * oh * c; i++)
                sum += out[k][i];
            (void)sum;
        }
    }
    return 0;
}
