/* The whole training step on the CUDA backend, run directly and captured as a CUDA graph and
 * replayed (run_step): a small CNN (conv, batch norm, max-pool, residual add, dropout, dense)
 * takes 6 Adam steps from the same initial buffers, with the learning rate, Adam's step count and
 * the dropout seed changing every step, once directly (twice, to show the direct step is itself
 * deterministic) and once through run_step; the parameters, the optimizer's moments and the
 * batch-norm running statistics must be bit-identical. Then the shapes change: a partial last
 * batch (another key), the full batch again, and evaluation forwards at another n, directly and
 * through run_step. The input staging (reserve again, input_submit from pinned host memory,
 * input_wait), peek_metrics and the device's timing marks are checked on the way. Exits 77
 * (skipped) without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/handle.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"
#include "tests/gpu_step.h"

enum { K = 6, BATCH = 32, PARTIAL = 27, EVAL_N = 13, CLASSES = 10 };
enum { SALT_DROPOUT = 0x44524f50 };  /* train.c's salt for the dropout seeds */

static const char *const NET =
    "[data]\nformat = synthetic\nshape = 12, 12, 3\nclasses = 10\ncount = 256\ntest_count = 0\n"
    "[train]\nbatch = 32\noptimizer = adam\nlearning_rate = 0.002\nweight_decay = 0.0001\nseed = 7\n"
    "[c1]\ntype = conv2d\nfilters = 8\nsize = 3\npadding = same\nbias = off\n"
    "[bn]\ntype = batchnorm\n"
    "[act]\ntype = activation\nactivation = relu\n"
    "[mp]\ntype = maxpool\nsize = 2\n"
    "[c2]\ntype = conv2d\nfilters = 8\nsize = 3\npadding = same\nactivation = relu\n"
    "[res]\ntype = add\ninputs = mp, c2\n"
    "[drop]\ntype = dropout\nrate = 0.25\n"
    "[flat]\ntype = flatten\n"
    "[fc]\ntype = dense\nunits = 32\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 10\n";


/* Pinned host batches the test stages from, as the input pipeline's ring: a slot is rewritten
 * only after input_wait says the copy that last read it is done. */
enum { HOST_SLOTS = 2 };
typedef struct host_ring {
    float *x[HOST_SLOTS];
    int32_t *y[HOST_SLOTS];
    long ticket[HOST_SLOTS];
    int next;
} host_ring;

static host_ring ring;

static int ring_open(ct_device *dev, size_t x_bytes, size_t y_bytes)
{
    for (int i = 0; i < HOST_SLOTS; i++) {
        ring.x[i] = dev->ops->host_alloc(dev, x_bytes);
        ring.y[i] = dev->ops->host_alloc(dev, y_bytes);
        CHECK_MSG(ring.x[i] && ring.y[i], "host_alloc of %zu + %zu bytes", x_bytes, y_bytes);
        if (!ring.x[i] || !ring.y[i])
            return 0;
    }
    return 1;
}

static void ring_close(ct_device *dev)
{
    if (!dev)
        return;
    for (int i = 0; i < HOST_SLOTS; i++) {
        dev->ops->host_free(dev, ring.x[i]);
        dev->ops->host_free(dev, ring.y[i]);
    }
    memset(&ring, 0, sizeof ring);
}

/* Batch number `k`: n samples of random inputs and labels, the same every time it is asked for. */
static void make_batch(int k, int n, size_t per_sample, float *x, int32_t *y)
{
    ct_rng rng = {ct_hash3(99, (uint64_t)k, 0)};
    for (size_t i = 0; i < (size_t)n * per_sample; i++)
        x[i] = 2.0f * ct_rng_uniform(&rng) - 1.0f;
    for (int i = 0; i < n; i++)
        y[i] = (int32_t)(ct_rng_next(&rng) % CLASSES);
}

