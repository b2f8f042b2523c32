/* The ini reader and the typed configuration (docs/architecture.md, "Config format").
 *
 * Two stages, so that --set overrides land before validation:
 *   ct_ini_parse   text -> sections and key/value entries with line numbers (syntax errors);
 *   ct_ini_set     one "section.key" override (line 0, named "--set section.key" in messages);
 *   ct_config_load ct_ini -> ct_config: unknown sections/keys (with the nearest valid key
 *                  suggested), missing required keys, bad numbers, unknown enum values,
 *                  duplicate layer names, unknown input references; every error names FILE:LINE.
 * Shapes are checked later, by the network builder, with the layer's line. */
#ifndef CT_CONFIG_H
#define CT_CONFIG_H

#include "base/status.h"
#include "base/types.h"
#include "data/settings.h"   /* [data] is the data code's struct: config depends on data, not the reverse */

typedef struct ct_ini_entry {
    char *key;
    char *value;
    int line;        /* 0 for a --set override */
} ct_ini_entry;

typedef struct ct_ini_section {
    char *name;
    int line;
    ct_ini_entry *entries;
    int n_entries, cap_entries;
} ct_ini_section;

typedef struct ct_ini {
    char *file;      /* name used in messages */
    ct_ini_section *sections;
    int n_sections, cap_sections;
} ct_ini;

/* Parses `text` (LF or CRLF; `#` and `;` comments, also inline after whitespace). Duplicate
 * section names or duplicate keys in a section are errors. On failure `ini` is left freeable. */
ct_status ct_ini_parse(ct_ini *ini, const char *text, const char *file, ct_err *err);
/* Sets section.key = value, replacing an existing entry or adding one (the section must exist,
 * except [data] and [train] which are created). */
ct_status ct_ini_set(ct_ini *ini, const char *section_dot_key, const char *value, ct_err *err);
void ct_ini_free(ct_ini *ini);

#define CT_MAX_NAME 64
#define CT_MAX_INPUTS 8   /* producers one layer may read */

#define CT_MAX_BATCH_CANDIDATES 16
#define CT_MAX_REPLICAS 64        /* devices = cpu:N */

/* [train] comm: which communicator the replicas use. */
typedef enum ct_comm_kind { CT_COMM_AUTO = 0, CT_COMM_NCCL } ct_comm_kind;

