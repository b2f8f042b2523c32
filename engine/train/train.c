/* The training loop, top to bottom: for each epoch, shuffle; for each batch, assemble it on the
 * host, upload, forward, loss, backward, optimizer step; then evaluate on the test set. Metrics
 * accumulate in the backend and are read only when a callback or the epoch's end needs them. */
#include <math.h>
#include <omp.h>
#include <time.h>

#include "api/handle.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Salts that keep the random streams of different purposes apart (the augmentation's is the
 * pipeline's CT_PIPELINE_SALT_AUGMENT). */
enum { SALT_DROPOUT = 0x44524f50 };

/* Assembles samples idx[0..n) into the backend's host staging and commits them to g->x and
 * g->labels, in stream order before the next step's work. */
ct_status ct_train_stage_batch(ct_net *net, const ct_dataset *ds, const long *idx, int n, int augment,
                               uint64_t aug_seed, ct_err *err)
{
    ct_graph *g = &net->graph;
    float *hx;
    int32_t *hy;
    ct_status st = net->be->ops->input_host(net->be, &hx, &hy, err);
    if (st != CT_OK)
        return st;
    ct_make_batch(ds, idx, n, &net->augment, augment, aug_seed, hx, hy);
    return net->be->ops->input_commit(net->be, g->x, g->labels, (size_t)n * ct_shape_size(g->input) * sizeof(float),
                                      (size_t)n * sizeof(int32_t), err);
}

static ct_optim_step optim_step(const ct_net *net)
{
    const ct_train_config *t = &net->cfg.train;
    const ct_graph *g = &net->graph;
    return (ct_optim_step){
        .kind = t->optimizer, .params = g->params, .grads = g->grads, .m = g->opt_m, .v = g->opt_v,
        .count = g->n_params, .momentum = t->momentum, .beta1 = t->beta1, .beta2 = t->beta2,
        .epsilon = t->epsilon, .weight_decay = t->weight_decay, .nesterov = t->nesterov,
    };
}

typedef struct step_ctx {
    ct_net *net;
    int n;
} step_ctx;

/* The work of one step, enqueued without reading anything back: the backend may capture it once
 * and replay it, so everything that changes per step comes through set_step. */
static ct_status step_work(void *p, ct_err *err)
{
    step_ctx *c = p;
    ct_net *net = c->net;
    ct_graph *g = &net->graph;
    ct_layer *out = ct_graph_output(g);
    ct_status st = ct_graph_forward(g, c->n, 1, err);
    if (st == CT_OK)
        st = ct_graph_zero_grads(g, c->n, err);
    if (st == CT_OK)
        st = net->be->ops->loss(net->be, out->y, g->labels, out->dy, c->n, g->classes, err);
    if (st == CT_OK)
        st = ct_graph_backward(g, c->n, err);
    if (st == CT_OK) {
        ct_optim_step s = optim_step(net);
        st = net->be->ops->optimizer_step(net->be, &s, err);
    }
    return st;
}

ct_status ct_train_step(ct_net *net, int n, float lr, ct_err *err)
{
    const ct_train_config *t = &net->cfg.train;
    long step = net->step + 1;
    ct_step_scalars s = {
        .lr = lr, .t = step, .bias1 = ct_adam_bias(t->beta1, step), .bias2 = ct_adam_bias(t->beta2, step),
        .dropout_seed = ct_hash3(t->seed, SALT_DROPOUT, (uint64_t)net->step),
    };
    step_ctx ctx = {net, n};
    ct_status st = net->be->ops->set_step(net->be, &s, err);
    /* the batch size is the shape that a captured step is specific to */
    if (st == CT_OK)
        st = net->be->ops->run_step(net->be, n, step_work, &ctx, err);
    if (st == CT_OK)
        net->step++;
    return st;
}

/* Names the first layer whose output is not finite, to point at where a divergence starts. */
static ct_status non_finite_failure(ct_net *net, int n, ct_err *err)
{
    ct_graph *g = &net->graph;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        if (!net->be->ops->all_finite(net->be, l->y, (size_t)n * ct_shape_size(l->out)))
            return ct_fail(err, CT_ERR_NUMERIC,
                           "the training loss is not finite at step %ld (epoch %d); the first layer "
                           "with a non-finite output is [%s]: lower learning_rate", net->step,
                           net->epoch + 1, l->cfg->name);
    }
    return ct_fail(err, CT_ERR_NUMERIC,
                   "the training loss is not finite at step %ld (epoch %d): lower learning_rate",
                   net->step, net->epoch + 1);
}

/* Progress without stalling the device: the figures are those of the last snapshot that has
 * completed, with the image count it was taken at. */
