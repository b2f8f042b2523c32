/* The compute stream's busy time over the train steps, from CUDA events recorded around each
 * step and read back without stalling: a ring of event pairs, each read (cudaEventQuery) once
 * its step has finished, before the ring reuses it; the rest at the epoch's end, when the loop
 * has synchronised. The CUDA device's step_timer ops (device.h, cuda/device.c). Declared without
 * CUDA types. Built only with the CUDA backend. */
#ifndef CT_STEP_TIMER_H
#define CT_STEP_TIMER_H

#include "base/status.h"
#include "device.h"

/* On `stream`, a CUDA device's compute stream (its cudaStream_t). */
ct_status ct_step_timer_create(void *stream, ct_step_timer **out, ct_err *err);
/* Around one step (on the thread that enqueues it). */
ct_status ct_step_timer_begin(ct_step_timer *t, ct_err *err);
ct_status ct_step_timer_end(ct_step_timer *t, ct_err *err);
/* The seconds of every timed step so far; waits for the last ones (call it once the device has
 * finished the epoch's steps, and it waits for nothing). */
ct_status ct_step_timer_total(ct_step_timer *t, double *seconds, ct_err *err);
void ct_step_timer_destroy(ct_step_timer *t);

#endif
