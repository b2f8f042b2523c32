/* workers = auto and prefetch = auto (the policy is in pipeline.h): the sizing at create, the
 * calibration window that measures the producer (the workers' fill times, pipeline.c) and the
 * consumer (the caller's time between batches, here), the choice made from them, and the figures
 * reported. The ring itself runs whatever sizes are set here. */
#include <string.h>
#include <unistd.h>

#include "data/pipeline_internal.h"

/* the calibration window, in batches delivered since create (see pipeline.h) */
enum { CALIB_SKIP = 2, CALIB_END = 10, AUTO_MAX_DEPTH = 8, CALIB_DEPTH = 3 };
#define AUTO_HEADROOM 1.25

static int online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void ct_pipeline_auto_size(ct_pipeline *p)
{
    const ct_pipeline_config *cfg = &p->cfg;
    p->workers_auto = cfg->workers == 0;
    p->prefetch_auto = cfg->prefetch == 0;
    p->max_workers = clampi(online_cores() - 1, 1, CT_PIPELINE_MAX_WORKERS);
    if (p->workers_auto) {
        p->want_workers = 1;
        p->threads_cap = p->max_workers;
        p->max_slots = p->prefetch_auto ? AUTO_MAX_DEPTH : cfg->prefetch;
        p->depth = p->prefetch_auto ? CALIB_DEPTH : cfg->prefetch;
    } else {
        p->want_workers = p->threads_cap = cfg->workers;
        p->max_slots = p->depth = p->prefetch_auto ? clampi(cfg->workers + 2, 2, AUTO_MAX_DEPTH) : cfg->prefetch;
        p->decided = 1;
    }
}

void ct_pipeline_auto_observe(ct_pipeline *p, double now)
{
    /* the window's first batches are its warm-up (pipeline.h): not counted */
    if (!p->decided && p->last_return > 0 && p->delivered > CALIB_SKIP) {
        p->busy_seconds += now - p->last_return;
        p->busy_images += p->last_n;
    }
}

void ct_pipeline_auto_check(ct_pipeline *p)
{
    if (!p->decided && p->delivered >= CALIB_END)
        ct_pipeline_auto_decide(p);
}

void ct_pipeline_auto_decide(ct_pipeline *p)
{
    if (p->decided)
        return;
    p->decided = 1;
    int w = p->max_workers;
    double producer = p->fill_seconds > 0 && p->fill_images > 0 ? (double)p->fill_images / p->fill_seconds : 0.0;
    double consumer = p->busy_seconds > 0 && p->busy_images > 0 ? (double)p->busy_images / p->busy_seconds : 0.0;
    if (producer > 0 && consumer > 0) {
        double need = AUTO_HEADROOM * consumer / producer;
        w = need >= (double)p->max_workers ? p->max_workers : (int)need + ((double)(int)need < need);
    }
    w = clampi(w, 1, p->max_workers);
    if (!p->prefetch_auto && w > p->cfg.prefetch)
        w = p->cfg.prefetch;
    p->want_workers = w;
    if (p->prefetch_auto)
        p->depth = clampi(w + 2, 2, AUTO_MAX_DEPTH);
    /* a thread that cannot start leaves a smaller pool, which still works */
    ct_pipeline_spawn_workers(p);
    p->want_workers = p->spawned;
    pthread_cond_broadcast(&p->work_cv);
}

void ct_pipeline_get_stats(const ct_pipeline *p, ct_pipeline_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_t *mu = (pthread_mutex_t *)&p->mu;   /* the figures move under the lock */
    pthread_mutex_lock(mu);
    if (p->cfg.sync) {
        out->workers = 0;
        out->prefetch = 1;
    } else {
        out->workers = p->spawned > 0 ? p->spawned : p->want_workers;
        out->prefetch = p->depth;
    }
    out->workers_auto = p->workers_auto;
    out->prefetch_auto = p->prefetch_auto;
    out->decided = p->decided;
    out->worker_images_per_s = p->fill_seconds > 0 ? (double)p->fill_images / p->fill_seconds : 0.0;
    out->producer_images_per_s = out->worker_images_per_s * (out->workers > 0 ? out->workers : 1);
    out->consumer_images_per_s = p->busy_seconds > 0 ? (double)p->busy_images / p->busy_seconds : 0.0;
    out->batches = p->delivered;
    out->images = p->delivered_images;
    out->wait_seconds = p->wait_total;
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
