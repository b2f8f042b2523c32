/* The command line's options: one row each, from which come the parsing, --help's text and the
 * check that each option applies to the subcommand (its record lists those it takes). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef enum cli_value {
    CLI_FLAG,      /* no value: the int field becomes 1 */
    CLI_TEXT,      /* const char *, as given */
    CLI_COUNT,     /* long, a whole number from min to 100000000 */
    CLI_AMOUNT,    /* double, positive, at most max (in `unit`) */
    CLI_BATCH,     /* const char *: max, auto or a count of at least 1 */
    CLI_SETTING,   /* --set: appended to sets[] */
    CLI_PATHS,     /* --images: appended to images[] (repeatable) */
    CLI_HELP,      /* prints --help's text and exits */
    CLI_VERSION    /* prints the version and exits */
} cli_value;

typedef struct cli_option {
    const char *shortname;   /* "-c", or NULL */
    const char *longname;    /* "--config" */
    const char *metavar;     /* what the value is ("FILE"); NULL for a flag */
    cli_value kind;
    size_t offset;           /* the field of cli_options it sets */
    double min, max;         /* CLI_COUNT: min; CLI_AMOUNT: max */
    const char *unit;        /* CLI_AMOUNT: for the message ("seconds") */
    const char *help;        /* --help's text; '\n' continues it on the next line */
} cli_option;

#define F(f) offsetof(cli_options, f)
#define COUNT_MAX 100000000L

