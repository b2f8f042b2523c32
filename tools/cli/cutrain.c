/* cutrain: the command line. `cutrain --config F` trains; subcommands eval, summary, predict,
 * bench, doctor and experiment. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cutrain [train] --config FILE [options]\n"
            "       cutrain eval --config FILE [options]\n"
            "       cutrain summary --config FILE [--batch B] [--json] [options]\n"
            "       cutrain predict --config FILE --weights CKPT --images IDX [--out CSV]\n"
            "       cutrain bench --config FILE [--steps N] [--batch B] [--precision P]\n"
            "                     [--warmup N] [--input-only] [--trace FILE]\n"
            "       cutrain doctor\n"
            "       cutrain experiment --config FILE [--out DIR] [--steps N | --seconds S] [--rungs LIST]\n"
            "\n"
            "commands:\n"
            "  train      train the network the config describes (the default)\n"
            "  eval       test-set loss and accuracy of the network\n"
            "  summary    per layer: output shape, parameters, FLOPs, activation memory at the batch;\n"
            "             the memory plan, the largest batch that fits, the launch-cost check\n"
            "  predict    class and probability for each image of an IDX file, as CSV\n"
            "  bench      training images/s and ms per step after warm-up, as one JSON line\n"
            "  doctor     driver and library versions, and a health check of every visible GPU\n"
            "  experiment the network through a ladder of speed techniques, one rung each (naive, +\n"
            "             prefetch, + big batch, + fp16, + CUDA graph, + GPU augment, + all GPUs): images/s,\n"
            "             GPU and CPU use and the verdict per rung, in DIR/experiment.csv, .json, .md, .png\n"
            "\n"
            "options:\n"
            "  -c, --config FILE         the network and training config (.ini)\n"
            "  -s, --set SECTION.KEY=V   override a config key (repeatable)\n"
            "      --devices LIST        same as --set train.devices=LIST (cpu, cpu:N, all, 0, 0,1)\n"
            "      --log FILE            append one JSON line per epoch to FILE\n"
            "      --tensorboard DIR     train: write TensorBoard event files (per-epoch scalars) in DIR\n"
            "      --checkpoint DIR      train: save DIR/ckpt-STEP.ckpt after every epoch (and every\n"
            "                            train.checkpoint_every steps), keep train.keep of them and\n"
            "                            DIR/best.ckpt; Ctrl-C or SIGTERM saves and exits 130 / 143\n"
            "      --resume FILE|DIR     train: continue from a checkpoint (the newest in DIR)\n"
            "      --weights FILE        eval, predict: load this checkpoint first\n"
            "      --images IDX          predict: the images (IDX, raw or .gz)\n"
            "      --out CSV             predict: write here instead of standard output\n"
            "      --out DIR             experiment: the folder for its files (default .)\n"
            "      --steps N             bench: timed steps (default 100); experiment: per rung\n"
            "      --seconds S           experiment: timed seconds per rung (default 10)\n"
            "      --rungs LIST          experiment: rungs to run, e.g. 0-3 or 0,2,5 (default all)\n"
            "      --warmup N            bench: untimed steps first (default 20)\n"
            "      --input-only          bench: the input pipeline alone (batches/s, no model)\n"
            "      --trace FILE          bench: then trace one more step (each layer's backward and\n"
            "                            each gradient bucket's all-reduce) as Chrome trace JSON\n"
            "      --batch B             same as --set train.batch=B (a number, max or auto)\n"
            "      --json                summary: one JSON object instead of the table\n"
            "      --bus-gbps G          summary: all-reduce bus bandwidth for the scaling estimate\n"
            "      --precision P         same as --set train.precision=P (fp32, fp16, bf16)\n"
            "  -q, --quiet               print only errors and the final result\n"
            "  -h, --help                this help\n"
            "  -V, --version             the version\n"
            "\n"
            "exit status: 0 ok, 1 runtime failure, 2 bad usage or config, 130 / 143 interrupted\n"
            "(SIGINT / SIGTERM) after saving\n");
}

/* Returns the value of an option that takes one, or NULL after printing the problem. */
static const char *option_value(int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg, '=');
    if (arg[1] == '-' && eq)
        return eq + 1;
    if (*i + 1 >= argc) {
        fprintf(stderr, "cutrain: %s needs a value\n", arg);
        return NULL;
    }
    return argv[++*i];
}

