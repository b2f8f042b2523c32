/* The training loop, top to bottom: for each epoch, shuffle; for each batch, assemble it on the
 * host, upload, forward, loss, backward, optimizer step; then evaluate on the test set. Metrics
 * accumulate in the backend and are read only when a callback or the epoch's end needs them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#include "base/clock.h"
#include "train/buckets.h"
#include "train/memory.h"
#include "train/monitor.h"
#include "train/optim.h"
#include "train/run.h"
#include "train/tensorboard.h"
#include "train/time_split.h"
#include "train/world.h"

/* Salts that keep the random streams of different purposes apart (the augmentation's is the
 * pipeline's CT_PIPELINE_SALT_AUGMENT). */
enum { SALT_DROPOUT = 0x44524f50 };

/* Makes replica i's device current before the calling thread enqueues on it: with several GPUs,
 * CUDA calls go to the current device. One replica's device is current already. */
static ct_status use_device(ct_run *run, int i, ct_err *err)
{
    if (run->n_replicas < 2)
        return CT_OK;
    ct_device *dev = run->replicas[i].dev;
    return dev->ops->activate(dev, err);
}

/* What every replica's backend has accumulated since the last reset: metrics are sums over
 * replicas, over every process of a world too when `over_world` (every rank then calls it at the
 * same point; summed in rank order, as one process sums its replicas). */
static ct_status read_metrics(ct_run *run, double *loss_sum, long *correct, int reset, int over_world, ct_err *err)
{
    *loss_sum = 0.0;
    *correct = 0;
    for (int i = 0; i < run->n_replicas; i++) {
        ct_backend *be = run->replicas[i].be;
        double loss = 0.0;
        long right = 0;
        ct_status st = use_device(run, i, err);
        if (st == CT_OK)
            st = be->ops->read_metrics(be, &loss, &right, reset, err);
        if (st != CT_OK)
            return st;
        *loss_sum += loss;
        *correct += right;
    }
    ct_status st = use_device(run, 0, err);
    if (st != CT_OK || !run->world || !over_world)
        return st;
    typedef struct metrics {
        double loss;
        long correct;
    } metrics;
    int size = ct_world_size(run->world);
    metrics mine = {*loss_sum, *correct}, *all = calloc((size_t)size, sizeof *all);
    if (!all)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the processes' metrics");
    char what[80];
    snprintf(what, sizeof what, "the metrics' exchange after step %ld", run->step);
    st = ct_world_all_gather(run->world, &mine, all, sizeof mine, what, err);
    if (st == CT_OK) {
        *loss_sum = 0.0;
        *correct = 0;
        for (int r = 0; r < size; r++) {
            *loss_sum += all[r].loss;
            *correct += all[r].correct;
        }
    }
    if (!ct_world_broken(run->world))   /* a failed exchange may still write into it */
        free(all);
    return st;
}

/* Makes every replica's device current for the calling thread in turn, replica 0's last: the
 * thread evaluates on it. */
static ct_status activate_devices(ct_run *run, ct_err *err)
{
    for (int i = run->n_replicas - 1; i >= 0; i--) {
        ct_device *dev = run->replicas[i].dev;
        ct_status st = dev->ops->activate(dev, err);
        if (st != CT_OK)
            return st;
    }
    return CT_OK;
}

ct_status ct_train_stage_batch(ct_run *run, ct_replica *r, const ct_dataset *ds, const long *idx, int n,
                               int augment, uint64_t aug_seed, ct_err *err)
{
    float *hx;
    int32_t *hy;
    int slot;
    ct_status st = ct_replica_host_slot(r, &hx, &hy, &slot, err);
    if (st != CT_OK)
        return st;
    st = ct_read_batch(ds, idx, n, &run->augment, augment, aug_seed, hx, hy, err);
    /* a sample that does not decode (format = imagefolder) fails the batch; the slot's ticket is
     * already cleared, so the slot is simply free again */
    if (st != CT_OK)
        return st;
    return ct_replica_submit_slot(r, slot, n, err);
}

