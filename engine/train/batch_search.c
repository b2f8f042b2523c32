/* batch = max | auto: the batch found against the memory budget and confirmed, or chosen for speed,
 * by real training steps on replica 0 before the run's own binding.
 *
 * max: the largest multiple of 8 (at most batch_max) whose memory plan fits the budget, then a few
 * real steps at it; an allocation failure there (from the binding or the steps) takes a tenth off,
 * rounded down to a multiple of 8, and tries again. auto: real steps at candidates doubling from 32
 * up to what max would pick (or batch_candidates), until images/s has not improved by 5% for two
 * candidates in a row or batch_search_seconds have passed; the smallest batch within 5% of the
 * best measured wins, since past saturation a larger batch buys no speed and costs generalisation.
 * auto never goes past the batch that leaves min_steps_per_epoch steps an epoch: on a CPU images/s
 * may climb up to the training set's size, and a batch of half the set trains two steps an epoch.
 *
 * Every trial binds the network afresh and unbinds it; the run then binds at the winner from the
 * seed, and the step count and metrics go back to zero, so training after a search is the training
 * of a run configured with that number. Synchronising here is fine: no training step is running. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "train/batch_search.h"
#include "train/memory.h"
#include "train/optim.h"

enum {
    WARMUP_STEPS = 2,      /* the first step of a shape runs directly, the second is captured */
    TIMED_STEPS = 3,
    CONFIRM_STEPS = 1,     /* max: timed after the warm-up, so its row has a figure too */
    MAX_TIMED_STEPS = 64,
    AUTO_FIRST = 32,
    UNBOUNDED_BATCH = 1 << 22,   /* batch_max before the training set's size is known */
};
#define MIN_WINDOW_MS 50.0   /* a window shorter than this is timed again, longer */
#define SATURATION 0.05      /* 5%: within it of the best is as fast; beyond it is an improvement */

static const char *const mode_names[] = {"fixed", "max", "auto"};

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

static size_t plan_total(ct_run *run, ct_backend *be, int batch, ct_memory_plan *p)
{
    ct_graph_plan(&run->graph, be, batch, run->cfg.train.optimizer, p);
    return p->total;
}

/* The largest batch whose plan fits: a multiple of 8, or batch_max itself below 8. */
static int largest_fitting(ct_run *run, ct_backend *be, size_t budget, int batch_max)
{
    int b = ct_graph_max_batch(&run->graph, be, run->cfg.train.optimizer, budget, batch_max);
    ct_memory_plan p;
    if (b == 0 && batch_max < 8 && plan_total(run, be, batch_max, &p) <= budget)
        b = batch_max;
    return b;
}

/* Appends a row (the table keeps the first CT_BATCH_TRIALS; later ones go to *spare). */
static ct_batch_trial *add_trial(ct_batch_search *s, ct_batch_trial *spare, int batch, int fits, double ips,
                                 size_t plan, const char *note)
{
    ct_batch_trial *t = s->n_trials < CT_BATCH_TRIALS ? &s->trials[s->n_trials++] : spare;
    *t = (ct_batch_trial){.batch = batch, .fits = fits, .images_per_s = ips, .plan_bytes = (long long)plan};
    snprintf(t->note, sizeof t->note, "%s", note);
    return t;
}

/* "[train] batch = max: <detail>" at the batch line (--set train.batch when it came from there):
 * where the search was asked for. */
static ct_status fail_batch(ct_run *run, ct_status status, const char *detail)
{
    const ct_train_config *t = &run->cfg.train;
    return ct_config_fail_train(&run->err, status, &run->cfg, t->batch_line, "batch", "[train] batch = %s: %s",
                                mode_names[t->batch_mode], detail);
}

