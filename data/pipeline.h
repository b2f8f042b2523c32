/* The input pipeline's host side (docs/architecture.md, "Input pipeline"): worker threads that
 * assemble whole batches, in order, into a ring of host buffers; the naive mode that does the
 * same on the caller's thread, sample by sample; and the on-caller mode, whole batches on the
 * caller's thread in one pass each (the CPU backend's).
 *
 * Backend-agnostic: slot memory comes from hooks (the CUDA backend passes cudaHostAlloc for pinned
 * memory), so nothing here knows about devices. The library never prints or exits.
 *
 * Batches. Epoch e is a permutation of the samples, ct_shuffle_indices(seed, e) (or file order
 * when shuffle is 0); batch b holds the samples at positions [b * batch, b * batch + n) of it,
 * n = batch except for a last partial batch. Its augment seed is
 *     ct_hash3(seed, CT_PIPELINE_SALT_AUGMENT, e * steps + b),   steps = ceil(count / batch)
 * (the trainer's formula; steps ignores drop_last so batches do not change with it), and its
 * pixels are ct_make_batch's for those indices and that seed. The sequence is the same for any
 * number of workers and any prefetch depth, and in the sync and on-caller modes.
 *
 * Threads. The consumer calls every function from one thread (the trainer's). Workers only call
 * the hooks (host_alloc, and the test hook): both must be thread-safe.
 *
 * A typical loop:
 *     ct_pipeline_start_epoch(p, epoch, first, err);
 *     for (;;) {
 *         ct_batch_view v;
 *         if (ct_pipeline_next(p, &v, &wait, err) != CT_OK) break;   // a worker's error
 *         if (v.n == 0) break;                                         // the epoch is over
 *         ... use v.x (or v.x_u8) and v.y ...
 *         ct_pipeline_release(p, v.slot);
 *     }
 */
#ifndef CT_PIPELINE_H
#define CT_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "data/dataset.h"

#define CT_PIPELINE_SALT_AUGMENT 0x41554700ULL   /* "AUG": the trainer's SALT_AUGMENT */
#define CT_PIPELINE_MAX_WORKERS 256              /* [data] workers = 1..256 */
#define CT_PIPELINE_MAX_PREFETCH 64              /* [data] prefetch = 1..64 */

typedef struct ct_pipeline ct_pipeline;

typedef struct ct_pipeline_config {
    const ct_dataset *ds;     /* must outlive the pipeline; read only */
    const ct_augment *aug;    /* copied at create */
    int batch;                /* samples per batch, >= 1 */
    uint64_t seed;            /* the run's seed ([train] seed): shuffle and augment draws */
    int shuffle;              /* 1: a new permutation each epoch (training); 0: file order */
    int augment;              /* 1: crop/flip draws (training); 0: normalise only (evaluation) */
    int workers;              /* threads, 1..256; 0 = auto (see ct_pipeline_info) */
    int prefetch;             /* ring depth in batches, 1..64; 0 = auto */
    int drop_last;            /* 1: drop the last partial batch */
    int sync;                 /* 1: pipeline = sync: no threads, no prefetch, pageable memory; each
                                 batch made on demand on the caller's thread, sample by sample */
    int on_caller;            /* 1 (unless sync): no threads, one buffer; each batch made on demand
                                 on the caller's thread, whole, in one pass
                                 (ct_make_batch_serial): for a CPU whose every core runs the
                                 step, where a worker would only take a core from it. Needs a set
                                 held in memory and float32 batches. Left 0 by
                                 ct_pipeline_config_init */
    int raw_u8;               /* 1: ship uint8 images (x_u8), augmentation left to the device */
    int encoded;              /* 1 (with raw_u8; decode = gpu): the JPEGs a device decoder takes stay
                                 compressed (ct_batch_view.encoded), the rest are decoded into x_u8;
                                 the set's format must be able to (ct_dataset_can_encode). Left 0 by
                                 ct_pipeline_config_init: the caller sets it once a device decoder
                                 is known to be there */
    double cpu_share;         /* encoded: the share of each batch's places the workers decode
                                 whatever the file (data/encoded.h), 0..1; 0 by default */
    /* Slot memory (parallel mode; sync mode always uses plain aligned memory, as the naive user
     * would). NULL host_alloc: aligned_alloc/free. host_alloc may be called from worker threads
     * (a slot is allocated when first filled) and returns NULL on failure. */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *p);
    void *alloc_ctx;
    /* Test-only: called by a worker (1..workers) before it fills each batch; a status other than
     * CT_OK (with a message in err) makes that worker fail as a broken read would. May also sleep
     * to reorder workers. NULL in production. Sync mode calls it too, with worker 0, on the
     * caller's thread. */
    ct_status (*test_hook)(void *ctx, int worker, long batch, ct_err *err);
    void *test_ctx;
} ct_pipeline_config;