static void *pipeline_alloc(void *ctx, size_t bytes) { return ((ct_device *)ctx)->ops->host_alloc(ctx, bytes); }
static void pipeline_free(void *ctx, void *p) { ((ct_device *)ctx)->ops->host_free(ctx, p); }

void ct_run_pipeline_config(ct_run *run, ct_pipeline_config *pc)
{
    ct_device *dev = run->replicas[0].dev;
    ct_pipeline_config_init(pc, &run->cfg.data, &run->train, &run->augment, run->batch, run->cfg.train.seed, 1);
    /* A step on the host runs on every core its threads have: an input worker there takes one from
     * it, and the step's other threads spin at their next barrier until the preempted one runs
     * again (docs/cpu-benchmarks.md). A set in memory costs one pass over the batch to gather and
     * normalise, so the trainer's thread makes it between steps, with no fork or barrier to wait on.
     * workers = N asks for workers, and gets them. */
    if (dev->host_memory && !pc->sync && !pc->raw_u8 && run->cfg.data.workers == 0 && run->train.images)
        pc->on_caller = 1;
    if (!pc->sync && !pc->on_caller) {
        pc->host_alloc = pipeline_alloc;
        pc->host_free = pipeline_free;
        pc->alloc_ctx = dev;
    }
    if (dev->host_memory)
        pc->raw_u8 = 0;
}

ct_optim_step ct_train_optim_step(const ct_train_config *t, ct_graph *g)
{
    return (ct_optim_step){
        .kind = t->optimizer, .params = &g->params, .grads = &g->grads,
        .m = g->opt_m.data ? &g->opt_m : NULL, .v = g->opt_v.data ? &g->opt_v : NULL,
        .momentum = t->momentum, .beta1 = t->beta1, .beta2 = t->beta2,
        .epsilon = t->epsilon, .weight_decay = t->weight_decay, .nesterov = t->nesterov,
        .params_half = g->params_half.data ? &g->params_half : NULL,
        .scaled = t->precision == CT_PREC_FP16,
    };
}

ct_scaler ct_train_scaler_start(const ct_train_config *t)
{
    /* a fixed scale never moves (growth 0); dynamic starts at loss_scale_init */
    return (ct_scaler){
        .loss_scale = t->loss_scale > 0 ? t->loss_scale : t->loss_scale_init,
        .growth_steps = t->loss_scale > 0 ? 0 : t->loss_scale_growth_steps,
    };
}

typedef struct step_ctx {
    ct_run *run;
    ct_replica *replica;
    int n;                   /* the replica's share */
    int total;               /* the global batch */
} step_ctx;

/* sync_bn: batch norm's per-channel figures averaged over the replicas, weighted by samples. A
 * communicator that reduces on a stream of its own (NCCL) is joined at once, so that the compute
 * stream waits for the result before batch norm reads it (the join also ends NCCL's count of the
 * step's samples, which its next all-reduce counts again: the same total, one more 4-byte
 * all-reduce). */
// v: (count) fp32 in the replica's backend memory
static ct_status bn_mean(void *p, float *v, int count, ct_err *err)
{
    step_ctx *c = p;
    ct_comm *comm = c->run->comm;
    ct_tensor t = ct_tensor_flat(v, CT_DTYPE_F32, (size_t)count);
    ct_status st = comm->ops->all_reduce_mean(comm, c->replica->rank, c->replica->be, &t, c->n, err);
    if (st == CT_OK && comm->ops->join)
        st = comm->ops->join(comm, c->replica->rank, c->replica->be, err);
    return st;
}

/* A traced step's forward: each layer's event runs from the end of the one before. */
typedef struct forward_clock {
    ct_trace_rank *trace;
    double mark;
} forward_clock;

static ct_status forward_done(void *p, int layer, ct_err *err)
{
    (void)err;
    forward_clock *fc = p;
    double now = ct_clock_seconds();
    ct_trace_add(fc->trace, CT_TRACE_FORWARD, layer, 0, fc->mark, now);
    fc->mark = now;
    return CT_OK;
}

