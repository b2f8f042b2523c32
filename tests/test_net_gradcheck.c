/* Whole-network gradient check by finite differences, through the network builder and the CPU
 * backend: fused activations, flatten aliasing, residual adds and concats (gradient accumulation
 * from two and three consumers), batch norm, dropout and pooling, wired as the trainer wires
 * them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "tests/test_util.h"

/* Every layer type; the concat joins an aliasing flatten and the dense layer that also reads it. */
static const char *NET =
    "[data]\nformat = synthetic\nshape = 8, 8, 2\nclasses = 5\ncount = 64\ntest_count = 0\n"
    "[train]\nbatch = 6\ndevices = cpu\nseed = 3\n"
    "[c1]\ntype = conv2d\nfilters = 4\nsize = 3\nstride = 2\npadding = same\nactivation = tanh\n"
    "[bn]\ntype = batchnorm\n"
    "[act]\ntype = activation\nactivation = leaky\n"
    "[c2]\ntype = conv2d\nfilters = 4\nsize = 3\npadding = same\nactivation = sigmoid\n"
    "[c3]\ntype = conv2d\nfilters = 4\nsize = 1\ninput = act\nbias = off\n"
    "[res]\ntype = add\ninputs = c2, c3\nactivation = gelu\n"
    "[mp]\ntype = maxpool\nsize = 3\nstride = 1\npadding = same\n"
    "[ap]\ntype = avgpool\nsize = 2\n"
    "[gp]\ntype = avgpool\nglobal = on\ninput = res\n"
    "[flat]\ntype = flatten\ninput = ap\n"
    "[fc]\ntype = dense\nunits = 7\nactivation = gelu\n"
    "[cat]\ntype = concat\ninputs = flat, fc\n"
    "[drop]\ntype = dropout\nrate = 0.3\n"
    "[out]\ntype = dense\nunits = 5\n";

/* A concat of feature maps, one of them (c1) also read by the two convolutions beside it, and a
 * batch norm with its own activation (kept apart from its output: gelu's gradient reads it). Smooth
 * activations only: a kink (relu, max-pool) near a perturbed value would break the differences. */
static const char *CONCAT_NET =
    "[data]\nformat = synthetic\nshape = 8, 8, 2\nclasses = 5\ncount = 64\ntest_count = 0\n"
    "[train]\nbatch = 6\ndevices = cpu\nseed = 3\n"
    "[c1]\ntype = conv2d\nfilters = 4\nsize = 3\nstride = 2\npadding = same\nactivation = tanh\n"
    "[c2]\ntype = conv2d\nfilters = 3\nsize = 3\npadding = same\nactivation = sigmoid\n"
    "[c3]\ntype = conv2d\nfilters = 2\nsize = 1\ninput = c1\nactivation = tanh\n"
    "[cat]\ntype = concat\ninputs = c2, c3, c1\n"
    "[mix]\ntype = conv2d\nfilters = 4\nsize = 3\nactivation = gelu\n"
    "[bn]\ntype = batchnorm\nactivation = gelu\n"
    "[flat]\ntype = flatten\n"
    "[out]\ntype = dense\nunits = 5\n";

static const ct_layer *layer_named(const ct_graph *g, const char *name)
{
    for (int i = 0; i < g->n_layers; i++)
        if (strcmp(g->layers[i].cfg->name, name) == 0)
            return &g->layers[i];
    return NULL;
}

/* Mean loss of one training-mode forward pass (fixed dropout seed, batch statistics). */
static double loss_at(ct_replica *r, int n)
{
    ct_graph *g = &r->graph;
    ct_backend *be = r->be;
    double loss;
    long correct;
    ct_err err;
    ct_step_scalars fixed = {.lr = 0.0f, .t = 1, .bias1 = 1.0f, .bias2 = 1.0f, .dropout_seed = 99};
    be->ops->set_step(be, &fixed, &err);
    be->ops->read_metrics(be, &loss, &correct, 1, &err);
    ct_graph_forward(g, n, 1, &err);
    be->ops->loss(be, ct_graph_output(g)->y, &g->labels, NULL, n, &err);
    be->ops->read_metrics(be, &loss, &correct, 1, &err);
    return loss / n;
}

