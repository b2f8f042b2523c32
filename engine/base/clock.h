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

#endif
