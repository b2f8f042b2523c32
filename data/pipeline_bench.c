/* `cutrain bench --input-only`: the pipeline alone, through its public API, timed. */
#include <string.h>

#include "base/clock.h"
#include "data/pipeline.h"

ct_status ct_pipeline_bench(const ct_pipeline_config *cfg, long warmup, long batches, ct_pipeline_bench_result *out,
                            ct_err *err)
{
    memset(out, 0, sizeof *out);
    if (warmup < 0 || batches < 1)
        return ct_fail(err, CT_ERR_USAGE, "input bench: needs at least 1 timed batch and no negative warm-up");
    ct_pipeline *p;
    ct_status st = ct_pipeline_create(&p, cfg, err);
    if (st != CT_OK)
        return st;
    long done = 0, images = 0, total = warmup + batches;
    double started = 0, wait_sum = 0;
    if (warmup == 0)
        started = ct_clock_seconds();
    for (int epoch = 0; st == CT_OK && done < total; epoch++) {
        if ((st = ct_pipeline_start_epoch(p, epoch, 0, err)) != CT_OK)
            break;
        while (done < total) {
            ct_batch_view v;
            double wait;
            if ((st = ct_pipeline_next(p, &v, &wait, err)) != CT_OK || v.n == 0)
                break;
            ct_pipeline_release(p, v.slot);
            done++;
            if (done > warmup) {
                images += v.n;
                wait_sum += wait;
            }
            if (done == warmup)
                started = ct_clock_seconds();
        }
    }
    double seconds = ct_clock_seconds() - started;
    if (st == CT_OK) {
        ct_pipeline_stats s;
        ct_pipeline_get_stats(p, &s);
        out->batches = batches;
        out->images = images;
        out->seconds = seconds;
        out->images_per_s = seconds > 0 ? (double)images / seconds : 0.0;
        out->wait_seconds = wait_sum;
        out->workers = s.workers;
        out->prefetch = s.prefetch;
        out->sync = cfg->sync != 0;
    }
    ct_pipeline_destroy(p);
    return st;
}
