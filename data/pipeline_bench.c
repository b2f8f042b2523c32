/* `cutrain bench --input-only`: the pipeline alone, through its public API, timed: wall clock,
 * the process's CPU time (so that images per CPU-second compare with other loaders on a shared
 * machine, where wall time depends on the neighbours) and the compressed bytes read. */
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>

#include "base/clock.h"
#include "data/pipeline.h"

/* User + system seconds of every thread of the process so far (getrusage: microseconds, where
 * /proc's clock ticks are 10 ms); negative when it fails. */
static double process_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1.0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

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
    double started = 0, wait_sum = 0, cpu_started = 0;
    ct_pipeline_stats at_start = {0};
    if (warmup == 0) {
        ct_pipeline_get_stats(p, &at_start);
        cpu_started = process_cpu_seconds();
        started = ct_clock_seconds();
    }
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
            if (done == warmup) {
                ct_pipeline_get_stats(p, &at_start);
                cpu_started = process_cpu_seconds();
                started = ct_clock_seconds();
            }
        }
    }
    double seconds = ct_clock_seconds() - started;
    double cpu_ended = process_cpu_seconds();
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
        out->cpu_seconds = cpu_started >= 0 && cpu_ended >= 0 ? cpu_ended - cpu_started : -1.0;
        out->input_bytes = s.input_bytes - at_start.input_bytes;
    }
    ct_pipeline_destroy(p);
    return st;
}
