/* Each tag names the --log field it mirrors, so that the two outputs are read the same way. */
#include "train/tensorboard.h"

static void add(ct_scalar *out, int *n, const char *tag, double value)
{
    out[(*n)++] = (ct_scalar){.tag = tag, .value = (float)value};
}

/* figures whose unknown value is negative */
static void add_known(ct_scalar *out, int *n, const char *tag, double value)
{
    if (value >= 0)
        add(out, n, tag, value);
}

int ct_epoch_scalars(const ct_epoch_stats *s, ct_scalar *out)
{
    int n = 0;
    add(out, &n, "train/loss", s->loss);
    add(out, &n, "train/accuracy", s->train_accuracy);
    add(out, &n, "train/learning_rate", s->learning_rate);
    if (s->test_accuracy >= 0) {
        add(out, &n, "test/loss", s->test_loss);
        add(out, &n, "test/accuracy", s->test_accuracy);
    }
    add(out, &n, "perf/images_per_s", s->images_per_s);
    add(out, &n, "perf/epoch_seconds", s->seconds);
    add(out, &n, "time/input_wait", s->time_split.input_wait);
    add(out, &n, "time/copy", s->time_split.copy);
    add(out, &n, "time/compute", s->time_split.compute);
    add(out, &n, "time/comm", s->time_split.comm);
    add_known(out, &n, "time/device_busy", s->time_split.device_busy);
    add_known(out, &n, "util/gpu", s->gpu_util);
    add_known(out, &n, "util/gpu_mem_mib", s->gpu_mem_mib);
    add_known(out, &n, "util/power_w", s->power_w);
    add_known(out, &n, "util/sm_clock_mhz", s->sm_clock_mhz);
    add_known(out, &n, "util/cpu", s->cpu_util);
    add_known(out, &n, "util/cpu_machine", s->cpu_util_machine);
    if (s->skipped_steps >= 0) { /* fp16's loss scaler */
        add(out, &n, "amp/loss_scale", s->loss_scale);
        add(out, &n, "amp/skipped_steps", (double)s->skipped_steps);
    }
    return n;
}

ct_status ct_tensorboard_epoch(ct_event_file *f, const ct_epoch_stats *s, ct_err *err)
{
    ct_scalar scalars[CT_EPOCH_SCALARS_MAX];
    int n = ct_epoch_scalars(s, scalars);
    return ct_event_file_write(f, s->step, scalars, n, err);
}