/* Batch k through the next host slot and the backend's input staging into g->x and g->labels. */
static int stage(ct_graph *g, int k, int n)
{
    ct_backend *be = g->be;
    ct_err err = {0};
    int slot = ring.next;
    ring.next = (slot + 1) % HOST_SLOTS;
    ct_status st = be->ops->input_wait(be, ring.ticket[slot], &err);
    CHECK_MSG(st == CT_OK, "input_wait: %s", err.msg);
    if (st != CT_OK)
        return 0;
    make_batch(k, n, ct_shape_size(g->input), ring.x[slot], ring.y[slot]);
    ct_input_batch b = {.n = n, .shape = g->input, .x = ring.x[slot], .y = ring.y[slot]};
    st = be->ops->input_submit(be, &b, &g->x, &g->labels, &ring.ticket[slot], &err);
    CHECK_MSG(st == CT_OK, "input_submit of %d samples: %s", n, err.msg);
    return st == CT_OK;
}

/* The scalars of step k (from 1): a learning rate that changes, Adam's bias corrections in double,
 * and the dropout seed train.c would use. */
static ct_step_scalars scalars_of(const ct_train_config *tc, int k)
{
    return (ct_step_scalars){
        .lr = tc->learning_rate * (float)(1.0 + 0.25 * (k % 3)),
        .t = k,
        .bias1 = (float)(1.0 - pow((double)tc->beta1, (double)k)),
        .bias2 = (float)(1.0 - pow((double)tc->beta2, (double)k)),
        .dropout_seed = ct_hash3(tc->seed, SALT_DROPOUT, (uint64_t)(k - 1)),
    };
}

/* ---- the buffers a step changes ---- */

typedef struct snapshot {
    float *params, *m, *v, *state;
} snapshot;

static int xfer(ct_backend *be, void *dst, const void *src, size_t bytes, int up)
{
    ct_err err = {0};
    ct_device *dev = be->dev;
    ct_status st = up ? dev->ops->upload(dev, dst, src, bytes, &err) : dev->ops->download(dev, dst, src, bytes, &err);
    CHECK_MSG(st == CT_OK, "%s of %zu bytes: %s", up ? "upload" : "download", bytes, err.msg);
    return st == CT_OK;
}

/* Whole flat tensors, the padding between the parameter tensors included (it must stay zero). */
static int take(ct_graph *g, snapshot *s)
{
    size_t pb = ct_tensor_bytes(&g->params), sb = g->n_state * sizeof(float);
    s->params = xmalloc(pb);
    s->m = xmalloc(pb);
    s->v = xmalloc(pb);
    s->state = xmalloc(sb);
    return xfer(g->be, s->params, g->params.data, pb, 0) && xfer(g->be, s->m, g->opt_m.data, pb, 0) &&
           xfer(g->be, s->v, g->opt_v.data, pb, 0) && xfer(g->be, s->state, g->state.data, sb, 0);
}

static int restore(ct_graph *g, const snapshot *s)
{
    size_t pb = ct_tensor_bytes(&g->params), sb = g->n_state * sizeof(float);
    return xfer(g->be, g->params.data, s->params, pb, 1) && xfer(g->be, g->opt_m.data, s->m, pb, 1) &&
           xfer(g->be, g->opt_v.data, s->v, pb, 1) && xfer(g->be, g->state.data, s->state, sb, 1);
}

static void drop(snapshot *s)
{
    free(s->params);
    free(s->m);
    free(s->v);
    free(s->state);
    memset(s, 0, sizeof *s);
}

/* Bit-identical, or the count, first place and largest size of the differences. */
static void check_bits(const char *what, const char *buf, const float *a, const float *b, size_t n)
{
    size_t differ = 0, first = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)) == 0)
            continue;
        if (differ++ == 0)
            first = i;
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst))  /* NaN counts as the worst */
            worst = d;
    }
    if (differ)
        printf("%-30s %-7s %zu of %zu differ (first at %zu: %.9g vs %.9g), max |diff| %.3g  FAIL\n", what, buf,
               differ, n, first, a[first], b[first], worst);
    else
        printf("%-30s %-7s %zu values bit-identical\n", what, buf, n);
    CHECK_MSG(differ == 0, "%s: %s: %zu of %zu values differ, max |diff| %.3g", what, buf, differ, n, worst);
}

