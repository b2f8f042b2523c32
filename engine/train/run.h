/* A training run: what the trainer works on, from the config and the data to the replicas, their
 * communicator and the training position. train/ owns it; the public handle (api/handle.h) holds
 * one, fills it in ct_prepare and passes it down: nothing below the API sees the handle. */
#ifndef CT_RUN_H
#define CT_RUN_H

#include "comm.h"
#include "config/config.h"
#include "data/dataset.h"
#include "data/pipeline.h"
#include "train/replica.h"
#include "train/replica_threads.h"

typedef struct ct_run {
    ct_err err;              /* the run's failures: the handle's message (ct_errmsg) */
    ct_net *handle;          /* the public handle holding the run, for the callbacks that take it
                              * (ct_callbacks.after_step); opaque here */
    ct_config cfg;
    int graph_built;         /* config loaded and shapes inferred */

    ct_dataset train, test;
    ct_graph graph;          /* the network as built from the config: shapes, no memory */
    ct_replica *replicas;    /* each a bound copy on one device: devices = cpu:N makes N, a GPU
                              * list (or all) one per GPU */
    int n_replicas;
    ct_comm *comm;           /* how the replicas agree on gradients; its size is every process's replicas */
    struct ct_world *world;  /* the processes of an mpirun / srun launch (train/world.h); NULL alone */
    ct_replica_threads *threads; /* one host thread per replica; NULL with one replica, whose
                              * step runs on the calling thread as it always has */

    ct_augment augment;
    ct_augment_params augment_params; /* the same, for device-side augmentation */
    ct_pipeline *pipeline;   /* training batches */
    int pipeline_depth;      /* its ring depth: 1 means a slot must go back before the next */
    long *order;             /* (train.count) this epoch's sample order */
    long *eval_order;        /* (batch) indices of one evaluation batch */
    int batch;               /* per step, over all replicas */
    ct_batch_search search;  /* what batch = max | auto tried (mode "fixed" otherwise) */
    int inference;           /* prepared for evaluation and prediction only (no batch search) */

    int epoch;               /* epochs completed */
    long step;               /* optimizer steps taken */
    double last_test_accuracy; /* of the last evaluation after an epoch, -1 when none */
    struct ct_monitor *monitor; /* while training: GPU and CPU use (train/monitor.h) */
    struct ct_event_file *tensorboard; /* the epochs' events, NULL when none */
    double comm_seconds;     /* the all-reduce's time by the clock this epoch, where steps run on the host */
    long bad_images_before;  /* the pipeline's replaced-sample count when the epoch began */
    struct ct_trace *trace;  /* while a step is traced: its events (train/trace.h) */
    char resumed[160];       /* the checkpoint ct_resume loads, for the processes' join to compare
                              * (its step and checksum); "" when the run starts fresh */
} ct_run;

/* ---- the trainer (train.c) ---- */

/* Epochs from run->epoch to [train] epochs, with the callbacks (NULL: none). */
ct_status ct_train_fit(ct_run *run, const ct_callbacks *cb);
ct_status ct_train_evaluate(ct_run *run, const ct_dataset *ds, ct_eval_result *out);
/* Samples idx[0..n) of ds, augmented when asked, assembled in replica r's host staging and
 * submitted through its backend's input path into its network's input tensors. */
ct_status ct_train_stage_batch(ct_run *run, ct_replica *r, const ct_dataset *ds, const long *idx, int n,
                               int augment, uint64_t aug_seed, ct_err *err);
/* [train] threads for the calling thread's OpenMP work (the CPU backend). */
void ct_train_apply_threads(const ct_run *run);
/* The optimizer update of [train] t over bound network g's parameters, gradients and moments, as
 * each training step passes it to the backend's optimizer_step. */
ct_optim_step ct_train_optim_step(const ct_train_config *t, ct_graph *g);
/* fp16's loss scaler as training starts, from [train]'s loss_scale keys. */
ct_scaler ct_train_scaler_start(const ct_train_config *t);
/* One optimizer step at learning rate lr on a global batch of n samples, each replica's slice
 * already in its network's input tensors. */
ct_status ct_train_step(ct_run *run, int n, float lr, ct_err *err);
/* Replica 0's parameters and batch-norm statistics onto every other replica (nothing with one). */
ct_status ct_train_broadcast_state(ct_run *run, ct_err *err);
/* The training pipeline's config: [data]'s keys, replica 0's device's host memory for its ring,
 * device augmentation only where there is a device. */
void ct_run_pipeline_config(ct_run *run, ct_pipeline_config *pc);

/* ---- several processes (agreement.c) ---- */

/* What the processes of one launch must agree on, as lines of "key = value" for the join
 * (world.h), into *out (malloc'd): this cutrain's version, the config as resolved less the keys
 * that may differ per process, the data as loaded (counts, shapes, checksums), the global batch,
 * the parameter count, and `resumed`, what identifies the checkpoint resumed from (NULL or "":
 * none). On a run whose data is loaded and replicas bound. */
ct_status ct_run_agreement(const ct_run *run, const char *version, const char *resumed, char **out, ct_err *err);

/* ---- the benchmark and the trace (bench.c), on a prepared run ---- */

/* Training steps timed in stream order on real batches kept in backend memory (ct_bench). */
ct_status ct_train_bench(ct_run *run, int warmup, long steps, ct_bench_result *out);
/* One training step traced into the Chrome trace JSON file at path (ct_trace_step). */
ct_status ct_train_trace_step(ct_run *run, const char *path);

/* ---- the monitor of a run (monitor_run.c) ---- */

/* Watches the GPUs that replicas train on (none on the CPU) at 10 Hz. NULL only when memory runs
 * out. */
struct ct_monitor *ct_run_monitor_start(const ct_run *run);

#endif
