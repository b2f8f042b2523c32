/* The protocol buffer wire format (base/protobuf.h). */
#include "base/protobuf.h"

#include <stdlib.h>
#include <string.h>

void ct_pb_free(ct_pb *o)
{
    if (o->growing)
        free(o->buf);
    o->buf = NULL;
    o->cap = o->len = 0;
}

/* Room for n more bytes in a growing buffer; 0 (and nomem) when it cannot be had. */
static int reserve(ct_pb *o, size_t n)
{
    if (o->nomem)
        return 0;
    if (o->len + n <= o->cap)
        return 1;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + n)
        cap *= 2;
    unsigned char *p = realloc(o->buf, cap);
    if (!p) {
        o->nomem = 1;
        return 0;
    }
    o->buf = p;
    o->cap = cap;
    return 1;
}

void ct_pb_raw(ct_pb *o, const void *p, size_t n)
{
    if (o->growing && !reserve(o, n))
        return;
    if (o->len + n <= o->cap && n)
        memcpy(o->buf + o->len, p, n);
    o->len += n;
}

size_t ct_pb_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >>= 7)
        n++;
    return n;
}

void ct_pb_varint(ct_pb *o, uint64_t v)
{
    unsigned char b[10];
    size_t n = 0;
    do {
        b[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    ct_pb_raw(o, b, n);
}

void ct_pb_key(ct_pb *o, unsigned field, unsigned wire)
{
    ct_pb_varint(o, (uint64_t)field << 3 | wire);
}

void ct_pb_le32(ct_pb *o, uint32_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    ct_pb_raw(o, b, 4);
}

void ct_pb_le64(ct_pb *o, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    ct_pb_raw(o, b, 8);
}

void ct_pb_int(ct_pb *o, unsigned field, int64_t v)
{
    ct_pb_key(o, field, CT_PB_VARINT);
    ct_pb_varint(o, (uint64_t)v);
}

void ct_pb_float(ct_pb *o, unsigned field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    ct_pb_key(o, field, CT_PB_FIXED32);
    ct_pb_le32(o, bits);
}

void ct_pb_double(ct_pb *o, unsigned field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    ct_pb_key(o, field, CT_PB_FIXED64);
    ct_pb_le64(o, bits);
}

void ct_pb_bytes(ct_pb *o, unsigned field, const void *p, size_t n)
{
    ct_pb_key(o, field, CT_PB_LEN);
    ct_pb_varint(o, n);
    ct_pb_raw(o, p, n);
}

void ct_pb_string(ct_pb *o, unsigned field, const char *s)
{
    ct_pb_bytes(o, field, s, strlen(s));
}

size_t ct_pb_len_field_size(unsigned field, size_t n)
{
    return ct_pb_varint_size((uint64_t)field << 3 | CT_PB_LEN) + ct_pb_varint_size(n) + n;
}

size_t ct_pb_begin(ct_pb *o, unsigned field)
{
    ct_pb_key(o, field, CT_PB_LEN);
    return o->len;
}

void ct_pb_end(ct_pb *o, size_t mark)
{
    if (!o->growing || o->nomem)
        return;   /* a fixed buffer cannot move what it wrote: its callers size messages first */
    size_t n = o->len - mark;
    size_t k = ct_pb_varint_size(n);
    if (!reserve(o, k))
        return;
    memmove(o->buf + mark + k, o->buf + mark, n);
    size_t end = o->len;
    o->len = mark;
    ct_pb_varint(o, n);   /* writes k bytes in place */
    o->len = end + k;
}