static int report_progress(const ct_callbacks *cb, ct_net *net, long done, long steps, long images,
                           double started, double waited, ct_err *err, ct_status *st)
{
    double loss_sum = 0.0;
    long correct = 0, seen = -1;
    *st = net->be->ops->peek_metrics(net->be, images, &loss_sum, &correct, &seen, err);
    if (*st != CT_OK)
        return 1;
    double seconds = now_seconds() - started;
    ct_progress p = {
        .epoch = net->epoch + 1, .epochs = net->cfg.train.epochs, .step_in_epoch = done,
        .steps_per_epoch = steps, .loss = seen > 0 ? loss_sum / seen : 0.0,
        .accuracy = seen > 0 ? (double)correct / seen : 0.0,
        .images_per_s = seconds > 0 ? images / seconds : 0.0, .seconds = seconds,
        .input_wait_share = seconds > 0 ? waited / seconds : 0.0,
    };
    return cb->on_step(&p, cb->user);
}

/* The pipeline slot whose batch is being copied to the device: it goes back to the workers once
 * the copy has read it, which is by the next batch's hand-over (the copy overlaps a step). */
typedef struct held_batch {
    int slot;                /* -1: none */
    long ticket;
} held_batch;

static ct_status give_back(ct_net *net, held_batch *h, ct_err *err)
{
    ct_status st = CT_OK;
    if (h->slot >= 0) {
        st = net->be->ops->input_wait(net->be, h->ticket, err);
        ct_pipeline_release(net->pipeline, h->slot);
        h->slot = -1;
    }
    return st;
}

/* Hands the pipeline's next batch to the backend; *n = its size (0: the epoch has no more). */
static ct_status feed(ct_net *net, held_batch *h, int *n, double *waited, ct_err *err)
{
    ct_graph *g = &net->graph;
    ct_batch_view v;
    double wait = 0.0;
    ct_status st = ct_pipeline_next(net->pipeline, &v, &wait, err);
    *waited += wait;
    *n = st == CT_OK ? v.n : 0;
    if (st != CT_OK || v.n == 0)
        return st;
    ct_input_batch in = {
        .n = v.n, .shape = g->input, .x = v.x, .x_u8 = v.x_u8, .y = v.y, .aug = &net->augment_params,
        .augment = v.augment, .augment_seed = v.augment_seed,
    };
    long ticket = 0;
    st = net->be->ops->input_submit(net->be, &in, g->x, g->labels, &ticket, err);
    /* the previous batch's copy ran while the step before this one computed: its slot is free */
    ct_status back = give_back(net, h, err);
    *h = (held_batch){v.slot, ticket};
    if (st == CT_OK)
        st = back;
    /* with one slot (sync mode, prefetch 1) or a copy already done (the CPU), return it at once */
    if (st == CT_OK && (net->be->host_memory || net->pipeline_depth < 2))
        st = give_back(net, h, err);
    return st;
}