/* The work of one step on one replica, enqueued without reading anything back: the backend may
 * capture it once and replay it, so everything that changes per step comes through set_step.
 * The gradients' all-reduce sits between backward and the update, inside the captured step. */
static ct_status step_work(void *p, ct_err *err)
{
    step_ctx *c = p;
    ct_replica *r = c->replica;
    ct_graph *g = &r->graph;
    ct_backend *be = r->be;
    ct_layer *out = ct_graph_output(g);
    /* one replica's statistics are already the global batch's; comm = nccl takes the synced path
     * with one rank too, so that a one-GPU machine runs it */
    int sync_bn = c->run->cfg.train.sync_bn && (c->run->comm->size > 1 || c->run->cfg.train.comm == CT_COMM_NCCL);
    be->bn_sync = sync_bn ? (ct_bn_sync){bn_mean, c, c->total} : (ct_bn_sync){0};
    ct_trace_rank *trace = c->run->trace ? &c->run->trace->rank[r - c->run->replicas] : NULL;  /* this process's replica */
    forward_clock fc = {trace, trace ? ct_clock_seconds() : 0.0};
    ct_status st = trace ? ct_graph_forward_each(g, c->n, 1, forward_done, &fc, err) : ct_graph_forward(g, c->n, 1, err);
    if (st == CT_OK)
        st = be->ops->loss(be, out->y, &g->labels, out->dy, c->n, err);
    if (trace)
        ct_trace_add(trace, CT_TRACE_LOSS, 0, 0, fc.mark, ct_clock_seconds());
    /* the gradients averaged over the replicas in buckets, each as backward completes it */
    ct_bucket_reduce reduce = {
        .comm = c->run->comm, .rank = r->rank, .graph = g, .samples = c->n, .bucket_mib = c->run->cfg.train.bucket_mib,
        .trace = trace,
        /* the time split's comm share: by the clock only where the step runs on the host */
        .timed = r->rank == 0 && r->dev->host_memory,
    };
    double comm_s = 0.0;
    if (st == CT_OK)
        st = ct_backward_reduced(&reduce, &comm_s, err);
    if (st == CT_OK && c->run->comm->ops->join)
        st = c->run->comm->ops->join(c->run->comm, r->rank, be, err);
    if (reduce.timed)  /* one replica's thread adds to it */
        c->run->comm_seconds += comm_s;
    /* fp16: the gradients back to their true size, non-finite values counted for the update */
    if (st == CT_OK && c->run->cfg.train.precision == CT_PREC_FP16)
        st = be->ops->unscale(be, &g->grads, err);
    if (st == CT_OK) {
        ct_optim_step s = ct_train_optim_step(&c->run->cfg.train, g);
        double start = trace ? ct_clock_seconds() : 0.0;
        st = be->ops->optimizer_step(be, &s, err);
        if (trace)
            ct_trace_add(trace, CT_TRACE_UPDATE, 0, 0, start, ct_clock_seconds());
    }
    /* each replica normalised with its own slice's statistics: replica 0's running statistics
     * become everyone's (DDP's broadcast_buffers), so every replica evaluates alike */
    if (st == CT_OK && g->state.count)
        st = c->run->comm->ops->broadcast(c->run->comm, r->rank, be, &g->state, 0, err);
    be->bn_sync = (ct_bn_sync){0};
    return st;
}

/* ct_capture_agree over the replicas' communicator: a failed capture on one replica is an error
 * on every replica, naming it, rather than direct launches on one while the others replay (NCCL
 * launches a captured collective only from one capture's graphs on all of its ranks). */
