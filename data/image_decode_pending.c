/* A stand-in for the image decoder (data/image_decode.h) until its implementation is merged: it
 * recognises JPEG and PNG by their first bytes and refuses to decode. Delete this file when
 * data/image_decode.c (the real decoder) arrives: both define the same functions. */
#include <stdlib.h>
#include <string.h>

#include "data/image_decode.h"

struct ct_image_decoder {
    int unused;
};

ct_image_kind ct_image_sniff(const uint8_t *b, size_t n)
{
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 8 && memcmp(b, png, 8) == 0)
        return CT_IMAGE_PNG;
    if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return CT_IMAGE_JPEG;
    return CT_IMAGE_UNKNOWN;
}

const char *ct_image_kind_name(ct_image_kind kind)
{
    return kind == CT_IMAGE_JPEG ? "jpeg" : kind == CT_IMAGE_PNG ? "png" : "not an image";
}

ct_status ct_image_decoder_new(ct_image_decoder **out, const ct_image_decode_options *opt, ct_err *err)
{
    (void)opt;
    *out = calloc(1, sizeof **out);
    return *out ? CT_OK : ct_fail(err, CT_ERR_NOMEM, "out of memory for an image decoder");
}

void ct_image_decoder_free(ct_image_decoder *d) { free(d); }

ct_status ct_image_read_info(ct_image_decoder *d, const uint8_t *bytes, size_t n, ct_image_info *info, ct_err *err)
{
    (void)d;
    (void)bytes;
    (void)n;
    memset(info, 0, sizeof *info);
    return ct_fail(err, CT_ERR_DATA, "this build has no image decoder yet");
}

ct_status ct_image_decode_region(ct_image_decoder *d, const uint8_t *bytes, size_t n, const ct_image_region *r,
                                 int out_w, int out_h, int channels, uint8_t *out, ct_err *err)
{
    (void)d;
    (void)bytes;
    (void)n;
    (void)r;
    (void)out_w;
    (void)out_h;
    (void)channels;
    (void)out;
    return ct_fail(err, CT_ERR_DATA, "this build has no image decoder yet");
}
