/* cutrain: a C/CUDA training engine for dense and convolutional networks.
 *
 * The public API is a handle, status codes and a per-handle message, in the manner of SQLite:
 *
 *     ct_net *net = NULL;
 *     if (ct_open_file("net.ini", &net) != CT_OK) { fprintf(stderr, "%s\n", ct_errmsg(net)); ... }
 *     ct_set(net, "train.epochs", "3");
 *     ct_fit(net, &callbacks);
 *     ct_evaluate(net, &result);
 *     ct_close(net);
 *
 * The library never prints, exits or aborts; handles share no state, so two handles in one
 * process train independently. ct_open_* always store a handle (unless memory runs out), so the
 * message of a failed open can be read before ct_close. */
#ifndef CUTRAIN_H
#define CUTRAIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CT_VERSION_STRING "0.1.0"

typedef enum ct_status {
    CT_OK = 0,
    CT_ERR_USAGE,    /* bad argument to an API call or bad flag */
    CT_ERR_CONFIG,   /* bad config text, key, value or shape */
    CT_ERR_IO,       /* a file could not be opened, read or written */
    CT_ERR_DATA,     /* a data file is malformed, truncated or inconsistent */
    CT_ERR_NOMEM,    /* an allocation failed */
    CT_ERR_BACKEND,  /* the compute backend failed or is unavailable */
    CT_ERR_NUMERIC,  /* the loss or an activation became non-finite */
    CT_ERR_STOPPED,  /* a callback asked to stop */
    CT_ERR_INTERNAL
} ct_status;


typedef struct ct_net ct_net;

/* Shares of the train loop's wall time (they add up to 1 within a few percent): waiting for the
 * input pipeline, copying batches to the devices, computing the step, and communicating (the
 * gradients' all-reduce between replicas). Timed by the host's clock: exact on the CPU; on a GPU
 * the host's view (compute is where the host waits for the device). */
typedef struct ct_time_split {
    double input_wait, copy, compute, comm;
    /* On a GPU, the share of the loop its compute stream spent running steps (CUDA events around
     * each step of the first replica): the device's own view, apart from the four above; negative
     * on the CPU. */
    double device_busy;
} ct_time_split;

/* Per-epoch figures passed to the epoch callback. Test figures are negative when the data has no
 * test set. */
typedef struct ct_epoch_stats {
    int epoch;              /* 1-based */
    int epochs;
    long step;              /* optimizer steps taken so far */
    double loss;            /* mean training loss over the epoch */
    double train_accuracy;  /* over the epoch's training batches, as seen while training */
    double test_loss;
    double test_accuracy;
    double images_per_s;    /* training images per second of the epoch's train loop */
    double seconds;         /* wall-clock seconds of the epoch, evaluation included */
    double learning_rate;   /* at the epoch's last step */
    /* Share of the train loop's time spent waiting for input batches, and the pipeline that made
     * them (workers 0: pipeline = sync, or input_on_caller: each batch made on the trainer's thread
     * between steps, what workers = auto does on the CPU). See ct_input_verdict. */
    double input_wait_share;
    int input_workers, input_prefetch, input_on_caller;
    const char *precision;  /* "fp32", "fp16" or "bf16" */
    /* fp16's loss scaler at the epoch's end: the scale, and the steps skipped for a non-finite
     * gradient since training began; -1 for both without one (fp32, bf16) */
    double loss_scale;
    long skipped_steps;
    /* [data] on_bad_image = skip: the epoch's training samples whose file failed to decode and were
     * replaced by the next file of the index that decodes (ct_bad_image_files names them); 0
     * otherwise */
    long bad_images;
    /* What a monitor saw over the epoch's train loop, negative where unknown: the training GPUs'
     * utilization (%, NVML's: the share of time a kernel ran, averaged over ~10 samples a second
     * and the GPUs), the highest memory in use on them (MiB, every process's), their power draw
     * (W, summed) and SM clock (MHz); the process's CPU use in cores and the machine's in % of
     * all its cores (/proc). The GPU figures are unknown on the CPU, without NVML
     * (libnvidia-ml.so.1), and after NVML fails. */
    double gpu_util, gpu_mem_mib, power_w, sm_clock_mhz;
    double cpu_util, cpu_util_machine;
    ct_time_split time_split;
    /* One line on what bounds the step, e.g. "input-bound: 61% waiting for input; raise workers
     * or use augment_on = gpu". */
    char time_verdict[192];
    /* Set on the epoch in which NVML stopped answering (the GPU figures are unknown from then
     * on), "" otherwise: a warning to show once. */
    char monitor_note[256];
} ct_epoch_stats;

