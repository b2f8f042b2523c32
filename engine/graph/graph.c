#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "graph/graph_internal.h"

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
    const ct_layer_def *def = l->def;
    if (l->n_in < def->min_inputs || l->n_in > def->max_inputs) {
        const char *type = ct_layer_type_name(l->type);
        if (def->min_inputs == def->max_inputs)
            return ct_fail_at(err, CT_ERR_CONFIG, file, c->line, "[%s] %s needs exactly %d inputs", c->name, type,
                              def->min_inputs);
        return ct_fail_at(err, CT_ERR_CONFIG, file, c->line, "[%s] %s needs %d to %d inputs", c->name, type,
                          def->min_inputs, def->max_inputs);
    }
    for (int k = 0; k < l->n_in; k++)
        l->in_shapes[k] = producer_shape(g, l->in[k]);
    l->in_shape = l->in_shapes[0];
    return CT_OK;
}

/* In a half run every layer is half but those pinned to fp32 and the output layer (its logits feed
 * the fp32 softmax, Keras's float32 output layer); an aliasing flatten has its producer's dtype,
 * as it shares its buffers. The data input is fp32. */
static void assign_dtypes(ct_graph *g)
{
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer *l = &g->layers[i];
        if (g->compute_dtype == CT_DTYPE_F32 || i == g->n_layers - 1 || l->cfg->dtype == CT_LAYER_DTYPE_FP32)
            l->dtype = CT_DTYPE_F32;
        else if (l->def->aliases_input)
            l->dtype = l->in[0] == CT_INPUT_NODE ? CT_DTYPE_F32 : g->layers[l->in[0]].dtype;
        else
            l->dtype = g->compute_dtype;
        l->touches_half = ct_dtype_is_half(l->dtype);
        for (int k = 0; k < l->n_in; k++)
            if (l->in[k] != CT_INPUT_NODE && ct_dtype_is_half(g->layers[l->in[k]].dtype))
                l->touches_half = 1;
    }
}

static ct_status check_output(ct_graph *g, const char *file, ct_err *err)
{
    const ct_layer *last = &g->layers[g->n_layers - 1];
    char a[48];
    ct_shape_text(last->out, a, sizeof a);
    if (last->out.h != 1 || last->out.w != 1)
        return ct_fail_at(err, CT_ERR_CONFIG, file, last->cfg->line,
                          "[%s] the last layer gives %s per sample; the softmax loss needs a flat "
                          "vector of %d class scores", last->cfg->name, a, g->classes);
    g->classes_mismatch = last->out.c != g->classes;
    if (g->classes_mismatch)
        return ct_fail_at(err, CT_ERR_CONFIG, file, last->cfg->line,
                          "[%s] the last layer gives %d values per sample but the data has %d classes",
                          last->cfg->name, last->out.c, g->classes);
    return CT_OK;
}

/* A gradient at a layer's output is worth computing only if some parameter lies at or before the
 * layer: below the first parameterised layers (the data, a flatten or pooling of it) nothing would
 * read it. For an MLP that is the first dense layer's input gradient, a product as large as its
 * forward. Producers come before their consumers in the layer list. */
static void mark_learning(ct_graph *g)
{
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer *l = &g->layers[i];
        l->learns = l->w_count + l->b_count > 0;
        for (int k = 0; k < l->n_in; k++) {
            int p = l->in[k];
            l->wants_dx[k] = p != CT_INPUT_NODE && g->layers[p].learns;
            l->learns |= l->wants_dx[k];
        }
    }
}

/* Each layer's producers and sole reader (ct_layer.src, sole_reader). The last layer's output is
 * the loss's, so it has none. Quadratic in the layers, which number tens. */
static void mark_readers(ct_graph *g)
{
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer *l = &g->layers[i];
        for (int k = 0; k < l->n_in; k++)
            l->src[k] = l->in[k] == CT_INPUT_NODE ? NULL : &g->layers[l->in[k]];
        int reads = 0;
        const ct_layer *reader = NULL;
        for (int j = i + 1; j < g->n_layers; j++)
            for (int k = 0; k < g->layers[j].n_in; k++)
                if (g->layers[j].in[k] == i) {
                    reads++;
                    reader = &g->layers[j];
                }
        l->sole_reader = reads == 1 && i < g->n_layers - 1 ? reader : NULL;
    }
}