static ct_status agree_capture(void *p, int captured, const char *why, ct_err *err)
{
    step_ctx *c = p;
    ct_comm *comm = c->run->comm;
    int rank = c->replica->rank, failed = -1;
    ct_status st = comm->ops->agree(comm, rank, c->replica->be, captured, &failed, err);
    if (st != CT_OK || failed < 0)
        return st;
    if (failed == rank)
        return ct_fail(err, CT_ERR_BACKEND, "CUDA graph capture of step %ld failed on replica %d of %d: %s; replicas "
                       "that reduce together must all replay a step's capture or none, so every replica stops "
                       "(graph = off trains without capture)", comm->step, rank, comm->size, why ? why : "");
    return ct_fail(err, CT_ERR_BACKEND, "CUDA graph capture of step %ld failed on replica %d of %d, so replica %d "
                   "stops too: replicas that reduce together must all replay a step's capture or none (graph = off "
                   "trains without capture)", comm->step, failed, comm->size, rank);
}

/* The share of replica `rank` (over every process) of a global batch of n: an even split, the
 * remainder to the first ranks. */
static int slice_size(const ct_run *run, int rank, int n)
{
    int ranks = run->comm->size;
    return n / ranks + (rank < n % ranks);
}

static int slice_start(const ct_run *run, int rank, int n)
{
    int ranks = run->comm->size;
    return rank * (n / ranks) + (rank < n % ranks ? rank : n % ranks);
}

/* One step of this process's replica i on its slice of a global batch of n. */
static ct_status replica_step(ct_run *run, int i, const ct_step_scalars *s, int n, ct_err *err)
{
    ct_replica *r = &run->replicas[i];
    int rank = r->rank;
    step_ctx ctx = {run, r, slice_size(run, rank, n), n};
    /* a captured step is specific to its work, the replica's buffers and the global batch, which
     * fixes the replica's slice: keyed on the slice, a replica whose slice of a last batch matches
     * its full one would replay while another runs its first, direct step */
    ct_step_key key = {step_work, &r->graph, n};
    ct_step_scalars mine = *s;
    mine.first_sample = slice_start(run, rank, n);
    mine.samples = n;
    ct_status st = r->be->ops->set_step(r->be, &mine, err);
    if (run->comm->size > 1)
        r->be->capture_agree = (ct_capture_agree){agree_capture, &ctx};
    /* a traced step runs directly: a replayed capture would skip the work that records events */
    if (st == CT_OK)
        st = run->trace ? step_work(&ctx, err) : r->be->ops->run_step(r->be, &key, &ctx, err);
    r->be->capture_agree = (ct_capture_agree){0};
    return st;
}

typedef struct step_job {
    ct_run *run;
    const ct_step_scalars *s;
    int n;
} step_job;

/* A replica's step on its own host thread: its collectives wait for the others'. */
static ct_status replica_step_job(void *p, int rank, ct_err *err)
{
    step_job *j = p;
    ct_device *dev = j->run->replicas[rank].dev;
    ct_status st = dev->ops->activate(dev, err);
    return st == CT_OK ? replica_step(j->run, rank, j->s, j->n, err) : st;
}

ct_status ct_train_step(ct_run *run, int n, float lr, ct_err *err)
{
    const ct_train_config *t = &run->cfg.train;
    long step = run->step + 1;
    ct_step_scalars s = {
        .lr = lr, .t = step, .bias1 = ct_adam_bias(t->beta1, step), .bias2 = ct_adam_bias(t->beta2, step),
        .dropout_seed = ct_hash3(t->seed, SALT_DROPOUT, (uint64_t)run->step),
    };
    ct_status st;
    run->comm->step = step;
    if (run->threads) {
        step_job job = {run, &s, n};
        st = ct_replica_threads_run(run->threads, replica_step_job, &job, err);
    } else {
        st = replica_step(run, 0, &s, n, err);
    }
    if (st == CT_OK)
        run->step++;
    return st;
}

/* Replica 0's parameters (and their half copy) and batch-norm statistics on every replica. */
static ct_status broadcast_job(void *p, int rank, ct_err *err)
{
    ct_run *run = p;
    ct_replica *r = &run->replicas[rank];
    ct_graph *g = &r->graph;
    ct_comm *c = run->comm;
    ct_status st = r->dev->ops->activate(r->dev, err);
    if (st == CT_OK)
        st = c->ops->broadcast(c, rank, r->be, &g->params, 0, err);
    if (st == CT_OK && g->params_half.data)
        st = c->ops->broadcast(c, rank, r->be, &g->params_half, 0, err);
    if (st == CT_OK && g->state.count)
        st = c->ops->broadcast(c, rank, r->be, &g->state, 0, err);
    return st;
}

