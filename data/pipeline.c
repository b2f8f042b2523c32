/* The input pipeline's host side (see pipeline.h for the contract): the ring and its workers.
 *
 * Parallel mode. A ring of slots, each one host buffer for a whole batch (x, then y). Workers
 * claim batches strictly in order (next_claim++ under the lock) whenever one of the first `depth`
 * slots is free, fill it outside the lock, and mark it ready. The consumer waits for the slot that
 * holds batch next_out, so batches come out in order however the workers interleave; the batch
 * contents depend only on (seed, epoch, b), never on which worker made it. A slot is free again
 * when the consumer releases it. Everything shared is guarded by one mutex; workers wait on
 * work_cv (a slot freed, an epoch started, quit), the consumer on ready_cv (a batch ready, a
 * failure, a drain finishing). How many workers run and how deep the ring is: pipeline_sizing.c.
 *
 * Sync mode. No threads and one buffer: next() makes the batch there, sample by sample, on the
 * caller's thread; the caller waits the whole time.
 *
 * On-caller mode (a CPU that trains on every core). Sync's one buffer and no threads, but next()
 * makes the whole batch in one pass (ct_make_batch_serial, no fork or barrier): a worker thread
 * would only take a core from the step's threads, which then wait for it at their next barrier.
 *
 * Nothing here prints or exits; worker failures are kept and handed to the consumer's next(). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/rng.h"
#include "data/format.h"
#include "data/pipeline_sizing.h"

enum {
    SLOT_FREE,
    SLOT_FILLING,   /* a worker is writing it */
    SLOT_READY,     /* holds batch `batch`, not yet handed out */
    SLOT_HELD       /* handed to the consumer, not yet released */
};

typedef struct slot {
    void *mem;      /* x (64-byte aligned size) then y; NULL until first filled */
    int state;
    long batch;
    int n;
    int epoch;
    ct_encoded_batch enc;   /* encoded: the batch's compressed JPEGs */
} slot;

typedef struct worker_arg {
    ct_pipeline *p;
    int id;         /* 1-based, as in messages and the test hook */
} worker_arg;

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

    /* workers wanted, ring depth, the lengths of slots[] and threads[], and the measured rates:
     * under mu, except busy_* (the consumer thread's own, as below) */
    ct_pipeline_sizing size;

    slot *slots;
    pthread_t *threads;
    worker_arg *args;
    int spawned;

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

    /* consumer figures (consumer thread only) */
    double last_return;        /* when next() last handed out a batch; 0: none to time */
    int last_n;
    long delivered, delivered_images;
    double wait_total;

    /* sync and on-caller modes: one buffer, no threads */
    int one_buffer;
    void *sync_mem;
    ct_encoded_batch sync_enc;
    int sync_held;
    ct_sample_reader *sync_reader;

    /* what the readers read, collected after each batch (under mu) */
    long long input_bytes;
    long bad_images;
};

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static void *default_alloc(size_t bytes) { return aligned_alloc(64, round_up(bytes ? bytes : 1, 64)); }

static void *slot_alloc(ct_pipeline *p, size_t bytes)
{
    return p->cfg.host_alloc ? p->cfg.host_alloc(p->cfg.alloc_ctx, bytes) : default_alloc(bytes);
}

static void slot_free(ct_pipeline *p, void *mem)
{
    if (!mem)
        return;
    if (p->cfg.host_alloc)
        p->cfg.host_free(p->cfg.alloc_ctx, mem);
    else
        free(mem);
}

static uint64_t batch_seed(const ct_pipeline *p, int epoch, long b)
{
    if (!p->cfg.augment)
        return 0;
    return ct_hash3(p->cfg.seed, CT_PIPELINE_SALT_AUGMENT, (uint64_t)epoch * (uint64_t)p->steps_seed + (uint64_t)b);
}

static int batch_size(const ct_pipeline *p, long b)
{
    long left = p->count - b * (long)p->batch;
    return (int)(left < p->batch ? left : p->batch);
}

/* Makes batch b of `epoch` into mem (x then y) with the calling thread's reader. Pure: the same
 * bytes whoever calls it. A sample that does not decode fails the batch (err names the file). */
