/* The input pipeline's private state, shared by its files: pipeline.c (the ring of slots, the
 * worker threads, start/next/release/stop), pipeline_auto.c (workers = auto and prefetch = auto:
 * sizing from measured rates, and the figures it reports) and pipeline_bench.c (the input-only
 * bench). Nothing outside data/pipeline*.c includes it. */
#ifndef CT_PIPELINE_INTERNAL_H
#define CT_PIPELINE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "data/pipeline.h"

typedef struct slot slot;               /* pipeline.c: one buffer of the ring */
typedef struct worker_arg worker_arg;   /* pipeline.c: a worker thread's argument */

struct ct_pipeline {
    ct_pipeline_config cfg;
    ct_augment aug;
    long count;
    int batch, cap;            /* cap = min(batch, count): samples a slot holds */
    long batches;              /* per epoch, drop_last applied */
    long steps_seed;           /* ceil(count / batch) */
    size_t sample_elems;       /* h * w * c */
    size_t y_offset, slot_bytes;
    long *order;               /* the epoch's sample order */

    /* sizing */
    int max_slots;             /* slots[] length */
    int depth;                 /* slots in use: [0, depth) */
    int want_workers;          /* threads that should run */
    int max_workers;           /* auto's upper bound */
    int workers_auto, prefetch_auto, decided;

    slot *slots;
    pthread_t *threads;
    worker_arg *args;
    int threads_cap, spawned;

    pthread_mutex_t mu;
    pthread_cond_t work_cv, ready_cv;
    int started;               /* an epoch has been started since create */
    int running;               /* workers may claim batches */
    int quit;                  /* workers must exit */
    int epoch;
    long next_claim, next_out, end;
    int held, filling;
    int failed;
    ct_err fail;

    /* producer figures (under mu) */
    double fill_seconds;
    long fill_images;

    /* consumer figures (consumer thread only) */
    double last_return;        /* when next() last handed out a batch; 0: none to time */
    int last_n;
    double busy_seconds;
    long busy_images;
    long delivered, delivered_images;
    double wait_total;

    /* sync mode */
    void *sync_mem;
    int sync_held;
};

static inline double ct_pipeline_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* pipeline.c: starts workers until want_workers run; called with mu held. Returns 0 or an errno. */
int ct_pipeline_spawn_workers(ct_pipeline *p);

/* pipeline_auto.c: workers = auto and prefetch = auto (the policy is in pipeline.h). */
/* Sizes a parallel pipeline at create from p->cfg: pool, thread capacity, ring length and depth. */
void ct_pipeline_auto_size(ct_pipeline *p);
/* The consumer's own time since next() last returned, counted inside the calibration window;
 * consumer thread, before it takes the lock. */
void ct_pipeline_auto_observe(ct_pipeline *p, double now);
/* Decides once the calibration window is over; called with mu held. */
void ct_pipeline_auto_check(ct_pipeline *p);
/* Decides now from what was measured (nothing when already decided); called with mu held. */
void ct_pipeline_auto_decide(ct_pipeline *p);

#endif
