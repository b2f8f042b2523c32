/* Mixed precision on the CPU backend: the layers' dtypes and the memory plan in every precision;
 * every layer type's half path against the fp32 network on the same weights and batch (per-layer
 * relative error within the half type's rounding, NaN fails); and fp16's dynamic loss scaler
 * driven into overflow by a huge first scale: the overflowing steps are skipped with the weights,
 * moments and half copy bit-identical to before, the scale halves until steps succeed and doubles
 * after the growth interval, and no NaN reaches the weights (the trace is printed). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "base/half.h"
#include "tests/test_util.h"

/* Every layer type, a pinned conv and a pinned batch norm; the last dense is the fp32 output. */
static const char *NET =
    "[data]\nformat = synthetic\nshape = 8, 8, 2\nclasses = 5\ncount = 320\ntest_count = 64\n"
    "[train]\nbatch = 32\ndevices = cpu\nseed = 5\noptimizer = adam\nlearning_rate = 0.01\n"
    "[c1]\ntype = conv2d\nfilters = 6\nsize = 3\npadding = same\nactivation = tanh\n"
    "[bn]\ntype = batchnorm\n"
    "[act]\ntype = activation\nactivation = leaky\n"
    "[c2]\ntype = conv2d\nfilters = 6\nsize = 3\npadding = same\nactivation = gelu\ndtype = fp32\n"
    "[c3]\ntype = conv2d\nfilters = 6\nsize = 1\ninput = act\nbias = off\n"
    "[res]\ntype = add\ninputs = c2, c3\nactivation = relu\n"
    "[bn2]\ntype = batchnorm\ndtype = fp32\n"
    "[mp]\ntype = maxpool\nsize = 2\n"
    "[ap]\ntype = avgpool\nsize = 2\ninput = res\n"
    "[cat]\ntype = concat\ninputs = mp, ap\n"
    "[flat]\ntype = flatten\n"
    "[fc]\ntype = dense\nunits = 16\nactivation = sigmoid\n"
    "[drop]\ntype = dropout\nrate = 0.25\n"
    "[out]\ntype = dense\nunits = 5\n";

/* extra: NULL-terminated key, value pairs set before preparing */
static ct_net *open_prepared(const char *precision, const char *const *extra)
{
    ct_net *net = NULL;
    CHECK(ct_open_string(NET, "mixed.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.precision", precision) == CT_OK);
    for (; extra && extra[0]; extra += 2)
        CHECK(ct_set(net, extra[0], extra[1]) == CT_OK);
    ct_status st = ct_prepare(net);
    CHECK_MSG(st == CT_OK, "%s: %s", precision, ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return NULL;
    }
    return net;
}

/* The first `count` values of t as fp32 (t fp32, fp16 or bf16, in host memory). */
static void to_f32(const ct_tensor *t, size_t count, float *out)
{
    for (size_t i = 0; i < count; i++) {
        if (t->dtype == CT_DTYPE_F16)
            out[i] = ct_f32_from_f16(((const uint16_t *)t->data)[i]);
        else if (t->dtype == CT_DTYPE_BF16)
            out[i] = ct_f32_from_bf16(((const uint16_t *)t->data)[i]);
        else
            out[i] = ((const float *)t->data)[i];
    }
}

