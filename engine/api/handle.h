/* The ct_net handle behind the public API: config, data, network, backend and training position.
 * Internal to the library (api.c, train.c). */
#ifndef CT_HANDLE_H
#define CT_HANDLE_H

#include "data/dataset.h"
#include "data/pipeline.h"
#include "train/comm.h"
#include "train/replica.h"
#include "train/replica_threads.h"

struct ct_net {
    ct_err err;
    ct_status open_status;   /* a failed open leaves only ct_errmsg and ct_close usable */
    ct_ini ini;
    ct_config cfg;
    int graph_built;         /* config loaded and shapes inferred */
    int prepared;            /* data loaded, memory bound */

    ct_dataset train, test;
    ct_graph graph;          /* the network as built from the config: shapes, no memory */
    ct_replica *replicas;    /* each a bound copy on one device: devices = cpu:N makes N, a GPU
                              * list (or all) one per GPU */
    int n_replicas;
    int gpu_ordinals[CT_MAX_REPLICAS];  /* the GPUs devices names, resolved when the run opens */
    int n_gpus;              /* 0 on the CPU */
    ct_comm *comm;           /* how the replicas agree on gradients; its size is every process's replicas */
    struct ct_world *world;  /* the processes of an mpirun / srun launch (train/world.h); NULL alone */
    ct_replica_threads *threads; /* one host thread per replica; NULL with one replica, whose
                              * step runs on the calling thread as it always has */
    char backend_reason[512];
    ct_alloc_fault alloc_fault;  /* handed to the devices as they are created */

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
    struct ct_monitor *monitor; /* while ct_fit runs: GPU and CPU use (train/monitor.h) */
    struct ct_event_file *tensorboard; /* ct_tensorboard_open's events, NULL when none */
    double comm_seconds;     /* the all-reduce's time by the clock this epoch, where steps run on the host */
    struct ct_trace *trace;  /* while ct_trace_step runs: the step's events (train/trace.h) */
};

/* The training pipeline's config: [data]'s keys, the backend's host memory for its ring, device
 * augmentation only where there is a device. */
void ct_net_pipeline_config(ct_net *net, ct_pipeline_config *pc);

/* Loads the config and builds the graph (shapes only, data probed not loaded). */
ct_status ct_net_build_graph(ct_net *net);

/* Checkpoint state (snapshot.c): the network's state into a checkpoint, and back after checking
 * every layer's name, type and shape against the config. */
struct ct_checkpoint;
ct_status ct_net_snapshot(ct_net *net, double test_accuracy, struct ct_checkpoint *ck, ct_err *err);
ct_status ct_net_restore(ct_net *net, const struct ct_checkpoint *ck, const char *source, ct_err *err);

/* The monitor of a run (train/monitor_run.c): watches the GPUs that replicas train on (none on
 * the CPU) at 10 Hz. NULL only when memory runs out. */
struct ct_monitor *ct_run_monitor_start(ct_net *net);

/* The trainer (train.c). */
ct_status ct_train_fit(ct_net *net, const ct_callbacks *cb);
ct_status ct_train_evaluate(ct_net *net, const ct_dataset *ds, ct_eval_result *out);
/* Samples idx[0..n) of ds, augmented when asked, assembled in replica r's host staging and
 * submitted through its backend's input path into its network's input tensors. */
ct_status ct_train_stage_batch(ct_net *net, ct_replica *r, const ct_dataset *ds, const long *idx, int n,
                               int augment, uint64_t aug_seed, ct_err *err);
/* [train] threads for the calling thread's OpenMP work (the CPU backend). */
void ct_train_apply_threads(const ct_net *net);
/* The optimizer update of [train] t over bound network g's parameters, gradients and moments, as
 * each training step passes it to the backend's optimizer_step. */
ct_optim_step ct_train_optim_step(const ct_train_config *t, ct_graph *g);
/* fp16's loss scaler as training starts, from [train]'s loss_scale keys. */
ct_scaler ct_train_scaler_start(const ct_train_config *t);
/* One optimizer step at learning rate lr on a global batch of n samples, each replica's slice
 * already in its network's input tensors. */
ct_status ct_train_step(ct_net *net, int n, float lr, ct_err *err);
/* Replica 0's parameters and batch-norm statistics onto every other replica (nothing with one). */
ct_status ct_train_broadcast_state(ct_net *net, ct_err *err);
/* [train] batch resolved on replica 0's device and backend (nothing bound): a number as given, or
 * batch = max | auto searched with real steps (batch_search.c); fills net->search. */
ct_status ct_batch_resolve(ct_net *net, int *batch);
/* The bytes a plan may take on a device that would train (every device in `devices` once there
 * are several; replica 0's today): the memory = limit: cap, else the device's free memory, less
 * memory_margin. *cap is the cap (0 without one). */
ct_status ct_memory_budget(const ct_train_config *t, ct_device *dev, size_t *budget, size_t *cap, ct_err *err);
/* Out of memory (st CT_ERR_NOMEM) while binding or training: appends the device, the batch, its
 * plan and the budget to the message, and with a fixed batch suggests batch = max. Returns st. */
ct_status ct_oom_explain(ct_net *net, ct_status st);
/* learning_rate's multiplier under lr_scaling at `batch`. */
double ct_lr_factor(const ct_train_config *t, int batch);
/* Learning rate at `step` (0-based) per the schedule and warm-up (optim.c). */
float ct_schedule_lr(const ct_train_config *t, long step, long steps_per_epoch);
/* Adam's bias correction 1 - beta^t, computed in double: it is tiny on the first steps. */
float ct_adam_bias(float beta, long t);

#endif
