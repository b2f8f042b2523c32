#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

/* ---- building: inputs, shapes, parameter offsets ---- */

static int find_layer(const ct_graph *g, int before, const char *name)
{
    for (int i = 0; i < before; i++)
        if (strcmp(g->layers[i].cfg->name, name) == 0)
            return i;
    return -2;
}

static ct_shape producer_shape(const ct_graph *g, int producer)
{
    return producer == CT_INPUT_NODE ? g->input : g->layers[producer].out;
}

static ct_status resolve_inputs(ct_graph *g, ct_layer *l, const char *file, ct_err *err)
{
    const ct_layer_config *c = l->cfg;
    if (c->n_inputs == 0) {
        l->in[0] = l->index == 0 ? CT_INPUT_NODE : l->index - 1;
        l->n_in = 1;
    } else {
        for (int k = 0; k < c->n_inputs; k++) {
            int p = find_layer(g, l->index, c->inputs[k]);
            if (p == -2) /* the config loader checks names; this guards direct use */
                return ct_fail_at(err, CT_ERR_CONFIG, file, c->inputs_line,
                                  "[%s] input '%s' is not an earlier layer", c->name, c->inputs[k]);
            l->in[k] = p;
        }
        l->n_in = c->n_inputs;
    }
    if (l->type == CT_LAYER_ADD && l->n_in != 2)
        return ct_fail_at(err, CT_ERR_CONFIG, file, c->line, "[%s] add needs exactly 2 inputs", c->name);
    l->in_shape = producer_shape(g, l->in[0]);
    return CT_OK;
}

static ct_status check_shapes(const ct_graph *g, const ct_layer *l, const char *file, ct_err *err)
{
    const ct_layer_config *c = l->cfg;
    char a[48], b[48];
    if (l->type == CT_LAYER_DENSE && (l->in_shape.h != 1 || l->in_shape.w != 1)) {
        ct_shape_text(l->in_shape, a, sizeof a);
        return ct_fail_at(err, CT_ERR_CONFIG, file, c->line,
                          "[%s] dense needs a flat input but gets %s; put a flatten layer before it",
                          c->name, a);
    }
    if (l->type == CT_LAYER_ADD) {
        ct_shape s1 = producer_shape(g, l->in[1]);
        if (s1.h != l->in_shape.h || s1.w != l->in_shape.w || s1.c != l->in_shape.c) {
            ct_shape_text(l->in_shape, a, sizeof a);
            ct_shape_text(s1, b, sizeof b);
            return ct_fail_at(err, CT_ERR_CONFIG, file, c->inputs_line ? c->inputs_line : c->line,
                              "[%s] cannot add %s ('%s') and %s ('%s'): shapes differ", c->name, a,
                              c->inputs[0], b, c->inputs[1]);
        }
    }
    return CT_OK;
}

static ct_status check_output(const ct_graph *g, const char *file, ct_err *err)
{
    const ct_layer *last = &g->layers[g->n_layers - 1];
    char a[48];
    ct_shape_text(last->out, a, sizeof a);
    if (last->out.h != 1 || last->out.w != 1)
        return ct_fail_at(err, CT_ERR_CONFIG, file, last->cfg->line,
                          "[%s] the last layer gives %s per sample; the softmax loss needs a flat "
                          "vector of %d class scores", last->cfg->name, a, g->classes);
    if (last->out.c != g->classes)
        return ct_fail_at(err, CT_ERR_CONFIG, file, last->cfg->line,
                          "[%s] the last layer gives %d values per sample but the data has %d classes",
                          last->cfg->name, last->out.c, g->classes);
    return CT_OK;
}

ct_status ct_graph_build(ct_graph *g, const ct_config *cfg, ct_shape input, int classes, ct_err *err)
{
    memset(g, 0, sizeof *g);
    g->input = input;
    g->classes = classes;
    g->layers = calloc((size_t)cfg->n_layers, sizeof *g->layers);
    if (!g->layers)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory building the network");
    g->n_layers = cfg->n_layers;
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer *l = &g->layers[i];
        l->cfg = &cfg->layers[i];
        l->type = l->cfg->type;
        l->index = i;
        l->act = l->cfg->activation;
        l->dtype = CT_DTYPE_F32;
        ct_status st = resolve_inputs(g, l, cfg->file, err);
        if (st == CT_OK)
            st = check_shapes(g, l, cfg->file, err);
        if (st == CT_OK)
            st = ct_layer_kind_of(l->type)->infer(l, cfg->file, err);
        if (st != CT_OK)
            return st;
        l->w_off = g->n_params;
        l->b_off = l->w_off + l->w_count;
        g->n_params = l->b_off + l->b_count;
        l->state_off = g->n_state;
        g->n_state += l->state_count;
    }
    return check_output(g, cfg->file, err);
}

