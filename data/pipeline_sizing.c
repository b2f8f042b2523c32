/* workers = auto and prefetch = auto (the policy is in pipeline.h, the interface in
 * pipeline_sizing.h): the sizes at create, the calibration window over the consumer's time, the
 * choice made from the measured rates, and the figures reported. */
#include <unistd.h>

#include "data/pipeline_sizing.h"

/* the calibration window, in batches delivered since create (see pipeline.h) */
enum { CALIB_SKIP = 2, CALIB_END = 10, AUTO_MAX_DEPTH = 8, CALIB_DEPTH = 3 };
#define AUTO_HEADROOM 1.25

static int online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void ct_pipeline_sizing_init(ct_pipeline_sizing *s, int workers, int prefetch)
{
    *s = (ct_pipeline_sizing){0};
    s->workers_auto = workers == 0;
    s->prefetch_auto = prefetch == 0;
    s->prefetch = prefetch;
    s->max_workers = clampi(online_cores() - 1, 1, CT_PIPELINE_MAX_WORKERS);
    if (s->workers_auto) {
        s->want_workers = 1;
        s->threads_cap = s->max_workers;
        s->max_slots = s->prefetch_auto ? AUTO_MAX_DEPTH : prefetch;
        s->depth = s->prefetch_auto ? CALIB_DEPTH : prefetch;
    } else {
        s->want_workers = s->threads_cap = workers;
        s->max_slots = s->depth = s->prefetch_auto ? clampi(workers + 2, 2, AUTO_MAX_DEPTH) : prefetch;
        s->decided = 1;
    }
}

void ct_pipeline_sizing_sync(ct_pipeline_sizing *s)
{
    *s = (ct_pipeline_sizing){.max_slots = 1, .depth = 1, .decided = 1};
}

void ct_pipeline_sizing_observe(ct_pipeline_sizing *s, long delivered, double seconds, int n)
{
    /* the window's first batches are its warm-up (pipeline.h): not counted */
    if (!s->decided && delivered > CALIB_SKIP) {
        s->busy_seconds += seconds;
        s->busy_images += n;
    }
}

int ct_pipeline_sizing_due(const ct_pipeline_sizing *s, long delivered)
{
    return !s->decided && delivered >= CALIB_END;
}

static double rate(double seconds, long images)
{
    return seconds > 0 && images > 0 ? (double)images / seconds : 0.0;
}

int ct_pipeline_sizing_decide(ct_pipeline_sizing *s)
{
    if (s->decided)
        return 0;
    s->decided = 1;
    int w = s->max_workers;
    double producer = rate(s->fill_seconds, s->fill_images);
    double consumer = rate(s->busy_seconds, s->busy_images);
    if (producer > 0 && consumer > 0) {
        double need = AUTO_HEADROOM * consumer / producer;
        w = need >= (double)s->max_workers ? s->max_workers : (int)need + ((double)(int)need < need);
    }
    w = clampi(w, 1, s->max_workers);
    if (!s->prefetch_auto && w > s->prefetch)
        w = s->prefetch;
    s->want_workers = w;
    if (s->prefetch_auto)
        s->depth = clampi(w + 2, 2, AUTO_MAX_DEPTH);
    return 1;
}

void ct_pipeline_sizing_stats(const ct_pipeline_sizing *s, int workers, ct_pipeline_stats *out)
{
    out->workers_auto = s->workers_auto;
    out->prefetch_auto = s->prefetch_auto;
    out->decided = s->decided;
    out->worker_images_per_s = rate(s->fill_seconds, s->fill_images);
    out->producer_images_per_s = out->worker_images_per_s * (workers > 0 ? workers : 1);
    out->consumer_images_per_s = rate(s->busy_seconds, s->busy_images);
}