ct_status ct_graph_build(ct_graph *g, const ct_config *cfg, ct_shape input, int classes, ct_err *err)
{
    memset(g, 0, sizeof *g);
    g->input = input;
    g->classes = classes;
    g->precision = cfg->train.precision;
    g->compute_dtype = g->precision == CT_PREC_FP16 ? CT_DTYPE_F16 : g->precision == CT_PREC_BF16 ? CT_DTYPE_BF16 : CT_DTYPE_F32;
    g->layers = calloc((size_t)cfg->n_layers, sizeof *g->layers);
    if (!g->layers)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory building the network");
    g->n_layers = cfg->n_layers;
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer *l = &g->layers[i];
        l->cfg = &cfg->layers[i];
        l->type = l->cfg->type;
        l->def = ct_layer_def_of(l->type);
        l->index = i;
        l->act = l->cfg->activation;
        l->dtype = CT_DTYPE_F32;
        if (!l->def)
            return ct_fail_at(err, CT_ERR_INTERNAL, cfg->file, l->cfg->line, "[%s] unknown layer type %d",
                              l->cfg->name, (int)l->type);
        ct_status st = resolve_inputs(g, l, cfg->file, err);
        if (st == CT_OK)
            st = l->def->infer(l, cfg->file, err);
        if (st != CT_OK)
            return st;
        /* each tensor aligned, so cuBLASLt, cuDNN and vector loads see aligned pointers */
        l->w_off = g->param_span;
        l->b_off = ct_align_count(l->w_off + l->w_count, CT_DTYPE_F32);
        g->param_span = ct_align_count(l->b_off + l->b_count, CT_DTYPE_F32);
        g->n_params += l->w_count + l->b_count;
        l->state_off = g->n_state;
        g->n_state += l->state_count;
    }
    assign_dtypes(g);
    mark_learning(g);
    mark_readers(g);
    return check_output(g, cfg->file, err);
}

/* ---- binding memory ---- */

