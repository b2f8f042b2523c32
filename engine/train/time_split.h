/* The train loop's wall time split into waiting for input, copying batches to the devices,
 * computing and communicating (the gradients' all-reduce), with a one-line verdict. Timed with
 * the host's clock around each part of the loop: exact on the CPU, where every part runs on the
 * calling thread; on a GPU it sees what the host waits for (see time_split.c). */
#ifndef CT_TIME_SPLIT_H
#define CT_TIME_SPLIT_H

#include "cutrain.h"
#include "device.h"

/* Seconds accumulated over one epoch's train loop. */
typedef struct ct_time_acc {
    double input_wait, copy, compute, comm;
    double device_busy;          /* the compute stream's time in steps; negative: unknown */
    ct_device *dev;              /* replica 0's, whose step timer times the steps */
    ct_step_timer *timer;        /* its step timer; NULL where it has none (the CPU) or it failed */
} ct_time_acc;

/* Starts an epoch's accumulation on replica 0's device: its step timer where it has one
 * (device_busy stays unknown elsewhere, and where the timer fails: the split only watches). */
void ct_time_acc_open(ct_time_acc *a, ct_device *dev);
/* Around each train step, on the thread that enqueues it. */
void ct_time_acc_step_begin(ct_time_acc *a);
void ct_time_acc_step_end(ct_time_acc *a);
/* Once the loop has synchronised with the devices: reads the timer into device_busy, frees it. */
void ct_time_acc_close(ct_time_acc *a);

/* The shares of `wall` seconds (each clamped to [0, 1]; device_busy negative when unknown) into
 * es->time_split, and the verdict
 * into es->time_verdict; its advice follows the pipeline es names (input_workers, input_on_caller). */
void ct_time_split_fill(const ct_time_acc *acc, double wall, ct_epoch_stats *es);

/* How the batches were made, for the verdict's advice when input bounds the step. */
typedef enum ct_input_mode {
    CT_INPUT_SYNC,       /* pipeline = sync: made on the trainer's thread, one thread */
    CT_INPUT_ON_CALLER,  /* workers = auto on the CPU: made on the trainer's thread between steps */
    CT_INPUT_WORKERS,    /* by input workers ahead of the step */
} ct_input_mode;

/* The verdict on shares s, ct_input_verdict's thresholds (20% bound, 5% worth a word), into buf. */
void ct_time_split_verdict(const ct_time_split *s, ct_input_mode mode, char *buf, size_t n);

#endif