/* Batch 8 (or batch_max below it) does not fit the budget. */
static ct_status too_small(ct_run *run, ct_replica *r, size_t budget, size_t cap, int batch_max)
{
    const ct_train_config *t = &run->cfg.train;
    int b = batch_max < 8 ? batch_max : 8;
    ct_memory_plan p;
    plan_total(run, r->be, b, &p);
    char detail[600];
    int used = snprintf(detail, sizeof detail,
                        "batch %d needs %.1f MiB (parameters and gradients %.1f, optimizer %.1f, activations %.1f, "
                        "activation gradients %.1f, workspace %.1f, inputs %.1f)",
                        b, mib(p.total), mib(p.params + p.params_half), mib(p.optimizer), mib(p.activations),
                        mib(p.gradients), mib(p.workspace), mib(p.inputs));
    double keep = 1.0 - (double)t->memory_margin;
    if (cap) {
        long need = (long)ceil(mib(p.total) / (keep > 0 ? keep : 1.0));
        snprintf(detail + used, sizeof detail - (size_t)used,
                 ", more than memory = limit:%ld less memory_margin %.0f%% leaves (%.1f MiB); raise the limit to "
                 "at least limit:%ld", t->memory_limit_mib, 100.0 * t->memory_margin, mib(budget), need);
        return fail_batch(run, CT_ERR_CONFIG, detail);
    }
    snprintf(detail + used, sizeof detail - (size_t)used,
             ", more than the %.1f MiB %s device %d has free less memory_margin %.0f%%; free memory on the device "
             "or use a smaller network", mib(budget), r->dev->ops->name, r->dev->ordinal, 100.0 * t->memory_margin);
    return fail_batch(run, CT_ERR_NOMEM, detail);
}

/* Submits the first `batch` training samples (wrapping round a small set), unaugmented: real
 * images for the steps to work on. */
static ct_status stage(ct_run *run, ct_replica *r, int batch, ct_err *err)
{
    long *idx = malloc((size_t)batch * sizeof *idx);
    if (!idx)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for a %d-sample batch", batch);
    for (int i = 0; i < batch; i++)
        idx[i] = i % run->train.count;
    ct_status st = ct_train_stage_batch(run, r, &run->train, idx, batch, 0, 0, err);
    free(idx);
    return st;
}

static ct_status run_steps(ct_run *run, int batch, int steps, ct_err *err)
{
    float lr = (float)(run->cfg.train.learning_rate * ct_lr_factor(&run->cfg.train, batch));
    ct_status st = CT_OK;
    for (int i = 0; i < steps && st == CT_OK; i++)
        st = ct_train_step(run, batch, lr, err);
    return st;
}

/* Binds replica 0 at `batch`, runs the real train step on a real batch (warm-up, then `timed` steps
 * between two timing marks, again for longer when that was too short to time), unbinds. *ips: the
 * timed images per second. */
static ct_status try_batch(ct_run *run, ct_replica *r, int batch, int timed, double *ips, ct_err *err)
{
    const ct_train_config *t = &run->cfg.train;
    ct_device *dev = r->dev;
    size_t limit = t->memory == CT_MEMORY_LIMIT ? (size_t)t->memory_limit_mib << 20 : 0;
    double ms = 0.0;
    int n = timed;
    *ips = -1.0;
    ct_status st = ct_replica_bind(r, &run->cfg, run->graph.input, run->graph.classes, batch, t->seed, limit, err);
    if (st != CT_OK)
        return st;
    /* fp16 steps unscale their gradients: a fresh binding needs the scaler the run starts with */
    if (t->precision == CT_PREC_FP16) {
        ct_scaler s = ct_train_scaler_start(t);
        st = r->be->ops->scaler_set(r->be, &s, err);
    }
    if (st == CT_OK)
        st = stage(run, r, batch, err);
    if (st == CT_OK)
        st = run_steps(run, batch, WARMUP_STEPS, err);
    for (int round = 0; round < 2 && st == CT_OK; round++) {
        st = dev->ops->mark(dev, 0, err);
        if (st == CT_OK)
            st = run_steps(run, batch, n, err);
        if (st == CT_OK)
            st = dev->ops->mark(dev, 1, err);
        if (st == CT_OK)
            st = dev->ops->elapsed(dev, 0, 1, &ms, err);
        if (st != CT_OK || ms >= MIN_WINDOW_MS)
            break;
        /* too short to time well: once more, long enough for about twice the minimum */
        int more = ms > 0 ? (int)ceil(n * 2.0 * MIN_WINDOW_MS / ms) : MAX_TIMED_STEPS;
        if (round == 0)
            n = more > MAX_TIMED_STEPS ? MAX_TIMED_STEPS : more < n ? n : more;
    }
    if (st == CT_OK)
        st = dev->ops->synchronize(dev, err);
    ct_replica_unbind(r);
    if (st == CT_OK)
        *ips = ms > 0 ? (double)batch * n / (ms / 1000.0) : 0.0;
    return st;
}