/* Progress within an epoch, passed to the step callback every `step_every` steps and at the
 * epoch's last step. */
typedef struct ct_progress {
    int epoch, epochs;
    long step_in_epoch, steps_per_epoch;
    double loss, accuracy;  /* running means over the epoch so far */
    double images_per_s;
    double seconds;         /* since the epoch started */
    double input_wait_share;/* of the epoch so far */
    double gpu_util;        /* % over the epoch so far, negative when unknown (see ct_epoch_stats) */
    long skipped_steps;     /* fp16 on a host-memory device (the CPU), where reading the scaler is free:
                             * steps skipped so far; -1 elsewhere (the epoch's stats have it) */
} ct_progress;

/* A callback returns 0 to go on, non-zero to stop training (ct_fit then returns CT_ERR_STOPPED). */
typedef struct ct_callbacks {
    int (*on_epoch)(const ct_epoch_stats *stats, void *user);
    int (*on_step)(const ct_progress *progress, void *user);
    long step_every;        /* 0: every 20 steps */
    void *user;
    /* Called after every optimizer step with the steps taken so far, without reading anything
     * back from the device; the network is consistent there, so it may ct_save (periodic
     * checkpoints, Ctrl-C). Non-zero stops training (CT_ERR_STOPPED). May be NULL. */
    int (*after_step)(ct_net *net, long steps_done, void *user);
} ct_callbacks;

typedef struct ct_eval_result {
    double loss;
    double accuracy;
    long images;
} ct_eval_result;

typedef struct ct_layer_info {
    const char *name;
    const char *type;       /* "dense", "conv2d", ... */
    int h, w, c;            /* output shape per sample, NHWC */
    long params;            /* trainable parameters */
    double flops;           /* forward FLOPs per sample (a multiply-add counts 2) */
    long activation_bytes;  /* bytes per sample kept for backward */
} ct_layer_info;

/* The TensorFlow Profiler's reading of an input wait share: "highly input-bound" (>= 20%),
 * "moderately input-bound" (>= 5%) or "not input-bound". */
const char *ct_input_verdict(double input_wait_share);

const char *ct_version(void);
const char *ct_status_name(ct_status status);

/* Several processes (mpirun -np P, srun): this process's rank and their number, as the
 * launcher's environment says (0 and 1 without a launcher); readable before any open, in any
 * build. Each process then trains one replica of the global batch; rank 0 alone should print and
 * save. A build without MPI refuses to prepare in such a process (ct_prepare says how to build). */
void ct_process_world(int *rank, int *size);
/* After a failure in one of several processes: ends them all (MPI_Abort with `code`), since a
 * peer that is stopped never ends by itself. Returns, doing nothing, where MPI is not running. */
void ct_process_abort(int code);

/* Parses the ini file (syntax only: sections, keys, duplicates); values are checked by
 * ct_prepare so that ct_set overrides can come first. */
ct_status ct_open_file(const char *path, ct_net **out);
/* `name` is used in messages and relative paths resolve against the current directory. */
ct_status ct_open_string(const char *text, const char *name, ct_net **out);
void ct_close(ct_net *net);