static ct_status make_batch(const ct_pipeline *p, ct_sample_reader *rd, void *mem, ct_encoded_batch *enc, int epoch,
                            long b, int n, ct_err *err)
{
    const long *idx = p->order + b * (long)p->batch;
    int32_t *y = (int32_t *)((char *)mem + p->y_offset);
    if (p->cfg.encoded)
        return ct_read_batch_encoded(p->cfg.ds, rd, idx, n, p->cfg.augment, batch_seed(p, epoch, b),
                                     p->cfg.cpu_share, mem, y, enc, err);
    if (p->cfg.raw_u8)
        return ct_read_batch_u8(p->cfg.ds, rd, idx, n, p->cfg.augment, batch_seed(p, epoch, b), mem, y, err);
    return ct_read_batch_serial(p->cfg.ds, rd, idx, n, &p->aug, p->cfg.augment, batch_seed(p, epoch, b), mem, y,
                                err);
}

/* Moves a reader's figures into the pipeline's; called with mu held (or in sync mode). */
static void collect_counts(ct_pipeline *p, ct_sample_reader *rd)
{
    if (!rd)
        return;
    p->input_bytes += rd->input_bytes;
    p->bad_images += rd->bad_images;
    rd->input_bytes = 0;
    rd->bad_images = 0;
}

/* What the files of batch b of the epoch in hand are about to be asked for (format = imagefolder,
 * cache = none): the kernel may start reading them while this batch decodes. */
static void announce_batch(const ct_pipeline *p, long b)
{
    if (b >= p->end || !p->cfg.ds->source || p->cfg.ds->images)
        return;
    const long *idx = p->order + b * (long)p->batch;
    int n = batch_size(p, b);
    for (int i = 0; i < n; i++)
        ct_dataset_prefetch_hint(p->cfg.ds, idx[i]);
}

static void fill_view(const ct_pipeline *p, ct_batch_view *v, int slot_id, void *mem, const ct_encoded_batch *enc,
                      int epoch, long b, int n)
{
    memset(v, 0, sizeof *v);
    v->slot = slot_id;
    v->index = b;
    v->epoch = epoch;
    v->n = n;
    if (p->cfg.raw_u8)
        v->x_u8 = mem;
    else
        v->x = mem;
    v->y = (int32_t *)((char *)mem + p->y_offset);
    v->encoded = p->cfg.encoded ? enc : NULL;
    v->augment = p->cfg.raw_u8 && p->cfg.augment;
    v->augment_seed = batch_seed(p, epoch, b);
}

static void end_view(ct_batch_view *v, int epoch)
{
    memset(v, 0, sizeof *v);
    v->slot = -1;
    v->index = -1;
    v->epoch = epoch;
}

/* ---- workers ---- */