static void compare_snapshots(const char *what, const snapshot *a, const snapshot *b, const ct_graph *g)
{
    check_bits(what, "params", a->params, b->params, g->param_span);
    check_bits(what, "adam m", a->m, b->m, g->param_span);
    check_bits(what, "adam v", a->v, b->v, g->param_span);
    check_bits(what, "bn run", a->state, b->state, g->n_state);
}

/* Every parameter, gradient and moment tensor and every activation gradient starts 256-byte
 * aligned in device memory (the layout itself is tests/test_graph_layout.c's). */
static void check_alignment(const ct_graph *g)
{
    size_t bad = 0;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        const ct_tensor *t[5] = {l->w, l->dw, l->b, l->db, l->dy};
        for (int k = 0; k < 5; k++)
            bad += t[k] && (uintptr_t)t[k]->data % CT_TENSOR_ALIGN != 0;
        if (l->w_count)
            bad += ((uintptr_t)g->opt_m.data + l->w_off * sizeof(float)) % CT_TENSOR_ALIGN != 0;
    }
    printf("alignment: %zu tensors off %d bytes\n", bad, CT_TENSOR_ALIGN);
    CHECK_MSG(bad == 0, "%zu tensors are not %d-byte aligned on the device", bad, CT_TENSOR_ALIGN);
}

static int read_loss(ct_backend *be, double *loss, long *correct)
{
    ct_err err = {0};
    ct_status st = be->ops->read_metrics(be, loss, correct, 1, &err);
    CHECK_MSG(st == CT_OK, "read_metrics: %s", err.msg);
    return st == CT_OK;
}

/* K steps from the buffers as they are: directly (via_run_step 0) or through run_step (1), keyed on
 * the step, the network and the batch size. The loss sum of the K steps into *loss; the time into
 * *ms. */
static int run_steps(step_ctx *c, const ct_train_config *tc, int via_run_step, double *loss, double *ms)
{
    ct_graph *g = c->g;
    ct_backend *be = g->be;
    ct_err err = {0};
    long correct;
    int ok = read_loss(be, loss, &correct); /* resets the accumulators */
    ok = ok && be->dev->ops->mark(be->dev, 0, &err) == CT_OK;
    c->n = BATCH;
    for (int k = 1; k <= K && ok; k++) {
        ok = stage(g, k, BATCH);
        ct_step_scalars s = scalars_of(tc, k);
        ct_status st = ok ? be->ops->set_step(be, &s, &err) : CT_ERR_INTERNAL;
        if (st == CT_OK)
            st = via_run_step ? be->ops->run_step(be, &(ct_step_key){train_work, c->g, BATCH}, c, &err)
                                   : train_work(c, &err);
        CHECK_MSG(!ok || st == CT_OK, "%s step %d: %s", via_run_step ? "run_step" : "direct", k, err.msg);
        ok = ok && st == CT_OK;
    }
    ok = ok && be->dev->ops->mark(be->dev, 1, &err) == CT_OK;
    ok = ok && read_loss(be, loss, &correct);
    *ms = -1.0;
    if (ok) {
        ct_status st = be->dev->ops->elapsed(be->dev, 0, 1, ms, &err);
        CHECK_MSG(st == CT_OK && isfinite(*ms) && *ms >= 0.0, "elapsed: %s (%g ms)", err.msg, *ms);
    }
    CHECK_MSG(ok, "the %s run did not complete: %s", via_run_step ? "run_step" : "direct", err.msg);
    return ok;
}

/* reserve was called for the full batch: a full batch, another right away, a third through the
 * first host slot again (stage waits until the first copy has read it), then 5 samples that must
 * leave the rest of the previous batch in place. */