/* ---- binding memory ---- */

static void *own(ct_graph *g, size_t bytes)
{
    g->allocated += bytes;
    if (bytes == 0)
        bytes = 1;
    void **grown = realloc(g->owned, (size_t)(g->n_owned + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    g->owned = grown;
    void *p = g->be->ops->alloc(g->be, bytes);
    if (p)
        g->owned[g->n_owned++] = p;
    return p;
}

/* flatten only reinterprets its input, so it shares the producer's buffers */
static int aliases_input(const ct_layer *l)
{
    return l->type == CT_LAYER_FLATTEN && l->in[0] != CT_INPUT_NODE;
}

size_t ct_graph_activation_bytes(const ct_graph *g, int i)
{
    const ct_layer *l = &g->layers[i];
    size_t out = ct_shape_size(l->out) * sizeof(float);
    size_t bytes = aliases_input(l) ? 0 : out;
    if (ct_layer_keeps_preactivation(l))
        bytes += out;
    const ct_layer_kind *kind = ct_layer_kind_of(l->type);
    if (kind->aux_bytes)
        bytes += kind->aux_bytes(l, 1);
    return bytes;
}

static ct_status bind_layers(ct_graph *g, ct_err *err)
{
    size_t n = (size_t)g->batch, offset = 0;
    size_t max_out = 0, workspace = 0;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        if (!aliases_input(l))
            g->act_grad_floats += n * ct_shape_size(l->out);
    }
    g->act_grads = own(g, g->act_grad_floats * sizeof(float));
    if (!g->act_grads)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for activation gradients");
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer *l = &g->layers[i];
        size_t out = n * ct_shape_size(l->out);
        for (int k = 0; k < l->n_in; k++) {
            int p = l->in[k];
            l->x[k] = p == CT_INPUT_NODE ? g->x : g->layers[p].y;
            l->dx[k] = p == CT_INPUT_NODE ? NULL : g->layers[p].dy;
        }
        if (aliases_input(l)) {
            l->y = (float *)l->x[0];
            l->dy = l->dx[0];
        } else {
            l->y = own(g, out * sizeof(float));
            l->dy = g->act_grads + offset;
            offset += out;
        }
        l->z = ct_layer_keeps_preactivation(l) ? own(g, out * sizeof(float)) : l->y;
        const ct_layer_kind *kind = ct_layer_kind_of(l->type);
        l->aux = kind->aux_bytes ? own(g, kind->aux_bytes(l, g->batch)) : NULL;
        if (!l->y || !l->z || (kind->aux_bytes && !l->aux))
            return ct_fail(err, CT_ERR_NOMEM, "out of memory for layer [%s] at batch %d", l->cfg->name, g->batch);
        l->w = l->w_count ? g->params + l->w_off : NULL;
        l->dw = l->w_count ? g->grads + l->w_off : NULL;
        l->b = l->b_count ? g->params + l->b_off : NULL;
        l->db = l->b_count ? g->grads + l->b_off : NULL;
        l->state = l->state_count ? g->state + l->state_off : NULL;
        if (out > max_out)
            max_out = out;
        size_t ws = g->be->ops->workspace_bytes(g->be, l, g->batch);
        if (ws > workspace)
            workspace = ws;
    }
    g->be->workspace = own(g, workspace);
    g->be->workspace_size = workspace;
    g->be->scratch = own(g, max_out * sizeof(float));
    if (!g->be->workspace || !g->be->scratch)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the %zu-byte workspace", workspace);
    return CT_OK;
}

/* Initial parameters on the host, then one upload. */
static ct_status init_params(ct_graph *g, uint64_t seed, ct_err *err)
{
    float *host = calloc(g->n_params + g->n_state + 1, sizeof(float));
    if (!host)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory initialising parameters");
    float *host_state = host + g->n_params;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        const ct_layer_kind *kind = ct_layer_kind_of(l->type);
        if (!kind->init)
            continue;
        /* one stream per layer: a layer's initial weights do not depend on the layers before it */
        ct_rng rng = {ct_hash3(seed, 0x494e4954ULL, (uint64_t)i)};
        kind->init(l, host + l->w_off, l->b_count ? host + l->b_off : NULL,
                   l->state_count ? host_state + l->state_off : NULL, &rng);
    }
    ct_status st = g->be->ops->upload(g->be, g->params, host, g->n_params * sizeof(float), err);
    if (st == CT_OK && g->n_state)
        st = g->be->ops->upload(g->be, g->state, host_state, g->n_state * sizeof(float), err);
    free(host);
    return st;
}

static int has_m(ct_optimizer opt) { return opt != CT_OPT_SGD; }
static int has_v(ct_optimizer opt) { return opt == CT_OPT_ADAM || opt == CT_OPT_ADAMW; }