/* 1 when a derivative estimate and the backward's value disagree. */
static int disagree(double numeric, double analytic)
{
    double diff = fabs(numeric - analytic);
    return diff / fmax(fabs(numeric) + fabs(analytic), 1e-3) > 0.05 && diff > 2e-4;
}

/* The loss at parameter p set to value (restored after). */
static double loss_with(ct_replica *r, int n, float *params, size_t p, float value)
{
    float saved = params[p];
    params[p] = value;
    double loss = loss_at(r, n);
    params[p] = saved;
    return loss;
}

/* Where central differences disagree, a kink of the loss (a max-pool's argmax switching, leaky's
 * zero) may lie within eps: then the side of p whose two half-step slopes agree is smooth, and the
 * backward's value must match that side's slope. 1 when that explains the disagreement. */
static int smooth_side_agrees(ct_replica *r, int n, float *params, size_t p, float eps, double analytic)
{
    const float x = params[p], h = eps / 2;
    double at[5];
    for (int i = 0; i < 5; i++)
        at[i] = loss_with(r, n, params, p, x + (float)(i - 2) * h);
    double left_far = (at[1] - at[0]) / h, left_near = (at[2] - at[1]) / h;
    double right_near = (at[3] - at[2]) / h, right_far = (at[4] - at[3]) / h;
    return (!disagree(left_far, left_near) && !disagree(left_near, analytic)) ||
           (!disagree(right_near, right_far) && !disagree(right_near, analytic));
}

/* concat's output after a forward pass: at every position, its inputs' channels in order. */
static void check_concat_forward(const ct_graph *g, int n, int want_inputs, int want_channels)
{
    const ct_layer *cat = layer_named(g, "cat");
    CHECK(cat && cat->n_in == want_inputs && cat->out.c == want_channels);
    if (!cat)
        return;
    size_t rows = (size_t)n * cat->out.h * cat->out.w, mismatched = 0, offset = 0;
    const float *y = ct_f32(cat->y);
    for (int k = 0; k < cat->n_in; k++) {
        const float *xk = ct_f32(cat->x[k]);
        size_t c = (size_t)cat->in_shapes[k].c;
        for (size_t row = 0; row < rows; row++)
            mismatched += memcmp(y + row * cat->out.c + offset, xk + row * c, c * sizeof *y) != 0;
        offset += c;
    }
    CHECK_MSG(mismatched == 0, "%zu of %zu concat blocks differ from their inputs", mismatched, rows * cat->n_in);
}

/* Forward, loss (which writes the last layer's dy) and backward, with a fixed dropout seed. */
static ct_status train_pass(ct_graph *g, ct_backend *be, int n, ct_err *err)
{
    ct_step_scalars fixed = {.lr = 0.0f, .t = 1, .bias1 = 1.0f, .bias2 = 1.0f, .dropout_seed = 99};
    ct_status st = be->ops->set_step(be, &fixed, err);
    if (st == CT_OK)
        st = ct_graph_forward(g, n, 1, err);
    if (st == CT_OK)
        st = be->ops->loss(be, ct_graph_output(g)->y, &g->labels, ct_graph_output(g)->dy, n, err);
    if (st == CT_OK)
        st = ct_graph_backward(g, n, err);
    return st;
}

/* Who writes an activation gradient and who adds to it: the consumer last in config order writes
 * (backward runs first through it), the others add. One row per input of each layer listed, in
 * input order. */
typedef struct writer_row {
    const char *layer;
    int accumulate;
} writer_row;

