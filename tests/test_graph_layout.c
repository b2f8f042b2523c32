/* The bound network's memory layout (engine/graph/graph.c) on the CPU backend, with every layer
 * type and sizes that are no multiple of 64 floats: every parameter, gradient and optimizer-moment
 * tensor and every activation gradient starts CT_TENSOR_ALIGN (256) bytes aligned, the tensors do
 * not overlap, the padding between them starts zero and is counted by the memory plan, and a
 * checkpoint holds the parameters packed per tensor (so it does not depend on the padding) and
 * restores them to the same places. */
#include <stdint.h>
#include <string.h>

#include "api/handle.h"
#include "checkpoint/snapshot.h"
#include "cpu/cpu_backend.h"
#include "tests/test_util.h"

static const char *const NET =
    "[data]\nformat = synthetic\nshape = 11, 9, 3\nclasses = 7\ncount = 64\ntest_count = 0\n"
    "[train]\nbatch = 5\noptimizer = adam\ndevices = cpu\nseed = 11\n"
    "[c1]\ntype = conv2d\nfilters = 5\nsize = 3\npadding = same\nactivation = relu\n"
    "[bn]\ntype = batchnorm\n"
    "[act]\ntype = activation\nactivation = tanh\n"
    "[mp]\ntype = maxpool\nsize = 2\n"
    "[c2]\ntype = conv2d\nfilters = 5\nsize = 3\npadding = same\nbias = off\n"
    "[res]\ntype = add\ninputs = mp, c2\nactivation = relu\n"
    "[ap]\ntype = avgpool\nsize = 2\nstride = 1\n"
    "[drop]\ntype = dropout\nrate = 0.1\n"
    "[flat]\ntype = flatten\n"
    "[d1]\ntype = dense\nunits = 13\nactivation = gelu\n"
    "[d2]\ntype = dense\nunits = 7\n";

static int aligned(const void *p)
{
    return (uintptr_t)p % CT_TENSOR_ALIGN == 0;
}

/* The layer's parameter tensors and their gradients and moments at 256 bytes; offsets in order. */
static void check_parameters(const ct_graph *g)
{
    CHECK(aligned(g->params.data) && aligned(g->grads.data) && aligned(g->opt_m.data) && aligned(g->opt_v.data));
    CHECK(g->params.count == g->param_span && g->grads.count == g->param_span && g->opt_m.count == g->param_span &&
          g->opt_v.count == g->param_span);
    size_t end = 0, packed = 0, tensors = 0;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        const char *name = l->cfg->name;
        const ct_tensor *own[4] = {l->w, l->dw, l->b, l->db};
        const size_t offset[4] = {l->w_off, l->w_off, l->b_off, l->b_off};
        const size_t count[4] = {l->w_count, l->w_count, l->b_count, l->b_count};
        for (int t = 0; t < 4; t++) {
            CHECK_MSG((own[t] != NULL) == (count[t] > 0), "[%s] tensor %d bound %s", name, t, own[t] ? "yes" : "no");
            if (!own[t])
                continue;
            tensors++;
            CHECK_MSG(aligned(own[t]->data), "[%s] tensor %d at %p is not %d-byte aligned", name, t, own[t]->data,
                      CT_TENSOR_ALIGN);
            CHECK_MSG(own[t]->count == count[t], "[%s] tensor %d has %zu values, not %zu", name, t, own[t]->count,
                      count[t]);
            /* the moments are laid out as the parameters */
            const char *m = (const char *)g->opt_m.data + offset[t] * sizeof(float);
            const char *v = (const char *)g->opt_v.data + offset[t] * sizeof(float);
            CHECK_MSG(aligned(m) && aligned(v), "[%s] tensor %d's moments are not aligned", name, t);
        }
        /* weights, then biases, each after the end of the one before */
        if (l->w_count) {
            CHECK_MSG(l->w_off >= end, "[%s] weights at %zu overlap what ends at %zu", name, l->w_off, end);
            end = l->w_off + l->w_count;
        }
        if (l->b_count) {
            CHECK_MSG(l->b_off >= end, "[%s] biases at %zu overlap what ends at %zu", name, l->b_off, end);
            end = l->b_off + l->b_count;
        }
        packed += l->w_count + l->b_count;
    }
    CHECK(end <= g->param_span);
    CHECK_MSG(packed == g->n_params, "n_params %zu, the layers hold %zu", g->n_params, packed);
    /* at most one 64-float block of padding per tensor: alignment, not waste */
    CHECK_MSG(g->param_span < g->n_params + 64 * tensors / 2 + 64, "span %zu for %zu values in %zu tensors",
              g->param_span, g->n_params, tensors / 2);
    CHECK_MSG(g->param_span > g->n_params, "the test's sizes should need padding (span %zu, values %zu)",
              g->param_span, g->n_params);
    printf("%zu parameter values in %zu tensors, span %zu\n", g->n_params, tensors / 2, g->param_span);
}

/* The layer whose gradient buffer layer i's dy is: a flatten's is its producer's. */
static int owner(const ct_graph *g, int i)
{
    while (g->layers[i].def->aliases_input && g->layers[i].in[0] != CT_INPUT_NODE)
        i = g->layers[i].in[0];
    return i;
}

