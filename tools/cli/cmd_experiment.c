/* cutrain experiment: the same network through the ladder of experiment_rungs.c. Each rung runs
 * on two handles: a calibration (batch = auto's search; with --seconds, up to 20 steps) that
 * tells the batch and the time a step takes, then a fresh handle whose epochs are cut to a chunk
 * of steps by train_limit, so that every timed epoch ends with the library's own epoch figures
 * (monitor, time split, verdict). The first epoch is the warm-up and is not counted. With
 * --steps N the timed epoch is N steps (several when the data holds fewer); with --seconds S
 * each is a quarter of S, as the calibration's time per step tells, until S seconds are timed. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "experiment.h"

/* The calibration times the steps after the first CALIBRATION_FROM, which carry the one-off
 * costs (cuDNN's algorithm search, the graph capture) that would make the timed epochs too short
 * for the monitor's samples; it stops after CALIBRATION_TO steps or a quarter of the rung's time. */
enum { CALIBRATION_FROM = 3, CALIBRATION_TO = 20, CHUNKS = 4 };

typedef struct calibration {
    double budget;           /* seconds */
    long from_step, steps;
    double from_seconds, seconds;
} calibration;

static int calibration_step(const ct_progress *p, void *user)
{
    calibration *c = user;
    if (p->step_in_epoch <= CALIBRATION_FROM) {
        c->from_step = p->step_in_epoch;
        c->from_seconds = p->seconds;
    }
    c->steps = p->step_in_epoch;
    c->seconds = p->seconds;
    return p->step_in_epoch >= CALIBRATION_TO || p->seconds >= c->budget;
}

/* Seconds a step takes once warm, as well as the calibration tells. */
static double calibrated_step(const calibration *c)
{
    if (c->steps > c->from_step && c->seconds > c->from_seconds)
        return (c->seconds - c->from_seconds) / (double)(c->steps - c->from_step);
    return c->steps > 0 && c->seconds > 0 ? c->seconds / (double)c->steps : 0.01;
}

/* Figures summed over the timed epochs, weighted by each epoch's train-loop seconds. */
typedef struct timed_run {
    xp_rung *rung;
    long images_per_epoch;
    double seconds_wanted;   /* 0: stop after the planned epochs */
    long prev_step;
    long images;
    double seconds;
    double w_gpu, w_mem, w_power, w_cpu, w_machine, w_busy;  /* seconds that knew the figure */
    double gpu, mem, power, cpu, machine, wait, input_wait, copy, compute, comm, busy;
    int quiet;
} timed_run;

static void weigh(double v, double t, double *sum, double *weight)
{
    if (v >= 0) {
        *sum += v * t;
        *weight += t;
    }
}

static int timed_epoch(const ct_epoch_stats *s, void *user)
{
    timed_run *t = user;
    long steps = s->step - t->prev_step;
    t->prev_step = s->step;
    if (s->epoch == 1)
        return 0; /* the warm-up: workers sized, buffers allocated, caches warm */
    xp_rung *r = t->rung;
    double secs = s->images_per_s > 0 ? (double)t->images_per_epoch / s->images_per_s : 0.0;
    r->steps += steps;
    t->images += t->images_per_epoch;
    t->seconds += secs;
    weigh(s->gpu_util, secs, &t->gpu, &t->w_gpu);
    weigh(s->gpu_mem_mib, secs, &t->mem, &t->w_mem);
    weigh(s->power_w, secs, &t->power, &t->w_power);
    weigh(s->cpu_util, secs, &t->cpu, &t->w_cpu);
    weigh(s->cpu_util_machine, secs, &t->machine, &t->w_machine);
    weigh(s->time_split.device_busy, secs, &t->busy, &t->w_busy);
    t->wait += s->input_wait_share * secs;
    t->input_wait += s->time_split.input_wait * secs;
    t->copy += s->time_split.copy * secs;
    t->compute += s->time_split.compute * secs;
    t->comm += s->time_split.comm * secs;
    snprintf(r->verdict, sizeof r->verdict, "%s", s->time_verdict);
    r->precision = s->precision ? s->precision : "fp32";
    r->workers = s->input_workers;
    r->prefetch = s->input_prefetch;
    if (s->monitor_note[0])
        snprintf(r->note, sizeof r->note, "%s", s->monitor_note);
    return t->seconds_wanted > 0 && t->seconds >= t->seconds_wanted;
}