static int free_slot(const ct_pipeline *p)
{
    for (int s = 0; s < p->size.depth; s++)
        if (p->slots[s].state == SLOT_FREE)
            return s;
    return -1;
}

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    ct_pipeline *p = wa->p;
    /* the worker's own decoder and read buffer, for sets decoded on demand */
    ct_sample_reader *rd = NULL;
    ct_err re;
    ct_err_clear(&re);
    ct_status rst = ct_sample_reader_new(p->cfg.ds, &rd, &re);
    pthread_mutex_lock(&p->mu);
    if (rst != CT_OK && !p->failed) {
        p->failed = 1;
        ct_fail(&p->fail, rst, "input worker %d of %d: %s", wa->id, p->spawned, re.msg);
        pthread_cond_broadcast(&p->ready_cv);
    }
    for (;;) {
        if (p->quit || p->failed)
            break;
        int s = p->running && p->next_claim < p->end ? free_slot(p) : -1;
        if (s < 0) {
            pthread_cond_wait(&p->work_cv, &p->mu);
            continue;
        }
        slot *sl = &p->slots[s];
        long b = p->next_claim++;
        int epoch = p->epoch, n = batch_size(p, b);
        sl->state = SLOT_FILLING;
        sl->batch = b;
        sl->n = n;
        sl->epoch = epoch;
        p->filling++;
        long next_b = b + 1;
        pthread_mutex_unlock(&p->mu);
        announce_batch(p, next_b);

        /* outside the lock: the slot is this worker's until it is marked ready */
        ct_err e;
        ct_err_clear(&e);
        ct_status st = CT_OK;
        int allocated = 0;
        if (p->cfg.test_hook)
            st = p->cfg.test_hook(p->cfg.test_ctx, wa->id, b, &e);
        if (st == CT_OK && !sl->mem) {
            allocated = 1;
            if (!(sl->mem = slot_alloc(p, p->slot_bytes)))
                st = ct_fail(&e, CT_ERR_NOMEM, "cannot allocate %zu bytes of host memory for prefetch slot %d",
                             p->slot_bytes, s);
        }
        double t0 = ct_clock_seconds();
        if (st == CT_OK)
            st = make_batch(p, rd, sl->mem, &sl->enc, epoch, b, n, &e);
        double dt = ct_clock_seconds() - t0;

        pthread_mutex_lock(&p->mu);
        p->filling--;
        collect_counts(p, rd);
        if (st != CT_OK) {
            sl->state = SLOT_FREE;
            if (!p->failed) {
                p->failed = 1;
                if (e.status == CT_OK)
                    e.status = st;
                ct_fail(&p->fail, st, "input worker %d of %d, batch %ld of epoch %d: %s", wa->id, p->spawned, b,
                        epoch, e.msg[0] ? e.msg : "failed");
            }
            pthread_cond_broadcast(&p->ready_cv);
            pthread_cond_broadcast(&p->work_cv);
            break;
        }
        sl->state = SLOT_READY;
        if (!allocated) {
            p->size.fill_seconds += dt;
            p->size.fill_images += n;
        }
        pthread_cond_broadcast(&p->ready_cv);
    }
    pthread_mutex_unlock(&p->mu);
    ct_sample_reader_free(rd);
    return NULL;
}

/* Starts workers until want_workers run; called with mu held. Returns 0 or an errno. Workers
 * block every signal, so SIGINT and friends reach the trainer's thread. */
static int spawn_workers(ct_pipeline *p)
{
    int rc = 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    while (p->spawned < p->size.want_workers && p->spawned < p->size.threads_cap) {
        worker_arg *wa = &p->args[p->spawned];
        wa->p = p;
        wa->id = p->spawned + 1;
        if ((rc = pthread_create(&p->threads[p->spawned], NULL, worker_main, wa)) != 0)
            break;
        p->spawned++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static void reset_slots(ct_pipeline *p)
{
    for (int s = 0; s < p->size.max_slots; s++)
        p->slots[s].state = SLOT_FREE;
    p->held = 0;
}

/* workers = auto decides (when it has not yet) and the workers grow to its choice; called with mu
 * held. A thread that cannot start leaves fewer workers, which still work. */
static void decide_sizes(ct_pipeline *p)
{
    if (!ct_pipeline_sizing_decide(&p->size))
        return;
    spawn_workers(p);
    p->size.want_workers = p->spawned;
    pthread_cond_broadcast(&p->work_cv);
}

/* ---- the API ---- */

void ct_pipeline_config_init(ct_pipeline_config *pc, const ct_data_settings *dc, const ct_dataset *ds,
                             const ct_augment *aug, int batch, uint64_t seed, int training)
{
    memset(pc, 0, sizeof *pc);
    pc->ds = ds;
    pc->aug = aug;
    pc->batch = batch;
    pc->seed = seed;
    pc->shuffle = training != 0;
    pc->augment = training != 0;
    pc->workers = dc->workers;
    pc->prefetch = dc->prefetch;
    pc->drop_last = training && dc->drop_last;   /* evaluation sees every sample */
    pc->sync = dc->pipeline == CT_PIPELINE_SYNC;
    pc->raw_u8 = dc->augment_on == CT_AUGMENT_ON_GPU;
}

static ct_status check_config(const ct_pipeline_config *c, ct_err *err)
{
    if (!c || !c->ds)
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: no dataset");
    const ct_dataset *ds = c->ds;
    if (ds->count < 1 || (!ds->images && !ds->source))
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: the dataset is empty");
    if (ct_shape_size(ds->shape) == 0)
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: the dataset's images have no pixels");
    if (c->batch < 1)
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: batch must be at least 1, got %d", c->batch);
    if (c->workers < 0 || c->workers > CT_PIPELINE_MAX_WORKERS)
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: workers must be auto (0) or 1 to %d, got %d",
                       CT_PIPELINE_MAX_WORKERS, c->workers);
    if (c->prefetch < 0 || c->prefetch > CT_PIPELINE_MAX_PREFETCH)
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: prefetch must be auto (0) or 1 to %d, got %d",
                       CT_PIPELINE_MAX_PREFETCH, c->prefetch);
    if (c->on_caller && !c->sync && (c->raw_u8 || !ds->images))
        return ct_fail(err, CT_ERR_USAGE,
                       "input pipeline: batches made on the caller's thread need a set held in memory and float32 "
                       "batches");
    if (c->encoded && (!c->raw_u8 || !ct_dataset_can_encode(ds)))
        return ct_fail(err, CT_ERR_USAGE,
                       "input pipeline: images left compressed for the device need uint8 batches and a set of "
                       "image files");
    if (!(c->cpu_share >= 0 && c->cpu_share <= 1))
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: cpu_share must be 0 to 1, got %g", c->cpu_share);
    if (!c->host_alloc != !c->host_free)
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: give both host_alloc and host_free, or neither");
    if (c->drop_last && ds->count < c->batch)
        return ct_fail(err, CT_ERR_CONFIG,
                       "drop_last = on with %ld sample%s and batch %d leaves no batch at all; "
                       "lower the batch or set drop_last = off",
                       ds->count, ds->count == 1 ? "" : "s", c->batch);
    return CT_OK;
}

