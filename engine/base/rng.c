#include <math.h>

#include "base/rng.h"

/* Box-Muller on two uniforms. ct_rng_uniform lies in [0, 1), so 1 - u lies in (0, 1] and the
 * logarithm never sees 0. The second value of the pair is dropped: the generator has no room to
 * cache it, and setup-time callers do not need the speed. */
float ct_rng_normal(ct_rng *r)
{
    float u1 = 1.0f - ct_rng_uniform(r);
    float u2 = ct_rng_uniform(r);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}
