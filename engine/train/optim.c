/* Learning-rate schedules with linear warm-up. Epoch positions are fractional, so a schedule
 * moves smoothly within an epoch (cosine) or jumps at epoch boundaries (step). */
#include <math.h>

#include "api/handle.h"

#define CT_PI 3.14159265358979323846

float ct_schedule_lr(const ct_train_config *t, long step, long steps_per_epoch)
{
    double spe = steps_per_epoch > 0 ? (double)steps_per_epoch : 1.0;
    double epoch = (double)step / spe;
    double warmup_steps = t->warmup * spe;
    if (warmup_steps > 0 && step < warmup_steps)
        return (float)(t->learning_rate * (step + 1) / warmup_steps);
    switch (t->schedule) {
    case CT_SCHED_STEP:
        return (float)(t->learning_rate * pow(t->gamma, floor(epoch / t->step_size)));
    case CT_SCHED_COSINE: {
        double span = t->epochs - t->warmup;
        double progress = span > 0 ? (epoch - t->warmup) / span : 1.0;
        if (progress > 1.0)
            progress = 1.0;
        return (float)(t->min_lr + (t->learning_rate - t->min_lr) * 0.5 * (1.0 + cos(CT_PI * progress)));
    }
    case CT_SCHED_CONSTANT:
    default:
        return t->learning_rate;
    }
}

float ct_adam_bias(float beta, long t)
{
    return (float)(1.0 - pow((double)beta, (double)t));
}