static const cli_option options[CLI_OPTION_COUNT] = {
    [CLI_OPT_CONFIG] = {"-c", "--config", "FILE", CLI_TEXT, F(config), .help = "the network and training config (.ini)"},
    [CLI_OPT_SET] = {"-s", "--set", "SECTION.KEY=V", CLI_SETTING, .help = "override a config key (repeatable)"},
    [CLI_OPT_DEVICES] = {NULL, "--devices", "LIST", CLI_TEXT, F(devices),
                         .help = "same as --set train.devices=LIST (cpu, cpu:N, all, 0, 0,1)"},
    [CLI_OPT_LOG] = {NULL, "--log", "FILE", CLI_TEXT, F(log_path), .help = "append one JSON line per epoch to FILE"},
    [CLI_OPT_TENSORBOARD] = {NULL, "--tensorboard", "DIR", CLI_TEXT, F(tensorboard_dir),
                             .help = "train: write TensorBoard event files (per-epoch scalars) in DIR"},
    [CLI_OPT_CHECKPOINT] = {NULL, "--checkpoint", "DIR", CLI_TEXT, F(checkpoint_dir),
                            .help = "train: save DIR/ckpt-STEP.ckpt after every epoch (and every\n"
                                    "train.checkpoint_every steps), keep train.keep of them and\n"
                                    "DIR/best.ckpt; Ctrl-C or SIGTERM saves and exits 130 / 143"},
    [CLI_OPT_RESUME] = {NULL, "--resume", "FILE|DIR", CLI_TEXT, F(resume),
                        .help = "train: continue from a checkpoint (the newest in DIR)"},
    [CLI_OPT_WEIGHTS] = {NULL, "--weights", "FILE", CLI_TEXT, F(weights),
                         .help = "eval, predict: load this checkpoint first"},
    [CLI_OPT_IMAGES] = {NULL, "--images", "PATH", CLI_PATHS,
                        .help = "predict: an IDX file (raw or .gz), or JPEG / PNG files and\n"
                                "folders of them (repeatable; paths without a flag count too)"},
    /* one option, two meanings: the row of the subcommand that takes it is the one read */
    [CLI_OPT_OUT_CSV] = {NULL, "--out", "CSV", CLI_TEXT, F(out), .help = "predict: write here instead of standard output"},
    [CLI_OPT_OUT_DIR] = {NULL, "--out", "DIR", CLI_TEXT, F(out), .help = "experiment: the folder for its files (default .)"},
    [CLI_OPT_STEPS] = {NULL, "--steps", "N", CLI_COUNT, F(steps), .min = 1,
                       .help = "bench: timed steps (default 100); experiment: per rung"},
    [CLI_OPT_SECONDS] = {NULL, "--seconds", "S", CLI_AMOUNT, F(seconds), .max = 86400, .unit = "seconds",
                         .help = "experiment: timed seconds per rung (default 10)"},
    [CLI_OPT_RUNGS] = {NULL, "--rungs", "LIST", CLI_TEXT, F(rungs),
                       .help = "experiment: rungs to run, e.g. 0-3 or 0,2,5 (default all)"},
    [CLI_OPT_WARMUP] = {NULL, "--warmup", "N", CLI_COUNT, F(warmup), .min = 0,
                        .help = "bench: untimed steps first (default 20)"},
    [CLI_OPT_INPUT_ONLY] = {NULL, "--input-only", NULL, CLI_FLAG, F(input_only),
                            .help = "bench: the input pipeline alone (batches/s, no model)"},
    [CLI_OPT_TRACE] = {NULL, "--trace", "FILE", CLI_TEXT, F(trace),
                       .help = "bench: then trace one more step (each layer's backward and\n"
                               "each gradient bucket's all-reduce) as Chrome trace JSON"},
    [CLI_OPT_BATCH] = {NULL, "--batch", "B", CLI_BATCH, F(batch),
                       .help = "same as --set train.batch=B (a number, max or auto)"},
    [CLI_OPT_JSON] = {NULL, "--json", NULL, CLI_FLAG, F(json), .help = "summary: one JSON object instead of the table"},
    [CLI_OPT_BUS_GBPS] = {NULL, "--bus-gbps", "G", CLI_AMOUNT, F(bus_gbps), .max = 1e6, .unit = "GB/s",
                          .help = "summary: all-reduce bus bandwidth for the scaling estimate"},
    [CLI_OPT_PRECISION] = {NULL, "--precision", "P", CLI_TEXT, F(precision),
                           .help = "same as --set train.precision=P (fp32, fp16, bf16)"},
    [CLI_OPT_PROBS] = {NULL, "--probs", NULL, CLI_FLAG, F(probs),
                       .help = "predict (IDX): add every class's probability, one column each"},
    [CLI_OPT_OUT_FILE] = {NULL, "--out", "FILE", CLI_TEXT, F(out), .help = "export: the file to write (replaced whole)"},
    [CLI_OPT_FORMAT] = {NULL, "--format", "F", CLI_TEXT, F(format), .help = "export: onnx (default) or safetensors"},
    [CLI_OPT_OPSET] = {NULL, "--opset", "N", CLI_COUNT, F(opset), .min = 1,
                       .help = "export: the ONNX opset, 13 to 21 (default 17)"},
    [CLI_OPT_EXPORT_BATCH] = {NULL, "--batch", "N|dynamic", CLI_TEXT, F(export_batch),
                              .help = "export: the ONNX input's batch size (default dynamic)"},
    [CLI_OPT_EXPORT_PRECISION] = {NULL, "--precision", "fp32|fp16", CLI_TEXT, F(export_precision),
                                  .help = "export: the weights' type (default fp32: the checkpoint's\n"
                                          "fp32 masters, whatever precision trained them)"},
    [CLI_OPT_QUIET] = {"-q", "--quiet", NULL, CLI_FLAG, F(quiet), .help = "print only errors and the final result"},
    [CLI_OPT_HELP] = {"-h", "--help", NULL, CLI_HELP, .help = "this help"},
    [CLI_OPT_VERSION] = {"-V", "--version", NULL, CLI_VERSION, .help = "the version"},
};

_Static_assert(CLI_OPTION_COUNT <= 32, "a subcommand's options are the bits of an unsigned");

/* ---- --help ---- */

/* text, its later lines indented by `indent` spaces. */
static void print_indented(FILE *out, const char *text, int indent)
{
    for (const char *p = text; *p; p++) {
        fputc(*p, out);
        if (*p == '\n')
            fprintf(out, "%*s", indent, "");
    }
    fputc('\n', out);
}

static void print_option(FILE *out, const cli_option *o);

