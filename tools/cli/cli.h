/* The cutrain command: its options (options.c), its subcommands (commands.c lists them; each is a
 * record in its own file, cmd_<name>.c), and what the subcommands share. */
#ifndef CT_CLI_H
#define CT_CLI_H

#include <stdio.h>

#include "cutrain.h"

/* Exit codes: 0 ok, 1 runtime failure, 2 bad usage or config. */
enum { CLI_OK = 0, CLI_FAILURE = 1, CLI_USAGE = 2 };

#define CLI_MAX_SETS 64
#define CLI_MAX_IMAGES 1024

typedef struct cli_options {
    const char *command;    /* the subcommand's name */
    unsigned given;         /* the options on the command line, CLI_OPT bits */
    const char *config;
    const char *sets[CLI_MAX_SETS];  /* "section.key=value" */
    int n_sets;
    const char *log_path;
    const char *tensorboard_dir; /* train: TensorBoard event files here */
    const char *devices;
    const char *checkpoint_dir;  /* train: save here */
    const char *resume;          /* train: checkpoint file or folder to continue from */
    const char *weights;         /* eval, predict: checkpoint to load */
    const char *images[CLI_MAX_IMAGES]; /* predict: an IDX file, or image files and folders */
    int n_images;
    const char *out;             /* predict: CSV path ("-" or absent: stdout); experiment: its folder;
                                  * export: the file */
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
    const char *format;          /* export: onnx or safetensors */
    long opset;                  /* export: ONNX opset (0: default) */
    const char *export_batch;    /* export: N or dynamic */
    const char *export_precision;/* export: fp32 or fp16 */
    int probs;                   /* predict: every class's probability */
    int quiet;
} cli_options;

/* Opens the config and applies --set and --devices; prints the failure and returns an exit code,
 * or CLI_OK with *out open. */
int cli_open(const cli_options *opt, ct_net **out);
/* cli_open, then prepared for evaluation or prediction (nothing trains) with --weights loaded when
 * given; prints the failure and returns an exit code, or CLI_OK with *out open. */
int cli_open_inference(const cli_options *opt, ct_net **out);
/* Prints "cutrain: <message>" and returns the exit code for the status. */
int cli_fail(ct_net *net, ct_status status);
int cli_exit_code(ct_status status);

/* ---- Ctrl-C and SIGTERM during train (stop_signals.c) ---- */

typedef struct cli_stop_signals cli_stop_signals;
/* Blocks SIGINT and SIGTERM in this thread and so in every thread started after it, and starts the
 * thread that takes them; call before anything starts a thread. Prints the failure and returns an
 * exit code, or CLI_OK with *out set. */
int cli_stop_signals_start(cli_stop_signals **out);
/* The first stop signal that came (SIGINT or SIGTERM), 0 while none. */
int cli_stop_signal(const cli_stop_signals *s);
/* The run is open: from here a signal no longer interrupts the calling thread's waits. */
void cli_stop_signals_opened(cli_stop_signals *s);
/* Ends the thread; s may be NULL. */
void cli_stop_signals_end(cli_stop_signals *s);

/* ---- the options (options.c): one row each, in --help's order ---- */

typedef enum cli_option_id {
    CLI_OPT_CONFIG, CLI_OPT_SET, CLI_OPT_DEVICES, CLI_OPT_LOG, CLI_OPT_TENSORBOARD, CLI_OPT_CHECKPOINT,
    CLI_OPT_RESUME, CLI_OPT_WEIGHTS, CLI_OPT_IMAGES, CLI_OPT_OUT_CSV, CLI_OPT_OUT_DIR, CLI_OPT_STEPS,
    CLI_OPT_SECONDS, CLI_OPT_RUNGS, CLI_OPT_WARMUP, CLI_OPT_INPUT_ONLY, CLI_OPT_TRACE, CLI_OPT_BATCH, CLI_OPT_JSON,
    CLI_OPT_BUS_GBPS, CLI_OPT_PRECISION, CLI_OPT_PROBS, CLI_OPT_OUT_FILE, CLI_OPT_FORMAT, CLI_OPT_OPSET,
    CLI_OPT_EXPORT_BATCH, CLI_OPT_EXPORT_PRECISION, CLI_OPT_QUIET, CLI_OPT_HELP, CLI_OPT_VERSION,
    CLI_OPTION_COUNT
} cli_option_id;

