/* The benchmark behind ct_bench: training steps timed in stream order (CUDA events on the GPU), on
 * real batches kept in backend memory and cycled the way the PyTorch peer keeps its data on the
 * GPU, so the figure is the model's speed and not the host's batch assembly. And ct_trace_step's:
 * one such step traced (train/trace.h). The public entry points are api/api_bench.c's. */
#include <math.h>
#include <stdlib.h>

#include "train/run.h"
#include "train/trace.h"
#include "train/world.h"

enum { BENCH_BATCHES = 4, BENCH_WINDOWS = 5 };

/* Device copies of whole batches: (batch, input) fp32 and (batch) int32 each. */
typedef struct bench_data {
    void *x[BENCH_BATCHES];
    void *y[BENCH_BATCHES];
} bench_data;

static void free_data(ct_device *dev, bench_data *d)
{
    for (int k = 0; k < BENCH_BATCHES; k++) {
        if (d->x[k])
            dev->ops->free(dev, d->x[k]);
        if (d->y[k])
            dev->ops->free(dev, d->y[k]);
    }
}

/* BENCH_BATCHES full batches of shuffled training samples (wrapping round a small set), staged
 * once and copied aside. */
static ct_status make_data(ct_run *run, ct_replica *r, bench_data *d, size_t xb, size_t yb, ct_err *err)
{
    ct_graph *g = &r->graph;
    ct_device *dev = r->dev;
    long count = run->train.count, batch = g->batch;
    long *idx = malloc((size_t)batch * sizeof *idx);
    if (!idx)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for benchmark batches");
    ct_shuffle_indices(run->order, count, run->cfg.train.seed, 0);
    ct_status st = CT_OK;
    for (int k = 0; k < BENCH_BATCHES && st == CT_OK; k++) {
        d->x[k] = dev->ops->alloc(dev, xb);
        d->y[k] = dev->ops->alloc(dev, yb);
        if (!d->x[k] || !d->y[k]) {
            st = ct_fail(err, CT_ERR_NOMEM, "out of memory for benchmark batches at batch %ld", batch);
            break;
        }
        for (long i = 0; i < batch; i++)
            idx[i] = run->order[(k * batch + i) % count];
        st = ct_train_stage_batch(run, r, &run->train, idx, (int)batch, 1, (uint64_t)k, err);
        if (st == CT_OK)
            st = dev->ops->copy(dev, d->x[k], g->x.data, xb, err);
        if (st == CT_OK)
            st = dev->ops->copy(dev, d->y[k], g->labels.data, yb, err);
    }
    free(idx);
    return st;
}

static ct_status run_steps(ct_run *run, ct_replica *r, const bench_data *d, long from, long count, size_t xb,
                           size_t yb, ct_err *err)
{
    ct_graph *g = &r->graph;
    float lr = run->cfg.train.learning_rate;
    ct_status st = CT_OK;
    for (long i = from; i < from + count && st == CT_OK; i++) {
        int k = (int)(i % BENCH_BATCHES);
        /* every replica takes the same slice of replica 0's staged batches, copied by its own
         * device, in order with its own steps (from another GPU's memory: a peer copy) */
        for (int j = 0; j < run->n_replicas && st == CT_OK; j++) {
            ct_device *dev = run->replicas[j].dev;
            ct_graph *rg = &run->replicas[j].graph;
            st = dev->ops->activate(dev, err);
            if (st == CT_OK)
                st = dev->ops->copy(dev, rg->x.data, d->x[k], xb, err);
            if (st == CT_OK)
                st = dev->ops->copy(dev, rg->labels.data, d->y[k], yb, err);
        }
        if (st == CT_OK)
            st = r->dev->ops->activate(r->dev, err);
        if (st == CT_OK)
            st = ct_train_step(run, g->batch * run->comm->size, lr, err);
    }
    return st;
}

/* Stages the benchmark's batches on replica 0's device, which it leaves current; d is to be freed
 * whatever this returns. */
static ct_status bench_begin(ct_run *run, bench_data *d, size_t *xb, size_t *yb)
{
    ct_replica *r = &run->replicas[0];
    ct_train_apply_threads(run);
    *xb = ct_tensor_bytes(&r->graph.x);
    *yb = ct_tensor_bytes(&r->graph.labels);
    ct_status st = r->dev->ops->activate(r->dev, &run->err);
    return st == CT_OK ? make_data(run, r, d, *xb, *yb, &run->err) : st;
}

