/* An epoch's figures as TensorBoard scalars (docs/monitoring.md, "TensorBoard", lists the tags). */
#ifndef CT_TRAIN_TENSORBOARD_H
#define CT_TRAIN_TENSORBOARD_H

#include "base/event_file.h"

enum { CT_EPOCH_SCALARS_MAX = 24 };

/* The epoch's known figures into out (CT_EPOCH_SCALARS_MAX), as floats; a figure the stats mark
 * unknown (negative: no test set, no GPU, no loss scaler) is left out. Returns how many. */
int ct_epoch_scalars(const ct_epoch_stats *s, ct_scalar *out);
/* One event at the epoch's global step, flushed. */
ct_status ct_tensorboard_epoch(ct_event_file *f, const ct_epoch_stats *s, ct_err *err);

#endif