static void check_gradient_writers(const ct_graph *g, const writer_row *want, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const ct_layer *l = layer_named(g, want[i].layer);
        CHECK_MSG(l != NULL, "no layer [%s]", want[i].layer);
        if (!l)
            continue;
        int k = 0;   /* which input of the layer: earlier rows of the same layer */
        for (size_t j = 0; j < i; j++)
            k += strcmp(want[j].layer, want[i].layer) == 0;
        CHECK_MSG(l->dx_accumulate[k] == want[i].accumulate, "[%s] input %d: dx_accumulate %d, expected %d",
                  want[i].layer, k, l->dx_accumulate[k], want[i].accumulate);
    }
    const ct_layer *first = &g->layers[0];
    CHECK(first->dx[0] == NULL);   /* the data: no gradient */
    /* a layer nothing reads (gp in NET) hands back a gradient only its own zeros made */
    const ct_layer *gp = layer_named(g, "gp");
    const float *gp_dy = gp ? ct_f32(gp->dy) : NULL;
    size_t zeros = 0;
    for (size_t i = 0; gp_dy && i < gp->dy->count; i++)
        zeros += gp_dy[i] == 0.0f;
    CHECK_MSG(!gp || zeros == gp->dy->count, "[gp]'s gradient, which nothing writes, is not all zeros");
}

/* NaN over every buffer a backward must write in full for n samples. */
static void poison_written(ct_graph *g, int n)
{
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer *l = &g->layers[i];
        ct_tensor *own[2] = {l->dw, l->db};
        for (int t = 0; t < 2; t++)
            for (size_t j = 0; own[t] && j < own[t]->count; j++)
                ct_f32(own[t])[j] = NAN;
        for (int k = 0; k < l->n_in; k++)
            for (size_t j = 0; l->dx[k] && j < (size_t)n * ct_shape_size(l->in_shapes[k]); j++)
                ct_f32(l->dx[k])[j] = NAN;
    }
}

/* Builds the network, checks its memory plan and who writes each gradient, runs one training pass
 * twice over poisoned gradients and compares every parameter gradient with central differences of
 * the loss. */