/* Overrides one key, as the command line's --set: ct_set(net, "train.batch", "128").
 * Allowed until ct_prepare. */
ct_status ct_set(ct_net *net, const char *section_dot_key, const char *value);

/* For tests of what follows an out-of-memory: once the devices are created (ct_prepare), the
 * device allocation after `skip` successful ones fails, and so do the `count` - 1 after it.
 * Allowed until ct_prepare. */
ct_status ct_inject_alloc_failures(ct_net *net, long skip, long count);

/* Validates the config, loads the data, builds the network and allocates everything.
 * ct_fit, ct_evaluate and the layer queries call it when it has not run. */
ct_status ct_prepare(ct_net *net);

ct_status ct_fit(ct_net *net, const ct_callbacks *callbacks);
/* TensorBoard event files: every epoch of the following ct_fit calls is written to DIR as scalar
 * summaries at the epoch's global step (docs/monitoring.md, "TensorBoard", lists the tags; a figure the
 * epoch's stats mark unknown is left out) and flushed, so `tensorboard --logdir DIR` shows it
 * while training runs. Creates DIR (and its parents) when missing and, at once, a new file
 * DIR/events.out.tfevents.<unix time>.<host name>; a folder that cannot be created or written is
 * refused here (CT_ERR_IO, naming it), before anything trains. A second call starts a new file.
 * A write failing mid-run stops ct_fit with CT_ERR_IO. */
ct_status ct_tensorboard_open(ct_net *net, const char *dir);
/* The event file being written, NULL before ct_tensorboard_open. */
const char *ct_tensorboard_path(const ct_net *net);
ct_status ct_evaluate(ct_net *net, ct_eval_result *result);

/* Checkpoints: parameters, optimizer state, batch-norm statistics and the training position, in
 * a versioned file with a CRC, replaced atomically. ct_load prepares the network if needed and
 * refuses a checkpoint whose layers differ from the config, naming the layer; training then
 * continues where the checkpoint left off (bit-identically on the CPU with the same threads and
 * batch). Optimizer moments load only when the optimizer is the same. A checkpoint also keeps
 * the training set's file index hash and class names when the set has them (an image folder):
 * ct_load takes the names (ct_class_name) and does not compare the sets, since evaluating and
 * predicting on other data is ordinary. */
ct_status ct_save(ct_net *net, const char *path);
ct_status ct_load(ct_net *net, const char *path);
/* ct_load for continuing training: first refuses (CT_ERR_DATA, the network unchanged) a
 * checkpoint saved from a training folder whose index hash differs from the configured training
 * set's now (files added, removed, renamed or resized), or whose class names differ, with a
 * message naming the checkpoint, the folder and both hashes. A checkpoint without a hash or
 * names (IDX, CIFAR-10, synthetic data, older checkpoints) loads as with ct_load. Called before
 * ct_prepare, it reads the checkpoint first and prepares the run itself; in one of several
 * processes (mpirun, srun) it must be, so that the processes' join compares the checkpoint each
 * resumes from (CT_ERR_USAGE on a run already prepared). */
ct_status ct_resume(ct_net *net, const char *path);
/* What the last ct_resume means beyond the state it restored, "" when nothing: the checkpoint was
 * trained with another optimizer (its moments are dropped, the config's start from zero), or it is
 * at or past [train] epochs (nothing is left to train; ct_fit returns at once). Never NULL. */
const char *ct_resume_note(const ct_net *net);
/* The class names predictions can be printed with: those of the checkpoint last loaded when it
 * carries them, else the training set's once prepared (an image folder's class folders, in label
 * order). ct_class_name_count is 0 when there are none; ct_class_name is NULL then, and for an
 * index out of range. The string lives until the next load or ct_close. */
int ct_class_name_count(const ct_net *net);
const char *ct_class_name(const ct_net *net, int index);
/* Reads and checks a checkpoint (CRC, format) without loading it: its position and the test
 * accuracy it was saved with (-1 when none). */