static ct_status search_max(ct_run *run, ct_replica *r, size_t budget, size_t cap, int batch_max, int *out)
{
    ct_batch_search *s = &run->search;
    ct_err *err = &run->err;
    ct_batch_trial spare;
    ct_memory_plan p;
    int b = largest_fitting(run, r->be, budget, batch_max);
    if (b == 0)
        return too_small(run, r, budget, cap, batch_max);
    if (b + 8 <= batch_max && plan_total(run, r->be, b + 8, &p) > budget)
        add_trial(s, &spare, b + 8, 0, -1.0, p.total, "plan over the budget");
    int backoffs = 0;
    for (;;) {
        double ips = -1.0;
        size_t plan = plan_total(run, r->be, b, &p);
        ct_status st = try_batch(run, r, b, CONFIRM_STEPS, &ips, err);
        if (st == CT_OK) {
            add_trial(s, &spare, b, 1, ips, plan, "chosen");
            *out = b;
            break;
        }
        if (st != CT_ERR_NOMEM)
            return st;
        add_trial(s, &spare, b, 0, -1.0, plan, "allocation failed");
        /* a tenth off, rounded down to a multiple of 8 */
        int next = (b - b / 10) / 8 * 8;
        if (next >= b)
            next = b - 8;
        if (next < 1)
            return ct_fail(err, CT_ERR_NOMEM, "[train] batch = max: allocation failed down to batch %d (%s)", b,
                           err->msg);
        b = next;
        backoffs++;
    }
    if (backoffs)
        snprintf(s->reason, sizeof s->reason,
                 "batch %d: the largest whose plan fits %.1f MiB, less a tenth %d time%s after allocation "
                 "failures; real steps ran at it", *out, mib(budget), backoffs, backoffs == 1 ? "" : "s");
    else
        snprintf(s->reason, sizeof s->reason, "batch %d: the largest %s whose plan fits %.1f MiB%s; real steps ran "
                                              "at it", *out, *out % 8 ? "batch" : "multiple of 8", mib(budget),
                 *out + 8 > batch_max ? " (batch_max caps it)" : "");
    return CT_OK;
}

/* auto's bound: the largest batch that leaves min_steps_per_epoch steps an epoch counted in whole
 * batches (so it holds with drop_last too), a multiple of 8 from 8 up; 1 when the training set
 * holds fewer samples than that many steps (the most steps there are); 0 when its size is unknown. */
static int steps_bound(const ct_run *run)
{
    long count = run->train.count;
    if (count <= 0)
        return 0;
    long most = count / run->cfg.train.min_steps_per_epoch;
    if (most >= 8)
        most = most / 8 * 8;
    if (most < 1)
        most = 1;
    return most < INT_MAX ? (int)most : INT_MAX;
}

/* auto's candidates: batch_candidates, else doubling from 32 up to max_b, and max_b itself. */
static int auto_candidates(const ct_train_config *t, int max_b, int *c)
{
    int n = 0;
    if (t->n_batch_candidates) {
        for (int i = 0; i < t->n_batch_candidates; i++)
            c[n++] = t->batch_candidates[i];
        return n;
    }
    for (long b = AUTO_FIRST; b <= max_b && n < CT_BATCH_TRIALS - 1; b *= 2)
        c[n++] = (int)b;
    if (n == 0 || c[n - 1] < max_b)
        c[n++] = max_b;
    return n;
}