ct_status ct_train_broadcast_state(ct_run *run, ct_err *err)
{
    if (run->threads)
        return ct_replica_threads_run(run->threads, broadcast_job, run, err);
    /* one replica in each of several processes */
    return run->world ? broadcast_job(run, 0, err) : CT_OK;
}

/* Names the first layer whose output is not finite, to point at where a divergence starts. */
static ct_status non_finite_failure(ct_run *run, int n, ct_err *err)
{
    ct_replica *r = &run->replicas[0];
    ct_graph *g = &r->graph;
    n = slice_size(run, r->rank, n);
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        if (!r->be->ops->all_finite(r->be, l->y, (size_t)n * ct_shape_size(l->out)))
            return ct_fail(err, CT_ERR_NUMERIC,
                           "the training loss is not finite at step %ld (epoch %d); the first layer "
                           "with a non-finite output is [%s]: lower learning_rate", run->step,
                           run->epoch + 1, l->cfg->name);
    }
    return ct_fail(err, CT_ERR_NUMERIC,
                   "the training loss is not finite at step %ld (epoch %d): lower learning_rate",
                   run->step, run->epoch + 1);
}

/* Progress without stalling the device: the figures are those of the last snapshot that has
 * completed, with the image count it was taken at. */
/* fp16's loss scaler of the first replica (they agree), read outside any step; -1 values without
 * one. */
static ct_status read_scaler(ct_run *run, double *loss_scale, long *skipped, ct_err *err)
{
    *loss_scale = -1.0;
    *skipped = -1;
    if (run->cfg.train.precision != CT_PREC_FP16)
        return CT_OK;
    ct_scaler s;
    ct_backend *be = run->replicas[0].be;
    ct_status st = be->ops->scaler_get(be, &s, err);
    if (st == CT_OK) {
        *loss_scale = s.loss_scale;
        *skipped = (long)s.skipped_steps;
    }
    return st;
}

/* images: this epoch's over every replica; own: those of this process's replicas, which are all
 * of them but in one of several processes, whose progress shows its own replica's figures (the
 * callbacks of ranks need not agree, so progress takes no exchange; the epoch's figures do). */
static int report_progress(const ct_callbacks *cb, ct_run *run, long done, long steps, long images, long own,
                           double started, double waited, ct_err *err, ct_status *st)
{
    double loss_sum = 0.0, loss_scale = -1.0;
    long correct = 0, seen = -1, skipped = -1;
    /* on a GPU the scaler would have to wait for the stream: the epoch's end reports it there */
    if (run->replicas[0].dev->host_memory && (*st = read_scaler(run, &loss_scale, &skipped, err)) != CT_OK)
        return 1;
    for (int i = 0; i < run->n_replicas; i++) {
        ct_backend *be = run->replicas[i].be;
        double loss = 0.0;
        long right = 0, tag = -1;
        *st = use_device(run, i, err);
        if (*st == CT_OK)
            *st = be->ops->peek_metrics(be, own, &loss, &right, &tag, err);
        if (*st != CT_OK)
            return 1;
        /* the figures of the oldest snapshot any replica has completed */
        loss_sum += loss;
        correct += right;
        seen = i == 0 || tag < seen ? tag : seen;
    }
    if ((*st = use_device(run, 0, err)) != CT_OK)
        return 1;
    double seconds = ct_clock_seconds() - started;
    ct_progress p = {
        .epoch = run->epoch + 1, .epochs = run->cfg.train.epochs, .step_in_epoch = done,
        .steps_per_epoch = steps, .loss = seen > 0 ? loss_sum / seen : 0.0, .skipped_steps = skipped,
        .accuracy = seen > 0 ? (double)correct / seen : 0.0,
        .images_per_s = seconds > 0 ? images / seconds : 0.0, .seconds = seconds,
        .input_wait_share = seconds > 0 ? waited / seconds : 0.0, .gpu_util = -1.0,
    };
    ct_monitor_figures mf;
    ct_monitor_figures_get(run->monitor, &mf);
    p.gpu_util = mf.gpu_util;
    return cb->on_step(&p, cb->user);
}

