/* What kind of image a buffer holds, from its signature alone (never from a file name). */
#include "data/image_decode.h"

#include <string.h>

ct_image_kind ct_image_sniff(const uint8_t *bytes, size_t n)
{
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    /* SOI followed by the first marker's 0xFF: every JPEG variant (JFIF, Exif, Adobe, raw) */
    if (n >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff)
        return CT_IMAGE_JPEG;
    if (n >= sizeof png_sig && memcmp(bytes, png_sig, sizeof png_sig) == 0)
        return CT_IMAGE_PNG;
    return CT_IMAGE_UNKNOWN;
}

const char *ct_image_kind_name(ct_image_kind kind)
{
    switch (kind) {
    case CT_IMAGE_JPEG:
        return "jpeg";
    case CT_IMAGE_PNG:
        return "png";
    default:
        return "not an image";
    }
}