static ct_status run_epoch(ct_net *net, const ct_callbacks *cb, ct_epoch_stats *es)
{
    ct_err *err = &net->err;
    const ct_train_config *t = &net->cfg.train;
    long steps = ct_pipeline_batches(net->pipeline);
    long every = cb && cb->step_every > 0 ? cb->step_every : 20;
    double loss_sum = 0.0, started = now_seconds(), waited = 0.0;
    long correct = 0, images = 0;
    int last_n = net->graph.batch;   /* size of the last batch, whose activations a failure inspects */
    float lr = t->learning_rate;
    held_batch held = {-1, 0};
    ct_status st = net->be->ops->read_metrics(net->be, &loss_sum, &correct, 1, err);

    /* a checkpoint saved mid-epoch resumes at the batch after it: the order is a function of
     * (seed, epoch), so the remaining batches are the ones the interrupted run would have seen */
    long first = net->step - (long)net->epoch * steps;
    if (first < 0 || first >= steps)
        first = 0;
    if (st == CT_OK)
        st = ct_pipeline_start_epoch(net->pipeline, net->epoch, first, err);
    for (long b = first; b < steps && st == CT_OK; b++) {
        int n = 0;
        st = feed(net, &held, &n, &waited, err);
        if (st != CT_OK || n == 0)
            break;
        last_n = n;
        lr = ct_schedule_lr(t, net->step, steps);
        st = ct_train_step(net, n, lr, err);
        images += n;
        /* where reading back is free, catch a divergence at its step, before anything saves it;
         * elsewhere it is caught at the next metrics read */
        if (st == CT_OK && net->be->host_memory &&
            (st = net->be->ops->read_metrics(net->be, &loss_sum, &correct, 0, err)) == CT_OK && !isfinite(loss_sum))
            st = non_finite_failure(net, n, err);
        if (st == CT_OK && cb && cb->on_step && ((b + 1) % every == 0 || b + 1 == steps)) {
            int stop = report_progress(cb, net, b + 1, steps, images, started, waited, err, &st);
            if (st == CT_OK && stop)
                st = ct_fail(err, CT_ERR_STOPPED, "training stopped by the step callback");
        }
        if (st == CT_OK && cb && cb->after_step && cb->after_step(net, net->step, cb->user))
            st = ct_fail(err, CT_ERR_STOPPED, "training stopped after step %ld (epoch %d)", net->step,
                         net->epoch + 1);
    }
    /* whatever ended the loop, no worker keeps running and no slot stays lent out */
    ct_err ignored;
    if (give_back(net, &held, st == CT_OK ? err : &ignored) != CT_OK && st == CT_OK)
        st = err->status;
    if (st != CT_OK)
        ct_pipeline_stop(net->pipeline);
    if (st == CT_OK)
        st = net->be->ops->read_metrics(net->be, &loss_sum, &correct, 1, err);
    if (st != CT_OK)
        return st;
    double train_seconds = now_seconds() - started;
    if (!isfinite(loss_sum))
        return non_finite_failure(net, last_n, err);

    *es = (ct_epoch_stats){
        .epoch = net->epoch + 1, .epochs = t->epochs, .step = net->step,
        .loss = images ? loss_sum / (double)images : 0.0,
        .train_accuracy = images ? (double)correct / (double)images : 0.0,
        .test_loss = -1.0, .test_accuracy = -1.0,
        .images_per_s = train_seconds > 0 ? images / train_seconds : 0.0, .learning_rate = lr,
        .input_wait_share = train_seconds > 0 ? waited / train_seconds : 0.0,
    };
    ct_pipeline_info(net->pipeline, &es->input_workers, &es->input_prefetch, NULL);
    if (net->test.count > 0) {
        ct_eval_result r;
        st = ct_train_evaluate(net, &net->test, &r);
        if (st != CT_OK)
            return st;
        es->test_loss = r.loss;
        es->test_accuracy = r.accuracy;
        net->last_test_accuracy = r.accuracy;
    }
    es->seconds = now_seconds() - started;
    return CT_OK;
}

/* OpenMP's thread count is a per-thread setting: set it on the thread that runs the work. */
void ct_train_apply_threads(const ct_net *net)
{
    if (net->cfg.train.threads > 0)
        omp_set_num_threads(net->cfg.train.threads);
}

ct_status ct_train_fit(ct_net *net, const ct_callbacks *cb)
{
    ct_train_apply_threads(net);
    while (net->epoch < net->cfg.train.epochs) {
        ct_epoch_stats es;
        ct_status st = run_epoch(net, cb, &es);
        if (st != CT_OK)
            return st;
        net->epoch++;
        if (cb && cb->on_epoch && cb->on_epoch(&es, cb->user))
            return ct_fail(&net->err, CT_ERR_STOPPED, "training stopped by the epoch callback after epoch %d",
                           net->epoch);
    }
    return CT_OK;
}

ct_status ct_train_evaluate(ct_net *net, const ct_dataset *ds, ct_eval_result *out)
{
    ct_err *err = &net->err;
    ct_graph *g = &net->graph;
    int batch = g->batch;
    double loss_sum = 0.0;
    long correct = 0;
    ct_train_apply_threads(net);
    /* evaluation runs between epochs, so it may reuse (and clears) the metric accumulators */
    ct_status st = net->be->ops->read_metrics(net->be, &loss_sum, &correct, 1, err);
    for (long start = 0; start < ds->count && st == CT_OK; start += batch) {
        int n = (int)(ds->count - start < batch ? ds->count - start : batch);
        for (int i = 0; i < n; i++)
            net->eval_order[i] = start + i;
        st = ct_train_stage_batch(net, ds, net->eval_order, n, 0, 0, err);
        if (st == CT_OK)
            st = ct_graph_forward(g, n, 0, err);
        if (st == CT_OK)
            st = net->be->ops->loss(net->be, ct_graph_output(g)->y, g->labels, NULL, n, g->classes, err);
    }
    if (st == CT_OK)
        st = net->be->ops->read_metrics(net->be, &loss_sum, &correct, 1, err);
    if (st != CT_OK)
        return st;
    out->images = ds->count;
    out->loss = ds->count ? loss_sum / (double)ds->count : 0.0;
    out->accuracy = ds->count ? (double)correct / (double)ds->count : 0.0;
    return CT_OK;
}