ct_status ct_checkpoint_info(ct_net *net, const char *path, int *epoch, long *step, double *test_accuracy);
/* [train] checkpoint_every and keep, for a caller that manages a checkpoint folder. */
ct_status ct_checkpoint_settings(ct_net *net, long *every_steps, int *keep);
int ct_epochs_done(const ct_net *net);
long ct_steps_done(const ct_net *net);

/* Class probabilities for `count` images given as the data files hold them: (count, h, w, c)
 * uint8, normalised as the config says. classes (count) gets the most likely class and
 * probabilities (count) its probability; either may be NULL. */
ct_status ct_predict(ct_net *net, const unsigned char *images, long count, int *classes, float *probabilities);

/* Image files to predict (JPEG and PNG), opened through the network's config. */
typedef struct ct_image_files ct_image_files;
/* Opens paths[0..n_paths): each a JPEG or PNG file, or a folder whose images (told by their bytes,
 * searched recursively, in sorted path order, hidden files skipped) are taken; files in the order
 * given, folders expanded in place. Each image is decoded when predicted, with [data]'s evaluation
 * transform (image_size, eval_resize, channels, max_pixels, normalize); a config without image
 * keys (a network trained on IDX or CIFAR-10) resizes to the network's input shape. Fails with
 * the message on the handle (ct_errmsg) naming the path; *out is NULL then. */
ct_status ct_open_image_files(ct_net *net, const char *const *paths, int n_paths, ct_image_files **out);
long ct_image_files_count(const ct_image_files *files);
/* The file image `index` comes from (NULL out of range); lives until ct_close_image_files. */
const char *ct_image_files_path(const ct_image_files *files, long index);
/* ct_predict for every image of files: classes and probabilities (ct_image_files_count each, either
 * may be NULL) as ct_predict gives them. A file that does not decode fails (CT_ERR_DATA) naming it. */
ct_status ct_predict_files(ct_net *net, const ct_image_files *files, int *classes, float *probabilities);
void ct_close_image_files(ct_image_files *files);   /* NULL is ignored */
/* Class probabilities for every class: probs (count, classes) gets the softmax of each image's
 * logits, as ct_predict computes its one probability; images as ct_predict takes them. */
ct_status ct_predict_probs(ct_net *net, const unsigned char *images, long count, float *probs);

/* ---- export (cutrain export, docs/export.md) ---- */

#define CT_EXPORT_OPSET_DEFAULT 17

typedef enum ct_export_format { CT_EXPORT_ONNX = 0, CT_EXPORT_SAFETENSORS } ct_export_format;

typedef struct ct_export_options {
    ct_export_format format;
    int opset;        /* ONNX opset, 13 to 21; 0: CT_EXPORT_OPSET_DEFAULT */
    int batch;        /* ONNX: the input's batch dimension; 0: dynamic */
    int fp16;         /* 1: fp16 weights (ONNX: and computation, with fp32 input and output); 0: the
                       * checkpoint's fp32 (master) weights, whatever precision trained them */
} ct_export_options;

/* Writes the network of the handle's config with the weights of the checkpoint `weights` to path:
 * the inference network as an ONNX model (input: the pixels as the data files hold them, NCHW,
 * normalised inside; output: softmax probabilities; class names and the config in its metadata),
 * or the weights alone as safetensors. Loads no data (the data files are probed for the input
 * shape only) and opens no device: the graph is built from the config and the values read from
 * the checkpoint, which must match it layer by layer
 * (the message names the first layer that differs). Written to a temporary file and renamed: a
 * failure leaves no file and an existing one unchanged. options NULL: ONNX, the defaults. */
ct_status ct_export(ct_net *net, const char *weights, const char *path, const ct_export_options *options);

/* Per-sample input shape (height, width, channels) and class count. */
ct_status ct_input_shape(ct_net *net, int *h, int *w, int *c, int *classes);

