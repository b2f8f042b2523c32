/* cutrain train: fit the network, report each epoch, keep checkpoints, stop cleanly on Ctrl-C. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct train_run {
    cli_progress progress;
    const cli_options *opt;
    ct_net *net;
    const cli_stop_signals *stops; /* Ctrl-C, SIGTERM */
    long checkpoint_every;
    int keep;
    double best;             /* best test accuracy saved as best.ckpt */
    int failed;              /* exit code of a failed checkpoint save */
} train_run;

static int after_step(ct_net *net, long steps_done, void *user)
{
    train_run *run = user;
    if (cli_stop_signal(run->stops))
        return 1;
    if (run->opt->checkpoint_dir && run->checkpoint_every > 0 && steps_done % run->checkpoint_every == 0)
        run->failed = cli_checkpoint_save(net, run->opt->checkpoint_dir, run->keep, -1.0, &run->best);
    return run->failed;
}

/* on_bad_image = skip: which files were replaced, so that the user can mend or remove them. */
static void print_bad_images(const ct_net *net)
{
    enum { SHOWN = 5 };
    const char *paths[SHOWN];
    long n = ct_bad_image_files(net, paths, SHOWN);
    fprintf(stderr, "cutrain: note: %ld training file%s could not be decoded and %s replaced (on_bad_image = skip):",
            n, n == 1 ? "" : "s", n == 1 ? "was" : "were");
    for (long i = 0; i < n && i < SHOWN; i++)
        fprintf(stderr, "%s %s", i ? "," : "", paths[i]);
    if (n > SHOWN)
        fprintf(stderr, " and %ld more", n - SHOWN);
    fprintf(stderr, "\n");
}

/* The network is consistent at an epoch's end, so the epoch's checkpoint is saved here. */
static int on_epoch(const ct_epoch_stats *s, void *user)
{
    train_run *run = user;
    cli_on_epoch(s, &run->progress);
    if (s->bad_images > 0)
        print_bad_images(run->net);
    if (run->opt->checkpoint_dir)
        run->failed = cli_checkpoint_save(run->net, run->opt->checkpoint_dir, run->keep, s->test_accuracy, &run->best);
    return run->failed;
}

static int interrupted(ct_net *net, const train_run *run)
{
    int sig = cli_stop_signal(run->stops);
    double best = run->best;
    printf("\ncutrain: %s after step %ld\n", sig == SIGTERM ? "terminated" : "interrupted", ct_steps_done(net));
    if (run->opt->checkpoint_dir) {
        int rc = cli_checkpoint_save(net, run->opt->checkpoint_dir, run->keep, -1.0, &best);
        if (rc != CLI_OK) {
            ct_close(net);
            return rc;
        }
        printf("cutrain: saved; continue with --resume %s\n", run->opt->checkpoint_dir);
    } else {
        printf("cutrain: nothing saved (no --checkpoint DIR)\n");
    }
    ct_close(net);
    return 128 + sig;
}

/* A failure while the config, the data or the checkpoint resumed from were still opening: when a
 * stop signal came meanwhile (an open that waited on a FIFO, a long load), it is an interruption,
 * exit 130 / 143, with nothing to save yet. net may be NULL (closed already). */
static int stopped_early(const cli_stop_signals *stops, ct_net *net, ct_status st, int rc)
{
    int sig = cli_stop_signal(stops);
    if (!sig) {
        if (net)
            return cli_fail(net, st);
        return rc;
    }
    if (net) {
        fprintf(stderr, "cutrain: %s\n", ct_errmsg(net));
        ct_close(net);
    }
    printf("cutrain: %s before training started; nothing saved\n", sig == SIGTERM ? "terminated" : "interrupted");
    return 128 + sig;
}

static int open_tensorboard(ct_net *net, const cli_options *opt)
{
    ct_status st = ct_tensorboard_open(net, opt->tensorboard_dir);
    if (st != CT_OK)
        return cli_fail(net, st);
    if (!opt->quiet)
        printf("cutrain: TensorBoard events in %s (view: tensorboard --logdir %s)\n", ct_tensorboard_path(net),
               opt->tensorboard_dir);
    return CLI_OK;
}

/* Training on an open network whose folders are checked (resume_path: the checkpoint to continue
 * from, NULL for a fresh run); closes net. */