/* The pipeline slot whose batch is being copied to the devices: it goes back to the workers once
 * every replica's copy has read it, which is by the next batch's hand-over (the copy overlaps a
 * step). Each replica's copy is named by its feed_ticket. */
typedef struct held_batch {
    int slot;                /* -1: none */
} held_batch;

static ct_status give_back(ct_run *run, held_batch *h, ct_err *err)
{
    ct_status st = CT_OK;
    if (h->slot >= 0) {
        for (int i = 0; i < run->n_replicas; i++) {
            ct_replica *r = &run->replicas[i];
            ct_status wait = use_device(run, i, err);
            if (wait == CT_OK)
                wait = r->be->ops->input_wait(r->be, r->feed_ticket, err);
            if (st == CT_OK)
                st = wait;
        }
        ct_status back = use_device(run, 0, err);
        if (st == CT_OK)
            st = back;
        ct_pipeline_release(run->pipeline, h->slot);
        h->slot = -1;
    }
    return st;
}

/* Hands the pipeline's next batch to the replicas, each its slice; *n = its size (0: the epoch
 * has no more). */
static ct_status feed(ct_run *run, held_batch *h, int *n, double *waited, ct_err *err)
{
    ct_batch_view v;
    double wait = 0.0;
    ct_status st = ct_pipeline_next(run->pipeline, &v, &wait, err);
    *waited += wait;
    *n = st == CT_OK ? v.n : 0;
    if (st != CT_OK || v.n == 0)
        return st;
    for (int i = 0; i < run->n_replicas && st == CT_OK; i++) {
        ct_replica *r = &run->replicas[i];
        ct_graph *g = &r->graph;
        size_t first = (size_t)slice_start(run, r->rank, v.n), sample = ct_shape_size(g->input);
        ct_input_batch in = {
            .n = slice_size(run, r->rank, v.n), .shape = g->input, .x = v.x ? v.x + first * sample : NULL,
            .x_u8 = v.x_u8 ? v.x_u8 + first * sample : NULL, .y = v.y + first, .aug = &run->augment_params,
            .augment = v.augment, .augment_seed = v.augment_seed, .first_sample = (long)first,
            .encoded = v.encoded,
        };
        /* each GPU copies its slice from the one pinned slot on its own copy stream */
        st = use_device(run, i, err);
        if (st == CT_OK)
            st = r->be->ops->input_submit(r->be, &in, &g->x, &g->labels, &r->next_feed_ticket, err);
    }
    if (st == CT_OK)
        st = use_device(run, 0, err);
    /* the previous batch's copies ran while the step before this one computed: its slot is free */
    ct_status back = give_back(run, h, err);
    for (int i = 0; i < run->n_replicas; i++)
        run->replicas[i].feed_ticket = run->replicas[i].next_feed_ticket;
    h->slot = v.slot;
    if (st == CT_OK)
        st = back;
    /* with one slot (sync mode, prefetch 1) or a copy already done (the CPU), return it at once */
    if (st == CT_OK && (run->replicas[0].dev->host_memory || run->pipeline_depth < 2))
        st = give_back(run, h, err);
    return st;
}

