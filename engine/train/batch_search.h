/* batch = max | auto: the batch found by real training steps on replica 0 (batch_search.c). */
#ifndef CT_BATCH_SEARCH_H
#define CT_BATCH_SEARCH_H

#include "train/run.h"

/* [train] batch resolved on replica 0's device and backend (nothing bound): a number as given, or
 * batch = max | auto searched with real steps; fills run->search. */
ct_status ct_batch_resolve(ct_run *run, int *batch);

#endif