/* The last layer index at which layer i's gradient is written in the backward pass (its last
 * reader of the layer's output, n_layers for the output layer, whose gradient the loss writes);
 * -1 when nothing writes it. */
static int last_write(const ct_graph *g, int i)
{
    int last = owner(g, g->n_layers - 1) == i ? g->n_layers : -1;
    for (int j = 0; j < g->n_layers; j++)
        for (int k = 0; k < g->layers[j].n_in && !g->layers[j].def->aliases_input; k++)
            if (g->layers[j].in[k] != CT_INPUT_NODE && owner(g, g->layers[j].in[k]) == i && j > last)
                last = j;
    return last;
}

/* Every activation gradient at 256 bytes and inside the block; a flatten shares its producer's;
 * two gradients share bytes only when the backward pass never holds both (layer i's lives from
 * its last writer down to layer i); and sharing happens (the block is smaller than the
 * gradients end to end). */
static void check_activation_gradients(const ct_graph *g)
{
    const char *block = g->act_grads.data, *block_end = block + ct_tensor_bytes(&g->act_grads);
    size_t end_to_end = 0;
    CHECK(aligned(block));
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *a = &g->layers[i];
        const char *dy = a->dy->data;
        CHECK_MSG(aligned(dy), "[%s] dy at %p is not %d-byte aligned", a->cfg->name, a->dy->data, CT_TENSOR_ALIGN);
        if (a->def->aliases_input) {
            CHECK_MSG(dy == g->layers[a->in[0]].dy->data, "[%s] dy is not its producer's", a->cfg->name);
            continue;
        }
        end_to_end += ct_tensor_bytes(a->dy);
        CHECK_MSG(dy >= block && dy + ct_tensor_bytes(a->dy) <= block_end, "[%s] dy is outside the block",
                  a->cfg->name);
        for (int j = i + 1; j < g->n_layers; j++) {
            const ct_layer *b = &g->layers[j];
            if (b->def->aliases_input)
                continue;
            const char *other = b->dy->data;
            int bytes_meet = dy < other + ct_tensor_bytes(b->dy) && other < dy + ct_tensor_bytes(a->dy);
            int wa = last_write(g, i), wb = last_write(g, j);
            /* lifetimes [i, wa] and [j, wb]; one never written is read as zeros all along */
            int times_meet = wa < 0 || wb < 0 || j <= wa;
            CHECK_MSG(!(bytes_meet && times_meet), "[%s] and [%s] share gradient bytes while both are live",
                      a->cfg->name, b->cfg->name);
        }
    }
    CHECK_MSG(ct_tensor_bytes(&g->act_grads) < end_to_end, "gradient block %zu bytes, end to end %zu",
              ct_tensor_bytes(&g->act_grads), end_to_end);
    printf("activation gradients: %zu bytes shared, %zu end to end\n", ct_tensor_bytes(&g->act_grads), end_to_end);
}

/* The values of the layers' parameter tensors in layer order, weights then biases. */
static float *packed_params(const ct_graph *g)
{
    float *out = malloc((g->n_params ? g->n_params : 1) * sizeof(float)), *p = out;
    const float *span = ct_f32(&g->params);
    for (int i = 0; out && i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        memcpy(p, span + l->w_off, l->w_count * sizeof(float));
        p += l->w_count;
        memcpy(p, span + l->b_off, l->b_count * sizeof(float));
        p += l->b_count;
    }
    return out;
}

/* 1 when every value outside the parameter tensors is zero. */
static int padding_zero(const ct_graph *g, const float *span)
{
    size_t at = 0;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        for (; at < l->w_off; at++)
            if (span[at] != 0.0f)
                return 0;
        at = l->w_off + l->w_count;
        for (; l->b_count && at < l->b_off; at++)
            if (span[at] != 0.0f)
                return 0;
        if (l->b_count)
            at = l->b_off + l->b_count;
    }
    for (; at < g->param_span; at++)
        if (span[at] != 0.0f)
            return 0;
    return 1;
}

/* A checkpoint stores the parameters packed (the format's parameter count is the layers' sum) and
 * puts them back at the aligned offsets. */