static ct_status search_auto(ct_run *run, ct_replica *r, size_t budget, size_t cap, int batch_max, int *out)
{
    const ct_train_config *t = &run->cfg.train;
    ct_batch_search *s = &run->search;
    ct_err *err = &run->err;
    ct_batch_trial spare;
    ct_memory_plan p;
    int max_b = largest_fitting(run, r->be, budget, batch_max);
    if (max_b == 0)
        return too_small(run, r, budget, cap, batch_max);
    int bound = steps_bound(run);
    int top = bound > 0 && bound < max_b ? bound : max_b;
    s->steps_bound = bound;
    int cand[CT_BATCH_TRIALS];
    int n_cand = auto_candidates(t, top, cand);
    /* every listed batch that fits is over the bound: the bound itself is measured, so auto picks */
    if (t->n_batch_candidates && top < max_b && cand[0] > top && cand[0] <= max_b && n_cand < CT_BATCH_TRIALS) {
        memmove(cand + 1, cand, (size_t)n_cand * sizeof *cand);
        cand[0] = top;
        n_cand++;
    }
    double started = ct_clock_seconds(), best = 0.0;
    int best_batch = 0, stale = 0, measured = 0, cut = 0;
    const char *stop = "every candidate was measured";
    char note[64];
    for (int i = 0; i < n_cand; i++) {
        int b = cand[i];
        size_t plan = plan_total(run, r->be, b, &p);
        if (b > max_b) {
            add_trial(s, &spare, b, 0, -1.0, plan, b > batch_max ? "over batch_max" : "plan over the budget");
            continue;
        }
        if (measured && ct_clock_seconds() - started > t->batch_search_seconds) {
            stop = "batch_search_seconds ran out";
            break;
        }
        if (b > top) {
            snprintf(note, sizeof note, "%ld steps an epoch, under min_steps_per_epoch", run->train.count / b);
            add_trial(s, &spare, b, 0, -1.0, plan, note);
            cut++;
            continue;
        }
        double ips = -1.0;
        ct_status st = try_batch(run, r, b, TIMED_STEPS, &ips, err);
        if (st == CT_ERR_NOMEM) {
            /* larger candidates would fail too */
            add_trial(s, &spare, b, 0, -1.0, plan, "allocation failed");
            stop = "an allocation failed";
            break;
        }
        if (st != CT_OK)
            return st;
        add_trial(s, &spare, b, 1, ips, plan, "");
        measured++;
        stale = ips > best * (1.0 + SATURATION) ? 0 : stale + 1;
        if (ips > best) {
            best = ips;
            best_batch = b;
        }
        if (stale >= 2) {
            stop = "images/s did not improve by 5% for two candidates in a row";
            break;
        }
    }
    /* the doubling stopped at the bound with memory for more: the next doubling (or what fits) is
     * the batch the bound kept out */
    int ran_out = strcmp(stop, "every candidate was measured") == 0;
    if (!t->n_batch_candidates && ran_out && top < max_b) {
        long next = AUTO_FIRST;
        while (next <= top)
            next *= 2;
        int b = next < max_b ? (int)next : max_b;
        snprintf(note, sizeof note, "%ld steps an epoch, under min_steps_per_epoch", run->train.count / b);
        add_trial(s, &spare, b, 0, -1.0, plan_total(run, r->be, b, &p), note);
        cut++;
    }
    s->bounded = ran_out && cut > 0;
    char bound_text[200];
    if (s->bounded)
        snprintf(bound_text, sizeof bound_text,
                 "min_steps_per_epoch = %d kept the batch at most %d (%ld training images), below the %d that fits "
                 "the memory", t->min_steps_per_epoch, top, run->train.count, max_b);
    if (!measured)
        return ct_fail(err, CT_ERR_NOMEM, "[train] batch = auto: no candidate batch could be bound (%s)", err->msg);
    /* the smallest measured batch within 5% of the best */
    ct_batch_trial *win = NULL;
    for (int i = 0; i < s->n_trials; i++) {
        ct_batch_trial *tr = &s->trials[i];
        if (tr->fits && tr->images_per_s >= (1.0 - SATURATION) * best && (!win || tr->batch < win->batch))
            win = tr;
    }
    if (!win)   /* every measured row is in the table, which holds more rows than there are candidates */
        return ct_fail(err, CT_ERR_INTERNAL, "batch = auto: the measured batches are missing from the table");
    snprintf(win->note, sizeof win->note, "chosen");
    *out = win->batch;
    snprintf(s->reason, sizeof s->reason,
             "batch %d: %.0f images/s, the smallest batch within 5%% of the best measured (%.0f at batch %d); %s",
             win->batch, win->images_per_s, best, best_batch, s->bounded ? bound_text : stop);
    return CT_OK;
}