int ct_layer_count(ct_net *net);                        /* -1 when not prepared */
ct_status ct_layer_info_get(ct_net *net, int index, ct_layer_info *info);

/* The bytes training allocates on the device at `batch` (0: the config's; with batch = max | auto,
 * the batch found once prepared, else the largest that fits the budget), by purpose and by element
 * type, in the config's precision; computed without allocating. Before ct_prepare with the CPU
 * backend's workspace, after it with the training backend's (cuDNN's and cuBLASLt's on a GPU).
 * total is what the device's allocator counts in use once prepared at that batch
 * (ct_memory_usage_get), to the byte. */
typedef struct ct_memory_info {
    int batch;
    long long params;        /* fp32 master parameters and their gradients */
    long long params_half;   /* their fp16 / bf16 copy (0 in fp32) */
    long long optimizer, state, inputs, activations, gradients, workspace;
    long long backend;       /* the backend's own buffers (the GPU's input staging and step scalars) */
    long long padding;       /* each allocation rounded up to 256 bytes by the allocator */
    long long total;
    long long fp32, fp16, bf16, int32, uint8;   /* the same total by element type */
    /* The largest batch (a multiple of 8) whose plan fits the budget: the memory = limit: cap, or
     * the free memory of the device that would train, less memory_margin; 0 when batch 8 does not
     * fit. budget is that many bytes; exceeds_cap is 1 when this plan is over a limit: cap. */
    int max_batch;
    long long budget;
    int exceeds_cap;
    const char *planned_with;   /* whose workspace sizes the plan has: "cpu" or "cuda" */
} ct_memory_info;
ct_status ct_memory_info_get(ct_net *net, int batch, ct_memory_info *info);

/* What the device allocator of the (first) device counts, in bytes, once prepared: every device
 * allocation goes through it and [train] memory governs it (grow, preallocate, limit:MiB). */
typedef struct ct_memory_usage {
    long long in_use;        /* allocated now (each allocation rounded up to 256 bytes) */
    long long peak;          /* the most in use at once so far */
    long long reserved;      /* held from the driver: in use, cached for reuse, a preallocated arena */
    long long cap;           /* memory = limit:MiB in bytes; 0 = none */
    long long pinned_in_use, pinned_peak;  /* host memory for the input ring, counted apart */
} ct_memory_usage;
ct_status ct_memory_usage_get(ct_net *net, ct_memory_usage *out);
/* The many-small-layers check, for the GPU that would train: the visible one (the first of
 * `devices`), or an H100-class model (132 SMs at 1.98 GHz, 3.35 TB/s, 990 TFLOP/s dense fp16,
 * 67 TFLOP/s fp32) where none is visible or devices = cpu. Each layer's forward + backward
 * kernel time at the batch is estimated by a roofline, max(FLOPs / peak, bytes / bandwidth),
 * and compared with the cost of launching its kernels (about 3 us each without CUDA graphs,
 * 1 us inside a captured step); a layer whose kernels would finish sooner is launch-bound.
 * Kernel counts are rough (a library call counts one kernel). Computed without allocating. */
typedef struct ct_launch_layer {
    int kernels;             /* forward + backward; 0 for an aliasing flatten */
    double kernel_us;        /* the roofline's estimate, forward + backward at the batch */
    double launch_us;        /* kernels x per_launch_us */
    int launch_bound;        /* kernel_us < launch_us */
} ct_launch_layer;
typedef struct ct_launch_report {
    int batch;
    char device[128];        /* "NVIDIA H200 (132 SMs at 1.98 GHz, 4.8 TB/s)" or the model's */
    int measured;            /* 1: the visible GPU's figures; 0: the H100-class model */
    double per_launch_us;    /* 1 with graph = on or auto, 3 with graph = off */
    int layers;              /* layers that launch kernels */
    int launch_bound;        /* of those */
    long launches;           /* kernels per training step: layers, input, loss, optimizer */
    double launch_us;        /* launches x per_launch_us */
    double kernel_us;        /* the step's estimated kernel time */
    int warn;                /* more than half the layers are launch-bound */
    /* when warn: "18 of 19 layers are launch-bound at batch 256: the step is about 84 launches
     * (~84 us of launch overhead vs ~10 us of kernel time); use wider layers, a larger batch, or
     * graph = on"; "" otherwise */
    char message[512];
} ct_launch_report;
/* batch 0: the config's. layers, when not NULL, gets n_layers entries (ct_layer_count). */
ct_status ct_launch_report_get(ct_net *net, int batch, ct_launch_report *report, ct_launch_layer *layers,
                               int n_layers);
