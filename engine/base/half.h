/* fp16 (IEEE binary16) and bf16 (bfloat16) on the host: the one definition of the rounding the
 * half-precision path stores with. Every conversion to half rounds to nearest, ties to even, as
 * CUDA's __float2half_rn and __float2bfloat16_rn do, so the CPU backend's half path stores the
 * bits the GPU's stores. fp16 keeps subnormals, overflows to infinity from 65520 up and keeps NaN a
 * NaN; bf16 has fp32's range and overflows only where fp32 rounding would. */
#ifndef CT_HALF_H
#define CT_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ct_f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static inline float ct_f32_from_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* q, the truncated value, plus one where the dropped bits rem (of `bits` bits) round it up. */
static inline uint32_t ct_round_even_(uint32_t q, uint32_t rem, int bits)
{
    const uint32_t halfway = 1u << (bits - 1);
    return q + (rem > halfway || (rem == halfway && (q & 1u)));
}

static inline uint16_t ct_f16_from_f32(float f)
{
    const uint32_t x = ct_f32_bits(f), sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u)                      /* NaN: quiet, top payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u)                     /* 65520 and up (and inf) round to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (abs >= 0x38800000u) {                   /* normal in fp16: from 2^-14 */
        const uint32_t q = ((abs >> 23) - 112u) << 10 | ((abs >> 13) & 0x3ffu);
        return (uint16_t)(sign | ct_round_even_(q, abs & 0x1fffu, 13));
    }
    if (abs < 0x33000000u)                      /* below 2^-25: rounds to a signed zero */
        return (uint16_t)sign;
    /* subnormal in fp16: units of 2^-24; the mantissa with its hidden bit, shifted into them */
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - (int)(abs >> 23);   /* 14 .. 24 */
    return (uint16_t)(sign | ct_round_even_(mant >> shift, mant & ((1u << shift) - 1u), shift));
}

static inline float ct_f32_from_f16(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {                             /* zero or subnormal: mant * 2^-24, exact in fp32 */
        const float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31)                              /* inf, NaN */
        return ct_f32_from_bits(sign | 0x7f800000u | mant << 13);
    return ct_f32_from_bits(sign | (exp + 112u) << 23 | mant << 13);
}

static inline uint16_t ct_bf16_from_f32(float f)
{
    const uint32_t x = ct_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)        /* NaN: quiet */
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)(ct_round_even_(x >> 16, x & 0xffffu, 16));
}

static inline float ct_f32_from_bf16(uint16_t h) { return ct_f32_from_bits((uint32_t)h << 16); }

/* f rounded through the half type and back: what storing it in fp16 (bf16) keeps. */
static inline float ct_round_f16(float f) { return ct_f32_from_f16(ct_f16_from_f32(f)); }
static inline float ct_round_bf16(float f) { return ct_f32_from_bf16(ct_bf16_from_f32(f)); }

#endif
