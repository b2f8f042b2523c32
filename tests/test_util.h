/* Minimal assertions for the test programs: each failed check prints where and why and counts;
 * ct_test_done() prints "N passed, N failed" and returns the exit code. */
#ifndef CT_TEST_UTIL_H
#define CT_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ct_test_passed, ct_test_failed;

#define CHECK(cond) do { \
    if (cond) ct_test_passed++; \
    else { ct_test_failed++; fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECK_MSG(cond, ...) do { \
    if (cond) ct_test_passed++; \
    else { ct_test_failed++; fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
           fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
} while (0)

#define CHECK_NEAR(a, b, tol) do { \
    double ct_a_ = (a), ct_b_ = (b); \
    if (fabs(ct_a_ - ct_b_) <= (tol) && !isnan(ct_a_) && !isnan(ct_b_)) ct_test_passed++; \
    else { ct_test_failed++; fprintf(stderr, "%s:%d: %s = %.9g, %s = %.9g, tolerance %g\n", \
           __FILE__, __LINE__, #a, ct_a_, #b, ct_b_, (double)(tol)); } \
} while (0)

/* True when haystack contains needle (NULL-safe). */
static inline int ct_contains(const char *haystack, const char *needle)
{
    return haystack && needle && strstr(haystack, needle) != NULL;
}

static inline const char *ct_fmnist_dir(void)
{
    const char *d = getenv("CT_FMNIST_DIR");
    return d && *d ? d : "/usr/share/datasets/fashion-mnist";
}

/* A whole file into fresh memory (free it), its size into *len; NULL when it cannot be read. */
static inline unsigned char *ct_slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = *len >= 0 ? malloc((size_t)*len + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)*len, f) != (size_t)*len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* 1 where oneDNN's Winograd kernels run: a build with oneDNN on x86-64 with AVX-512 (F, BW, VL,
 * DQ: its avx512_core kernels); elsewhere 3x3 convolutions stay on the direct kernels. */
static inline int ct_test_winograd_runs(void)
{
#if defined(CUTRAIN_HAVE_ONEDNN) && defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

static inline int ct_test_done(void)
{
    printf("%d passed, %d failed\n", ct_test_passed, ct_test_failed);
    return ct_test_failed ? 1 : 0;
}

#endif