void cli_usage(FILE *out)
{
    enum { NAME_WIDTH = 10 };
    const size_t lead = strlen("       cutrain ");
    for (int i = 0; cli_commands[i]; i++) {
        fputs(i == 0 ? "usage: cutrain " : "       cutrain ", out);
        print_indented(out, cli_commands[i]->usage, (int)(lead + strlen(cli_commands[i]->name) + 1));
    }
    fputs("\ncommands:\n", out);
    for (int i = 0; cli_commands[i]; i++) {
        fprintf(out, "  %-*s ", NAME_WIDTH, cli_commands[i]->name);
        print_indented(out, cli_commands[i]->about, 2 + NAME_WIDTH + 1);
    }
    fputs("\noptions:\n", out);
    for (int i = 0; i < CLI_OPTION_COUNT; i++)
        print_option(out, &options[i]);
    fputs("\nexit status: 0 ok, 1 runtime failure, 2 bad usage or config, 130 / 143 interrupted\n"
          "(SIGINT / SIGTERM) after saving\n", out);
}

/* One option's row of --help's list. */
static void print_option(FILE *out, const cli_option *o)
{
    enum { FLAG_WIDTH = 22 };
    char flag[64];
    snprintf(flag, sizeof flag, "%s%s%s", o->longname, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    char shortname[8];   /* "-c, " */
    snprintf(shortname, sizeof shortname, "%s%s", o->shortname ? o->shortname : "", o->shortname ? ", " : "");
    fprintf(out, "  %-4s%-*s", shortname, FLAG_WIDTH, flag);
    print_indented(out, o->help, 2 + 4 + FLAG_WIDTH);
}

void cli_command_usage(FILE *out, const cli_command *cmd)
{
    fputs("usage: cutrain ", out);
    print_indented(out, cmd->usage, (int)strlen("usage: cutrain ") + (int)strlen(cmd->name) + 1);
    fputs("\n  ", out);
    print_indented(out, cmd->about, 2);
    fputs("\noptions:\n", out);
    for (int i = 0; i < CLI_OPTION_COUNT; i++)
        if ((cmd->takes | CLI_OPTS_ALWAYS) & (1u << i))
            print_option(out, &options[i]);
    fputs("\nall commands: cutrain --help\n", out);
}

/* ---- parsing ---- */

static int is_option(const char *arg, const cli_option *o)
{
    if (o->shortname && strcmp(arg, o->shortname) == 0)
        return 1;
    size_t n = strlen(o->longname);
    return strncmp(arg, o->longname, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

/* The row of arg: the one `takes` includes when several share the name, else the first. */
static int find_option(const char *arg, unsigned takes)
{
    int found = -1;
    for (int i = 0; i < CLI_OPTION_COUNT; i++)
        if (is_option(arg, &options[i])) {
            if (takes & (1u << i))
                return i;
            if (found < 0)
                found = i;
        }
    return found;
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

/* A count given on the command line, at least `min`; -1 after printing the problem. */
static long parse_count(const char *flag, const char *text, long min)
{
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < min || v > COUNT_MAX) {
        fprintf(stderr, "cutrain: %s needs a whole number from %ld to %ld, not '%s'\n", flag, min, COUNT_MAX, text);
        return -1;
    }
    return v;
}

/* The option's value into its field of opt. */
static int store(const cli_option *o, const char *value, cli_options *opt)
{
    void *field = (char *)opt + o->offset;
    switch (o->kind) {
    case CLI_FLAG:
        *(int *)field = 1;
        return CLI_OK;
    case CLI_TEXT:
        *(const char **)field = value;
        return CLI_OK;
    case CLI_COUNT:
        return (*(long *)field = parse_count(o->longname, value, (long)o->min)) < 0 ? CLI_USAGE : CLI_OK;
    case CLI_AMOUNT: {
        char *end = NULL;
        double v = strtod(value, &end);
        if (!*value || *end || !(v > 0) || v > o->max) {
            fprintf(stderr, "cutrain: %s needs a positive number of %s, not '%s'\n", o->longname, o->unit, value);
            return CLI_USAGE;
        }
        *(double *)field = v;
        return CLI_OK;
    }
    case CLI_BATCH:
        if (strcmp(value, "max") != 0 && strcmp(value, "auto") != 0 && parse_count(o->longname, value, 1) < 0)
            return CLI_USAGE;
        *(const char **)field = value;
        return CLI_OK;
    case CLI_SETTING:
        if (opt->n_sets == CLI_MAX_SETS) {
            fprintf(stderr, "cutrain: at most %d --set options\n", CLI_MAX_SETS);
            return CLI_USAGE;
        }
        opt->sets[opt->n_sets++] = value;
        return CLI_OK;
    case CLI_PATHS:
        if (opt->n_images == CLI_MAX_IMAGES) {
            fprintf(stderr, "cutrain: at most %d image paths; give their folder instead\n", CLI_MAX_IMAGES);
            return CLI_USAGE;
        }
        opt->images[opt->n_images++] = value;
        return CLI_OK;
    case CLI_HELP:
        cli_usage(stdout);
        exit(CLI_OK);
    case CLI_VERSION:
        printf("cutrain %s\n", ct_version());
        exit(CLI_OK);
    }
    return CLI_USAGE;
}

int cli_parse_options(int argc, char **argv, int first, const cli_command *cmd, cli_options *opt)
{
    opt->command = cmd->name;
    opt->warmup = -1;
    for (int i = first; i < argc; i++) {
        int id = find_option(argv[i], cmd->takes | CLI_OPTS_ALWAYS);
        /* `cutrain COMMAND --help`: that command's usage and options; `cutrain --help`: all */
        if (id == CLI_OPT_HELP) {
            if (first > 1)
                cli_command_usage(stdout, cmd);
            else
                cli_usage(stdout);
            exit(CLI_OK);
        }
        if (id < 0 && cmd->positional && argv[i][0] != '-') {
            /* a bare argument: the value of the command's positional option */
            for (id = 0; id < CLI_OPTION_COUNT && !(cmd->positional & (1u << id)); id++)
                ;
            if (store(&options[id], argv[i], opt) != CLI_OK)
                return CLI_USAGE;
            opt->given |= 1u << id;
            continue;
        }
        if (id < 0) {
            fprintf(stderr, "cutrain: unknown option '%s' (see cutrain --help)\n", argv[i]);
            return CLI_USAGE;
        }
        const cli_option *o = &options[id];
        const char *value = NULL;
        if (o->metavar && !(value = option_value(argc, argv, &i)))
            return CLI_USAGE;
        if (store(o, value, opt) != CLI_OK)
            return CLI_USAGE;
        opt->given |= 1u << id;
    }
    return CLI_OK;
}

/* ---- the options against the subcommand ---- */

static const char *refusal_reason(const cli_command *cmd, int id)
{
    for (const cli_refusal *r = cmd->refusals; r && r->why; r++)
        if ((int)r->option == id)
            return r->why;
    return NULL;
}

int cli_check_options(const cli_command *cmd, const cli_options *opt)
{
    unsigned missing = cmd->needs & ~opt->given;
    if (missing) {
        char list[256] = "";
        size_t used = 0;
        int left = 0;
        for (int i = 0; i < CLI_OPTION_COUNT; i++)
            left += (missing >> i) & 1u;
        for (int i = 0; i < CLI_OPTION_COUNT && used < sizeof list; i++) {
            if (!(missing & (1u << i)))
                continue;
            left--;
            used += (size_t)snprintf(list + used, sizeof list - used, "%s %s%s", options[i].longname,
                                     options[i].metavar, left > 1 ? ", " : left == 1 ? " and " : "");
        }
        fprintf(stderr, "cutrain: %s needs %s (see cutrain --help)\n", cmd->name, list);
        return CLI_USAGE;
    }
    unsigned misplaced = opt->given & ~(cmd->takes | CLI_OPTS_ALWAYS);
    for (int i = 0; i < CLI_OPTION_COUNT; i++) {
        if (!(misplaced & (1u << i)))
            continue;
        const char *why = refusal_reason(cmd, i);
        fprintf(stderr, "cutrain: %s%s%s%s does not apply to '%s'\n", options[i].longname, why ? " (" : "",
                why ? why : "", why ? ")" : "", cmd->name);
        return CLI_USAGE;
    }
    return cmd->check ? cmd->check(opt) : CLI_OK;
}