static void *own(ct_graph *g, size_t bytes)
{
    ct_device *dev = g->be->dev;
    g->allocated += bytes;
    if (bytes == 0)
        bytes = 1;
    void **grown = realloc(g->owned, (size_t)(g->n_owned + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    g->owned = grown;
    void *p = dev->ops->alloc(dev, bytes);
    if (p)
        g->owned[g->n_owned++] = p;
    return p;
}

/* A tensor of its own memory; NULL data when out of memory. */
static ct_tensor own_tensor(ct_graph *g, ct_dtype dtype, int n, ct_shape shape)
{
    ct_tensor t = ct_tensor_make(NULL, dtype, n, shape);
    t.data = own(g, ct_tensor_bytes(&t));
    return t;
}

/* A flat tensor of `count` elements of its own memory. */
static ct_tensor own_flat(ct_graph *g, ct_dtype dtype, size_t count)
{
    ct_tensor t = ct_tensor_flat(NULL, dtype, count);
    t.data = own(g, ct_tensor_bytes(&t));
    return t;
}

size_t ct_graph_activation_bytes(const ct_graph *g, int i)
{
    const ct_layer *l = &g->layers[i];
    size_t out = ct_shape_size(l->out) * ct_dtype_size(l->dtype);
    size_t bytes = aliases_input(l) ? 0 : out;
    if (ct_layer_keeps_preactivation(l))
        bytes += out;
    return bytes + aux_bytes(l, 1);
}

enum { TENSORS_PER_LAYER = 11 };  /* y, dy, z, aux, w, b, dw, db, state, w_half, b_half */

/* The next free tensor slot, holding t. */
static ct_tensor *slot(ct_graph *g, ct_tensor t)
{
    ct_tensor *p = &g->tensors[g->n_tensors++];
    *p = t;
    return p;
}

/* A view of `count` elements at `offset` of a flat tensor, (rows, 1, 1, count / rows). */
static ct_tensor *view(ct_graph *g, const ct_tensor *flat, size_t offset, size_t count, int rows)
{
    char *base = (char *)flat->data + offset * ct_dtype_size(flat->dtype);
    return slot(g, ct_tensor_make(base, flat->dtype, rows, (ct_shape){1, 1, (int)(count / (size_t)rows)}));
}

/* ct_layer.dx_accumulate: the first writer of each activation gradient in backward order writes
 * it, the later ones add to it, so no gradient needs clearing before a step. Writers are told apart
 * by the buffer they deliver to (a flatten's is its producer's); aliasing layers deliver nothing.
 * A gradient nobody writes (a layer no other reads, but for the last, whose dy the loss writes)
 * keeps the zeros it was allocated with (plan.c gives it bytes of its own). */
static void mark_gradient_writers(ct_graph *g)
{
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer *l = &g->layers[i];
        for (int k = 0; k < l->n_in; k++) {
            l->dx_accumulate[k] = 0;
            if (!l->dx[k] || aliases_input(l))
                continue;
            int target = grad_owner(g, l->in[k]);
            /* layers after i come before it in backward order, and so do i's inputs before k */
            for (int j = i; j < g->n_layers && !l->dx_accumulate[k]; j++) {
                const ct_layer *w = &g->layers[j];
                if (aliases_input(w))
                    continue;
                for (int q = 0; q < (j == i ? k : w->n_in); q++)
                    if (w->in[q] != CT_INPUT_NODE && grad_owner(g, w->in[q]) == target)
                        l->dx_accumulate[k] = 1;
            }
        }
    }
}

static ct_status bind_layers(ct_graph *g, ct_err *err)
{
    int n = g->batch;
    size_t *offset = calloc((size_t)g->n_layers, sizeof *offset);
    if (!offset)
        return ct_fail(err, CT_ERR_NOMEM, "allocating the activation gradients");
    /* every activation gradient in one block of bytes, each in its layer's dtype, sharing bytes
     * where lifetimes allow */
    g->act_grads = own_flat(g, CT_DTYPE_U8, ct_graph_grad_layout(g, n, offset));
    g->tensors = calloc((size_t)g->n_layers * TENSORS_PER_LAYER, sizeof *g->tensors);
    if (!g->act_grads.data || !g->tensors) {
        free(offset);
        return ct_fail(err, CT_ERR_NOMEM, "allocating the activation gradients");
    }
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer *l = &g->layers[i];
        for (int k = 0; k < l->n_in; k++) {
            int p = l->in[k];
            l->x[k] = p == CT_INPUT_NODE ? &g->x : g->layers[p].y;
            l->dx[k] = l->wants_dx[k] ? g->layers[p].dy : NULL;
        }
        if (aliases_input(l)) {
            l->y = slot(g, ct_tensor_make(l->x[0]->data, l->dtype, n, l->out));
            l->dy = slot(g, ct_tensor_make(g->layers[l->in[0]].dy->data, l->dtype, n, l->out));
        } else {
            l->y = slot(g, own_tensor(g, l->dtype, n, l->out));
            char *grads = (char *)g->act_grads.data + offset[i];
            l->dy = slot(g, ct_tensor_make(grads, l->dtype, n, l->out));
        }
        l->z = ct_layer_keeps_preactivation(l) ? slot(g, own_tensor(g, l->dtype, n, l->out)) : l->y;
        l->aux = NULL;
        if (l->def->aux_count) {
            ct_dtype dtype;
            size_t count = l->def->aux_count(l, n, &dtype);
            l->aux = slot(g, ct_tensor_flat(NULL, dtype, count));
            l->aux->data = own(g, ct_tensor_bytes(l->aux));
        }
        if (!l->y->data || !l->z->data || (l->aux && !l->aux->data)) {
            free(offset);
            return ct_fail(err, CT_ERR_NOMEM, "allocating layer [%s]'s outputs", l->cfg->name);
        }
        int rows = l->type == CT_LAYER_DENSE || l->type == CT_LAYER_CONV2D ? l->out.c : 1;
        l->w = l->w_count ? view(g, &g->params, l->w_off, l->w_count, rows) : NULL;
        l->dw = l->w_count ? view(g, &g->grads, l->w_off, l->w_count, rows) : NULL;
        l->b = l->b_count ? view(g, &g->params, l->b_off, l->b_count, 1) : NULL;
        l->db = l->b_count ? view(g, &g->grads, l->b_off, l->b_count, 1) : NULL;
        l->state = l->state_count ? view(g, &g->state, l->state_off, l->state_count, 1) : NULL;
        int half_w = ct_layer_reads_half_weights(l);
        l->w_half = half_w ? view(g, &g->params_half, l->w_off, l->w_count, rows) : NULL;
        l->b_half = half_w && l->b_count ? view(g, &g->params_half, l->b_off, l->b_count, 1) : NULL;
    }
    free(offset);
    mark_gradient_writers(g);
    return CT_OK;
}