static void staging_check(ct_graph *g)
{
    ct_backend *be = g->be;
    size_t per = ct_shape_size(g->input), xcount = (size_t)BATCH * per;
    float *want_x = xmalloc(xcount * sizeof(float)), *got_x = xmalloc(xcount * sizeof(float));
    int32_t *want_y = xmalloc(BATCH * sizeof(int32_t)), *got_y = xmalloc(BATCH * sizeof(int32_t));
    int ok = stage(g, 1001, BATCH) && stage(g, 1002, BATCH) && stage(g, 1003, BATCH) && stage(g, 1004, 5);
    if (ok) {
        make_batch(1003, BATCH, per, want_x, want_y);
        make_batch(1004, 5, per, want_x, want_y); /* the first 5 samples replaced */
        ok = xfer(be, got_x, g->x.data, xcount * sizeof(float), 0) &&
             xfer(be, got_y, g->labels.data, BATCH * sizeof(int32_t), 0);
    }
    if (ok) {
        int same_x = memcmp(got_x, want_x, xcount * sizeof(float)) == 0;
        int same_y = memcmp(got_y, want_y, BATCH * sizeof(int32_t)) == 0;
        printf("input staging: inputs %s, labels %s\n", same_x ? "as staged" : "DIFFER", same_y ? "as staged" : "DIFFER");
        CHECK_MSG(same_x, "the inputs in g->x are not the staged batch");
        CHECK_MSG(same_y, "the labels in g->labels are not the staged batch");
    }
    free(want_x);
    free(got_x);
    free(want_y);
    free(got_y);
}

/* peek_metrics must not wait, but once the work is done (read_metrics waited for it) a snapshot
 * requested before must show up, with its tag and the figures read_metrics gives. An evaluation
 * batch puts something in the accumulators first. */