/* ||a - b|| / ||b||, or INFINITY when a holds a NaN or an infinity. */
static double rel_error(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static ct_dtype compute_dtype_of(const char *precision)
{
    return strcmp(precision, "fp16") == 0 ? CT_DTYPE_F16 : strcmp(precision, "bf16") == 0 ? CT_DTYPE_BF16
                                                                                          : CT_DTYPE_F32;
}

/* Dtypes: half but the pinned layers and the output; the flatten shares its producer's; the plan
 * equals what was allocated, and counts the half copy of the parameters. */
static void test_dtypes_and_plan(void)
{
    static const char *const precisions[] = {"fp32", "fp16", "bf16"};
    for (int p = 0; p < 3; p++) {
        ct_net *net = open_prepared(precisions[p], NULL);
        if (!net)
            continue;
        ct_replica *r = &net->run.replicas[0];
        ct_graph *g = &r->graph;
        ct_dtype compute = compute_dtype_of(precisions[p]);
        for (int i = 0; i < g->n_layers; i++) {
            const ct_layer *l = &g->layers[i];
            const char *name = l->cfg->name;
            int pinned = strcmp(name, "c2") == 0 || strcmp(name, "bn2") == 0 || strcmp(name, "out") == 0;
            ct_dtype want = pinned ? CT_DTYPE_F32 : compute;
            CHECK_MSG(l->dtype == want && l->y->dtype == want && l->dy->dtype == want, "%s: [%s] is %s, want %s",
                      precisions[p], name, ct_dtype_name(l->dtype), ct_dtype_name(want));
            int half_w = compute != CT_DTYPE_F32 && !pinned && (l->type == CT_LAYER_DENSE || l->type == CT_LAYER_CONV2D);
            CHECK_MSG((l->w_half != NULL) == half_w, "%s: [%s] half weights %d", precisions[p], name, half_w);
            if (l->dw)
                CHECK(l->dw->dtype == CT_DTYPE_F32 && l->w->dtype == CT_DTYPE_F32);
        }
        ct_memory_plan plan;
        ct_graph_plan(g, r->be, g->batch, net->run.cfg.train.optimizer, &plan);
        CHECK_MSG(plan.total - plan.padding - plan.backend == g->allocated, "%s: plan %zu bytes, allocated %zu",
                  precisions[p], plan.total - plan.padding - plan.backend, g->allocated);
        ct_devmem_usage usage;
        r->dev->ops->memory_usage(r->dev, &usage);
        CHECK_MSG(plan.total == usage.in_use, "%s: plan %zu bytes, the allocator counts %zu in use", precisions[p],
                  plan.total, usage.in_use);
        size_t by = 0;
        for (int d = 0; d < CT_DTYPE_COUNT; d++)
            by += plan.by_dtype[d];
        CHECK_MSG(by == plan.total, "%s: bytes by dtype %zu, total %zu", precisions[p], by, plan.total);
        CHECK(plan.params_half == (compute == CT_DTYPE_F32 ? 0 : g->param_span * 2));
        if (compute != CT_DTYPE_F32)
            CHECK(plan.by_dtype[compute] > 0 && g->params_half.dtype == compute);
        printf("%s: plan %zu bytes (fp32 %zu, fp16 %zu, bf16 %zu)\n", precisions[p], plan.total,
               plan.by_dtype[CT_DTYPE_F32], plan.by_dtype[CT_DTYPE_F16], plan.by_dtype[CT_DTYPE_BF16]);
        ct_close(net);
    }
}

/* One training pass of the same batch on the same weights in fp32 and in `precision`; every
 * layer's output and every parameter gradient compared. */
static void test_layers_against_fp32(const char *precision, double tol_y, double tol_grad)
{
    ct_net *ref = open_prepared("fp32", NULL), *net = open_prepared(precision, NULL);
    if (!ref || !net) {
        ct_close(ref);
        ct_close(net);
        return;
    }
    ct_graph *a = &ref->run.replicas[0].graph, *b = &net->run.replicas[0].graph;
    ct_backend *be_a = ref->run.replicas[0].be, *be_b = net->run.replicas[0].be;
    ct_err err;
    int n = a->batch;
    long idx[64];
    for (int i = 0; i < n; i++)
        idx[i] = i * 7 % ref->run.train.count;
    /* the same seed gave both the same masters; the half copy is their rounding */
    CHECK(memcmp(a->params.data, b->params.data, ct_tensor_bytes(&a->params)) == 0);
    for (size_t i = 0; i < b->param_span; i++) {
        float w = ((float *)b->params.data)[i];
        float h = b->compute_dtype == CT_DTYPE_F16 ? ct_f32_from_f16(((uint16_t *)b->params_half.data)[i])
                                    : ct_f32_from_bf16(((uint16_t *)b->params_half.data)[i]);
        if (h != (b->compute_dtype == CT_DTYPE_F16 ? ct_round_f16(w) : ct_round_bf16(w))) {
            CHECK_MSG(0, "%s: half copy [%zu] = %g is not the rounding of %g", precision, i, h, w);
            break;
        }
    }
    ct_step_scalars s = {.lr = 0.01f, .t = 1, .dropout_seed = 99};
    CHECK(ct_train_stage_batch(&ref->run, &ref->run.replicas[0], &ref->run.train, idx, n, 0, 0, &err) == CT_OK);
    CHECK(ct_train_stage_batch(&net->run, &net->run.replicas[0], &net->run.train, idx, n, 0, 0, &err) == CT_OK);
    CHECK(be_a->ops->set_step(be_a, &s, &err) == CT_OK && be_b->ops->set_step(be_b, &s, &err) == CT_OK);
    CHECK(ct_graph_forward(a, n, 1, &err) == CT_OK && ct_graph_forward(b, n, 1, &err) == CT_OK);
    size_t most = 0;
    for (int i = 0; i < a->n_layers; i++)
        most = ct_shape_size(a->layers[i].out) * (size_t)n > most ? ct_shape_size(a->layers[i].out) * (size_t)n : most;
    most = most > a->param_span ? most : a->param_span;
    float *ya = malloc(most * sizeof *ya), *yb = malloc(most * sizeof *yb);
    double worst_y = 0, worst_g = 0;
    for (int i = 0; i < a->n_layers; i++) {
        const ct_layer *la = &a->layers[i], *lb = &b->layers[i];
        size_t count = ct_shape_size(la->out) * (size_t)n;
        to_f32(la->y, count, ya);
        to_f32(lb->y, count, yb);
        double e = rel_error(yb, ya, count);
        worst_y = e > worst_y ? e : worst_y;
        CHECK_MSG(e <= tol_y, "%s: [%s] output off by %.3g (tolerance %.3g)", precision, la->cfg->name, e, tol_y);
    }
    /* the fp16 net scales its loss gradient; unscaling brings the gradients back to size */
    CHECK(be_a->ops->loss(be_a, ct_graph_output(a)->y, &a->labels, ct_graph_output(a)->dy, n, &err) == CT_OK);
    CHECK(be_b->ops->loss(be_b, ct_graph_output(b)->y, &b->labels, ct_graph_output(b)->dy, n, &err) == CT_OK);
    CHECK(ct_graph_backward(a, n, &err) == CT_OK && ct_graph_backward(b, n, &err) == CT_OK);
    if (b->compute_dtype == CT_DTYPE_F16)
        CHECK(be_b->ops->unscale(be_b, &b->grads, &err) == CT_OK);
    for (int i = 0; i < a->n_layers; i++) {
        const ct_layer *la = &a->layers[i], *lb = &b->layers[i];
        const ct_tensor *ga[2] = {la->dw, la->db}, *gb[2] = {lb->dw, lb->db};
        for (int k = 0; k < 2; k++) {
            if (!ga[k])
                continue;
            to_f32(ga[k], ga[k]->count, ya);
            to_f32(gb[k], gb[k]->count, yb);
            double e = rel_error(yb, ya, ga[k]->count);
            worst_g = e > worst_g ? e : worst_g;
            CHECK_MSG(e <= tol_grad, "%s: [%s] %s gradient off by %.3g (tolerance %.3g)", precision, la->cfg->name,
                      k ? "bias" : "weight", e, tol_grad);
        }
    }
    printf("%s against fp32: worst output error %.3g, worst parameter-gradient error %.3g\n", precision, worst_y,
           worst_g);
    free(ya);
    free(yb);
    ct_close(ref);
    ct_close(net);
}

/* What the overflow test compares across a skipped step. */
typedef struct snapshot {
    void *params, *half, *m, *v;
    ct_scaler scaler;
} snapshot;

typedef struct trace {
    snapshot before;
    int ok, skips, halvings, doublings, nan_weights;
} trace;

static void *copy_of(const ct_tensor *t)
{
    void *p = malloc(ct_tensor_bytes(t) + 1);
    memcpy(p, t->data, ct_tensor_bytes(t));
    return p;
}

static void take(ct_net *net, snapshot *s)
{
    ct_replica *r = &net->run.replicas[0];
    ct_err err;
    free(s->params);
    free(s->half);
    free(s->m);
    free(s->v);
    s->params = copy_of(&r->graph.params);
    s->half = copy_of(&r->graph.params_half);
    s->m = copy_of(&r->graph.opt_m);
    s->v = copy_of(&r->graph.opt_v);
    CHECK(r->be->ops->scaler_get(r->be, &s->scaler, &err) == CT_OK);
}

static int same_bytes(const void *p, const ct_tensor *t) { return memcmp(p, t->data, ct_tensor_bytes(t)) == 0; }

static int after_step(ct_net *net, long steps_done, void *user)
{
    trace *tr = user;
    ct_replica *r = &net->run.replicas[0];
    ct_graph *g = &r->graph;
    ct_scaler now;
    ct_err err;
    CHECK(r->be->ops->scaler_get(r->be, &now, &err) == CT_OK);
    const ct_scaler *was = &tr->before.scaler;
    int skipped = now.skipped_steps == was->skipped_steps + 1;
    CHECK_MSG(skipped || now.applied_steps == was->applied_steps + 1, "step %ld neither applied nor skipped",
              steps_done);
    CHECK(now.nonfinite == 0);
    if (skipped) {
        tr->skips++;
        CHECK_MSG(same_bytes(tr->before.params, &g->params) && same_bytes(tr->before.half, &g->params_half) &&
                      same_bytes(tr->before.m, &g->opt_m) && same_bytes(tr->before.v, &g->opt_v),
                  "step %ld was skipped but the weights, their half copy or the moments changed", steps_done);
        CHECK_MSG(now.loss_scale == fmaxf(was->loss_scale * 0.5f, 1.0f) && now.applied_steps == was->applied_steps &&
                      now.clean_steps == 0,
                  "step %ld skipped: scale %g -> %g", steps_done, was->loss_scale, now.loss_scale);
        tr->halvings += now.loss_scale < was->loss_scale;
    } else {
        CHECK_MSG(!same_bytes(tr->before.params, &g->params), "step %ld was applied but no weight moved", steps_done);
        int grows = was->clean_steps + 1 >= was->growth_steps;
        CHECK_MSG(now.loss_scale == (grows ? fminf(was->loss_scale * 2.0f, 0x1p24f) : was->loss_scale) &&
                      now.clean_steps == (grows ? 0 : was->clean_steps + 1),
                  "step %ld applied after %d clean steps: scale %g -> %g", steps_done, was->clean_steps,
                  was->loss_scale, now.loss_scale);
        tr->doublings += now.loss_scale > was->loss_scale;
    }
    for (size_t i = 0; i < g->param_span; i++)
        if (!isfinite(((float *)g->params.data)[i])) {
            tr->nan_weights++;
            break;
        }
    printf("step %3ld: %s scale %-9g clean %d skipped %lld applied %lld\n", steps_done,
           skipped ? "skipped" : "applied", (double)now.loss_scale, (int)now.clean_steps, (long long)now.skipped_steps,
           (long long)now.applied_steps);
    take(net, &tr->before);
    return 0;
}

static void test_overflow(void)
{
    /* 2^24, the largest first scale: the loss gradient is 2^24 / 32 = 2^19 times its size, far
     * beyond fp16's 65504 once it reaches the half layers */
    static const char *const keys[] = {"train.loss_scale_init", "16777216", "train.loss_scale_growth_steps", "4",
                                       "train.epochs", "3", NULL};
    ct_net *net = open_prepared("fp16", keys);
    if (!net)
        return;
    trace tr;
    memset(&tr, 0, sizeof tr);
    take(net, &tr.before);
    CHECK(tr.before.scaler.loss_scale == 16777216.0f && tr.before.scaler.growth_steps == 4);
    ct_callbacks cb = {.after_step = after_step, .user = &tr};
    ct_status st = ct_fit(net, &cb);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    printf("%d skipped steps, %d halvings, %d doublings\n", tr.skips, tr.halvings, tr.doublings);
    CHECK_MSG(tr.skips >= 2 && tr.halvings >= 2, "the first steps should overflow: %d skipped", tr.skips);
    CHECK_MSG(tr.doublings >= 1, "the scale never doubled after %d clean steps", 4);
    CHECK(tr.nan_weights == 0);
    CHECK(tr.before.scaler.applied_steps + tr.before.scaler.skipped_steps == ct_steps_done(net));
    /* after the storm it trains: better than chance (5 classes) */
    ct_eval_result r;
    CHECK(ct_evaluate(net, &r) == CT_OK);
    CHECK_MSG(r.accuracy > 0.3, "accuracy %g after the skipped steps", r.accuracy);
    free(tr.before.params);
    free(tr.before.half);
    free(tr.before.m);
    free(tr.before.v);
    ct_close(net);
}

int main(void)
{
    test_dtypes_and_plan();
    /* fp16 keeps 11 significant bits (relative rounding 2^-11), bf16 8 (2^-8); errors compound over
     * a dozen layers, so outputs get a few dozen roundings. Parameter gradients also carry the
     * discrete choices a rounding can flip (a max-pool's argmax, relu's sign), which send a whole
     * gradient elsewhere whatever the precision (measured: about 0.09 in both), and batch norm's
     * sums cancel: 0.15, well below what a wrong formula or a missed rounding gives (order 1). */
    test_layers_against_fp32("fp16", 0.02, 0.15);
    test_layers_against_fp32("bf16", 0.1, 0.15);
    test_overflow();
    return ct_test_done();
}
