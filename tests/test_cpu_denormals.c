/* The CPU backend's steps flush subnormal floats to zero on the calling thread and on every thread
 * of its OpenMP team (engine/cpu/denormals.c), and give each thread its own floating-point mode
 * back afterwards: a product below 2^-126 is 0 inside a step and subnormal outside it. */
#include <omp.h>

#include "cpu/cpu_backend.h"
#include "tests/test_util.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>

/* MXCSR's flags; its low 6 bits are sticky exception states, which any operation may raise */
enum { THREADS = 3, FTZ_DAZ = 0x8040, CONTROL = ~0x3f };

/* 1e-30 * 1e-10 = 1e-40, subnormal in fp32; volatile so that the compiler does not fold it */
static float tiny_product(void)
{
    volatile float a = 1e-30f, b = 1e-10f;
    return a * b;
}

typedef struct seen {
    int flagged[THREADS], flushed[THREADS], threads;
} seen;

static ct_status inside_step(void *ctx, ct_err *err)
{
    (void)err;
    seen *s = ctx;
#pragma omp parallel num_threads(THREADS)
    {
        int t = omp_get_thread_num();
        s->flagged[t] = (_mm_getcsr() & FTZ_DAZ) == FTZ_DAZ;
        s->flushed[t] = tiny_product() == 0.0f;
#pragma omp single
        s->threads = omp_get_num_threads();
    }
    return CT_OK;
}

static int team_modes_clear(void)
{
    int clear = 1;
#pragma omp parallel num_threads(THREADS) reduction(&& : clear)
    clear = (_mm_getcsr() & FTZ_DAZ) == 0 && tiny_product() > 0.0f;
    return clear;
}

int main(void)
{
    omp_set_num_threads(THREADS);
    unsigned before = _mm_getcsr();
    CHECK(tiny_product() > 0.0f);   /* the default mode keeps subnormals */
    CHECK(team_modes_clear());
    seen s = {0};
    ct_err err = {0};
    CHECK(ct_cpu_run_flushed(inside_step, &s, &err) == CT_OK);
    CHECK_MSG(s.threads == THREADS, "a team of %d threads", s.threads);
    for (int t = 0; t < s.threads; t++)
        CHECK_MSG(s.flagged[t] && s.flushed[t], "thread %d: flags %s, product %s in the step", t,
                  s.flagged[t] ? "set" : "not set", s.flushed[t] ? "flushed" : "subnormal");
    CHECK_MSG((_mm_getcsr() & CONTROL) == (before & CONTROL), "the caller's MXCSR controls are %#x after the step, "
              "%#x before", _mm_getcsr() & CONTROL, before & CONTROL);
    CHECK_MSG(team_modes_clear(), "a thread of the team kept the flags after the step");
    CHECK(tiny_product() > 0.0f);
    return ct_test_done();
}
#else
int main(void)
{
    return 77;   /* skipped: the flags are x86's */
}
#endif
