/* workers = auto and prefetch = auto (the policy is in pipeline.h): how many workers the input
 * pipeline runs and how deep its ring is, from the rates it measures.
 *
 * A policy on figures only: it knows nothing of threads, locks or slots. The pipeline (pipeline.c)
 * owns one ct_pipeline_sizing, feeds it what it measures (the workers' fill times into fill_*, the
 * consumer's own time through observe), asks it to decide, and applies the decision: it starts the
 * workers that want_workers asks for, and uses the first `depth` slots of its ring. */
#ifndef CT_PIPELINE_SIZING_H
#define CT_PIPELINE_SIZING_H

#include "data/pipeline.h"

typedef struct ct_pipeline_sizing {
    /* what to allocate at create: the most threads and slots the sizing may ask for */
    int threads_cap, max_slots;
    /* the sizes in force */
    int want_workers;          /* threads that should run */
    int depth;                 /* slots in use: [0, depth) */
    int max_workers;           /* auto's upper bound */
    int prefetch;              /* the prefetch asked for, 0 = auto */
    int workers_auto, prefetch_auto, decided;
    /* the producer: one worker's fill times, fills that allocated a slot excluded (the caller's
     * own making in sync mode) */
    double fill_seconds;
    long fill_images;
    /* the consumer: its own time between batches, inside the calibration window */
    double busy_seconds;
    long busy_images;
} ct_pipeline_sizing;

/* The sizes at create, from [data] workers and prefetch (0 = auto). */
void ct_pipeline_sizing_init(ct_pipeline_sizing *s, int workers, int prefetch);
/* The sizes of sync mode: no workers, one buffer, nothing to decide. */
void ct_pipeline_sizing_sync(ct_pipeline_sizing *s);
/* The consumer took `seconds` of its own for a batch of n images, `delivered` batches into the
 * pipeline's life: counted when inside the calibration window. */
void ct_pipeline_sizing_observe(ct_pipeline_sizing *s, long delivered, double seconds, int n);
/* Whether the calibration window is over with nothing decided yet. */
int ct_pipeline_sizing_due(const ct_pipeline_sizing *s, long delivered);
/* Decides from what was measured: sets want_workers and depth. Returns 0 when already decided
 * (nothing changes), 1 when the pipeline must apply the new sizes. */
int ct_pipeline_sizing_decide(ct_pipeline_sizing *s);
/* The figures of ct_pipeline_stats that are the sizing's: the auto flags, decided, and the
 * measured rates (producer = one worker's rate times `workers`, all of them running). */
void ct_pipeline_sizing_stats(const ct_pipeline_sizing *s, int workers, ct_pipeline_stats *out);

#endif