/* Initial parameters on the host, then one upload. */
static ct_status init_params(ct_graph *g, uint64_t seed, ct_err *err)
{
    /* calloc: the padding between tensors starts at zero, and the optimizer keeps it there (its
     * gradient is never written) */
    float *host = calloc(g->param_span + g->n_state + 1, sizeof(float));
    if (!host)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory initialising parameters");
    float *host_state = host + g->param_span;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        if (!l->def->init)
            continue;
        /* one stream per layer: a layer's initial weights do not depend on the layers before it */
        ct_rng rng = {ct_hash3(seed, 0x494e4954ULL, (uint64_t)i)};
        l->def->init(l, host + l->w_off, l->b_count ? host + l->b_off : NULL,
                     l->state_count ? host_state + l->state_off : NULL, &rng);
    }
    ct_device *dev = g->be->dev;
    ct_status st = ct_graph_set_params(g, host, err);
    if (st == CT_OK && g->n_state)
        st = dev->ops->upload(dev, g->state.data, host_state, ct_tensor_bytes(&g->state), err);
    free(host);
    return st;
}

ct_status ct_graph_set_params(ct_graph *g, const float *host, ct_err *err)
{
    ct_device *dev = g->be->dev;
    ct_status st = dev->ops->upload(dev, g->params.data, host, ct_tensor_bytes(&g->params), err);
    if (st != CT_OK || !g->params_half.data)
        return st;
    /* rounded on the host with the kernels' rounding (base/half.h), then one upload */
    uint16_t *half = malloc(g->param_span * sizeof *half + 1);
    if (!half)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the half copy of %zu parameters", g->param_span);
    for (size_t i = 0; i < g->param_span; i++)
        half[i] = g->compute_dtype == CT_DTYPE_F16 ? ct_f16_from_f32(host[i]) : ct_bf16_from_f32(host[i]);
    st = dev->ops->upload(dev, g->params_half.data, half, ct_tensor_bytes(&g->params_half), err);
    free(half);
    return st;
}

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* The plan's breakdown, for the messages of ct_graph_bind's refusals. */
static void plan_text(const ct_memory_plan *p, char *buf, size_t n)
{
    snprintf(buf, n,
             "%.1f MiB (parameters and gradients %.1f, optimizer %.1f, activations %.1f, activation gradients %.1f, "
             "workspace %.1f, inputs %.1f)",
             mib(p->total), mib(p->params + p->params_half), mib(p->optimizer), mib(p->activations),
             mib(p->gradients), mib(p->workspace + p->backend), mib(p->inputs));
}

/* An allocation failed while binding: err holds what failed; the message then names the device,
 * the batch and the plan, and says what to do. */
static ct_status explain_oom(ct_graph *g, ct_backend *be, int batch, ct_optimizer opt, ct_err *err)
{
    ct_memory_plan p;
    ct_graph_plan(g, be, batch, opt, &p);
    ct_devmem_usage u;
    be->dev->ops->memory_usage(be->dev, &u);
    char what[sizeof err->msg], plan[320], cap[64] = "";
    snprintf(what, sizeof what, "%s", err->msg);
    plan_text(&p, plan, sizeof plan);
    if (u.cap)
        snprintf(cap, sizeof cap, " of the memory = limit:%.0f MiB", mib(u.cap));
    return ct_fail(err, CT_ERR_NOMEM,
                   "out of memory on %s at batch %d (%s): the plan needs %s, and %.1f MiB%s were in use when it ran "
                   "out; use batch = max to train the largest batch that fits, or lower the batch",
                   be->dev->label, batch, what, plan, mib(u.in_use), cap);
}

