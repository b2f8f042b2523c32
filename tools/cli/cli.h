/* The cutrain command: shared options and the subcommands (one file each). */
#ifndef CT_CLI_H
#define CT_CLI_H

#include <stdio.h>

#include "cutrain.h"

/* Exit codes: 0 ok, 1 runtime failure, 2 bad usage or config. */
enum { CLI_OK = 0, CLI_FAILURE = 1, CLI_USAGE = 2 };

#define CLI_MAX_SETS 64

typedef struct cli_options {
    const char *command;    /* train, eval, summary */
    const char *config;
    const char *sets[CLI_MAX_SETS];  /* "section.key=value" */
    int n_sets;
    const char *log_path;
    const char *tensorboard_dir; /* train: TensorBoard event files here */
    const char *devices;
    const char *checkpoint_dir;  /* train: save here */
    const char *resume;          /* train: checkpoint file or folder to continue from */
    const char *weights;         /* eval, predict: checkpoint to load */
    const char *images;          /* predict: IDX images */
    const char *out;             /* predict: CSV path ("-" or absent: stdout) */
    long steps;                  /* bench, experiment: timed steps (0: default) */
    double seconds;              /* experiment: timed seconds per rung (0: default) */
    const char *rungs;           /* experiment: which rungs ("0-3", "0,2"; NULL: all) */
    long warmup;                 /* bench: untimed steps (-1: default) */
    const char *batch;           /* --batch B: train.batch */
    const char *precision;       /* --precision P: train.precision */
    int input_only;              /* bench: the input pipeline alone */
    const char *trace;           /* bench: write one step's trace here */
    int json;                    /* summary: one JSON object instead of the table */
    double bus_gbps;             /* summary: all-reduce bus bandwidth for the scaling estimate (0: model) */
    int quiet;
} cli_options;

/* Opens the config and applies --set and --devices; prints the failure and returns an exit code,
 * or CLI_OK with *out open. */
int cli_open(const cli_options *opt, ct_net **out);
/* Prints "cutrain: <message>" and returns the exit code for the status. */
int cli_fail(ct_net *net, ct_status status);
int cli_exit_code(ct_status status);

int cmd_train(const cli_options *opt);
int cmd_eval(const cli_options *opt);
int cmd_summary(const cli_options *opt);
int cmd_predict(const cli_options *opt);
int cmd_bench(const cli_options *opt);
int cmd_doctor(const cli_options *opt);
int cmd_experiment(const cli_options *opt);

/* Checkpoint folders (checkpoint_dir.c): DIR/ckpt-<step>.ckpt, the last `keep` kept, and
 * DIR/best.ckpt for the best test accuracy. */
int cli_checkpoint_save(ct_net *net, const char *dir, int keep, double test_accuracy, double *best);
/* The test accuracy of DIR/best.ckpt, -1 when there is none: a resumed run replaces it only
 * when it does better. */
double cli_checkpoint_best(ct_net *net, const char *dir);
/* FILE, or the newest ckpt-*.ckpt in a folder, into path (n bytes); prints and returns an exit
 * code on failure. */
int cli_checkpoint_resolve(const char *file_or_dir, char *path, size_t n);
/* Loads --weights into an open network; prints and returns an exit code on failure. */
int cli_load_weights(ct_net *net, const char *weights);

/* Progress display and JSON-lines log for training (progress.c). */
typedef struct cli_progress {
    int tty;                /* draw a bar on stdout */
    int quiet;
    FILE *log;              /* JSON lines, or NULL */
    double started;
    int batch;              /* in every log record */
    const ct_batch_search *search;  /* batch = max | auto: in the first record, then NULL */
} cli_progress;

int cli_on_step(const ct_progress *p, void *user);
int cli_on_epoch(const ct_epoch_stats *s, void *user);
/* What batch = max | auto tried and why the winner won, and how learning_rate follows the batch. */
void cli_print_batch_search(const ct_batch_search *s, const ct_lr_scaling_info *lr);
double cli_now(void);

#endif
