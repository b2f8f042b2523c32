/* Subnormal floats flushed to zero during a training step, on every thread that computes it.
 *
 * Why: after the first epoch some of a network's values (Adam's moments of gradients that have
 * gone quiet, products of two small numbers) fall below 2^-126, and x86 cores take a slow
 * microcode path for every operation on them. Measured on fmnist_convnet (2 threads): epochs 2
 * and 3 took 32.1 and 31.9 s against 29.7 s for the first; with both flags set, 28.8-29.3 s each,
 * the losses the same to the printed digits. TensorFlow sets the same flags on its CPU threads.
 *
 * The flags (MXCSR's flush-to-zero and denormals-are-zero) belong to a thread: set on the caller
 * and on each thread of its OpenMP team for the step, and each thread's own value put back after,
 * so that the program's threads keep their floating-point mode outside our steps. Elsewhere than
 * x86 with SSE the step runs as it is. */
#include <stdint.h>

#include "cpu/cpu_backend.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <omp.h>
#include <xmmintrin.h>

enum { FTZ = 0x8000, DAZ = 0x0040, MAX_THREADS = 256 };

typedef struct thread_modes {
    unsigned caller;
    unsigned team[MAX_THREADS];
    int team_size;
} thread_modes;

ct_status ct_cpu_run_flushed(ct_step_fn fn, void *ctx, ct_err *err)
{
    thread_modes saved;
    saved.caller = _mm_getcsr();
    _mm_setcsr(saved.caller | FTZ | DAZ);
    saved.team_size = 0;
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        if (t < MAX_THREADS) {
            saved.team[t] = _mm_getcsr();
            _mm_setcsr(saved.team[t] | FTZ | DAZ);
        }
#pragma omp single
        saved.team_size = omp_get_num_threads();
    }
    ct_status st = fn(ctx, err);
    /* the same team size, so the same threads (libgomp keeps its pool) take their own values back */
#pragma omp parallel num_threads(saved.team_size)
    {
        int t = omp_get_thread_num();
        if (t < MAX_THREADS)
            _mm_setcsr(saved.team[t]);
    }
    _mm_setcsr(saved.caller);
    return st;
}
#else
ct_status ct_cpu_run_flushed(ct_step_fn fn, void *ctx, ct_err *err)
{
    return fn(ctx, err);
}
#endif