void ct_graph_plan(const ct_graph *g, ct_backend *be, int batch, ct_optimizer opt, ct_memory_plan *plan)
{
    size_t n = (size_t)batch, pbytes = g->n_params * sizeof(float), max_out = 0, workspace = 0;
    memset(plan, 0, sizeof *plan);
    plan->params = 2 * pbytes;
    plan->optimizer = (size_t)(has_m(opt) + has_v(opt)) * pbytes;
    plan->state = g->n_state * sizeof(float);
    plan->inputs = n * ct_shape_size(g->input) * sizeof(float) + n * sizeof(int32_t);
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        size_t out = n * ct_shape_size(l->out) * sizeof(float);
        const ct_layer_kind *kind = ct_layer_kind_of(l->type);
        if (!aliases_input(l)) {
            plan->activations += out;
            plan->gradients += out;
        }
        if (ct_layer_keeps_preactivation(l))
            plan->activations += out;
        if (kind->aux_bytes)
            plan->activations += kind->aux_bytes(l, batch);
        if (out > max_out)
            max_out = out;
        size_t ws = be->ops->workspace_bytes(be, l, batch);
        if (ws > workspace)
            workspace = ws;
    }
    plan->workspace = workspace + max_out;
    plan->total = plan->params + plan->optimizer + plan->state + plan->inputs + plan->activations +
                  plan->gradients + plan->workspace;
}

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

ct_status ct_graph_bind(ct_graph *g, ct_backend *be, int batch, ct_optimizer opt, uint64_t seed, size_t limit,
                        ct_err *err)
{
    if (limit) {
        ct_memory_plan p;
        ct_graph_plan(g, be, batch, opt, &p);
        if (p.total > limit)
            return ct_fail(err, CT_ERR_NOMEM,
                           "memory = limit:%.0f MiB is too small: batch %d needs %.1f MiB (parameters and "
                           "gradients %.1f, optimizer %.1f, activations %.1f, activation gradients %.1f, "
                           "workspace %.1f, inputs %.1f); raise the limit or lower the batch",
                           mib(limit), batch, mib(p.total), mib(p.params), mib(p.optimizer), mib(p.activations),
                           mib(p.gradients), mib(p.workspace), mib(p.inputs));
    }
    g->be = be;
    g->batch = batch;
    size_t pbytes = g->n_params * sizeof(float);
    g->params = own(g, pbytes);
    g->grads = own(g, pbytes);
    g->opt_m = has_m(opt) ? own(g, pbytes) : NULL;
    g->opt_v = has_v(opt) ? own(g, pbytes) : NULL;
    g->state = own(g, g->n_state * sizeof(float));
    g->x = own(g, (size_t)batch * ct_shape_size(g->input) * sizeof(float));
    g->labels = own(g, (size_t)batch * sizeof(int32_t));
    if (!g->params || !g->grads || !g->state || !g->x || !g->labels ||
        (has_m(opt) && !g->opt_m) || (has_v(opt) && !g->opt_v))
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for %zu parameters at batch %d", g->n_params, batch);
    ct_status st = bind_layers(g, err);
    if (st == CT_OK)
        st = be->ops->input_reserve(be, (size_t)batch * ct_shape_size(g->input) * sizeof(float),
                                    (size_t)batch * sizeof(int32_t), err);
    return st == CT_OK ? init_params(g, seed, err) : st;
}

void ct_graph_free(ct_graph *g)
{
    if (g->be)
        for (int i = 0; i < g->n_owned; i++)
            g->be->ops->free(g->be, g->owned[i]);
    if (g->be) {
        g->be->workspace = NULL;
        g->be->scratch = NULL;
    }
    free(g->owned);
    free(g->layers);
    memset(g, 0, sizeof *g);
}

/* ---- passes ---- */

ct_status ct_graph_forward(ct_graph *g, int n, int training, ct_err *err)
{
    for (int i = 0; i < g->n_layers; i++) {
        ct_status st = g->be->ops->forward(g->be, &g->layers[i], n, training, err);
        if (st != CT_OK)
            return st;
    }
    return CT_OK;
}

ct_status ct_graph_zero_grads(ct_graph *g, int n, ct_err *err)
{
    (void)n; /* the whole block: cheap next to a step, and layout stays batch-independent */
    ct_status st = g->be->ops->zero(g->be, g->act_grads, g->act_grad_floats * sizeof(float), err);
    if (st == CT_OK)
        st = g->be->ops->zero(g->be, g->grads, g->n_params * sizeof(float), err);
    return st;
}

ct_status ct_graph_backward(ct_graph *g, int n, ct_err *err)
{
    for (int i = g->n_layers - 1; i >= 0; i--) {
        ct_status st = g->be->ops->backward(g->be, &g->layers[i], n, err);
        if (st != CT_OK)
            return st;
    }
    return CT_OK;
}