static int is_option(const char *arg, const char *shortname, const char *longname)
{
    if (shortname && strcmp(arg, shortname) == 0)
        return 1;
    size_t n = strlen(longname);
    return strncmp(arg, longname, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

/* Options that only make sense with some commands: say so instead of ignoring them. */
static int check_combination(const cli_options *opt)
{
    int train = strcmp(opt->command, "train") == 0, predict = strcmp(opt->command, "predict") == 0;
    int experiment = strcmp(opt->command, "experiment") == 0, bench = strcmp(opt->command, "bench") == 0;
    const char *misplaced = NULL;
    if (!bench && (opt->warmup >= 0 || opt->input_only || opt->trace || (opt->steps && !experiment)))
        misplaced = opt->steps && !experiment ? "--steps" : opt->input_only ? "--input-only"
                    : opt->trace ? "--trace" : "--warmup";
    else if (opt->input_only && opt->trace)
        misplaced = "--trace (it traces a training step, not the input pipeline)";
    else if (!experiment && (opt->seconds > 0 || opt->rungs))
        misplaced = opt->rungs ? "--rungs" : "--seconds";
    else if (experiment && (opt->devices || opt->batch || opt->precision))
        misplaced = opt->devices ? "--devices (the rungs choose the devices)"
                    : opt->batch ? "--batch (the rungs choose the batch)" : "--precision (the rungs choose it)";
    else if (!train && opt->checkpoint_dir)
        misplaced = "--checkpoint";
    else if (!train && opt->resume)
        misplaced = "--resume";
    else if (!train && opt->log_path)
        misplaced = "--log";
    else if (!train && opt->tensorboard_dir)
        misplaced = "--tensorboard";
    else if (train && opt->weights)
        misplaced = "--weights (to continue training use --resume)";
    else if (opt->json && strcmp(opt->command, "summary") != 0)
        misplaced = "--json";
    else if (opt->bus_gbps > 0 && strcmp(opt->command, "summary") != 0)
        misplaced = "--bus-gbps";
    else if ((!predict && opt->images) || (!predict && !experiment && opt->out))
        misplaced = opt->images ? "--images" : "--out";
    if (misplaced) {
        fprintf(stderr, "cutrain: %s does not apply to '%s'\n", misplaced, opt->command);
        return CLI_USAGE;
    }
    if (experiment && opt->steps && opt->seconds > 0) {
        fprintf(stderr, "cutrain: experiment takes --steps N or --seconds S, not both\n");
        return CLI_USAGE;
    }
    if (predict && (!opt->weights || !opt->images)) {
        fprintf(stderr, "cutrain: predict needs --weights CKPT and --images IDX\n");
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* A count given on the command line, at least `min`; -1 after printing the problem. */
static long parse_count(const char *flag, const char *text, long min)
{
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < min || v > 100000000L) {
        fprintf(stderr, "cutrain: %s needs a whole number >= %ld, not '%s'\n", flag, min, text);
        return -1;
    }
    return v;
}

static int parse_args(int argc, char **argv, cli_options *opt)
{
    int i = 1;
    opt->warmup = -1;
    opt->command = "train";
    if (argc > 1 && argv[1][0] != '-') {
        opt->command = argv[1];
        i = 2;
        if (strcmp(opt->command, "train") && strcmp(opt->command, "eval") && strcmp(opt->command, "summary") &&
            strcmp(opt->command, "predict") && strcmp(opt->command, "bench") && strcmp(opt->command, "doctor") &&
            strcmp(opt->command, "experiment")) {
            fprintf(stderr, "cutrain: unknown command '%s' (commands: train, eval, summary, predict, bench, "
                    "doctor, experiment)\n", opt->command);
            return CLI_USAGE;
        }
    }
    for (; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = NULL;
        if (is_option(arg, "-h", "--help")) {
            usage(stdout);
            exit(CLI_OK);
        } else if (is_option(arg, "-V", "--version")) {
            printf("cutrain %s\n", ct_version());
            exit(CLI_OK);
        } else if (is_option(arg, "-q", "--quiet")) {
            opt->quiet = 1;
        } else if (is_option(arg, "-c", "--config")) {
            if (!(value = option_value(argc, argv, &i)))
                return CLI_USAGE;
            opt->config = value;
        } else if (is_option(arg, "-s", "--set")) {
            if (!(value = option_value(argc, argv, &i)))
                return CLI_USAGE;
            if (opt->n_sets == CLI_MAX_SETS) {
                fprintf(stderr, "cutrain: at most %d --set options\n", CLI_MAX_SETS);
                return CLI_USAGE;
            }
            opt->sets[opt->n_sets++] = value;
        } else if (is_option(arg, NULL, "--devices")) {
            if (!(value = option_value(argc, argv, &i)))
                return CLI_USAGE;
            opt->devices = value;
        } else if (is_option(arg, NULL, "--log")) {
            if (!(value = option_value(argc, argv, &i)))
                return CLI_USAGE;
            opt->log_path = value;
        } else if (is_option(arg, NULL, "--tensorboard")) {
            if (!(opt->tensorboard_dir = option_value(argc, argv, &i)))
                return CLI_USAGE;
        } else if (is_option(arg, NULL, "--checkpoint")) {
            if (!(opt->checkpoint_dir = option_value(argc, argv, &i)))
                return CLI_USAGE;
        } else if (is_option(arg, NULL, "--resume")) {
            if (!(opt->resume = option_value(argc, argv, &i)))
                return CLI_USAGE;
        } else if (is_option(arg, NULL, "--weights")) {
            if (!(opt->weights = option_value(argc, argv, &i)))
                return CLI_USAGE;
        } else if (is_option(arg, NULL, "--images")) {
            if (!(opt->images = option_value(argc, argv, &i)))
                return CLI_USAGE;
        } else if (is_option(arg, NULL, "--out")) {
            if (!(opt->out = option_value(argc, argv, &i)))
                return CLI_USAGE;
        } else if (is_option(arg, NULL, "--steps")) {
            if (!(value = option_value(argc, argv, &i)) || (opt->steps = parse_count("--steps", value, 1)) < 0)
                return CLI_USAGE;
        } else if (is_option(arg, NULL, "--seconds")) {
            char *end = NULL;
            if (!(value = option_value(argc, argv, &i)))
                return CLI_USAGE;
            opt->seconds = strtod(value, &end);
            if (!*value || *end || !(opt->seconds > 0) || opt->seconds > 86400) {
                fprintf(stderr, "cutrain: --seconds needs a positive number of seconds, not '%s'\n", value);
                return CLI_USAGE;
            }
        } else if (is_option(arg, NULL, "--rungs")) {
            if (!(opt->rungs = option_value(argc, argv, &i)))
                return CLI_USAGE;
        } else if (is_option(arg, NULL, "--warmup")) {
            if (!(value = option_value(argc, argv, &i)) || (opt->warmup = parse_count("--warmup", value, 0)) < 0)
                return CLI_USAGE;
        } else if (is_option(arg, NULL, "--input-only")) {
            opt->input_only = 1;
        } else if (is_option(arg, NULL, "--trace")) {
            if (!(opt->trace = option_value(argc, argv, &i)))
                return CLI_USAGE;
        } else if (is_option(arg, NULL, "--json")) {
            opt->json = 1;
        } else if (is_option(arg, NULL, "--bus-gbps")) {
            char *end = NULL;
            if (!(value = option_value(argc, argv, &i)))
                return CLI_USAGE;
            opt->bus_gbps = strtod(value, &end);
            if (!*value || *end || !(opt->bus_gbps > 0) || opt->bus_gbps > 1e6) {
                fprintf(stderr, "cutrain: --bus-gbps needs a positive number of GB/s, not '%s'\n", value);
                return CLI_USAGE;
            }
        } else if (is_option(arg, NULL, "--batch")) {
            if (!(value = option_value(argc, argv, &i)) ||
                (strcmp(value, "max") != 0 && strcmp(value, "auto") != 0 && parse_count("--batch", value, 1) < 0))
                return CLI_USAGE;
            opt->batch = value;
        } else if (is_option(arg, NULL, "--precision")) {
            if (!(opt->precision = option_value(argc, argv, &i)))
                return CLI_USAGE;
        } else {
            fprintf(stderr, "cutrain: unknown option '%s' (see cutrain --help)\n", arg);
            return CLI_USAGE;
        }
    }
    if (strcmp(opt->command, "doctor") == 0) {
        if (opt->config || opt->n_sets || opt->devices) {
            fprintf(stderr, "cutrain: doctor takes no config; it checks every visible GPU\n");
            return CLI_USAGE;
        }
        return CLI_OK;
    }
    if (!opt->config) {
        fprintf(stderr, "cutrain: %s needs --config FILE (see cutrain --help)\n", opt->command);
        return CLI_USAGE;
    }
    return check_combination(opt);
}

int main(int argc, char **argv)
{
    cli_options opt = {0};
    int rc = parse_args(argc, argv, &opt);
    if (rc != CLI_OK)
        return rc;
    /* one of several processes (mpirun, srun): rank 0 alone prints, logs and saves */
    int rank, size;
    ct_process_world(&rank, &size);
    if (rank > 0) {
        /* errors still go to stderr, prefixed with the rank (cli_fail) */
        if (!freopen("/dev/null", "w", stdout))
            fprintf(stderr, "cutrain: rank %d: cannot silence standard output\n", rank);
        opt.quiet = 1;
        opt.log_path = NULL;
        opt.checkpoint_dir = NULL;
        opt.tensorboard_dir = NULL;
    }
    if (strcmp(opt.command, "eval") == 0)
        rc = cmd_eval(&opt);
    else if (strcmp(opt.command, "summary") == 0)
        rc = cmd_summary(&opt);
    else if (strcmp(opt.command, "predict") == 0)
        rc = cmd_predict(&opt);
    else if (strcmp(opt.command, "bench") == 0)
        rc = cmd_bench(&opt);
    else if (strcmp(opt.command, "doctor") == 0)
        rc = cmd_doctor(&opt);
    else if (strcmp(opt.command, "experiment") == 0)
        rc = cmd_experiment(&opt);
    else
        rc = cmd_train(&opt);
    /* a failed process ends the others: a stopped or waiting peer would not end by itself */
    if (rc != CLI_OK && size > 1)
        ct_process_abort(rc);
    return rc;
}
