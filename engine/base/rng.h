/* Counter-based random numbers: every draw is a pure function of (seed, stream, counter), so
 * results do not depend on thread count or order, and the GPU can draw the same numbers. */
#ifndef CT_RNG_H
#define CT_RNG_H

#include <stdint.h>

/* The pure functions below also compile as CUDA device code, so a kernel draws exactly the
 * numbers the CPU backend draws (dropout masks). */
#ifdef __CUDACC__
#define CT_HD __host__ __device__
#else
#define CT_HD
#endif

static inline CT_HD uint64_t ct_mix64(uint64_t z)
{
    /* splitmix64 finaliser */
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline CT_HD uint64_t ct_hash3(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return ct_mix64(ct_mix64(seed ^ ct_mix64(stream)) + counter);
}

/* Uniform in [0, 1) with 24 bits. */
static inline CT_HD float ct_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return (float)(ct_hash3(seed, stream, counter) >> 40) * (1.0f / 16777216.0f);
}

/* A sequential generator for setup-time work (init, synthetic data). */
typedef struct ct_rng { uint64_t state; } ct_rng;

static inline uint64_t ct_rng_next(ct_rng *r) { r->state += 0x9e3779b97f4a7c15ULL; return ct_mix64(r->state); }
static inline float ct_rng_uniform(ct_rng *r) { return (float)(ct_rng_next(r) >> 40) * (1.0f / 16777216.0f); }
#ifdef __cplusplus
extern "C" {
#endif
float ct_rng_normal(ct_rng *r);
#ifdef __cplusplus
}
#endif

#endif