ct_status ct_train_bench(ct_run *run, int warmup, long steps, ct_bench_result *out)
{
    ct_err *err = &run->err;
    bench_data d = {0};
    size_t xb = 0, yb = 0;
    ct_status st = bench_begin(run, &d, &xb, &yb);
    /* every replica steps; replica 0's device times them (CPU replicas share the one clock) */
    ct_replica *r = &run->replicas[0];
    ct_backend *be = r->be;
    ct_device *dev = r->dev;
    double loss = 0.0, total = 0.0, best = -1.0;
    long correct = 0, done = 0;
    /* warm-up: the first step of a shape runs directly, the second is captured */
    if (st == CT_OK)
        st = run_steps(run, r, &d, 0, warmup, xb, yb, err);
    if (st == CT_OK)
        st = be->ops->read_metrics(be, &loss, &correct, 1, err);
    for (int w = 0; w < BENCH_WINDOWS && st == CT_OK; w++) {
        long n = steps / BENCH_WINDOWS + (w < steps % BENCH_WINDOWS);
        if (n == 0)
            continue;
        double ms = 0.0;
        st = dev->ops->mark(dev, 0, err);
        if (st == CT_OK)
            st = run_steps(run, r, &d, warmup + done, n, xb, yb, err);
        if (st == CT_OK)
            st = dev->ops->mark(dev, 1, err);
        if (st == CT_OK)
            st = dev->ops->elapsed(dev, 0, 1, &ms, err);
        if (st == CT_OK) {
            total += ms;
            done += n;
            if (best < 0 || ms / n < best)
                best = ms / n;
        }
    }
    if (st == CT_OK)
        st = be->ops->read_metrics(be, &loss, &correct, 1, err);
    ct_scaler sc = {.loss_scale = -1.0};
    int scaled = run->cfg.train.precision == CT_PREC_FP16;
    if (st == CT_OK && scaled)
        st = be->ops->scaler_get(be, &sc, err);
    free_data(dev, &d);
    if (st != CT_OK)
        return st;
    if (!isfinite(loss))
        return ct_fail(err, CT_ERR_NUMERIC, "the loss became non-finite during the benchmark: lower learning_rate");
    *out = (ct_bench_result){
        .batch = run->batch, .steps = done, .ms_per_step = total / (double)done, .ms_per_step_min = best,
        .images_per_s = total > 0 ? (double)run->batch * (double)done / (total / 1000.0) : 0.0,
        .graph = be->capture, .precision = ct_precision_name(run->cfg.train.precision),
        .loss_scale = scaled ? sc.loss_scale : -1.0, .skipped_steps = scaled ? (long)sc.skipped_steps : -1,
    };
    return CT_OK;
}

ct_status ct_train_trace_step(ct_run *run, const char *path)
{
    ct_err *err = &run->err;
    bench_data d = {0};
    size_t xb = 0, yb = 0;
    ct_status st = bench_begin(run, &d, &xb, &yb);
    ct_replica *r = &run->replicas[0];
    ct_trace trace = {0};
    /* room for every layer's forward and backward, as many buckets, the loss and the update */
    if (st == CT_OK)
        st = ct_trace_open(&trace, &r->graph, run->n_replicas, 3 * r->graph.n_layers + 2, err);
    /* the first step pays for first use (threads, allocations): trace the second */
    if (st == CT_OK)
        st = run_steps(run, r, &d, 0, 1, xb, yb, err);
    run->trace = &trace;
    if (st == CT_OK)
        st = run_steps(run, r, &d, 1, 1, xb, yb, err);
    run->trace = NULL;
    if (st == CT_OK)
        st = r->dev->ops->synchronize(r->dev, err);
    /* several processes trace the same step: rank 0 alone writes */
    if (st == CT_OK && (!run->world || ct_world_rank(run->world) == 0))
        st = ct_trace_write(&trace, path, err);
    free_data(r->dev, &d);
    ct_trace_close(&trace);
    return st;
}
