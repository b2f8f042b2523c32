/* The fp16 training step on the CUDA backend, captured as a CUDA graph and replayed, against the
 * same step run directly (tests/test_gpu_step.c does this for fp32): one deterministic fp16
 * network takes K of the trainer's own steps (ct_train_step: forward, scaled loss, backward,
 * unscale, optimizer with the scaler's verdict and the half copy, scaler update) on fixed batches
 * with a learning rate that changes, three times from the same initial buffers: directly (graphs
 * off), directly again (to show the direct step is itself deterministic), and through run_step with
 * graphs on (direct, captured, replayed). One network, so that all three runs use the same cuDNN
 * algorithms (each backend measures and picks its own). The first loss scale is the largest (2^24)
 * and the growth interval 2, so the steps skip, halve, apply and double inside the replayed graph.
 * The scaler states after every step (read outside the step) must be identical between the runs,
 * and at the end the fp32 masters, their half copy, Adam's moments, the batch-norm statistics and
 * the scaler bit-identical.
 *
 * The step's host reads: the backend keeps no counter of them (test_gpu_step.c relies on capture
 * succeeding, which a synchronisation inside the step would break). This test counts them: in the
 * first direct run, from the second step on, run_step is wrapped so that it first captures the
 * trainer's step function on the compute stream (nothing runs) and walks the graph: a
 * synchronisation inside the step makes that capture fail, and a copy into host memory or a host
 * callback shows as a node. The count must be zero with scaling on; then the step runs as usual.
 * The graph run must keep graphs on with no note (its own capture did not fail). Exits 77
 * (skipped) without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "cuda/cuda_internal.h"
#include "tests/gpu_test.h"

enum { K = 12, BATCH = 32 };

static const char *const NET =
    "[data]\nformat = synthetic\nshape = 12, 12, 3\nclasses = 10\ncount = 512\ntest_count = 0\n"
    "[train]\nbatch = 32\noptimizer = adam\nlearning_rate = 0.002\nweight_decay = 0.0001\nseed = 7\n"
    "devices = 0\ngraph = on\ndeterministic = on\nprecision = fp16\nloss_scale_init = 16777216\n"
    "loss_scale_growth_steps = 2\n"
    "[c1]\ntype = conv2d\nfilters = 8\nsize = 3\npadding = same\nbias = off\n"
    "[bn]\ntype = batchnorm\n"
    "[act]\ntype = activation\nactivation = relu\n"
    "[mp]\ntype = maxpool\nsize = 2\n"
    "[c2]\ntype = conv2d\nfilters = 8\nsize = 3\npadding = same\nactivation = gelu\n"
    "[res]\ntype = add\ninputs = mp, c2\n"
    "[drop]\ntype = dropout\nrate = 0.25\n"
    "[flat]\ntype = flatten\n"
    "[fc]\ntype = dense\nunits = 32\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 10\n";

/* ---- host reads of a step, counted from a capture of it ---- */

typedef struct read_count {
    int captures;            /* steps inspected */
    int failed;              /* captures that failed: the step synchronised (or could not be captured) */
    int host_copies;         /* memcpy nodes into host memory */
    int host_nodes;          /* host callbacks */
    int nodes;               /* all nodes seen, for the log */
    char why[320];           /* the first failure */
} read_count;

static read_count reads;
static const ct_backend_ops *real_ops;  /* the direct network's backend's own ops */
static ct_backend_ops counting_ops;

/* 1 when p is host memory (pinned, or pageable: unregistered). */
static int is_host(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;  /* not known to CUDA: pageable host memory */
    }
    return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeUnregistered;
}