/* Mirrored data parallelism predicted for the GPU ct_launch_report_get models: the fp32 gradient
 * bytes all-reduced per step (in 25 MiB buckets, a ring over the GPUs at bus_gbps of bus
 * bandwidth as nccl-tests reports it, 0: an NVLink H100-class node's 450 GB/s, and 15 us per
 * call), against one replica's roofline step time at its share of the global batch, on 2, 4 and
 * 8 GPUs. Efficiency is the speedup over one GPU at the whole batch divided by the GPUs, with the
 * all-reduce after backward (serial) or overlapping it bucket by bucket (DDP's way; the last
 * bucket cannot overlap). An estimate until a multi-GPU machine measures it. */
typedef struct ct_scaling_report {
    int batch;               /* the global batch */
    long long allreduce_bytes;
    int buckets;
    double bus_gbps, call_us;
    double single_step_us;   /* one GPU at the whole batch */
    int n_rows;
    struct {
        int gpus, batch_per_gpu;      /* batch_per_gpu 0: the batch gives a GPU no sample */
        double step_us, allreduce_us; /* one replica's step at its share; the all-reduce */
        double efficiency_serial, efficiency_overlap;
    } rows[3];
} ct_scaling_report;
/* batch 0: the config's. bus_gbps 0: the default model's. */
ct_status ct_scaling_report_get(ct_net *net, int batch, double bus_gbps, ct_scaling_report *report);
const char *ct_backend_name(const ct_net *net);        /* "cpu" once prepared */
/* Why that backend was chosen, e.g. "devices = all but no CUDA device is present". */
const char *ct_backend_reason(const ct_net *net);
/* Anything the backend changed on its own while running, e.g. "CUDA graph capture failed,
 * running without graphs: ..." or, with deterministic = on, that a convolution had no
 * deterministic algorithm; several are joined with "; ". "" when nothing. */
const char *ct_backend_note(const ct_net *net);
/* The batch per step: the config's number, or what batch = max | auto found once prepared (0 before). */
int ct_batch_size(const ct_net *net);
long ct_train_images(const ct_net *net);
/* A training folder's files left out of its index (format = imagefolder): hidden ones (a leading
 * '.') and those that are not JPEG or PNG by their bytes; 0 for other formats. Either may be NULL. */
void ct_train_files_skipped(const ct_net *net, long *hidden, long *not_images);
/* The training files that failed to decode so far under on_bad_image = skip: how many, and the
 * first `max` of their paths in paths[] (valid while the net lives; paths may be NULL). */
long ct_bad_image_files(const ct_net *net, const char **paths, long max);

/* ---- the batch: batch = max | auto, and lr_scaling ---- */

#define CT_BATCH_TRIALS 24

/* One batch the search considered. */
typedef struct ct_batch_trial {
    int batch;
    int fits;                /* 1 when its plan fit the budget and real steps ran at it */
    double images_per_s;     /* over its timed steps (warm-up excluded); -1 when not measured */
    long long plan_bytes;    /* the memory plan's total at this batch */
    char note[64];           /* "chosen", "plan over the budget", "allocation failed", ... */
} ct_batch_trial;

