/* [train] memory against a device: the bytes a plan may take, and what an out-of-memory failure
 * says (memory.c). Both the trainer and the batch search use them. */
#ifndef CT_TRAIN_MEMORY_H
#define CT_TRAIN_MEMORY_H

#include "train/run.h"

/* The bytes a plan may take on a device that would train (every device in `devices` once there
 * are several; replica 0's today): the memory = limit: cap, else the device's free memory, less
 * memory_margin. *cap is the cap (0 without one). */
ct_status ct_memory_budget(const ct_train_config *t, ct_device *dev, size_t *budget, size_t *cap, ct_err *err);
/* memory = grow (and preallocate on host memory, where it grows): the plan of `replicas` replicas
 * bound at `batch` each on r's device against its budget, before anything is allocated. A plan
 * over the budget fails (CT_ERR_NOMEM) with both figures: growing into it would end in an
 * allocation failure at best, and on the host in the kernel's out-of-memory kill. */
ct_status ct_memory_check_plan(ct_run *run, ct_replica *r, int batch, int replicas);
/* Out of memory (st CT_ERR_NOMEM) while binding or training: appends the device, the batch, its
 * plan and the budget to the run's message, and with a fixed batch suggests batch = max. Returns
 * st. */
ct_status ct_oom_explain(ct_run *run, ct_status st);

#endif