static double mean(double sum, double weight)
{
    return weight > 0 ? sum / weight : -1.0;
}

static void finish_run(timed_run *t)
{
    xp_rung *r = t->rung;
    double s = t->seconds;
    r->seconds = s;
    r->images_per_s = s > 0 ? (double)t->images / s : -1.0;
    r->gpu_util = mean(t->gpu, t->w_gpu);
    r->gpu_mem_mib = mean(t->mem, t->w_mem);
    r->power_w = mean(t->power, t->w_power);
    r->cpu_util = mean(t->cpu, t->w_cpu);
    r->cpu_util_machine = mean(t->machine, t->w_machine);
    r->input_wait_share = mean(t->wait, s);
    r->split = (ct_time_split){mean(t->input_wait, s), mean(t->copy, s), mean(t->compute, s), mean(t->comm, s),
                               mean(t->busy, t->w_busy)};
}

/* Opens the config with the user's --set and rung k's keys. */
static ct_status open_rung(const cli_options *opt, int k, const char *devices, ct_net **net)
{
    *net = NULL;
    if (cli_open(opt, net) != CLI_OK)
        return CT_ERR_CONFIG; /* printed already */
    return xp_apply_rung(*net, k, devices);
}

typedef struct ladder {
    const cli_options *opt;
    const char *devices;     /* what rungs 0..5 train on */
    int gpus;
    char no_gpu[200];
    xp_report *report;
} ladder;

/* Why rung k cannot run here, or NULL. */
static const char *cannot_run(const ladder *l, int k, char *buf, size_t n)
{
    if (k == 4 && !l->gpus)
        snprintf(buf, n, "CUDA graphs need a GPU (%s); graph is ignored on the CPU", l->no_gpu);
    else if (k == 5 && !l->gpus)
        snprintf(buf, n, "augmenting on the GPU needs one (%s); the CPU backend keeps augment_on = cpu", l->no_gpu);
    else if (k == 6 && l->gpus < 2)
        snprintf(buf, n, "mirroring needs 2 or more GPUs; %d visible%s%s", l->gpus, l->gpus ? "" : ": ",
                 l->gpus ? "" : l->no_gpu);
    else
        return NULL;
    return buf;
}

/* The rung's failure: a config problem stops the ladder (exit 2), anything else is recorded. */
static int rung_failed(xp_rung *r, ct_net *net, ct_status st)
{
    if (st == CT_ERR_CONFIG || st == CT_ERR_USAGE) {
        if (net)
            fprintf(stderr, "cutrain: rung %d (%s): %s\n", r->rung, r->name, ct_errmsg(net));
        ct_close(net);
        return CLI_USAGE;
    }
    r->status = XP_FAILED;
    snprintf(r->reason, sizeof r->reason, "%s", net ? ct_errmsg(net) : "could not open the config");
    ct_close(net);
    return CLI_OK;
}

/* Mirrored rung: the batch search runs on one device, so each GPU takes the batch it found for
 * one (the last rung below that ran), and the global batch is that times the GPUs, as
 * MirroredStrategy's users scale it. */
static ct_status set_mirrored_batch(const ladder *l, ct_net *net)
{
    int per_gpu = 32;
    for (int k = 5; k >= 0; k--)
        if (l->report->rungs[k].status == XP_RAN && l->report->rungs[k].batch > 0) {
            per_gpu = l->report->rungs[k].batch;
            break;
        }
    char text[32];
    snprintf(text, sizeof text, "%d", per_gpu * l->gpus);
    return ct_set(net, "train.batch", text);
}

