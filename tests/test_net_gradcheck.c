/* Whole-network gradient check by finite differences, through the network builder and the CPU
 * backend: fused activations, flatten aliasing, residual adds (gradient accumulation from two
 * consumers), batch norm, dropout and pooling, wired as the trainer wires them. */
#include "api/handle.h"
#include "tests/test_util.h"

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
    "[drop]\ntype = dropout\nrate = 0.3\n"
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

int main(void)
{
    ct_net *net = NULL;
    CHECK(ct_open_string(NET, "gradcheck.ini", &net) == CT_OK);
    ct_status st = ct_prepare(net);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st != CT_OK)
        return ct_test_done();
    /* the one replica's bound network (net->graph holds the shapes only) */
    ct_replica *r = &net->replicas[0];
    ct_graph *g = &r->graph;
    ct_backend *be = r->be;
    int n = g->batch;
    /* the planner and the allocations it predicts must agree, byte for byte */
    ct_memory_plan plan;
    ct_graph_plan(g, be, n, net->cfg.train.optimizer, &plan);
    CHECK_MSG(plan.total == g->allocated, "plan %zu bytes, allocated %zu", plan.total, g->allocated);
    CHECK(plan.activations > 0 && plan.gradients > 0 && plan.params == 2 * g->n_params * sizeof(float));
    /* a fused activation keeps its pre-activation only where its gradient needs it (gelu): tanh
     * and sigmoid run in place and take their gradients from the output, which the finite
     * differences below check */
    static const struct { const char *name; int kept; } fused[] = {
        {"c1", 0}, {"c2", 0}, {"c3", 0}, {"res", 1}, {"fc", 1}, {"out", 0},
    };
    for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) {
        const ct_layer *l = layer_named(g, fused[i].name);
        CHECK_MSG(l && (l->z != l->y) == fused[i].kept && (l->z->data != l->y->data) == fused[i].kept,
                  "[%s] should %skeep its pre-activation", fused[i].name, fused[i].kept ? "" : "not ");
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
    for (size_t i = 0; i < g->n_params; i++)
        params[i] += 0.05f * (ct_rng_uniform(&rng) - 0.5f);

    ct_err err;
    ct_step_scalars fixed = {.lr = 0.0f, .t = 1, .bias1 = 1.0f, .bias2 = 1.0f, .dropout_seed = 99};
    be->ops->set_step(be, &fixed, &err);
    ct_graph_forward(g, n, 1, &err);
    ct_graph_zero_grads(g, n, &err);
    be->ops->loss(be, ct_graph_output(g)->y, &g->labels, ct_graph_output(g)->dy, n, &err);
    ct_graph_backward(g, n, &err);

    /* every parameter of every layer, central differences */
    const float eps = 2e-3f;
    int checked = 0, bad = 0;
    double worst = 0.0;
    for (int li = 0; li < g->n_layers; li++) {
        const ct_layer *l = &g->layers[li];
        size_t count = l->w_count + l->b_count;
        for (size_t k = 0; k < count; k++) {
            size_t p = l->w_off + k;
            float saved = params[p];
            params[p] = saved + eps;
            double up = loss_at(r, n);
            params[p] = saved - eps;
            double down = loss_at(r, n);
            params[p] = saved;
            double numeric = (up - down) / (2.0 * eps);
            double analytic = grads[p];
            double diff = fabs(numeric - analytic);
            double rel = diff / fmax(fabs(numeric) + fabs(analytic), 1e-3);
            checked++;
            if (rel > worst)
                worst = rel;
            if (rel > 0.05 && diff > 2e-4) {
                if (bad++ < 10)
                    fprintf(stderr, "[%s] param %zu: analytic %.6g numeric %.6g\n", l->cfg->name, k,
                            analytic, numeric);
            }
        }
    }
    printf("checked %d parameters, worst relative error %.3g\n", checked, worst);
    CHECK(checked > 300);
    CHECK_MSG(bad == 0, "%d of %d parameter gradients disagree with finite differences", bad, checked);
    ct_close(net);
    return ct_test_done();
}