#define CLI_OPT(name) (1u << CLI_OPT_##name)
/* What every subcommand takes without saying so. */
#define CLI_OPTS_ALWAYS (CLI_OPT(QUIET) | CLI_OPT(HELP) | CLI_OPT(VERSION))
/* The config and its overrides, and the overrides of where and how to run: what most take. */
#define CLI_OPTS_CONFIG (CLI_OPT(CONFIG) | CLI_OPT(SET))
#define CLI_OPTS_RUN (CLI_OPT(DEVICES) | CLI_OPT(BATCH) | CLI_OPT(PRECISION))

/* ---- the subcommands ---- */

/* An option a subcommand refuses with a reason, said in the refusal. */
typedef struct cli_refusal {
    cli_option_id option;
    const char *why;
} cli_refusal;

/* One subcommand: --help's usage line and description, the dispatch and the option checks all
 * come from these records. */
typedef struct cli_command {
    const char *name;
    int (*run)(const cli_options *opt);
    const char *usage;        /* the synopsis after "cutrain "; '\n' continues it under the first */
    const char *about;        /* for --help's list of commands; '\n' continues it */
    unsigned takes;           /* the options it accepts (CLI_OPTS_ALWAYS besides), CLI_OPT bits */
    unsigned needs;           /* those it cannot run without */
    const cli_refusal *refusals; /* options refused with a reason; ends with a NULL why; may be NULL */
    int (*check)(const cli_options *opt); /* rules across its options (prints, CLI_USAGE); may be NULL */
    unsigned positional;      /* the option (one CLI_OPT bit) that arguments without a flag are values
                               * of, e.g. predict's image paths from a shell glob; 0: none */
} cli_command;

/* commands.c: the subcommands in --help's order, NULL-terminated; the first is the default. */
extern const cli_command *const cli_commands[];
/* The subcommand called name; prints the problem and returns NULL when there is none. */
const cli_command *cli_find_command(const char *name);

/* options.c: argv[first..] into opt (opt->command and opt->given set); --help and --version print
 * and exit. Then the options against cmd's record. Both print the problem and return an exit
 * code. */
int cli_parse_options(int argc, char **argv, int first, const cli_command *cmd, cli_options *opt);
int cli_check_options(const cli_command *cmd, const cli_options *opt);
/* --help's text. */
void cli_usage(FILE *out);
/* One command's usage, what it does and the options it takes (`cutrain COMMAND --help`). */
void cli_command_usage(FILE *out, const cli_command *cmd);

/* Checkpoint folders (checkpoint_dir.c): DIR/ckpt-<step>.ckpt, the last `keep` kept, and
 * DIR/best.ckpt for the best test accuracy. */
int cli_checkpoint_save(ct_net *net, const char *dir, int keep, double test_accuracy, double *best);
/* The test accuracy of DIR/best.ckpt, -1 when there is none: a resumed run replaces it only
 * when it does better. */
double cli_checkpoint_best(ct_net *net, const char *dir);
/* FILE, or the newest ckpt-*.ckpt in a folder, into path (n bytes); prints and returns an exit
 * code on failure. */
int cli_checkpoint_resolve(const char *file_or_dir, char *path, size_t n);
/* How many ckpt-*.ckpt DIR holds (-1: it cannot be read), and the newest's name into newest. */
int cli_checkpoint_count(const char *dir, char *newest, size_t n);

/* A checkpoint folder claimed by this run (checkpoint_claim.c): made if missing, locked so that a
 * second run is refused naming the holder, and refused when it holds checkpoints that the run does
 * not resume from (resume_path: the checkpoint file resumed from, NULL for a fresh run). Before the
 * data loads: an unwritable folder is found here. Prints and returns an exit code on failure. */
typedef struct cli_claimed_folder cli_claimed_folder;
int cli_checkpoint_claim(const char *dir, const char *resume_path, cli_claimed_folder **out);
/* Lets the folder go (NULL is fine); a folder the claim made and nothing was saved in is removed. */
void cli_checkpoint_release(cli_claimed_folder *c);
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