static int run_rung(ladder *l, xp_rung *r)
{
    const cli_options *opt = l->opt;
    int k = r->rung;
    ct_net *net = NULL;
    /* the calibration: prepares (batch = auto searches here, within the rung's time) and times a
     * few steps, input pipeline included */
    ct_status st = open_rung(opt, k, l->devices, &net);
    if (st == CT_OK && k == 6)
        st = set_mirrored_batch(l, net);
    if (st == CT_OK)
        st = ct_set(net, "train.epochs", "1");
    if (st == CT_OK && opt->seconds > 0 && k >= 2) {
        char secs[32];
        snprintf(secs, sizeof secs, "%g", opt->seconds);
        st = ct_set(net, "train.batch_search_seconds", secs);
    }
    if (st == CT_OK)
        st = ct_prepare(net);
    if (st != CT_OK)
        return rung_failed(r, net, st);
    /* --steps N needs only the batch; --seconds S the time a step takes */
    calibration cal = {.budget = opt->seconds / CHUNKS};
    ct_callbacks cb = {.on_step = calibration_step, .step_every = 1, .user = &cal};
    if (opt->steps == 0)
        st = ct_fit(net, &cb);
    if (st != CT_OK && st != CT_ERR_STOPPED)
        return rung_failed(r, net, st);
    int batch = ct_batch_size(net);
    long images = ct_train_images(net);
    r->batch = batch;
    /* rung 6 takes the per-GPU batch found below it times the GPUs (set_mirrored_batch) */
    r->batch_mode = k >= 2 && k < 6 ? "auto" : "fixed";
    snprintf(r->backend, sizeof r->backend, "%s", ct_backend_name(net));
    if (!l->report->device[0])
        snprintf(l->report->device, sizeof l->report->device, "%s", ct_backend_reason(net));
    ct_close(net);

    /* the timed handle: epochs of `chunk` steps, the first of them the warm-up */
    double per_step = calibrated_step(&cal);
    /* --steps N: timed epochs of N steps (each epoch's start costs something: workers, the
     * monitor), fewer when the training set is shorter; --seconds: epochs until the time is up */
    long chunk = opt->steps > 0 ? opt->steps : (long)ceil(opt->seconds / CHUNKS / (per_step > 1e-6 ? per_step : 1e-6));
    long most = batch > 0 ? images / batch : 1;
    if (chunk > most)
        chunk = most;
    if (chunk < 1)
        chunk = 1;
    long limit = chunk * batch < images ? chunk * batch : images;
    long epochs = opt->steps > 0 ? 1 + (opt->steps + chunk - 1) / chunk : 1000000;
    char text[3][32];
    snprintf(text[0], sizeof text[0], "%d", batch);
    snprintf(text[1], sizeof text[1], "%ld", limit);
    snprintf(text[2], sizeof text[2], "%ld", epochs);
    st = open_rung(opt, k, l->devices, &net);
    if (st == CT_OK)
        st = ct_set(net, "train.batch", text[0]);
    if (st == CT_OK)
        st = ct_set(net, "data.train_limit", text[1]);
    if (st == CT_OK)
        st = ct_set(net, "train.epochs", text[2]);
    /* the test set is scored after every epoch: one image keeps that out of the way */
    if (st == CT_OK)
        st = ct_set(net, "data.test_limit", "1");
    timed_run t = {.rung = r, .images_per_epoch = limit, .seconds_wanted = opt->steps > 0 ? 0 : opt->seconds,
                   .quiet = opt->quiet};
    cb = (ct_callbacks){.on_epoch = timed_epoch, .user = &t};
    if (st == CT_OK)
        st = ct_fit(net, &cb);
    if (st != CT_OK && !(st == CT_ERR_STOPPED && t.seconds_wanted > 0 && t.seconds >= t.seconds_wanted))
        return rung_failed(r, net, st);
    finish_run(&t);
    ct_memory_usage usage;
    if (ct_memory_usage_get(net, &usage) == CT_OK)
        r->memory_peak_mib = (double)usage.peak / (1024.0 * 1024.0);
    if (ct_backend_note(net)[0])
        snprintf(r->note, sizeof r->note, "%s", ct_backend_note(net));
    if (k == 3 && strcmp(r->backend, "cpu") == 0 && !r->note[0])
        snprintf(r->note, sizeof r->note, "%s", "the CPU computes in fp32 and rounds to half: no tensor cores, "
                                                 "only the cost");
    r->status = XP_RAN;
    ct_close(net);
    return CLI_OK;
}

static void print_rung(const xp_rung *r)
{
    if (r->status == XP_SKIPPED || r->status == XP_FAILED) {
        printf("rung %d %-14s %s: %s\n", r->rung, r->name, r->status == XP_SKIPPED ? "skipped" : "FAILED", r->reason);
    } else {
        printf("rung %d %-14s batch %d %s: %.0f img/s", r->rung, r->name, r->batch, r->precision, r->images_per_s);
        if (r->gpu_util >= 0)
            printf(", GPU %.0f%%", r->gpu_util);
        if (r->cpu_util >= 0)
            printf(", CPU %.1f cores", r->cpu_util);
        if (r->cpu_util_machine >= 0)
            printf(" (machine %.0f%%)", r->cpu_util_machine);
        printf("\n  %s\n", r->verdict);
    }
    fflush(stdout);
}

