/* On a GPU the step is enqueued, not run, under the host's clock: the host's view puts the
 * device's work where the host waits for it (the next batch's copy slot, the metrics read), so
 * "compute" there is the loop's time less the input wait, the copies' and the all-reduce's
 * enqueueing. CUDA events on the streams would split the device's own time; not done yet. */
#include "train/time_split.h"

#include <stdio.h>

static double share(double seconds, double wall)
{
    double s = wall > 0 ? seconds / wall : 0.0;
    return s < 0 ? 0.0 : s > 1 ? 1.0 : s;
}

void ct_time_split_fill(const ct_time_acc *acc, double wall, int workers, ct_epoch_stats *es)
{
    es->time_split = (ct_time_split){
        .input_wait = share(acc->input_wait, wall), .copy = share(acc->copy, wall),
        .compute = share(acc->compute, wall), .comm = share(acc->comm, wall),
    };
    ct_time_split_verdict(&es->time_split, workers, es->time_verdict, sizeof es->time_verdict);
}

void ct_time_split_verdict(const ct_time_split *s, int workers, char *buf, size_t n)
{
    /* ct_input_verdict's thresholds: from 20% a part bounds the step, from 5% it is worth a word */
    const double bound = 0.20, notable = 0.05;
    int wait = (int)(100.0 * s->input_wait + 0.5), copy = (int)(100.0 * s->copy + 0.5);
    int compute = (int)(100.0 * s->compute + 0.5), comm = (int)(100.0 * s->comm + 0.5);
    if (s->input_wait >= bound)
        snprintf(buf, n, "input-bound: %d%% waiting for input; %s", wait,
                 workers == 0 ? "use pipeline = parallel" : "raise workers or use augment_on = gpu");
    else if (s->copy >= bound)
        snprintf(buf, n, "copy-bound: %d%% copying batches to the device; augment_on = gpu ships 4x fewer bytes",
                 copy);
    else if (s->comm >= bound)
        snprintf(buf, n, "communication-bound: %d%% in the gradient all-reduce; raise the batch per device", comm);
    else if (s->input_wait >= notable)
        snprintf(buf, n, "compute-bound: %d%% computing, %d%% waiting for input (moderately input-bound)", compute,
                 wait);
    else
        snprintf(buf, n, "compute-bound: %d%% computing", compute);
}