typedef struct ct_train_config {
    int epochs;
    int batch;               /* the batch for CT_BATCH_FIXED; 0 until a search resolves it */
    ct_batch_mode batch_mode;
    int batch_line;          /* file line of `batch`, -1 from --set, 0 the default */
    float memory_margin;     /* fraction of the budget kept free by max and auto (0 .. 0.5) */
    int batch_max;           /* upper bound of max and auto; 0: the training set size */
    float batch_search_seconds;  /* auto: stop trying larger candidates after this long */
    int batch_candidates[CT_MAX_BATCH_CANDIDATES];  /* auto: the batches to try, ascending */
    int n_batch_candidates;  /* 0: doubling from 32 */
    int min_steps_per_epoch; /* auto: never a batch that leaves fewer steps an epoch */
    ct_lr_scaling lr_scaling;
    int base_batch;          /* the batch learning_rate was tuned for; 0 when not given */
    double lr_factor;        /* learning_rate's multiplier from lr_scaling at the resolved batch
                              * (1 until resolved, and with none) */
    ct_optimizer optimizer;
    float learning_rate;
    float momentum;          /* momentum optimizer */
    int nesterov;
    float beta1, beta2, epsilon;
    float weight_decay;      /* L2 for sgd/momentum/adam, decoupled for adamw */
    ct_schedule schedule;
    float step_size;         /* epochs between decays (step) */
    float gamma;             /* decay factor (step) */
    float warmup;            /* epochs of linear warm-up */
    float min_lr;            /* floor of the cosine schedule */
    ct_precision precision;
    float loss_scale;        /* fp16: a fixed loss scale, or 0 for `dynamic` */
    float loss_scale_init;   /* fp16 dynamic: the first scale */
    int loss_scale_growth_steps;  /* fp16 dynamic: clean steps before the scale doubles */
    char devices[64];        /* "cpu" (cpu:N too), "all", or a comma list of ordinals */
    int replicas;            /* devices = cpu:N: N CPU replicas; a GPU list: its length; 1 for cpu
                              * and all (all is counted when the run opens) */
    int devices_line;        /* file line of `devices`, -1 from --set, 0 the default */
    float bucket_mib;        /* gradients all-reduced in buckets of this many MiB */
    float comm_timeout;      /* seconds a replica waits for the others in a collective */
    int sync_bn;             /* 1: batch norm's statistics over the global batch (all replicas) */
    ct_comm_kind comm;       /* auto: NCCL over several GPUs, none for one; nccl: NCCL even for one */
    int capture;             /* the graph key (CUDA graphs): 1 on, 0 off, -1 auto (on for CUDA) */
    int deterministic;       /* 1: cuDNN's deterministic convolution algorithms where one exists */
    int tf32;                /* 1: cuDNN's fp32 convolutions may use TF32 tensor cores (ignored on the CPU) */
    int winograd;            /* 1: the CPU's 3x3 stride-1 convolutions may run Winograd (ignored on GPUs) */
    int sparse_backward;     /* 1: the CPU's convolutions may run their backward over a mostly-zero
                              * output gradient's non-zeros alone (ignored on GPUs) */
    uint64_t seed;
    int threads;             /* CPU threads, 0 = all cores */
    long checkpoint_every;   /* also save every N steps (with --checkpoint DIR), 0 = epochs only */
    int keep;                /* checkpoints kept in the folder besides the best one */
    ct_memory_mode memory;   /* grow (allocate as needed), preallocate, or a hard limit */
    long memory_limit_mib;   /* with CT_MEMORY_LIMIT */
    int memory_line;         /* file line of `memory`, -1 from --set, 0 the default */
    int line;
} ct_train_config;

typedef struct ct_layer_config {
    char name[CT_MAX_NAME];
    ct_layer_type type;
    int line;                /* line of the section header */
    char inputs[CT_MAX_INPUTS][CT_MAX_NAME];
    int n_inputs;            /* 0 = the previous layer (or the data for the first layer) */
    int inputs_line;
    ct_activation activation;
    int units;               /* dense */
    int filters, size, stride;   /* conv2d; pools use size and stride (stride 0 = size) */
    ct_padding padding;
    int bias;                /* dense, conv2d: 1 on */
    ct_init init;
    int global;              /* avgpool/maxpool over the whole plane */
    float rate;              /* dropout */
    float momentum, epsilon; /* batchnorm */
    ct_layer_dtype dtype;    /* dense, conv2d, batchnorm: auto or pinned to fp32 */
} ct_layer_config;

/* One key as resolved (its value, else its default), for comparing the configs of the processes of
 * one launch, which must agree (train/world.h's join). */
typedef struct ct_config_value {
    char *key;               /* "section.key" */
    char *value;             /* numbers and words as parsed ("1e-3" and "0.001" alike), other values
                              * as written, "(not set)" without a value or default */
    int per_process;         /* may differ between the processes of one launch: what says where
                              * (paths, whose content the data's checksum compares), on which device
                              * and how fast, never what is trained */
} ct_config_value;

typedef struct ct_config {
    char *file;              /* as given */
    char *dir;               /* folder of file, for relative paths */
    ct_data_settings data;
    ct_train_config train;
    ct_layer_config *layers;
    int n_layers;
    ct_config_value *values; /* every section's keys, in file order, each section's in its table's */
    int n_values;
} ct_config;

ct_status ct_config_load(ct_config *cfg, const ct_ini *ini, ct_err *err);
void ct_config_free(ct_config *cfg);
/* A failure about [train] `key` whose origin is `key_line` (a *_line field above): at its file line
 * (> 0), as "--set train.KEY: " for a command-line value (< 0: --set, or a flag that stands for it),
 * else at the [train] header's line (the default). */
ct_status ct_config_fail_train(ct_err *err, ct_status status, const ct_config *cfg, int key_line, const char *key,
                               const char *fmt, ...);

#endif