ct_status ct_graph_bind(ct_graph *g, ct_backend *be, int batch, ct_optimizer opt, uint64_t seed, size_t limit,
                        ct_err *err)
{
    if (limit) {
        ct_memory_plan p;
        ct_graph_plan(g, be, batch, opt, &p);
        if (p.total > limit) {
            char plan[320];
            plan_text(&p, plan, sizeof plan);
            return ct_fail(err, CT_ERR_NOMEM,
                           "memory = limit:%.0f MiB is too small: batch %d needs %s on %s; raise the limit, lower "
                           "the batch, or use batch = max to train the largest batch within the limit",
                           mib(limit), batch, plan, be->dev->label);
        }
    }
    /* a capture of a step on this network (at this address) from an earlier binding holds buffers
     * that are gone or about to be replaced */
    be->ops->forget(be, g);
    g->be = be;
    g->batch = batch;
    g->params = own_flat(g, CT_DTYPE_F32, g->param_span);
    g->grads = own_flat(g, CT_DTYPE_F32, g->param_span);
    g->opt_m = has_m(opt) ? own_flat(g, CT_DTYPE_F32, g->param_span) : ct_tensor_flat(NULL, CT_DTYPE_F32, 0);
    g->opt_v = has_v(opt) ? own_flat(g, CT_DTYPE_F32, g->param_span) : ct_tensor_flat(NULL, CT_DTYPE_F32, 0);
    g->state = own_flat(g, CT_DTYPE_F32, g->n_state);
    g->params_half = g->compute_dtype != CT_DTYPE_F32 ? own_flat(g, g->compute_dtype, g->param_span) : ct_tensor_flat(NULL, g->compute_dtype, 0);
    g->x = own_tensor(g, CT_DTYPE_F32, batch, g->input);
    g->labels = own_tensor(g, CT_DTYPE_I32, batch, (ct_shape){1, 1, 1});
    if (!g->params.data || !g->grads.data || !g->state.data || !g->x.data || !g->labels.data ||
        (has_m(opt) && !g->opt_m.data) || (has_v(opt) && !g->opt_v.data) ||
        (g->compute_dtype != CT_DTYPE_F32 && !g->params_half.data)) {
        ct_fail(err, CT_ERR_NOMEM, "allocating %zu parameters and their optimizer state", g->n_params);
        return explain_oom(g, be, batch, opt, err);
    }
    ct_status st = bind_layers(g, err);
    if (st == CT_OK) {
        size_t workspace, scratch;
        ct_graph_backend_sizes(g, be, batch, &workspace, &scratch);
        st = be->ops->reserve(be, workspace, scratch, ct_tensor_bytes(&g->x), ct_tensor_bytes(&g->labels), err);
        g->allocated += workspace + scratch;
    }
    if (st == CT_ERR_NOMEM)
        return explain_oom(g, be, batch, opt, err);
    return st == CT_OK ? init_params(g, seed, err) : st;
}

void ct_graph_free(ct_graph *g)
{
    if (g->be) {
        /* captured steps on these buffers must never be replayed, nor another network that comes
         * to live at this address be taken for this one */
        g->be->ops->forget(g->be, g);
        for (int i = 0; i < g->n_owned; i++)
            g->be->dev->ops->free(g->be->dev, g->owned[i]);
    }
    free(g->owned);
    free(g->tensors);
    free(g->layers);
    memset(g, 0, sizeof *g);
}

/* ---- passes ---- */

ct_status ct_graph_forward_each(ct_graph *g, int n, int training, ct_layer_done_fn done, void *ctx, ct_err *err)
{
    for (int i = 0; i < g->n_layers; i++) {
        ct_layer *l = &g->layers[i];
        ct_status st = g->be->ops->layers[l->type]->forward(g->be, l, n, training, err);
        if (st == CT_OK && done)
            st = done(ctx, i, err);
        if (st != CT_OK)
            return st;
    }
    return CT_OK;
}

ct_status ct_graph_forward(ct_graph *g, int n, int training, ct_err *err)
{
    return ct_graph_forward_each(g, n, training, NULL, NULL, err);
}

/* Under sync_bn a layer of batch statistics averages figures over the replicas inside its
 * backward: it runs even for no samples, so that the others' collectives find this replica there. */
static int backward_is_collective(const ct_graph *g, const ct_layer *l)
{
    return l->def->batch_statistics && g->be->bn_sync.mean;
}

ct_status ct_graph_backward_each(ct_graph *g, int n, ct_layer_done_fn done, void *ctx, ct_err *err)
{
    ct_status st = CT_OK;
    /* no layer writes anything for no samples: their gradients are zero (a replica whose share
     * of a small batch is empty still takes part in the all-reduce) */
    if (n == 0) {
        ct_device *dev = g->be->dev;
        st = dev->ops->zero(dev, g->grads.data, ct_tensor_bytes(&g->grads), err);
    }
    for (int i = g->n_layers - 1; i >= 0 && st == CT_OK; i--) {
        ct_layer *l = &g->layers[i];
        if (n > 0 || backward_is_collective(g, l))
            st = g->be->ops->layers[l->type]->backward(g->be, l, n, err);
        if (st == CT_OK && done)
            st = done(ctx, i, err);
    }
    return st;
}

ct_status ct_graph_backward(ct_graph *g, int n, ct_err *err)
{
    return ct_graph_backward_each(g, n, NULL, NULL, err);
}