static void walk(cudaGraph_t recorded, int depth)
{
    size_t count = 0;
    if (cudaGraphGetNodes(recorded, NULL, &count) != cudaSuccess) {
        snprintf(reads.why, sizeof reads.why, "cudaGraphGetNodes failed");
        reads.failed++;
        return;
    }
    cudaGraphNode_t *nodes = xmalloc((count ? count : 1) * sizeof *nodes);
    GPU_OK(cudaGraphGetNodes(recorded, nodes, &count));
    for (size_t i = 0; i < count; i++) {
        enum cudaGraphNodeType type;
        GPU_OK(cudaGraphNodeGetType(nodes[i], &type));
        reads.nodes++;
        if (type == cudaGraphNodeTypeMemcpy) {
            struct cudaMemcpy3DParms p;
            GPU_OK(cudaGraphMemcpyNodeGetParams(nodes[i], &p));
            if (p.kind == cudaMemcpyDeviceToHost || p.kind == cudaMemcpyHostToHost ||
                (p.kind == cudaMemcpyDefault && (p.dstArray == NULL && is_host(p.dstPtr.ptr))))
                reads.host_copies++;
        } else if (type == cudaGraphNodeTypeHost) {
            reads.host_nodes++;
        } else if (type == cudaGraphNodeTypeGraph && depth < 8) {
            cudaGraph_t child = NULL;
            GPU_OK(cudaGraphChildGraphNodeGetGraph(nodes[i], &child));
            walk(child, depth + 1);
        }
    }
    free(nodes);
}

/* run_step in the first direct run: a capture of the step's work, inspected and thrown away (from the
 * second step of a key on: the first runs cuDNN's algorithm search and cuBLASLt's planning, which
 * belong outside any capture), then the backend's own run_step, which runs it. */
static int counting_calls;

static ct_status counting_run_step(ct_backend *be, const ct_step_key *key, void *ctx, ct_err *err)
{
    if (counting_calls++ > 0) {
        ct_cuda *cu = ct_cuda_of(be);
        cudaGraph_t recorded = NULL;
        ct_err inner = {0};
        reads.captures++;
        cudaError_t rc = cudaStreamBeginCapture(cu->compute, cudaStreamCaptureModeThreadLocal);
        ct_status st = CT_OK;
        if (rc == cudaSuccess) {
            st = key->fn(ctx, &inner);
            rc = cudaStreamEndCapture(cu->compute, &recorded);
        }
        if (rc != cudaSuccess || st != CT_OK || !recorded) {
            reads.failed++;
            if (!reads.why[0])
                snprintf(reads.why, sizeof reads.why, "capture: %.80s; step: %.160s",
                         rc == cudaSuccess ? "ok" : cudaGetErrorString(rc), st == CT_OK ? "ok" : inner.msg);
            (void)cudaGetLastError();
        } else {
            walk(recorded, 0);
        }
        if (recorded)
            GPU_OK(cudaGraphDestroy(recorded));
    }
    return real_ops->run_step(be, key, ctx, err);
}

/* ---- the network and its buffers ---- */

static ct_net *open_net(void)
{
    ct_net *net = NULL;
    ct_status st = ct_open_string(NET, "step_fp16.ini", &net);
    if (st == CT_OK)
        st = ct_prepare(net);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return NULL;
    }
    printf("backend %s (%s)\n", ct_backend_name(net), ct_backend_reason(net));
    CHECK_MSG(strcmp(ct_backend_name(net), "cuda") == 0, "built on %s", ct_backend_name(net));
    ct_graph *g = &net->run.replicas[0].graph;
    CHECK_MSG(g->precision == CT_PREC_FP16 && g->params_half.data && g->params_half.dtype == CT_DTYPE_F16,
              "not an fp16 network with a half copy");
    CHECK_MSG(net->run.replicas[0].be->capture == 1, "graph = on, but the backend has graphs off: %s",
              ct_backend_note(net));
    if (strcmp(ct_backend_name(net), "cuda") != 0 || !g->params_half.data || !g->opt_m.data || !g->opt_v.data) {
        ct_close(net);
        return NULL;
    }
    return net;
}