/* Fills pc from [data] (workers, prefetch, augment_on, pipeline, drop_last) and the rest.
 * training: shuffle and augment (the train set) or neither (evaluation). Hooks are left NULL. */
void ct_pipeline_config_init(ct_pipeline_config *pc, const ct_data_settings *dc, const ct_dataset *ds,
                             const ct_augment *aug, int batch, uint64_t seed, int training);

typedef struct ct_batch_view {
    int slot;                 /* give it back with ct_pipeline_release; -1 when n is 0 */
    long index;               /* batch number b within the epoch */
    int epoch;
    int n;                    /* samples; 0: the epoch is over */
    float *x;                 /* (n, h, w, c) float32, augmented and normalised; NULL when raw_u8 */
    uint8_t *x_u8;            /* (n, h, w, c) uint8 as stored; NULL unless raw_u8 */
    int32_t *y;               /* (n) labels */
    /* encoded: the samples the device decodes (their x_u8 is not written), until the slot is
     * released; NULL unless the pipeline's `encoded` */
    const ct_encoded_batch *encoded;
    int augment;              /* whether the device must augment (raw_u8 with augment on) */
    uint64_t augment_seed;    /* the batch's seed (see above); 0 when augment is off */
} ct_batch_view;

/* Checks the config and allocates the bookkeeping (slot buffers come later, on first use; the sync
 * and on-caller modes allocate their one buffer here). Refuses drop_last with fewer samples than
 * a batch. */
ct_status ct_pipeline_create(ct_pipeline **out, const ct_pipeline_config *cfg, ct_err *err);

/* Starts epoch `epoch` at batch first_batch (0, or where a resumed run left off; at most
 * ct_pipeline_batches). Starts the workers when they are not running. An epoch still in progress
 * is abandoned: its slots are taken back, so views from it must no longer be used. Clears a
 * worker failure (the failed threads are joined first). */
ct_status ct_pipeline_start_epoch(ct_pipeline *p, int epoch, long first_batch, ct_err *err);

/* Batches per epoch (with drop_last applied). */
long ct_pipeline_batches(const ct_pipeline *p);
/* ceil(count / batch): the step count the augment seeds use. */
long ct_pipeline_steps_for_seed(const ct_pipeline *p);

/* The next batch of the epoch, strictly in order first_batch, first_batch + 1, ... After the
 * last one it returns CT_OK with out->n == 0 (and keeps doing so). wait_seconds (may be NULL):
 * time blocked waiting for the batch; in the sync and on-caller modes, the time spent making it.
 * The caller may hold at most prefetch - 1 slots when it calls this (prefetch 1, sync or on-caller:
 * release before asking for the next); holding more is a usage error, not a hang.
 * A worker's failure is returned here: its status and "input worker W of N, batch B of epoch E:
 * why". Call ct_pipeline_stop or ct_pipeline_destroy afterwards (or start another epoch). */
ct_status ct_pipeline_next(ct_pipeline *p, ct_batch_view *out, double *wait_seconds, ct_err *err);