/* What batch = max | auto tried and why the winner won (mode "fixed" and no trials for a number). */
typedef struct ct_batch_search {
    const char *mode;        /* "fixed", "max" or "auto" */
    int batch;               /* the batch training uses */
    long long budget;        /* bytes a plan had to fit: the limit: cap or the free memory, less memory_margin */
    int steps_bound;         /* auto: the largest batch that leaves min_steps_per_epoch steps an epoch; 0 otherwise */
    int bounded;             /* auto: 1 when that bound, not memory or images/s, ended the search */
    int n_trials;            /* in the order tried */
    ct_batch_trial trials[CT_BATCH_TRIALS];
    char reason[400];        /* why the winner won, one sentence */
    char warning[256];       /* "" or why the batch may converge worse (lr_scaling = none above base_batch) */
} ct_batch_search;

/* Prepares the network (running the search) when it has not been, then fills *out. */
ct_status ct_batch_search_get(ct_net *net, ct_batch_search *out);

/* How learning_rate follows the batch ([train] lr_scaling, base_batch). */
typedef struct ct_lr_scaling_info {
    const char *rule;        /* "none", "linear" or "sqrt" */
    int batch;               /* the batch training uses */
    int base_batch;          /* the batch learning_rate was tuned for; 0 when not given */
    double learning_rate;    /* as configured */
    double factor;           /* applied to it (1 with none): the schedule and warm-up run on the product */
    double linear_factor;    /* batch / base_batch, what linear scaling would apply; 0 without base_batch */
} ct_lr_scaling_info;

/* Prepares the network when it has not been, then fills *out. */
ct_status ct_lr_scaling_get(ct_net *net, ct_lr_scaling_info *out);

/* Prepares for evaluation and prediction only (cutrain eval, predict): as ct_prepare, but
 * batch = max | auto, which find a training batch by measuring training steps, are refused
 * (CT_ERR_CONFIG, naming the line): give these a number. ct_evaluate and ct_predict call it on a
 * handle that has not been prepared. */
ct_status ct_prepare_inference(ct_net *net);

/* ---- benchmarking (cutrain bench) ---- */

typedef struct ct_bench_result {
    int batch;
    long steps;              /* timed steps */
    double images_per_s;     /* training images per second over the timed steps */
    double ms_per_step;      /* mean milliseconds per step (CUDA events on the GPU) */
    double ms_per_step_min;  /* fastest of the timed windows */
    int graph;               /* 1 when the step ran as a captured CUDA graph */
    const char *precision;   /* [train] precision: "fp32", "fp16" or "bf16" */
    /* fp16's loss scaler after the timed steps (read outside them): the scale, and the steps
     * skipped for a non-finite gradient, warm-up included; -1 for both without one */
    double loss_scale;
    long skipped_steps;
} ct_bench_result;

/* Times training steps (forward, loss, backward, optimizer) after `warmup` untimed ones, on real
 * batches of the training set cycled through the backend's input staging, so the timed work is
 * the model's and the inputs' device copies, not the host's batch assembly. Changes the weights:
 * prepare a fresh handle for training afterwards. */
ct_status ct_bench(ct_net *net, int warmup, long steps, ct_bench_result *out);

typedef struct ct_input_bench_result {
    long batches, images;    /* timed */
    double images_per_s;
    double seconds;
    int workers, prefetch;   /* what ran (auto's choice); workers 0 with pipeline = sync */
    int sync;
    double cpu_seconds;      /* user + system time of the process over the timed part (every
                                thread); negative when unknown */
    long long input_bytes;   /* compressed bytes read over the timed part (image folders; 0 for
                                data held in memory) */
} ct_input_bench_result;

/* The input pipeline alone, no model (`cutrain bench --input-only`): `warmup` then `batches`
 * training batches made as the config says (workers, prefetch, pipeline, augment_on, augment),
 * each handed back at once, timed on the host clock. */
ct_status ct_bench_input(ct_net *net, long warmup, long batches, ct_input_bench_result *out);