static ct_status run_epoch(ct_run *run, const ct_callbacks *cb, ct_epoch_stats *es)
{
    ct_err *err = &run->err;
    const ct_train_config *t = &run->cfg.train;
    long steps = ct_pipeline_batches(run->pipeline);
    long every = cb && cb->step_every > 0 ? cb->step_every : 20;
    double loss_sum = 0.0, started = ct_clock_seconds(), waited = 0.0;
    long correct = 0, images = 0, own = 0;
    int last_n = run->batch;   /* size of the last batch, whose activations a failure inspects */
    float lr = t->learning_rate;
    held_batch held = {-1};
    ct_status st = read_metrics(run, &loss_sum, &correct, 1, 0, err);
    ct_time_acc split;
    ct_time_acc_open(&split, run->replicas[0].dev);
    run->comm_seconds = 0.0;
    ct_pipeline_stats ps;
    ct_pipeline_get_stats(run->pipeline, &ps);
    run->bad_images_before = ps.bad_images;
    ct_monitor_begin(run->monitor);

    /* a checkpoint saved mid-epoch resumes at the batch after it: the order is a function of
     * (seed, epoch), so the remaining batches are the ones the interrupted run would have seen */
    long first = run->step - (long)run->epoch * steps;
    if (first < 0 || first >= steps)
        first = 0;
    if (st == CT_OK)
        st = ct_pipeline_start_epoch(run->pipeline, run->epoch, first, err);
    for (long b = first; b < steps && st == CT_OK; b++) {
        int n = 0;
        double fed = ct_clock_seconds(), waited_before = waited;
        st = feed(run, &held, &n, &waited, err);
        double stepped = ct_clock_seconds();
        split.input_wait += waited - waited_before;
        split.copy += stepped - fed - (waited - waited_before);
        if (st != CT_OK || n == 0)
            break;
        last_n = n;
        lr = ct_schedule_lr(t, run->step, steps);
        ct_time_acc_step_begin(&split);
        st = ct_train_step(run, n, lr, err);
        ct_time_acc_step_end(&split);
        images += n;
        for (int i = 0; i < run->n_replicas; i++)
            own += slice_size(run, run->replicas[i].rank, n);
        /* where reading back is free, catch a divergence at its step, before anything saves it;
         * elsewhere it is caught at the next metrics read */
        if (st == CT_OK && run->replicas[0].dev->host_memory &&
            (st = read_metrics(run, &loss_sum, &correct, 0, 1, err)) == CT_OK && !isfinite(loss_sum))
            st = non_finite_failure(run, n, err);
        if (st == CT_OK && cb && cb->on_step && ((b + 1) % every == 0 || b + 1 == steps)) {
            int stop = report_progress(cb, run, b + 1, steps, images, own, started, waited, err, &st);
            if (st == CT_OK && stop)
                st = ct_fail(err, CT_ERR_STOPPED, "training stopped by the step callback");
        }
        if (st == CT_OK && cb && cb->after_step && cb->after_step(run->handle, run->step, cb->user))
            st = ct_fail(err, CT_ERR_STOPPED, "training stopped after step %ld (epoch %d)", run->step,
                         run->epoch + 1);
        split.compute += ct_clock_seconds() - stepped; /* the step, its metrics and callbacks */
    }
    double loop_end = ct_clock_seconds();
    /* whatever ended the loop, no worker keeps running and no slot stays lent out */
    ct_err ignored;
    if (give_back(run, &held, st == CT_OK ? err : &ignored) != CT_OK && st == CT_OK)
        st = err->status;
    if (st != CT_OK)
        ct_pipeline_stop(run->pipeline);
    if (st == CT_OK)
        st = read_metrics(run, &loss_sum, &correct, 1, 1, err);
    ct_time_acc_close(&split);
    if (st != CT_OK)
        return st;
    double train_seconds = ct_clock_seconds() - started;
    split.compute += train_seconds - (loop_end - started); /* waiting for the devices to finish */
    if (!isfinite(loss_sum))
        return non_finite_failure(run, last_n, err);

    *es = (ct_epoch_stats){
        .epoch = run->epoch + 1, .epochs = t->epochs, .step = run->step,
        .loss = images ? loss_sum / (double)images : 0.0,
        .train_accuracy = images ? (double)correct / (double)images : 0.0,
        .test_loss = -1.0, .test_accuracy = -1.0,
        .images_per_s = train_seconds > 0 ? images / train_seconds : 0.0, .learning_rate = lr,
        .input_wait_share = train_seconds > 0 ? waited / train_seconds : 0.0,
    };
    ct_pipeline_info(run->pipeline, &es->input_workers, &es->input_prefetch, NULL);
    ct_pipeline_get_stats(run->pipeline, &ps);
    es->bad_images = ps.bad_images - run->bad_images_before;
    es->input_on_caller = ps.on_caller;
    split.comm = run->comm_seconds;
    split.compute -= split.comm;
    ct_time_split_fill(&split, train_seconds, es);
    ct_monitor_epoch_stats(run->monitor, es);
    es->precision = ct_precision_name(t->precision);
    st = read_scaler(run, &es->loss_scale, &es->skipped_steps, err);
    if (st != CT_OK)
        return st;
    if (run->test.count > 0) {
        ct_eval_result r;
        st = ct_train_evaluate(run, &run->test, &r);
        if (st != CT_OK)
            return st;
        es->test_loss = r.loss;
        es->test_accuracy = r.accuracy;
        run->last_test_accuracy = r.accuracy;
    }
    es->seconds = ct_clock_seconds() - started;
    return CT_OK;
}

