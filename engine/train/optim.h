/* The learning rate: its scaling with the batch, its schedule with warm-up, and Adam's bias
 * correction (optim.c). */
#ifndef CT_TRAIN_OPTIM_H
#define CT_TRAIN_OPTIM_H

#include "config/config.h"

/* learning_rate's multiplier under lr_scaling at `batch`. */
double ct_lr_factor(const ct_train_config *t, int batch);
/* Learning rate at `step` (0-based) per the schedule and warm-up. */
float ct_schedule_lr(const ct_train_config *t, long step, long steps_per_epoch);
/* Adam's bias correction 1 - beta^t, computed in double: it is tiny on the first steps. */
float ct_adam_bias(float beta, long t);

#endif