/* DIR exists or is made, and a file can be created in it: checked before anything trains. */
static int check_out(const char *dir)
{
    char probe[4096];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "cutrain: --out %s: cannot create the folder: %s\n", dir, strerror(errno));
        return 0;
    }
    snprintf(probe, sizeof probe, "%s/.cutrain-experiment-XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0) {
        fprintf(stderr, "cutrain: --out %s: cannot write there: %s\n", dir, strerror(errno));
        return 0;
    }
    close(fd);
    unlink(probe);
    return 1;
}

static int cmd_experiment(const cli_options *opt)
{
    int asked[XP_RUNGS];
    if (!xp_parse_rungs(opt->rungs ? opt->rungs : "all", asked))
        return CLI_USAGE;
    cli_options o = *opt;
    if (o.steps == 0 && o.seconds <= 0)
        o.seconds = 10;
    /* the config and the overrides, checked (data loaded, network built at rung 0's settings)
     * before the folder is made and anything trains */
    ct_net *net = NULL;
    int rc = cli_open(&o, &net);
    if (rc != CLI_OK)
        return rc;
    ct_status st = xp_apply_rung(net, 0, "cpu");
    if (st == CT_OK)
        st = ct_prepare(net);
    if (st != CT_OK)
        return cli_fail(net, st);
    ct_close(net);
    const char *dir = o.out ? o.out : ".";
    if (!check_out(dir))
        return CLI_FAILURE;

    xp_report report;
    memset(&report, 0, sizeof report);
    xp_rungs_init(&report);
    report.config = o.config;
    report.cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    report.seconds_per_rung = o.steps > 0 ? 0 : o.seconds;
    report.steps_per_rung = o.steps;
    ladder l = {.opt = &o, .devices = "cpu", .report = &report};
    ct_doctor_report doc;
    memset(&doc, 0, sizeof doc);
    if (ct_doctor(&doc) == CT_OK)
        l.gpus = doc.n_gpus;
    snprintf(l.no_gpu, sizeof l.no_gpu, "%s", l.gpus ? "" : doc.no_gpu_reason[0] ? doc.no_gpu_reason : "no GPU");
    if (l.gpus)
        l.devices = "0";
    int failed = 0;
    for (int k = 0; k < XP_RUNGS; k++) {
        xp_rung *r = &report.rungs[k];
        if (!asked[k])
            continue;
        char why[320];
        if (cannot_run(&l, k, why, sizeof why)) {
            r->status = XP_SKIPPED;
            snprintf(r->reason, sizeof r->reason, "%s", why);
        } else if ((rc = run_rung(&l, r)) != CLI_OK) {
            return rc;
        }
        failed |= r->status == XP_FAILED;
        if (!o.quiet)
            print_rung(r);
    }
    xp_speedups(&report);
    if (!xp_write_reports(&report, dir))
        return CLI_FAILURE;
    xp_plot(dir, o.quiet);
    if (!o.quiet)
        printf("wrote %s/experiment.csv, .json, .md\n", dir);
    return failed ? CLI_FAILURE : CLI_OK;
}

static int check_experiment(const cli_options *opt)
{
    if (opt->steps && opt->seconds > 0) {
        fprintf(stderr, "cutrain: experiment takes --steps N or --seconds S, not both\n");
        return CLI_USAGE;
    }
    return CLI_OK;
}

const cli_command cli_cmd_experiment = {
    .name = "experiment",
    .run = cmd_experiment,
    .usage = "experiment --config FILE [--out DIR] [--steps N | --seconds S] [--rungs LIST]",
    .about = "the network through a ladder of speed techniques, one rung each (naive, +\n"
             "prefetch, + big batch, + fp16, + CUDA graph, + GPU augment, + all GPUs): images/s,\n"
             "GPU and CPU use and the verdict per rung, in DIR/experiment.csv, .json, .md, .png",
    .takes = CLI_OPTS_CONFIG | CLI_OPT(OUT_DIR) | CLI_OPT(STEPS) | CLI_OPT(SECONDS) | CLI_OPT(RUNGS),
    .needs = CLI_OPT(CONFIG),
    .refusals = (const cli_refusal[]){{CLI_OPT_DEVICES, "the rungs choose the devices"},
                                      {CLI_OPT_BATCH, "the rungs choose the batch"},
                                      {CLI_OPT_PRECISION, "the rungs choose it"}, {0}},
    .check = check_experiment,
};