/* What ct_pipeline_create allocates before its threads and locks exist, and the pipeline itself. */
static void free_parts(ct_pipeline *p)
{
    free(p->order);
    free(p->slots);
    free(p->threads);
    free(p->args);
    free(p->sync_mem);
    ct_encoded_batch_free(&p->sync_enc);
    ct_sample_reader_free(p->sync_reader);
    free(p);
}

ct_status ct_pipeline_create(ct_pipeline **out, const ct_pipeline_config *cfg, ct_err *err)
{
    *out = NULL;
    ct_status st = check_config(cfg, err);
    if (st != CT_OK)
        return st;
    ct_pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return ct_fail(err, CT_ERR_NOMEM, "input pipeline: out of memory");
    p->cfg = *cfg;
    if (cfg->aug) {
        p->aug = *cfg->aug;
    } else {
        for (int c = 0; c < CT_MAX_CHANNELS; c++)
            p->aug.std[c] = 1.0f;
    }
    p->cfg.aug = &p->aug;
    p->count = cfg->ds->count;
    p->batch = cfg->batch;
    p->cap = p->count < p->batch ? (int)p->count : p->batch;
    p->steps_seed = (p->count + p->batch - 1) / p->batch;
    p->batches = cfg->drop_last ? p->count / p->batch : p->steps_seed;
    p->sample_elems = ct_shape_size(cfg->ds->shape);
    size_t x_bytes = (size_t)p->cap * p->sample_elems * (cfg->raw_u8 ? 1 : sizeof(float));
    p->y_offset = round_up(x_bytes, 64);
    p->slot_bytes = p->y_offset + (size_t)p->cap * sizeof(int32_t);

    int mutex_ok = 0, work_ok = 0, ready_ok = 0;
    p->order = malloc((size_t)p->count * sizeof *p->order);
    if (!p->order)
        goto nomem;
    for (long i = 0; i < p->count; i++)
        p->order[i] = i;

    p->one_buffer = cfg->sync || cfg->on_caller;
    if (p->one_buffer) {
        ct_pipeline_sizing_sync(&p->size);
        if (!(p->sync_mem = default_alloc(p->slot_bytes)))
            goto nomem;
        if ((st = ct_sample_reader_new(cfg->ds, &p->sync_reader, err)) != CT_OK) {
            free_parts(p);
            return st;
        }
    } else {
        ct_pipeline_sizing_init(&p->size, cfg->workers, cfg->prefetch);
        p->slots = calloc((size_t)p->size.max_slots, sizeof *p->slots);
        p->threads = calloc((size_t)p->size.threads_cap, sizeof *p->threads);
        p->args = calloc((size_t)p->size.threads_cap, sizeof *p->args);
        if (!p->slots || !p->threads || !p->args)
            goto nomem;
    }
    if (!(mutex_ok = pthread_mutex_init(&p->mu, NULL) == 0) || !(work_ok = pthread_cond_init(&p->work_cv, NULL) == 0) ||
        !(ready_ok = pthread_cond_init(&p->ready_cv, NULL) == 0)) {
        if (mutex_ok)
            pthread_mutex_destroy(&p->mu);
        if (work_ok)
            pthread_cond_destroy(&p->work_cv);
        free_parts(p);
        return ct_fail(err, CT_ERR_INTERNAL, "input pipeline: cannot create its lock");
    }
    *out = p;
    return CT_OK;

nomem:
    free_parts(p);
    return ct_fail(err, CT_ERR_NOMEM, "input pipeline: out of memory");
}