static void check_checkpoint(ct_net *net, ct_graph *g)
{
    ct_err err = {0};
    ct_checkpoint ck;
    float *want = packed_params(g);
    ct_status st = ct_run_snapshot(&net->run, -1.0, &ck, &err);
    CHECK_MSG(st == CT_OK, "snapshot: %s", err.msg);
    if (st != CT_OK || !want) {
        ct_checkpoint_free(&ck);
        free(want);
        return;
    }
    CHECK(ck.n_params == g->n_params && ck.m && ck.v);
    CHECK_MSG(memcmp(ck.params, want, g->n_params * sizeof(float)) == 0, "the checkpoint's parameters are not the "
              "layers' tensors packed in order");
    /* the file itself: parsed back, the same values */
    size_t len = ct_checkpoint_size(&ck);
    uint8_t *buf = malloc(len);
    ct_checkpoint back;
    memset(&back, 0, sizeof back);
    if (buf) {
        ct_checkpoint_serialize(&ck, buf);
        st = ct_checkpoint_parse(buf, len, "layout.ckpt", &back, &err);
        CHECK_MSG(st == CT_OK, "parse: %s", err.msg);
        CHECK(st != CT_OK || (back.n_params == g->n_params &&
                              memcmp(back.params, want, g->n_params * sizeof(float)) == 0));
    }
    /* scramble the bound tensors (padding included), restore: every value back in its place,
     * the padding zero again */
    float *params = ct_f32(&g->params), *m = ct_f32(&g->opt_m);
    for (size_t i = 0; i < g->param_span; i++)
        params[i] = m[i] = 7.0f;
    st = ct_run_restore(&net->run, st == CT_OK && buf ? &back : &ck, "layout.ckpt", &err);
    CHECK_MSG(st == CT_OK, "restore: %s", err.msg);
    float *got = packed_params(g);
    CHECK(got && memcmp(got, want, g->n_params * sizeof(float)) == 0);
    CHECK_MSG(padding_zero(g, params), "restore left the padding between parameter tensors non-zero");
    CHECK_MSG(padding_zero(g, m), "restore left the padding between moment tensors non-zero");
    free(got);
    free(buf);
    ct_checkpoint_free(&back);
    ct_checkpoint_free(&ck);
    free(want);
}

static const ct_layer *layer_named(const ct_graph *g, const char *name)
{
    for (int i = 0; i < g->n_layers; i++)
        if (strcmp(g->layers[i].cfg->name, name) == 0)
            return &g->layers[i];
    CHECK_MSG(0, "no layer [%s]", name);
    return NULL;
}

/* Producers and sole readers (ct_layer.src, sole_reader), which a backend's fusions read: mp feeds
 * both c2 and res, the last layer feeds only the loss. None of NET's relus is read by a max pool
 * alone (c1 by bn, res by ap), so the CPU folds none of their gradients into a reader. */
static void check_readers(const ct_graph *g)
{
    const ct_layer *c1 = layer_named(g, "c1"), *bn = layer_named(g, "bn"), *mp = layer_named(g, "mp"),
                   *c2 = layer_named(g, "c2"), *res = layer_named(g, "res"), *ap = layer_named(g, "ap"),
                   *d2 = layer_named(g, "d2");
    if (!c1 || !bn || !mp || !c2 || !res || !ap || !d2)
        return;
    CHECK(c1->src[0] == NULL && bn->src[0] == c1 && res->src[0] == mp && res->src[1] == c2);
    CHECK(c1->sole_reader == bn && c2->sole_reader == res && res->sole_reader == ap);
    CHECK_MSG(mp->sole_reader == NULL, "mp has two readers, yet sole_reader is [%s]",
              mp->sole_reader ? mp->sole_reader->cfg->name : "");
    CHECK(d2->sole_reader == NULL);
    for (int i = 0; i < g->n_layers; i++)
        CHECK_MSG(!ct_cpu_relu_grad_in_reader(&g->layers[i]), "[%s] folds its relu", g->layers[i].cfg->name);
}

int main(void)
{
    ct_net *net = NULL;
    ct_status st = ct_open_string(NET, "layout.ini", &net);
    if (st == CT_OK)
        st = ct_prepare(net);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return ct_test_done();
    }
    ct_graph *g = &net->run.replicas[0].graph;
    ct_backend *be = net->run.replicas[0].be;
    CHECK(be->dev->host_memory);  /* the test reads the tensors directly */
    check_parameters(g);
    check_activation_gradients(g);
    check_readers(g);
    CHECK_MSG(padding_zero(g, ct_f32(&g->params)), "initial parameters have non-zero padding");

    /* the plan counts the padding: it equals what binding allocated */
    ct_memory_plan plan;
    ct_graph_plan(g, be, g->batch, net->run.cfg.train.optimizer, &plan);
    /* what binding asked for, then what the device's allocator counts (each allocation rounded up, the
     * backend's own buffers) */
    CHECK_MSG(plan.total - plan.padding - plan.backend == g->allocated, "plan %zu bytes, allocated %zu",
              plan.total - plan.padding - plan.backend, g->allocated);
    ct_devmem_usage usage;
    be->dev->ops->memory_usage(be->dev, &usage);
    CHECK_MSG(plan.total == usage.in_use, "plan %zu bytes, the allocator counts %zu in use", plan.total, usage.in_use);
    CHECK(plan.params == 2 * ct_tensor_bytes(&g->params) && plan.gradients == ct_tensor_bytes(&g->act_grads));

    /* a few training steps keep the padding of the parameters and moments zero */
    for (int k = 0; k < 3 && st == CT_OK; k++)
        st = ct_train_step(&net->run, g->batch, 0.01f, &net->run.err);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    CHECK_MSG(padding_zero(g, ct_f32(&g->params)) && padding_zero(g, ct_f32(&g->opt_m)) &&
              padding_zero(g, ct_f32(&g->opt_v)), "training made the padding non-zero");

    check_checkpoint(net, g);
    ct_close(net);
    return ct_test_done();
}
