/* A run's state as a checkpoint and back (snapshot.c): parameters, optimizer moments, batch-norm
 * running statistics and the training position. */
#ifndef CT_SNAPSHOT_H
#define CT_SNAPSHOT_H

#include "checkpoint/checkpoint.h"
#include "train/run.h"

/* The run's state into a checkpoint, replica 0's (the replicas agree), with the training set's
 * index hash and class names (format version 3 when it has either). */
ct_status ct_run_snapshot(ct_run *run, double test_accuracy, ct_checkpoint *ck, ct_err *err);
/* Back into every replica, after checking every layer's name, type and shape against the config;
 * `source` names the checkpoint in messages. */
ct_status ct_run_restore(ct_run *run, const ct_checkpoint *ck, const char *source, ct_err *err);

/* Names the first layer that differs between the network g and the checkpoint (name, type, output
 * shape, weight, bias and state counts); `source` names the checkpoint. */
ct_status ct_checkpoint_check_layers(const ct_graph *g, const ct_checkpoint *ck, const char *source, ct_err *err);

/* Before resuming from ck: refuses (CT_ERR_DATA) a checkpoint saved from a training set whose index
 * hash or class names differ from the run's training set, naming both. A checkpoint with neither
 * passes. Reads nothing from the devices. */
ct_status ct_run_check_dataset(const ct_run *run, const ct_checkpoint *ck, const char *source, ct_err *err);

#endif