static int train_checked(const cli_options *opt, ct_net *net, const char *resume_path, cli_stop_signals *stops)
{
    train_run run = {.progress = {.tty = isatty(STDOUT_FILENO) && !opt->quiet, .quiet = opt->quiet},
                     .opt = opt, .net = net, .stops = stops, .best = -1.0};
    /* resumed before the run is prepared: under mpirun the processes' join compares the checkpoint */
    ct_status st = resume_path ? ct_resume(net, resume_path) : ct_prepare(net);
    if (st == CT_OK && resume_path && !opt->quiet)
        printf("cutrain: resumed from %s at epoch %d, step %ld\n", resume_path, ct_epochs_done(net),
               ct_steps_done(net));
    /* on stderr even with --quiet: it is about what this run will (not) do */
    if (st == CT_OK && resume_path && ct_resume_note(net)[0]) {
        fflush(stdout);
        fprintf(stderr, "cutrain: note: %s\n", ct_resume_note(net));
    }
    if (st != CT_OK)
        return stopped_early(stops, net, st, CLI_FAILURE);
    cli_stop_signals_opened(stops);
    if (opt->log_path && !(run.progress.log = fopen(opt->log_path, "a"))) {
        fprintf(stderr, "cutrain: cannot open log %s: %s\n", opt->log_path, strerror(errno));
        ct_close(net);
        return CLI_FAILURE;
    }
    ct_checkpoint_settings(net, &run.checkpoint_every, &run.keep);
    if (opt->checkpoint_dir)
        run.best = cli_checkpoint_best(net, opt->checkpoint_dir);
    ct_batch_search search;
    ct_lr_scaling_info lr;
    if ((st = ct_batch_search_get(net, &search)) != CT_OK || (st = ct_lr_scaling_get(net, &lr)) != CT_OK) {
        if (run.progress.log)
            fclose(run.progress.log);
        return cli_fail(net, st);
    }
    run.progress.batch = ct_batch_size(net);
    run.progress.search = &search;
    if (!opt->quiet) {
        printf("cutrain: backend %s (%s)\n", ct_backend_name(net), ct_backend_reason(net));
        cli_print_batch_search(&search, &lr);
        /* the many-small-layers check counts GPU kernel launches: a CPU run has none */
        ct_launch_report launch;
        if (strcmp(ct_backend_name(net), "cpu") != 0 && ct_launch_report_get(net, 0, &launch, NULL, 0) == CT_OK &&
            launch.warn)
            printf("cutrain: warning: %s\n", launch.message);
        printf("cutrain: %s: %ld training images, batch %d\n", opt->config, ct_train_images(net), ct_batch_size(net));
        long hidden = 0, not_images = 0;
        ct_train_files_skipped(net, &hidden, &not_images);
        if (hidden + not_images > 0)
            printf("cutrain: the training folder's index leaves out %ld hidden file%s and %ld that %s not JPEG or PNG\n",
                   hidden, hidden == 1 ? "" : "s", not_images, not_images == 1 ? "is" : "are");
        fflush(stdout);
    }
    ct_callbacks cb = {.on_epoch = on_epoch, .on_step = run.progress.tty ? cli_on_step : NULL, .step_every = 10,
                       .user = &run, .after_step = after_step};
    run.progress.started = cli_now();
    st = ct_fit(net, &cb);
    if (run.progress.log)
        fclose(run.progress.log);
    if (ct_backend_note(net)[0])
        fprintf(stderr, "cutrain: note: %s\n", ct_backend_note(net));
    if (st == CT_ERR_STOPPED && cli_stop_signal(stops))
        return interrupted(net, &run);
    if (run.failed) { /* the save printed why */
        ct_close(net);
        return run.failed;
    }
    if (st == CT_ERR_NOMEM && opt->checkpoint_dir && ct_steps_done(net) > 0) {
        /* out of memory inside a step leaves the parameters of the last completed one: keep them */
        fprintf(stderr, "cutrain: %s\n", ct_errmsg(net));
        double best = run.best;
        if (cli_checkpoint_save(net, opt->checkpoint_dir, run.keep, -1.0, &best) == CLI_OK)
            fprintf(stderr, "cutrain: saved step %ld; continue with --resume %s and a batch that fits (batch = max)\n",
                    ct_steps_done(net), opt->checkpoint_dir);
        ct_close(net);
        return cli_exit_code(st);
    }
    if (st != CT_OK)
        return cli_fail(net, st);
    ct_close(net);
    return CLI_OK;
}

static int open_and_train(const cli_options *opt, cli_stop_signals *stops)
{
    ct_net *net = NULL;
    int rc = cli_open(opt, &net);
    if (rc != CLI_OK)
        return stopped_early(stops, NULL, CT_OK, rc);
    /* before the data loads: a folder that cannot be written, or that holds another run's
     * checkpoints or is in use by one, is refused before anything runs */
    if (opt->tensorboard_dir && (rc = open_tensorboard(net, opt)) != CLI_OK)
        return rc;
    char resume_path[4096];
    if (opt->resume && (rc = cli_checkpoint_resolve(opt->resume, resume_path, sizeof resume_path)) != CLI_OK) {
        ct_close(net);
        return rc;
    }
    cli_claimed_folder *claim = NULL;
    if (opt->checkpoint_dir &&
        (rc = cli_checkpoint_claim(opt->checkpoint_dir, opt->resume ? resume_path : NULL, &claim)) != CLI_OK) {
        ct_close(net);
        return rc;
    }
    rc = train_checked(opt, net, opt->resume ? resume_path : NULL, stops);
    cli_checkpoint_release(claim);
    return rc;
}

static int cmd_train(const cli_options *opt)
{
    /* from the start, before any thread: a signal while the data loads stops training before its
     * first step ends */
    cli_stop_signals *stops = NULL;
    int rc = cli_stop_signals_start(&stops);
    if (rc != CLI_OK)
        return rc;
    rc = open_and_train(opt, stops);
    cli_stop_signals_end(stops);
    return rc;
}

const cli_command cli_cmd_train = {
    .name = "train",
    .run = cmd_train,
    .usage = "[train] --config FILE [options]",
    .about = "train the network the config describes (the default)",
    .takes = CLI_OPTS_CONFIG | CLI_OPTS_RUN | CLI_OPT(LOG) | CLI_OPT(TENSORBOARD) | CLI_OPT(CHECKPOINT) |
             CLI_OPT(RESUME),
    .needs = CLI_OPT(CONFIG),
    .refusals = (const cli_refusal[]){{CLI_OPT_WEIGHTS, "to continue training use --resume"}, {0}},
};