/* The caller is done with the slot's memory (after its host-to-device copy has completed).
 * An unknown or already released slot is ignored. */
void ct_pipeline_release(ct_pipeline *p, int slot);

/* Ends the epoch early (or after a failure): workers finish the batch in hand, exit and are
 * joined, also those blocked on a full ring. Buffers are kept for the next epoch. Safe to call at
 * any time, twice, or before any epoch. */
void ct_pipeline_stop(ct_pipeline *p);

/* Stops and frees everything. NULL is ignored. */
void ct_pipeline_destroy(ct_pipeline *p);

/* workers = auto (the policy, simple on purpose):
 *   1. The first epoch starts with one worker and a depth of 3.
 *   2. Over its batches 2..9 (after two warm-up batches) it measures the producer, one worker's
 *      images/s while filling (fills that allocated a slot excluded), and the consumer, the
 *      caller's images/s from the time between a next() returning and the following call (its
 *      own work, waits excluded).
 *   3. At batch 10 (or at the end of a shorter first epoch) it picks
 *          workers  = ceil(1.25 * consumer / producer), clamped to 1 .. max(1, online cores - 1)
 *                     (the upper bound when the consumer takes no measurable time, as in a bench);
 *                     with an explicit prefetch, also at most prefetch;
 *          prefetch = workers + 2 (W being filled, one ready, one held by the consumer), 2 .. 8,
 *                     unless prefetch was given.
 *      and starts the extra workers. The choice then holds for the pipeline's life.
 * With explicit workers and prefetch = auto, prefetch = clamp(workers + 2, 2, 8) from the start.
 * The sync and on-caller modes report workers 0, prefetch 1. */
typedef struct ct_pipeline_stats {
    int workers, prefetch;          /* in use now */
    int on_caller;                  /* 1: no workers, each batch made in next() on the caller's thread */
    int workers_auto, prefetch_auto;/* chosen by auto */
    int decided;                    /* auto: the choice is made (always 1 without auto) */
    double worker_images_per_s;     /* one worker's measured fill rate (0: nothing measured) */
    double producer_images_per_s;   /* workers x that */
    double consumer_images_per_s;   /* the caller's measured rate (0: not measured) */
    long batches, images;           /* delivered by next() since create */
    long long input_bytes;          /* compressed bytes the workers read for them (0 for formats
                                       held in memory) */
    long bad_images;                /* on_bad_image = skip: samples replaced since create */
    double wait_seconds;            /* total blocked in next() since create */
} ct_pipeline_stats;

void ct_pipeline_get_stats(const ct_pipeline *p, ct_pipeline_stats *out);
/* The short form: the number of workers, depth, and their producer rate (images/s). Any may be NULL. */
void ct_pipeline_info(const ct_pipeline *p, int *workers, int *prefetch, double *producer_images_per_s);

/* `cutrain bench --input-only`: the pipeline alone, no model. Makes a pipeline from cfg, consumes
 * `warmup` + `batches` batches over as many epochs as needed (releasing each at once), and times
 * the last `batches`: wall time, the process's CPU time and the bytes its workers read. */
typedef struct ct_pipeline_bench_result {
    long batches, images;           /* timed */
    double seconds;
    double images_per_s;
    double wait_seconds;            /* blocked in next() during the timed part */
    int workers, prefetch;          /* what ran (auto's choice) */
    int sync;
    double cpu_seconds;             /* user + system time of the whole process (every thread)
                                       over the timed part; negative when /proc cannot say */
    long long input_bytes;          /* compressed bytes the workers read over the timed part
                                       (ct_pipeline_stats.input_bytes; 0 for in-memory formats) */
} ct_pipeline_bench_result;

ct_status ct_pipeline_bench(const ct_pipeline_config *cfg, long warmup, long batches,
                            ct_pipeline_bench_result *out, ct_err *err);

#endif
