/* The monotonic clock in seconds: every host-side duration (step times, waits, deadlines). */
#ifndef CT_CLOCK_H
#define CT_CLOCK_H

#include <time.h>

static inline double ct_clock_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The monotonic time `seconds` from now, for waits on a condition variable whose clock is
 * CLOCK_MONOTONIC (pthread_condattr_setclock). */
static inline void ct_clock_deadline(double seconds, struct timespec *ts)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    double whole = (double)(long)seconds;
    ts->tv_sec += (time_t)whole;
    ts->tv_nsec += (long)((seconds - whole) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

#endif