static int xfer(ct_backend *be, void *dst, const void *src, size_t bytes, int up)
{
    ct_err err = {0};
    ct_device *dev = be->dev;
    ct_status st = !bytes ? CT_OK : up ? dev->ops->upload(dev, dst, src, bytes, &err)
                                       : dev->ops->download(dev, dst, src, bytes, &err);
    CHECK_MSG(st == CT_OK, "%s of %zu bytes: %s", up ? "upload" : "download", bytes, err.msg);
    return st == CT_OK;
}

/* What a step changes: whole flat tensors (padding included) and the scaler. */
typedef struct snapshot {
    float *params, *m, *v, *state;
    uint16_t *half;
    ct_scaler scaler;
} snapshot;

static int take(ct_net *net, snapshot *s)
{
    ct_graph *g = &net->run.replicas[0].graph;
    ct_backend *be = net->run.replicas[0].be;
    ct_err err = {0};
    size_t pb = ct_tensor_bytes(&g->params), hb = ct_tensor_bytes(&g->params_half), sb = g->n_state * sizeof(float);
    s->params = xmalloc(pb);
    s->m = xmalloc(pb);
    s->v = xmalloc(pb);
    s->state = xmalloc(sb);
    s->half = xmalloc(hb);
    int ok = xfer(be, s->params, g->params.data, pb, 0) && xfer(be, s->m, g->opt_m.data, pb, 0) &&
             xfer(be, s->v, g->opt_v.data, pb, 0) && xfer(be, s->state, g->state.data, sb, 0) &&
             xfer(be, s->half, g->params_half.data, hb, 0);
    ct_status st = be->ops->scaler_get(be, &s->scaler, &err);
    CHECK_MSG(st == CT_OK, "scaler_get: %s", err.msg);
    return ok && st == CT_OK;
}

/* Back to s: the masters with their half copy (ct_graph_set_params), the moments, the statistics,
 * the scaler, and the trainer's step count (which the step's t and dropout seed come from). */
static int restore(ct_net *net, const snapshot *s)
{
    ct_graph *g = &net->run.replicas[0].graph;
    ct_backend *be = net->run.replicas[0].be;
    ct_err err = {0};
    size_t pb = ct_tensor_bytes(&g->params), sb = g->n_state * sizeof(float);
    ct_status st = ct_graph_set_params(g, s->params, &err);
    if (st == CT_OK)
        st = be->ops->scaler_set(be, &s->scaler, &err);
    CHECK_MSG(st == CT_OK, "restore: %s", err.msg);
    net->run.step = 0;
    return st == CT_OK && xfer(be, g->opt_m.data, s->m, pb, 1) && xfer(be, g->opt_v.data, s->v, pb, 1) &&
           xfer(be, g->state.data, s->state, sb, 1);
}

static void drop(snapshot *s)
{
    free(s->params);
    free(s->m);
    free(s->v);
    free(s->state);
    free(s->half);
    memset(s, 0, sizeof *s);
}

static int same_scaler(const ct_scaler *a, const ct_scaler *b)
{
    return memcmp(&a->loss_scale, &b->loss_scale, sizeof a->loss_scale) == 0 && a->nonfinite == b->nonfinite &&
           a->clean_steps == b->clean_steps && a->growth_steps == b->growth_steps &&
           a->applied_steps == b->applied_steps && a->skipped_steps == b->skipped_steps;
}

/* Bit-identical, or the count and first place of the differences. */
static void check_bytes(const char *run, const char *what, const void *a, const void *b, size_t bytes)
{
    const unsigned char *x = a, *y = b;
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < bytes; i++)
        if (x[i] != y[i] && differ++ == 0)
            first = i;
    if (differ)
        printf("%-28s %-11s %zu of %zu bytes differ, the first at byte %zu  FAIL\n", run, what, differ, bytes, first);
    else
        printf("%-28s %-11s %zu bytes bit-identical\n", run, what, bytes);
    CHECK_MSG(differ == 0, "%s: %s: %zu of %zu bytes differ", run, what, differ, bytes);
}

