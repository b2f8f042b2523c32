/* The train loop's wall time split into waiting for input, copying batches to the devices,
 * computing and communicating (the gradients' all-reduce), with a one-line verdict. Timed with
 * the host's clock around each part of the loop: exact on the CPU, where every part runs on the
 * calling thread; on a GPU it sees what the host waits for (see time_split.c). */
#ifndef CT_TIME_SPLIT_H
#define CT_TIME_SPLIT_H

#include "cutrain.h"

/* Seconds accumulated over one epoch's train loop. */
typedef struct ct_time_acc {
    double input_wait, copy, compute, comm;
} ct_time_acc;

/* The shares of `wall` seconds (each clamped to [0, 1]) into es->time_split, and the verdict
 * into es->time_verdict; `workers` is the input pipeline's (0: pipeline = sync). */
void ct_time_split_fill(const ct_time_acc *acc, double wall, int workers, ct_epoch_stats *es);

/* The verdict on shares s, ct_input_verdict's thresholds (20% bound, 5% worth a word), into buf. */
void ct_time_split_verdict(const ct_time_split *s, int workers, char *buf, size_t n);

#endif
