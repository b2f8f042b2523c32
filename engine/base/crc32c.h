/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord files, and the
 * masked form TFRecord stores, so that a CRC of data that itself holds CRCs stays well mixed. */
#ifndef CT_CRC32C_H
#define CT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes: "123456789" gives 0xE3069283. */
uint32_t ct_crc32c(const void *data, size_t n);
/* TFRecord's mask: rotated right by 15, plus 0xa282ead8. */
uint32_t ct_crc32c_mask(uint32_t crc);

#endif