static void gradcheck(const char *text, const writer_row *writers, size_t n_writers, int cat_inputs,
                      int cat_channels)
{
    ct_net *net = NULL;
    CHECK(ct_open_string(text, "gradcheck.ini", &net) == CT_OK);
    ct_status st = ct_prepare(net);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return;
    }
    /* the one replica's bound network (net->run.graph holds the shapes only) */
    ct_replica *r = &net->run.replicas[0];
    ct_graph *g = &r->graph;
    ct_backend *be = r->be;
    int n = g->batch;
    /* the planner and the allocations it predicts must agree, byte for byte */
    ct_memory_plan plan;
    ct_graph_plan(g, be, n, net->run.cfg.train.optimizer, &plan);
    /* what binding asked for, then what the device's allocator counts (each allocation rounded up, the
     * backend's own buffers) */
    CHECK_MSG(plan.total - plan.padding - plan.backend == g->allocated, "plan %zu bytes, allocated %zu",
              plan.total - plan.padding - plan.backend, g->allocated);
    ct_devmem_usage usage;
    be->dev->ops->memory_usage(be->dev, &usage);
    CHECK_MSG(plan.total == usage.in_use, "plan %zu bytes, the allocator counts %zu in use", plan.total, usage.in_use);
    CHECK(plan.activations > 0 && plan.gradients > 0 && plan.params == 2 * g->param_span * sizeof(float));
    /* a fused activation keeps its pre-activation only where its gradient needs it (gelu): tanh
     * and sigmoid run in place and take their gradients from the output, which the finite
     * differences below check */
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        int kept = l->def->fused_activation && l->act == CT_ACT_GELU;
        CHECK_MSG((l->z != l->y) == kept && (l->z->data != l->y->data) == kept,
                  "[%s] should %skeep its pre-activation", l->cfg->name, kept ? "" : "not ");
    }
    /* the CPU device's memory is host memory: the test writes the tensors directly */
    CHECK(be->dev->host_memory);
    float *x = ct_f32(&g->x), *params = ct_f32(&g->params);
    const float *grads = ct_f32(&g->grads);
    int32_t *labels = ct_i32(&g->labels);
    ct_rng rng = {12345};
    for (size_t i = 0; i < (size_t)n * ct_shape_size(g->input); i++)
        x[i] = 2.0f * ct_rng_uniform(&rng) - 1.0f;
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)(ct_rng_next(&rng) % 5);
    /* small random biases so no unit starts exactly at an activation's kink */
    for (int li = 0; li < g->n_layers; li++) {
        const ct_layer *l = &g->layers[li];
        for (size_t k = 0; k < l->w_count + l->b_count; k++) {
            size_t p = k < l->w_count ? l->w_off + k : l->b_off + (k - l->w_count);
            params[p] += 0.05f * (ct_rng_uniform(&rng) - 0.5f);
        }
    }

    check_gradient_writers(g, writers, n_writers);

    /* Nothing is cleared before backward: poison every buffer it must write (each layer's
     * parameter gradients and every gradient a layer hands back) with NaN, and a second pass
     * over the same batch must give the same bits (it would double what an accumulating one
     * left behind). */
    poison_written(g, n);
    ct_err err;
    ct_status st1 = train_pass(g, be, n, &err);
    CHECK_MSG(st1 == CT_OK, "first pass: %s", err.msg);
    float *first = malloc(g->grads.count * sizeof(float));
    CHECK(first != NULL);
    if (!first) {
        ct_close(net);
        return;
    }
    memcpy(first, grads, g->grads.count * sizeof(float));
    ct_status st2 = train_pass(g, be, n, &err);
    CHECK_MSG(st2 == CT_OK, "second pass: %s", err.msg);
    CHECK_MSG(memcmp(first, grads, g->grads.count * sizeof(float)) == 0,
              "a second backward over the same batch changed the parameter gradients");
    free(first);
    check_concat_forward(g, n, cat_inputs, cat_channels);

    /* every parameter of every layer, central differences */
    const float eps = 2e-3f;
    int checked = 0, bad = 0, kinks = 0;
    double worst = 0.0;
    for (int li = 0; li < g->n_layers; li++) {
        const ct_layer *l = &g->layers[li];
        size_t count = l->w_count + l->b_count;
        for (size_t k = 0; k < count; k++) {
            size_t p = k < l->w_count ? l->w_off + k : l->b_off + (k - l->w_count);
            float saved = params[p];
            params[p] = saved + eps;
            double up = loss_at(r, n);
            params[p] = saved - eps;
            double down = loss_at(r, n);
            params[p] = saved;
            double numeric = (up - down) / (2.0 * eps);
            double analytic = grads[p];
            double rel = fabs(numeric - analytic) / fmax(fabs(numeric) + fabs(analytic), 1e-3);
            checked++;
            if (rel > worst)
                worst = rel;
            if (disagree(numeric, analytic) && smooth_side_agrees(r, n, params, p, eps, analytic)) {
                kinks++;
            } else if (disagree(numeric, analytic)) {
                if (bad++ < 10)
                    fprintf(stderr, "[%s] param %zu: analytic %.6g numeric %.6g\n", l->cfg->name, k,
                            analytic, numeric);
            }
        }
    }
    printf("checked %d parameters, worst relative error %.3g, %d beside a kink (one-sided slope)\n", checked,
           worst, kinks);
    CHECK(checked > 300);
    /* a kink within eps of a parameter is rare; many would mean the one-sided test hides a bug */
    CHECK_MSG(kinks * 100 <= checked, "%d of %d parameters beside a kink", kinks, checked);
    CHECK_MSG(bad == 0, "%d of %d parameter gradients disagree with finite differences", bad, checked);
    ct_close(net);
}

int main(void)
{
    /* act feeds c2 and c3; res feeds mp and gp (which nothing reads); flat (aliasing ap's
     * buffers) feeds fc and cat */
    static const writer_row net_writers[] = {
        {"c1", 0}, {"bn", 0}, {"act", 0}, {"c2", 1}, {"c3", 0}, {"res", 0}, {"res", 0}, {"mp", 1},
        {"ap", 0}, {"gp", 0}, {"fc", 1}, {"cat", 0}, {"cat", 0}, {"drop", 0}, {"out", 0},
    };
    /* c1 feeds c2, c3 and cat */
    static const writer_row concat_writers[] = {
        {"c1", 0}, {"c2", 1}, {"c3", 1}, {"cat", 0}, {"cat", 0}, {"cat", 0}, {"mix", 0}, {"out", 0},
    };
    gradcheck(NET, net_writers, sizeof net_writers / sizeof *net_writers, 2, 16 + 7);
    gradcheck(CONCAT_NET, concat_writers, sizeof concat_writers / sizeof *concat_writers, 3, 3 + 2 + 4);
    return ct_test_done();
}
