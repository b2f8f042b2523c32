/* On a GPU the step is enqueued, not run, under the host's clock: the host's view puts the
 * device's work where the host waits for it (the next batch's copy slot, the metrics read), so
 * "compute" there is the loop's time less the input wait, the copies' and the all-reduce's
 * enqueueing. The device's own view is device_busy: its step timer around each step (device.h;
 * CUDA events on the compute stream), the share of the loop the GPU spent running steps. */
#include "train/time_split.h"

#include <stdio.h>

void ct_time_acc_open(ct_time_acc *a, ct_device *dev)
{
    *a = (ct_time_acc){.device_busy = -1.0, .dev = dev};
    ct_err ignored;
    if (dev->ops->step_timer_create(dev, &a->timer, &ignored) != CT_OK)
        a->timer = NULL;
}

/* A timer that fails stops timing; the training's own checks report a failing device. */
static void stop_timer(ct_time_acc *a)
{
    a->dev->ops->step_timer_destroy(a->timer);
    a->timer = NULL;
}

void ct_time_acc_step_begin(ct_time_acc *a)
{
    ct_err ignored;
    if (a->timer && a->dev->ops->step_timer_begin(a->timer, &ignored) != CT_OK)
        stop_timer(a);
}

void ct_time_acc_step_end(ct_time_acc *a)
{
    ct_err ignored;
    if (a->timer && a->dev->ops->step_timer_end(a->timer, &ignored) != CT_OK)
        stop_timer(a);
}

void ct_time_acc_close(ct_time_acc *a)
{
    ct_err ignored;
    double seconds = 0.0;
    if (a->timer && a->dev->ops->step_timer_total(a->timer, &seconds, &ignored) == CT_OK)
        a->device_busy = seconds;
    if (a->timer)
        stop_timer(a);
}

static double share(double seconds, double wall)
{
    double s = wall > 0 ? seconds / wall : 0.0;
    return s < 0 ? 0.0 : s > 1 ? 1.0 : s;
}

void ct_time_split_fill(const ct_time_acc *acc, double wall, ct_epoch_stats *es)
{
    es->time_split = (ct_time_split){
        .input_wait = share(acc->input_wait, wall), .copy = share(acc->copy, wall),
        .compute = share(acc->compute, wall), .comm = share(acc->comm, wall),
        .device_busy = acc->device_busy >= 0 ? share(acc->device_busy, wall) : -1.0,
    };
    ct_input_mode mode = es->input_workers > 0 ? CT_INPUT_WORKERS
                         : es->input_on_caller ? CT_INPUT_ON_CALLER
                                               : CT_INPUT_SYNC;
    ct_time_split_verdict(&es->time_split, mode, es->time_verdict, sizeof es->time_verdict);
}

void ct_time_split_verdict(const ct_time_split *s, ct_input_mode mode, char *buf, size_t n)
{
    /* ct_input_verdict's thresholds: from 20% a part bounds the step, from 5% it is worth a word */
    const double bound = 0.20, notable = 0.05;
    int wait = (int)(100.0 * s->input_wait + 0.5), copy = (int)(100.0 * s->copy + 0.5);
    int compute = (int)(100.0 * s->compute + 0.5), comm = (int)(100.0 * s->comm + 0.5);
    static const char *const advice[] = {
        [CT_INPUT_SYNC] = "use pipeline = parallel",
        [CT_INPUT_ON_CALLER] = "set workers = N to make batches ahead on their own threads",
        [CT_INPUT_WORKERS] = "raise workers or use augment_on = gpu",
    };
    if (s->input_wait >= bound)
        snprintf(buf, n, "input-bound: %d%% waiting for input; %s", wait, advice[mode]);
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
