/* Learning-rate schedules with linear warm-up. Epoch positions are fractional, so a schedule
 * moves smoothly within an epoch (cosine) or jumps at epoch boundaries (step). */
#include <math.h>

#include "train/optim.h"

#define CT_PI 3.14159265358979323846

double ct_lr_factor(const ct_train_config *t, int batch)
{
    if (t->lr_scaling == CT_LR_SCALING_NONE || t->base_batch <= 0 || batch <= 0)
        return 1.0;
    double ratio = (double)batch / (double)t->base_batch;
    return t->lr_scaling == CT_LR_SCALING_LINEAR ? ratio : sqrt(ratio);
}

/* lr_scaling scales the peak rate (Goyal et al.): the warm-up climbs to it and the schedules decay
 * from it; min_lr stays as given. With a factor of 1 every product below is the unscaled value
 * exactly, so runs without scaling keep their bits. */
float ct_schedule_lr(const ct_train_config *t, long step, long steps_per_epoch)
{
    double spe = steps_per_epoch > 0 ? (double)steps_per_epoch : 1.0;
    double epoch = (double)step / spe;
    double warmup_steps = t->warmup * spe;
    /* (a factor of 0 is a config built by hand, unscaled) a float, as learning_rate is: each expression below keeps the types (and roundings) it had
     * before scaling existed */
    float peak = t->lr_factor > 0 ? (float)(t->learning_rate * t->lr_factor) : t->learning_rate;
    if (warmup_steps > 0 && step < warmup_steps)
        return (float)(peak * (step + 1) / warmup_steps);
    switch (t->schedule) {
    case CT_SCHED_STEP:
        return (float)(peak * pow(t->gamma, floor(epoch / t->step_size)));
    case CT_SCHED_COSINE: {
        double span = t->epochs - t->warmup;
        double progress = span > 0 ? (epoch - t->warmup) / span : 1.0;
        if (progress > 1.0)
            progress = 1.0;
        return (float)(t->min_lr + (peak - t->min_lr) * 0.5 * (1.0 + cos(CT_PI * progress)));
    }
    case CT_SCHED_CONSTANT:
    default:
        return peak;
    }
}

float ct_adam_bias(float beta, long t)
{
    return (float)(1.0 - pow((double)beta, (double)t));
}