long ct_pipeline_batches(const ct_pipeline *p) { return p->batches; }
long ct_pipeline_steps_for_seed(const ct_pipeline *p) { return p->steps_seed; }

/* Joins every worker and takes all slots back. */
static void stop_workers(ct_pipeline *p)
{
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    p->running = 0;
    pthread_cond_broadcast(&p->work_cv);
    pthread_cond_broadcast(&p->ready_cv);
    int n = p->spawned;
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < n; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_lock(&p->mu);
    p->spawned = 0;
    p->quit = 0;
    p->failed = 0;
    p->filling = 0;
    reset_slots(p);
    p->next_claim = p->next_out = p->end = 0;
    pthread_mutex_unlock(&p->mu);
}

ct_status ct_pipeline_start_epoch(ct_pipeline *p, int epoch, long first_batch, ct_err *err)
{
    if (epoch < 0)
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: epoch must not be negative, got %d", epoch);
    if (first_batch < 0 || first_batch > p->batches)
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: first batch %ld is outside the epoch's 0..%ld",
                       first_batch, p->batches);
    p->last_return = 0;
    if (p->one_buffer) {
        if (p->cfg.shuffle)
            ct_shuffle_indices(p->order, p->count, p->cfg.seed, epoch);
        p->epoch = epoch;
        p->next_out = first_batch;
        p->end = p->batches;
        p->sync_held = 0;
        p->started = 1;
        return CT_OK;
    }
    pthread_mutex_lock(&p->mu);
    int failed = p->failed;
    pthread_mutex_unlock(&p->mu);
    if (failed)
        stop_workers(p);
    pthread_mutex_lock(&p->mu);
    /* abandon the epoch in progress: no new claims, wait for the batches in hand */
    p->running = 0;
    while (p->filling > 0)
        pthread_cond_wait(&p->ready_cv, &p->mu);
    reset_slots(p);
    if (p->started)
        decide_sizes(p);   /* the first epoch ended before the calibration window did */
    if (p->cfg.shuffle)
        ct_shuffle_indices(p->order, p->count, p->cfg.seed, epoch);
    p->epoch = epoch;
    p->next_claim = p->next_out = first_batch;
    p->end = p->batches;
    p->running = 1;
    p->started = 1;
    int rc = spawn_workers(p);
    int spawned = p->spawned;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    if (spawned == 0) {
        stop_workers(p);
        return ct_fail(err, CT_ERR_INTERNAL, "input pipeline: cannot start a worker thread: %s", strerror(rc));
    }
    return CT_OK;
}