static void compare_snapshots(const char *run, const snapshot *a, const snapshot *b, const ct_graph *g)
{
    size_t pb = ct_tensor_bytes(&g->params);
    check_bytes(run, "params", a->params, b->params, pb);
    check_bytes(run, "params half", a->half, b->half, ct_tensor_bytes(&g->params_half));
    check_bytes(run, "adam m", a->m, b->m, pb);
    check_bytes(run, "adam v", a->v, b->v, pb);
    check_bytes(run, "bn running", a->state, b->state, g->n_state * sizeof(float));
    int same = same_scaler(&a->scaler, &b->scaler);
    printf("%-28s %-11s %s\n", run, "scaler", same ? "identical" : "DIFFERS  FAIL");
    CHECK_MSG(same, "%s: the scalers differ", run);
}

/* One run of K steps from the buffers as they are; the scaler after each step into trace[k - 1],
 * the loss sum into *loss. graphs: the backend's run_step captures and replays (1) or runs the
 * step directly (0). */
static int run_steps(ct_net *net, int capture, ct_scaler *trace, double *loss)
{
    ct_replica *r = &net->run.replicas[0];
    ct_backend *be = r->be;
    ct_err err = {0};
    long idx[BATCH], correct;
    be->capture = capture;
    int ok = be->ops->read_metrics(be, loss, &correct, 1, &err) == CT_OK;  /* clears them */
    for (int k = 1; k <= K && ok; k++) {
        for (int i = 0; i < BATCH; i++)
            idx[i] = ((long)k * 37 + (long)i * 13) % net->run.train.count;
        float lr = 0.002f * (float)(1.0 + 0.25 * (k % 3));
        ct_status st = ct_train_stage_batch(&net->run, r, &net->run.train, idx, BATCH, 0, 0, &err);
        if (st == CT_OK)
            st = ct_train_step(&net->run, BATCH, lr, &err);
        if (st == CT_OK)
            st = be->ops->scaler_get(be, &trace[k - 1], &err);
        CHECK_MSG(st == CT_OK, "%s step %d: %s", capture ? "graph" : "direct", k, err.msg);
        ok = st == CT_OK;
    }
    ok = ok && be->ops->read_metrics(be, loss, &correct, 1, &err) == CT_OK;
    CHECK_MSG(ok, "the %s run did not complete: %s", capture ? "graph" : "direct", err.msg);
    return ok;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* figures and failures interleave in order in a log */
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    ct_net *net = open_net();
    if (!net)
        return ct_test_done();
    ct_replica *r = &net->run.replicas[0];
    ct_graph *g = &r->graph;
    ct_backend *be = r->be;

    snapshot init = {0}, direct = {0}, again = {0}, captured = {0};
    ct_scaler tr_direct[K], tr_again[K], tr_captured[K];
    double loss_direct = 0, loss_again = 0, loss_captured = 0;
    int ok = take(net, &init);
    CHECK_MSG(ok && init.scaler.loss_scale == 16777216.0f && init.scaler.growth_steps == 2 &&
                  init.scaler.applied_steps == 0,
              "the first scale %g, growth %d", (double)init.scaler.loss_scale, (int)init.scaler.growth_steps);

    /* the first direct run, its steps inspected for host reads */
    real_ops = be->ops;
    counting_ops = *real_ops;
    counting_ops.run_step = counting_run_step;
    be->ops = &counting_ops;
    ok = ok && run_steps(net, 0, tr_direct, &loss_direct) && take(net, &direct);
    be->ops = real_ops;
    ok = ok && restore(net, &init) && run_steps(net, 0, tr_again, &loss_again) && take(net, &again);
    ok = ok && restore(net, &init) && run_steps(net, 1, tr_captured, &loss_captured) && take(net, &captured);

    if (ok) {
        int skips = 0, applied = 0, halvings = 0, doublings = 0;
        const ct_scaler *was = &init.scaler;
        for (int k = 0; k < K; k++) {
            const ct_scaler *s = &tr_captured[k];
            int skipped = s->skipped_steps == was->skipped_steps + 1;
            int same = same_scaler(s, &tr_direct[k]) && same_scaler(s, &tr_again[k]);
            skips += skipped;
            applied += !skipped;
            halvings += s->loss_scale < was->loss_scale;
            doublings += s->loss_scale > was->loss_scale;
            printf("step %2d: graph %s scale %-9g clean %d skipped %lld applied %lld | direct scale %-9g skipped %lld "
                   "applied %lld%s\n", k + 1, skipped ? "skipped" : "applied", (double)s->loss_scale,
                   (int)s->clean_steps, (long long)s->skipped_steps, (long long)s->applied_steps,
                   (double)tr_direct[k].loss_scale, (long long)tr_direct[k].skipped_steps,
                   (long long)tr_direct[k].applied_steps, same ? "" : "  FAIL");
            CHECK_MSG(same, "step %d: the scaler differs between the graph and the direct runs", k + 1);
            CHECK_MSG(s->nonfinite == 0, "step %d: the verdict was not cleared", k + 1);
            was = s;
        }
        printf("%d steps: %d skipped, %d applied, %d halvings, %d doublings\n", K, skips, applied, halvings, doublings);
        /* else the replayed step never took one of its branches */
        CHECK_MSG(skips >= 1 && applied >= 1 && halvings >= 1 && doublings >= 1,
                  "the steps should skip, apply, halve and double: %d, %d, %d, %d", skips, applied, halvings,
                  doublings);
        printf("loss sums: direct %.9g, again %.9g, graph %.9g\n", loss_direct, loss_again, loss_captured);
        CHECK_MSG(isfinite(loss_direct) && loss_direct > 0.0, "loss sum %g", loss_direct);
        /* accumulated on the device, perhaps with atomics in any order */
        CHECK_NEAR(loss_again, loss_direct, 1e-5 * fabs(loss_direct));
        CHECK_NEAR(loss_captured, loss_direct, 1e-5 * fabs(loss_direct));
        CHECK_MSG(memcmp(direct.params, init.params, ct_tensor_bytes(&g->params)) != 0, "the steps changed nothing");
        /* a difference here is the direct step's own nondeterminism, not the graph's */
        compare_snapshots("direct vs direct again", &direct, &again, g);
        compare_snapshots("direct vs run_step (graph)", &direct, &captured, g);
        CHECK_MSG(be->ops->all_finite(be, &g->params, g->param_span), "non-finite weights");
    }
    printf("host reads: %d steps captured and inspected (%d nodes), %d failed captures, %d copies to host memory, "
           "%d host callbacks%s%s\n", reads.captures, reads.nodes, reads.failed, reads.host_copies, reads.host_nodes,
           reads.why[0] ? ": " : "", reads.why);
    CHECK_MSG(!ok || (reads.captures == K - 1 && reads.nodes > 0), "%d steps inspected of %d", reads.captures, K - 1);
    CHECK_MSG(reads.failed == 0, "the fp16 step could not be captured (a synchronisation inside it?): %s", reads.why);
    CHECK_MSG(reads.host_copies == 0 && reads.host_nodes == 0, "the fp16 step reads the device from the host: %d "
              "copies, %d callbacks", reads.host_copies, reads.host_nodes);
    CHECK_MSG(be->capture == 1 && ct_backend_note(net)[0] == '\0', "graphs %d after the graph run: %s", be->capture,
              ct_backend_note(net));
    drop(&init);
    drop(&direct);
    drop(&again);
    drop(&captured);
    ct_close(net);
    return ct_test_done();
}
#else
#include "tests/no_cuda_main.h"
#endif
