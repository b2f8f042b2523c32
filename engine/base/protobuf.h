/* A small protocol buffer writer: the wire format's varints, keys and length-delimited fields,
 * shared by every file cutrain encodes by hand (TensorBoard's events, ONNX models), so that no
 * protobuf library is needed for a handful of messages.
 *
 * Two modes over one struct:
 *   - a caller's buffer (ct_pb_fixed): bytes past `cap` are counted, not written, so one encoder
 *     both sizes (cap 0) and fills a buffer;
 *   - a growing buffer (ct_pb_growing): malloc'd and enlarged as needed; a failed allocation sets
 *     `nomem` and later writes do nothing. Only this mode nests messages without sizing them first
 *     (ct_pb_begin / ct_pb_end), since the length is inserted in front of the message once known.
 * Wire types: 0 varint, 1 fixed 64 bits, 2 length-delimited, 5 fixed 32 bits. */
#ifndef CT_PROTOBUF_H
#define CT_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct ct_pb {
    unsigned char *buf;
    size_t cap, len;     /* len counts every byte written or, past cap in a fixed buffer, sized */
    int growing;         /* 1: buf is ours and grows */
    int nomem;           /* a growing buffer failed to grow: its contents are incomplete */
} ct_pb;

enum { CT_PB_VARINT = 0, CT_PB_FIXED64 = 1, CT_PB_LEN = 2, CT_PB_FIXED32 = 5 };

static inline ct_pb ct_pb_fixed(unsigned char *buf, size_t cap)
{
    return (ct_pb){.buf = buf, .cap = cap};
}
static inline ct_pb ct_pb_growing(void)
{
    return (ct_pb){.growing = 1};
}
/* Frees a growing buffer's bytes. */
void ct_pb_free(ct_pb *o);

size_t ct_pb_varint_size(uint64_t v);
void ct_pb_raw(ct_pb *o, const void *p, size_t n);
void ct_pb_varint(ct_pb *o, uint64_t v);
void ct_pb_key(ct_pb *o, unsigned field, unsigned wire);
/* Little-endian fixed-width values, without a key. */
void ct_pb_le32(ct_pb *o, uint32_t v);
void ct_pb_le64(ct_pb *o, uint64_t v);

/* Whole fields: key then value. int64 and int32 fields take negative values as protobuf does
 * (two's complement over 10 bytes). */
void ct_pb_int(ct_pb *o, unsigned field, int64_t v);
void ct_pb_float(ct_pb *o, unsigned field, float v);
void ct_pb_double(ct_pb *o, unsigned field, double v);
void ct_pb_bytes(ct_pb *o, unsigned field, const void *p, size_t n);
void ct_pb_string(ct_pb *o, unsigned field, const char *s);
/* The size a length-delimited field of n bytes takes, key included. */
size_t ct_pb_len_field_size(unsigned field, size_t n);

/* A nested message in a growing buffer: ct_pb_begin writes the key and returns a mark; the
 * message's fields follow; ct_pb_end puts its length in front of them. */
size_t ct_pb_begin(ct_pb *o, unsigned field);
void ct_pb_end(ct_pb *o, size_t mark);

#endif