static ct_status next_sync(ct_pipeline *p, ct_batch_view *out, double t0, double *wait_seconds, ct_err *err)
{
    if (p->sync_held)
        return ct_fail(err, CT_ERR_USAGE,
                       "input pipeline: release the previous batch before asking for the next (pipeline = sync "
                       "and batches made on the caller's thread have one buffer)");
    if (p->next_out >= p->end) {
        end_view(out, p->epoch);
        if (wait_seconds)
            *wait_seconds = 0;
        return CT_OK;
    }
    long b = p->next_out;
    int n = batch_size(p, b);
    if (p->cfg.test_hook) {
        ct_err e;
        ct_err_clear(&e);
        ct_status st = p->cfg.test_hook(p->cfg.test_ctx, 0, b, &e);
        if (st != CT_OK)
            return ct_fail(err, st, "input pipeline (sync), batch %ld of epoch %d: %s", b, p->epoch,
                           e.msg[0] ? e.msg : "failed");
    }
    const long *idx = p->order + b * (long)p->batch;
    int32_t *y = (int32_t *)((char *)p->sync_mem + p->y_offset);
    uint64_t seed = batch_seed(p, p->epoch, b);
    ct_status st = CT_OK;
    ct_err e;
    ct_err_clear(&e);
    /* on the caller: the whole batch in one call (check_config: a set in memory) */
    int whole = p->cfg.on_caller && !p->cfg.sync;
    if (whole)
        ct_make_batch_serial(p->cfg.ds, idx, n, &p->aug, p->cfg.augment, seed, p->sync_mem, y);
    else if (p->cfg.encoded)   /* sample by sample inside, as below */
        st = ct_read_batch_encoded(p->cfg.ds, p->sync_reader, idx, n, p->cfg.augment, seed, p->cfg.cpu_share,
                                   p->sync_mem, y, &p->sync_enc, &e);
    /* the naive user: one sample at a time into the one buffer */
    for (int i = 0; i < n && st == CT_OK && !whole && !p->cfg.encoded; i++) {
        if (p->cfg.raw_u8)
            st = ct_read_sample_u8(p->cfg.ds, p->sync_reader, idx[i], i, p->cfg.augment, seed,
                                   (uint8_t *)p->sync_mem + (size_t)i * p->sample_elems, y + i, &e);
        else
            st = ct_read_sample(p->cfg.ds, p->sync_reader, idx[i], i, &p->aug, p->cfg.augment, seed,
                                (float *)p->sync_mem + (size_t)i * p->sample_elems, y + i, &e);
    }
    collect_counts(p, p->sync_reader);
    if (st != CT_OK)
        return ct_fail(err, st, "input pipeline (sync), batch %ld of epoch %d: %s", b, p->epoch,
                       e.msg[0] ? e.msg : "failed");
    fill_view(p, out, 0, p->sync_mem, &p->sync_enc, p->epoch, b, n);
    p->next_out++;
    p->sync_held = 1;
    double wait = ct_clock_seconds() - t0;
    p->size.fill_seconds += wait;   /* the caller is the one producer */
    p->size.fill_images += n;
    p->wait_total += wait;
    p->delivered++;
    p->delivered_images += n;
    if (wait_seconds)
        *wait_seconds = wait;
    return CT_OK;
}