/* A memory = limit: cap below what the network takes at any batch (its parameters, their
 * gradients, the optimizer state, the backend's own buffers) is a config error at the memory line,
 * whatever the batch: no batch could train, and the message says the least limit that trains
 * batch 8 less the margin. */
static ct_status check_cap(ct_run *run, ct_backend *be)
{
    const ct_train_config *t = &run->cfg.train;
    if (t->memory != CT_MEMORY_LIMIT)
        return CT_OK;
    ct_memory_plan none, eight;
    plan_total(run, be, 0, &none);
    size_t fixed = none.params + none.params_half + none.optimizer + none.state + none.backend;
    size_t cap = (size_t)t->memory_limit_mib << 20;
    if (fixed <= cap)
        return CT_OK;
    plan_total(run, be, 8, &eight);
    double keep = 1.0 - (double)t->memory_margin;
    long need = (long)ceil(mib(eight.total) / (keep > 0 ? keep : 1.0));
    return ct_config_fail_train(&run->err, CT_ERR_CONFIG, &run->cfg, t->memory_line, "memory",
                      "[train] memory = limit:%ld MiB is below what the network needs before any batch: %.1f MiB "
                      "(parameters and gradients %.1f, half copy %.1f, optimizer %.1f, state %.1f, backend %.1f); "
                      "batch 8 trains from limit:%ld",
                      t->memory_limit_mib, mib(fixed), mib(none.params), mib(none.params_half), mib(none.optimizer),
                      mib(none.state), mib(none.backend), need);
}

/* lr_scaling = none keeps learning_rate at a batch above the one it was tuned for: fewer, larger
 * steps at the same rate, which may fall short in the configured epochs. */
static void lr_warning(ct_run *run, int batch)
{
    const ct_train_config *t = &run->cfg.train;
    ct_batch_search *s = &run->search;
    if (t->lr_scaling != CT_LR_SCALING_NONE || t->base_batch <= 0 || batch <= t->base_batch)
        return;
    snprintf(s->warning, sizeof s->warning,
             "batch %d is above base_batch %d with lr_scaling = none: learning_rate %g, tuned for batch %d, takes "
             "%.3gx fewer steps an epoch and may converge worse; set lr_scaling = linear or sqrt, or batch_max = %d",
             batch, t->base_batch, (double)t->learning_rate, t->base_batch, (double)batch / (double)t->base_batch,
             t->base_batch);
}

ct_status ct_batch_resolve(ct_run *run, int *batch)
{
    const ct_train_config *t = &run->cfg.train;
    ct_batch_search *s = &run->search;
    memset(s, 0, sizeof *s);
    s->mode = mode_names[t->batch_mode];
    if (!run->inference && run->n_replicas) {
        ct_status st = check_cap(run, run->replicas[0].be);
        if (st != CT_OK)
            return st;
    }
    if (t->batch_mode == CT_BATCH_FIXED) {
        *batch = s->batch = t->batch;
        lr_warning(run, t->batch);
        return CT_OK;
    }
    if (run->inference)
        return fail_batch(run, CT_ERR_CONFIG, "it finds a training batch by measuring training steps, which "
                                              "evaluation and prediction do not take; give them a number (batch = "
                                              "N, or --batch N)");
    ct_train_apply_threads(run);
    /* the search runs one replica (several are refused at the config): its device's budget */
    ct_replica *r = &run->replicas[0];
    size_t budget = 0, cap = 0;
    ct_status st = ct_memory_budget(t, r->dev, &budget, &cap, &run->err);
    if (st != CT_OK)
        return st;
    s->budget = (long long)budget;
    long count = run->train.count > 0 ? run->train.count : UNBOUNDED_BATCH;
    int batch_max = t->batch_max ? t->batch_max : (int)(count < INT_MAX ? count : INT_MAX);
    long step = run->step;
    int found = 0;
    st = t->batch_mode == CT_BATCH_MAX ? search_max(run, r, budget, cap, batch_max, &found)
                                       : search_auto(run, r, budget, cap, batch_max, &found);
    /* the trials' steps leave no trace: the run counts (and seeds dropout) from its own first step */
    run->step = step;
    if (st != CT_OK)
        return st;
    *batch = s->batch = found;
    lr_warning(run, found);
    return CT_OK;
}