static void peek_check(step_ctx *c)
{
    ct_graph *g = c->g;
    ct_backend *be = g->be;
    ct_err err = {0};
    double loss = 0.0, peek_loss = 0.0;
    long correct = 0, peek_correct = 0, tag_out = -1;
    c->n = BATCH;
    if (!read_loss(be, &loss, &correct) || !stage(g, 2001, BATCH))
        return;
    ct_status st = eval_work(c, &err);
    CHECK_MSG(st == CT_OK, "evaluation forward: %s", err.msg);
    if (st != CT_OK)
        return;
    CHECK_MSG(be->ops->peek_metrics(be, 1, &peek_loss, &peek_correct, &tag_out, &err) == CT_OK, "%s", err.msg);
    CHECK_MSG(be->ops->read_metrics(be, &loss, &correct, 0, &err) == CT_OK, "%s", err.msg);
    tag_out = -1;
    for (int i = 0; i < 200 && tag_out < 1; i++) {
        if (be->ops->peek_metrics(be, 2 + i, &peek_loss, &peek_correct, &tag_out, &err) != CT_OK) {
            CHECK_MSG(0, "peek_metrics: %s", err.msg);
            return;
        }
        if (tag_out < 1) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    printf("peek_metrics: tag %ld, loss sum %.7g (read_metrics %.7g), correct %ld (%ld)\n", tag_out, peek_loss,
           loss, peek_correct, correct);
    CHECK_MSG(tag_out >= 1, "no snapshot completed in a second after the work was done (tag %ld)", tag_out);
    CHECK_MSG(isfinite(loss) && loss > 0.0, "evaluation loss sum %g", loss);
    if (tag_out >= 1) {
        CHECK_NEAR(peek_loss, loss, 1e-6 * fabs(loss));
        CHECK(peek_correct == correct);
    }
    read_loss(be, &loss, &correct); /* clears the accumulators */
}

/* Shapes other than the captured one: the last partial batch (its own key: direct, captured,
 * replayed), the full batch again, and evaluation at another n, directly and through run_step. */
static void shape_changes(step_ctx *c, const ct_train_config *tc)
{
    ct_graph *g = c->g;
    ct_backend *be = g->be;
    ct_err err = {0};
    double loss;
    long correct;
    int ok = read_loss(be, &loss, &correct);
    c->n = PARTIAL;
    for (int k = K + 1; k <= K + 3 && ok; k++) {
        ok = stage(g, k, PARTIAL);
        ct_step_scalars s = scalars_of(tc, k);
        ct_status st = ok ? be->ops->set_step(be, &s, &err) : CT_ERR_INTERNAL;
        if (st == CT_OK)
            st = be->ops->run_step(be, &(ct_step_key){train_work, g, PARTIAL}, c, &err);
        CHECK_MSG(!ok || st == CT_OK, "partial batch of %d, step %d: %s", PARTIAL, k, err.msg);
        ok = ok && st == CT_OK;
    }
    if (ok && read_loss(be, &loss, &correct)) {
        printf("partial batch of %d: 3 steps through run_step, mean loss %.5g\n", PARTIAL, loss / (3.0 * PARTIAL));
        CHECK_MSG(isfinite(loss) && loss > 0.0, "partial batch loss sum %g", loss);
        CHECK_MSG(be->ops->all_finite(be, &g->params, g->param_span), "non-finite parameters after the partial batch");
    }

    /* the full batch again, after another shape ran in between */
    c->n = BATCH;
    ok = ok && stage(g, K + 4, BATCH);
    if (ok) {
        ct_step_scalars s = scalars_of(tc, K + 4);
        ct_status st = be->ops->set_step(be, &s, &err);
        if (st == CT_OK)
            st = be->ops->run_step(be, &(ct_step_key){train_work, c->g, BATCH}, c, &err);
        CHECK_MSG(st == CT_OK, "the full batch after the partial one: %s", err.msg);
        ok = st == CT_OK && read_loss(be, &loss, &correct);
        if (ok) {
            printf("full batch again: loss %.5g\n", loss / BATCH);
            CHECK_MSG(isfinite(loss) && loss > 0.0, "full batch loss sum %g", loss);
        }
    }

    /* evaluation at yet another n: directly, then three times through run_step (direct, captured,
     * replayed) on the same batch, which must give the same loss each time */
    c->n = EVAL_N;
    ok = ok && stage(g, K + 5, EVAL_N);
    double once = 0.0, thrice = 0.0;
    if (ok) {
        ct_status st = eval_work(c, &err);
        CHECK_MSG(st == CT_OK, "evaluation forward at n = %d: %s", EVAL_N, err.msg);
        ok = st == CT_OK && read_loss(be, &once, &correct);
    }
    for (int i = 0; i < 3 && ok; i++) {
        ct_status st = be->ops->run_step(be, &(ct_step_key){eval_work, g, EVAL_N}, c, &err);
        CHECK_MSG(st == CT_OK, "evaluation through run_step at n = %d, call %d: %s", EVAL_N, i + 1, err.msg);
        ok = st == CT_OK;
    }
    if (ok && read_loss(be, &thrice, &correct)) {
        printf("evaluation at n = %d: loss sum %.7g directly, %.7g over 3 run_step calls\n", EVAL_N, once, thrice);
        CHECK_MSG(isfinite(once) && once > 0.0, "evaluation loss sum %g", once);
        CHECK_NEAR(thrice, 3.0 * once, 1e-5 * 3.0 * fabs(once));
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* figures and failures interleave in order in a log */
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    ct_net *net = NULL;
    ct_status st = ct_open_string(NET, "step.ini", &net);
    if (st == CT_OK)
        st = ct_net_build_graph(net);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return ct_test_done();
    }
    const ct_train_config *tc = &net->run.cfg.train;

    ct_err err = {0};
    ct_backend *gpu = NULL;
    ct_graph g;
    memset(&g, 0, sizeof g);
    /* deterministic: the direct steps and the replayed ones must agree bit for bit */
    st = ct_gpu_test_open(&gpu, &(ct_backend_options){.capture = 1, .allow_tf32 = 0, .deterministic = 1}, &err);
    if (st == CT_OK)
        st = ct_graph_build(&g, &net->run.cfg, net->run.graph.input, net->run.graph.classes, &err);
    if (st == CT_OK)
        st = ct_graph_bind(&g, gpu, BATCH, tc->optimizer, tc->seed, 0, &err);
    size_t x_bytes = (size_t)BATCH * ct_shape_size(g.input) * sizeof(float), y_bytes = BATCH * sizeof(int32_t);
    /* ct_graph_bind has reserved the workspace and staging for its batch already; reserving
     * again, as a rebind would, must simply replace them */
    if (st == CT_OK) {
        size_t workspace = 0, scratch = 0;
        ct_graph_backend_sizes(&g, gpu, BATCH, &workspace, &scratch);
        st = gpu->ops->reserve(gpu, workspace, scratch, x_bytes, y_bytes, &err);
    }
    CHECK_MSG(st == CT_OK, "the CUDA network: %s", err.msg);
    if (st != CT_OK || !ring_open(gpu->dev, x_bytes, y_bytes)) {
        ring_close(gpu ? gpu->dev : NULL);
        ct_graph_free(&g);
        ct_gpu_test_close(gpu);
        ct_close(net);
        return ct_test_done();
    }
    CHECK_MSG(gpu->capture == 1, "graphs = 1 was asked for, but the backend has them off: %s", gpu->note);
    CHECK(g.opt_m.data && g.opt_v.data && g.n_state > 0);
    check_alignment(&g);

    staging_check(&g);

    /* the update the trainer itself hands the backend */
    step_ctx c = {.g = &g, .n = BATCH, .opt = ct_train_optim_step(tc, &g)};
    CHECK(c.opt.kind == CT_OPT_ADAM && c.opt.params == &g.params && c.opt.m == &g.opt_m && c.opt.v == &g.opt_v);
    snapshot init = {0}, direct = {0}, again = {0}, captured = {0};
    double loss_direct = 0, loss_again = 0, loss_captured = 0, ms_direct = 0, ms_again = 0, ms_captured = 0;
    int ok = take(&g, &init);
    ok = ok && run_steps(&c, tc, 0, &loss_direct, &ms_direct) && take(&g, &direct);
    ok = ok && restore(&g, &init) && run_steps(&c, tc, 0, &loss_again, &ms_again) && take(&g, &again);
    ok = ok && restore(&g, &init) && run_steps(&c, tc, 1, &loss_captured, &ms_captured) && take(&g, &captured);
    if (ok) {
        printf("%d steps of batch %d: direct %.3f ms, direct again %.3f ms, run_step %.3f ms (graphs %s)\n", K,
               BATCH, ms_direct, ms_again, ms_captured, gpu->capture ? "on" : "off");
        printf("loss sums: direct %.9g, again %.9g, run_step %.9g\n", loss_direct, loss_again, loss_captured);
        CHECK_MSG(isfinite(loss_direct) && loss_direct > 0.0, "loss sum %g", loss_direct);
        CHECK_MSG(memcmp(direct.params, init.params, ct_tensor_bytes(&g.params)) != 0, "the steps changed nothing");
        /* the loss sum is accumulated on the device, perhaps with atomics in any order */
        CHECK_NEAR(loss_again, loss_direct, 1e-5 * fabs(loss_direct));
        CHECK_NEAR(loss_captured, loss_direct, 1e-5 * fabs(loss_direct));
        /* a difference here is the direct step's own nondeterminism (an algorithm with atomics),
         * not the graph's */
        compare_snapshots("direct vs direct again", &direct, &again, &g);
        compare_snapshots("direct vs run_step (graph)", &direct, &captured, &g);
        CHECK_MSG(gpu->capture == 1, "run_step turned graphs off: %s", gpu->note);
        peek_check(&c);
        shape_changes(&c, tc);
        CHECK_MSG(gpu->capture == 1, "graphs were turned off after the shape changes: %s", gpu->note);
    }
    if (gpu->note[0])
        printf("note: %s\n", gpu->note);
    drop(&init);
    drop(&direct);
    drop(&again);
    drop(&captured);
    ring_close(gpu->dev);
    ct_graph_free(&g);
    ct_gpu_test_close(gpu);
    ct_close(net);
    return ct_test_done();
}
#else
#include "tests/no_cuda_main.h"
#endif