ct_status ct_pipeline_next(ct_pipeline *p, ct_batch_view *out, double *wait_seconds, ct_err *err)
{
    double t0 = ct_clock_seconds();
    if (wait_seconds)
        *wait_seconds = 0;
    if (!p->started)
        return ct_fail(err, CT_ERR_USAGE, "input pipeline: no epoch started (call ct_pipeline_start_epoch first)");
    if (p->one_buffer)
        return next_sync(p, out, t0, wait_seconds, err);

    if (p->last_return > 0)
        ct_pipeline_sizing_observe(&p->size, p->delivered, t0 - p->last_return, p->last_n);
    p->last_return = 0;

    pthread_mutex_lock(&p->mu);
    if (ct_pipeline_sizing_due(&p->size, p->delivered))
        decide_sizes(p);
    int s = -1;
    for (;;) {
        if (p->failed) {
            ct_status st = p->fail.status != CT_OK ? p->fail.status : CT_ERR_INTERNAL;
            ct_fail(err, st, "%s", p->fail.msg);
            pthread_mutex_unlock(&p->mu);
            return st;
        }
        if (p->next_out >= p->end) {
            decide_sizes(p);   /* a first epoch shorter than the window */
            pthread_mutex_unlock(&p->mu);
            end_view(out, p->epoch);
            return CT_OK;
        }
        for (int i = 0; i < p->size.depth && s < 0; i++)
            if (p->slots[i].state == SLOT_READY && p->slots[i].batch == p->next_out)
                s = i;
        if (s >= 0)
            break;
        if (p->next_claim == p->next_out && p->held >= p->size.depth) {
            int held = p->held, depth = p->size.depth;
            pthread_mutex_unlock(&p->mu);
            return ct_fail(err, CT_ERR_USAGE,
                           "input pipeline: the caller holds all %d slots (prefetch %d); release one before asking "
                           "for the next batch (at most prefetch - 1 may be held)",
                           held, depth);
        }
        pthread_cond_wait(&p->ready_cv, &p->mu);
    }
    slot *sl = &p->slots[s];
    sl->state = SLOT_HELD;
    p->held++;
    p->next_out++;
    fill_view(p, out, s, sl->mem, &sl->enc, sl->epoch, sl->batch, sl->n);
    pthread_mutex_unlock(&p->mu);

    double t1 = ct_clock_seconds();
    p->wait_total += t1 - t0;
    p->delivered++;
    p->delivered_images += out->n;
    p->last_return = t1;
    p->last_n = out->n;
    if (wait_seconds)
        *wait_seconds = t1 - t0;
    return CT_OK;
}

void ct_pipeline_release(ct_pipeline *p, int slot_id)
{
    if (!p)
        return;
    if (p->one_buffer) {
        if (slot_id == 0)
            p->sync_held = 0;
        return;
    }
    if (slot_id < 0 || slot_id >= p->size.max_slots)
        return;
    pthread_mutex_lock(&p->mu);
    if (p->slots[slot_id].state == SLOT_HELD) {
        p->slots[slot_id].state = SLOT_FREE;
        p->held--;
        pthread_cond_broadcast(&p->work_cv);
    }
    pthread_mutex_unlock(&p->mu);
}

void ct_pipeline_stop(ct_pipeline *p)
{
    if (!p)
        return;
    p->last_return = 0;
    if (p->one_buffer) {
        p->sync_held = 0;
        p->next_out = p->end = 0;
        return;
    }
    stop_workers(p);
}

void ct_pipeline_destroy(ct_pipeline *p)
{
    if (!p)
        return;
    ct_pipeline_stop(p);
    for (int s = 0; s < p->size.max_slots && p->slots; s++) {
        slot_free(p, p->slots[s].mem);
        ct_encoded_batch_free(&p->slots[s].enc);
    }
    free(p->sync_mem);
    ct_encoded_batch_free(&p->sync_enc);
    ct_sample_reader_free(p->sync_reader);
    free(p->slots);
    free(p->threads);
    free(p->args);
    free(p->order);
    pthread_cond_destroy(&p->ready_cv);
    pthread_cond_destroy(&p->work_cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void ct_pipeline_get_stats(const ct_pipeline *p, ct_pipeline_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_t *mu = (pthread_mutex_t *)&p->mu;   /* the figures move under the lock */
    pthread_mutex_lock(mu);
    if (p->one_buffer) {
        out->workers = 0;
        out->prefetch = 1;
        out->on_caller = p->cfg.on_caller && !p->cfg.sync;
    } else {
        out->workers = p->spawned > 0 ? p->spawned : p->size.want_workers;
        out->prefetch = p->size.depth;
    }
    ct_pipeline_sizing_stats(&p->size, out->workers, out);
    out->batches = p->delivered;
    out->images = p->delivered_images;
    out->wait_seconds = p->wait_total;
    out->input_bytes = p->input_bytes;
    out->bad_images = p->bad_images;
    pthread_mutex_unlock(mu);
}

void ct_pipeline_info(const ct_pipeline *p, int *workers, int *prefetch, double *producer_images_per_s)
{
    ct_pipeline_stats s;
    ct_pipeline_get_stats(p, &s);
    if (workers)
        *workers = s.workers;
    if (prefetch)
        *prefetch = s.prefetch;
    if (producer_images_per_s)
        *producer_images_per_s = s.producer_images_per_s;
}