/* OpenMP's thread count is a per-thread setting: set it on the thread that runs the work. */
void ct_train_apply_threads(const ct_run *run)
{
    if (run->cfg.train.threads > 0)
        omp_set_num_threads(run->cfg.train.threads);
}

ct_status ct_train_fit(ct_run *run, const ct_callbacks *cb)
{
    ct_train_apply_threads(run);
    ct_status activated = activate_devices(run, &run->err);
    if (activated != CT_OK)
        return activated;
    while (run->epoch < run->cfg.train.epochs) {
        ct_epoch_stats es;
        ct_status st = run_epoch(run, cb, &es);
        if (st != CT_OK)
            return ct_oom_explain(run, st);
        run->epoch++;
        if (run->tensorboard && (st = ct_tensorboard_epoch(run->tensorboard, &es, &run->err)) != CT_OK)
            return st;
        if (cb && cb->on_epoch && cb->on_epoch(&es, cb->user))
            return ct_fail(&run->err, CT_ERR_STOPPED, "training stopped by the epoch callback after epoch %d",
                           run->epoch);
    }
    return CT_OK;
}

/* Evaluation runs on the first replica: a forward pass needs no agreement between them. */
ct_status ct_train_evaluate(ct_run *run, const ct_dataset *ds, ct_eval_result *out)
{
    ct_err *err = &run->err;
    ct_replica *r = &run->replicas[0];
    ct_graph *g = &r->graph;
    ct_backend *be = r->be;
    int batch = g->batch;
    double loss_sum = 0.0;
    long correct = 0;
    ct_train_apply_threads(run);
    /* evaluation runs between epochs, so it may reuse (and clears) the metric accumulators */
    ct_status st = activate_devices(run, err);
    if (st == CT_OK)
        st = read_metrics(run, &loss_sum, &correct, 1, 0, err);
    for (long start = 0; start < ds->count && st == CT_OK; start += batch) {
        int n = (int)(ds->count - start < batch ? ds->count - start : batch);
        for (int i = 0; i < n; i++)
            run->eval_order[i] = start + i;
        st = ct_train_stage_batch(run, r, ds, run->eval_order, n, 0, 0, err);
        if (st == CT_OK)
            st = ct_graph_forward(g, n, 0, err);
        if (st == CT_OK)
            st = be->ops->loss(be, ct_graph_output(g)->y, &g->labels, NULL, n, err);
    }
    if (st == CT_OK)
        st = read_metrics(run, &loss_sum, &correct, 1, 0, err);
    if (st != CT_OK)
        return st;
    out->images = ds->count;
    out->loss = ds->count ? loss_sum / (double)ds->count : 0.0;
    out->accuracy = ds->count ? (double)correct / (double)ds->count : 0.0;
    return CT_OK;
}
