/* The host's fp16 and bf16 conversions (base/half.h): every half value survives the round trip,
 * rounding is to nearest with ties to even at normal, subnormal and overflow boundaries, and
 * special values keep their meaning. Values are checked against the exact arithmetic of doubles. */
#include <math.h>
#include <stdio.h>

#include "base/half.h"
#include "tests/test_util.h"

/* The fp16 value of bits h, in double (exact), or NAN / INFINITY. */
static double f16_value(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v = exp == 0 ? ldexp(mant, -24) : exp == 31 ? (mant ? NAN : INFINITY) : ldexp(1024 + mant, exp - 25);
    return sign ? -v : v;
}

int main(void)
{
    /* every fp16 bit pattern: to fp32 exactly, and back to the same bits (NaNs stay NaN) */
    long wrong_value = 0, wrong_back = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = ct_f32_from_f16((uint16_t)h);
        double want = f16_value((uint16_t)h);
        if (isnan(want) ? !isnan(f) : (double)f != want || !signbit(f) != !signbit(want))
            wrong_value++;
        uint16_t back = ct_f16_from_f32(f);
        if (isnan(want) ? ((back & 0x7c00) != 0x7c00 || (back & 0x3ff) == 0) : back != h)
            wrong_back++;
    }
    CHECK_MSG(wrong_value == 0, "%ld fp16 patterns convert to the wrong fp32", wrong_value);
    CHECK_MSG(wrong_back == 0, "%ld fp16 patterns do not survive fp32 and back", wrong_back);

    /* Between each pair of neighbouring positive finite fp16 values a and b: a point just above a
     * goes to a, the midpoint to whichever is even, just below b to b. Covers the subnormals, the
     * normal/subnormal boundary and every exponent. */
    long wrong_round = 0;
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double a = f16_value((uint16_t)h), b = f16_value((uint16_t)(h + 1)), mid = (a + b) / 2;
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        wrong_round += ct_f16_from_f32(nextafterf((float)mid, 0.0f)) != h;
        wrong_round += ct_f16_from_f32((float)mid) != even;
        wrong_round += ct_f16_from_f32(nextafterf((float)mid, INFINITY)) != h + 1;
        wrong_round += ct_f16_from_f32(-(float)mid) != (0x8000 | even);
    }
    CHECK_MSG(wrong_round == 0, "%ld fp16 roundings off", wrong_round);
    /* overflow: 65504 is the largest; 65519.99 rounds down to it, 65520 (the tie) to inf */
    CHECK(ct_f16_from_f32(65504.0f) == 0x7bff && ct_f16_from_f32(65519.996f) == 0x7bff);
    CHECK(ct_f16_from_f32(65520.0f) == 0x7c00 && ct_f16_from_f32(-1e30f) == 0xfc00);
    CHECK(ct_f16_from_f32(INFINITY) == 0x7c00 && ct_f16_from_f32(-INFINITY) == 0xfc00);
    /* underflow: half of the smallest subnormal (2^-25) is a tie, to the even zero; above it, 2^-24 */
    CHECK(ct_f16_from_f32(0x1p-25f) == 0x0000 && ct_f16_from_f32(nextafterf(0x1p-25f, 1.0f)) == 0x0001);
    CHECK(ct_f16_from_f32(-0x1p-30f) == 0x8000 && ct_f16_from_f32(-0.0f) == 0x8000);
    CHECK(isnan(ct_f32_from_f16(ct_f16_from_f32(NAN))));

    /* bf16: the top half of fp32, rounded to nearest even */
    long wrong_bf = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = ct_f32_from_bf16((uint16_t)h);
        if (isnan(f) ? !isnan(ct_f32_from_bf16(ct_bf16_from_f32(f))) : ct_bf16_from_f32(f) != h)
            wrong_bf++;
    }
    CHECK_MSG(wrong_bf == 0, "%ld bf16 patterns do not survive fp32 and back", wrong_bf);
    CHECK(ct_bf16_from_f32(ct_f32_from_bits(0x3f808000u)) == 0x3f80);   /* tie, even below */
    CHECK(ct_bf16_from_f32(ct_f32_from_bits(0x3f818000u)) == 0x3f82);   /* tie, even above */
    CHECK(ct_bf16_from_f32(ct_f32_from_bits(0x3f808001u)) == 0x3f81);
    CHECK(ct_bf16_from_f32(ct_f32_from_bits(0x7f7fffffu)) == 0x7f80);   /* FLT_MAX rounds to inf */
    CHECK(isnan(ct_f32_from_bf16(ct_bf16_from_f32(NAN))));
    CHECK(ct_round_f16(0.1f) == 0.0999755859375f && ct_round_bf16(0.1f) == 0.10009765625f);
    return ct_test_done();
}