/* Runs two training steps like ct_bench's (which they change the weights as) and writes the
 * second's trace to path as Chrome trace JSON (chrome://tracing, ui.perfetto.dev): on each
 * replica, every layer's backward and every gradient bucket's all-reduce ([train] bucket_mib),
 * with start and duration by the host clock, so one sees whether the reductions overlap backward.
 * On a GPU the host clock shows when the work was enqueued, not when it ran. Under several
 * processes every rank must call it (the step's collectives need them all); rank 0 writes. */
ct_status ct_trace_step(ct_net *net, const char *path);

/* ---- GPU health (cutrain doctor) ---- */

#define CT_DOCTOR_MAX_GPUS 16
#define CT_DOCTOR_MAX_WARNINGS 8

typedef struct ct_gpu_health {
    int ordinal;
    char name[96];
    double total_mib, free_mib;
    int pass;                /* 1 when every check on this GPU passed */
    double gemm_rel_err;     /* largest relative error of its GEMM against the CPU */
    double conv_rel_err;     /* of its convolution against the CPU */
    char detail[320];        /* the first failure, or what passed */
} ct_gpu_health;

typedef struct ct_doctor_report {
    int built_with_cuda;
    /* versions as the libraries encode them; 0 when absent */
    int driver_cuda, runtime_cuda;          /* 13000 = CUDA 13.0 */
    int cublas_compiled, cublas_loaded;     /* e.g. 130100 */
    int cudnn_compiled, cudnn_loaded;       /* e.g. 91900 = 9.19.0 */
    int nccl_compiled, nccl_loaded;         /* e.g. 22809 = 2.28.9 */
    int n_gpus;
    ct_gpu_health gpus[CT_DOCTOR_MAX_GPUS];
    int together;            /* -1 fewer than 2 GPUs, 0 failed, 1 passed: all GPUs at once */
    char together_detail[320];
    int n_warnings;
    char warnings[CT_DOCTOR_MAX_WARNINGS][200];
    char no_gpu_reason[200]; /* why n_gpus is 0 */
    int pass;                /* n_gpus > 0, every GPU passed, and together did not fail */
} ct_doctor_report;

/* Checks the driver, the libraries and each visible GPU (allocate, a GEMM and a convolution
 * checked against the CPU, a one-rank NCCL all-reduce), then all of them together. Fills
 * *report and returns CT_OK whenever it could run the checks, whatever they found; read
 * report->pass. Prints nothing. */
ct_status ct_doctor(ct_doctor_report *report);

/* The message of the last failure on this handle ("" when none). Safe on NULL. */
const char *ct_errmsg(const ct_net *net);

/* ---- files and formatting without a handle (what the command needs besides a network) ---- */

/* Images as a data file holds them, the layout ct_predict takes. */
typedef struct ct_images {
    unsigned char *pixels;  /* (count, h, w, c) uint8; freed by ct_free_images */
    long count;
    int h, w, c;
} ct_images;

/* Reads an IDX image file (magic 0x00000803: n, rows, cols; or 0x00000804: n, h, w, c), raw or
 * gzip (told by content, not by name), into *out. With no handle to hold it, the message goes to
 * the caller's buffer: on failure msg receives a message naming the file (truncated to msg_size
 * bytes, always NUL-terminated), on success ""; msg may be NULL. *out is empty on failure. */
ct_status ct_read_idx_images(const char *path, ct_images *out, char *msg, size_t msg_size);
/* Frees the pixels and empties *images; safe on NULL and on an empty or already freed set. */
void ct_free_images(ct_images *images);

/* A per-sample shape as `cutrain summary` prints it: "28x28x1", or "10" for 1x1x10. Writes at
 * most size bytes, NUL-terminated (truncated when short); CT_ERR_USAGE when buf is NULL or size
 * is 0. */
ct_status ct_format_shape(int h, int w, int c, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
