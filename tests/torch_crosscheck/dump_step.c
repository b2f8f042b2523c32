/* The PyTorch crosscheck's helper (tests/torch_crosscheck/crosscheck.py): one training step's
 * forward and backward of a network on the CPU backend, on the first [train] batch images of
 * Fashion-MNIST's training set, written out for PyTorch to repeat in float64 with the same weights:
 *
 *   params.safetensors   the parameters and batch-norm statistics the step starts from
 *   grads.safetensors    the same names holding each parameter's gradient; its running statistics
 *                        are those the training forward left
 *   tensors.safetensors  input (n, h, w, c) as the trainer stages it, labels (n), loss (1: the
 *                        batch's mean), eval_logits (n, classes: a forward in evaluation mode after
 *                        the step's), and per layer <layer>.y (its output), <layer>.dy (the loss's
 *                        gradient at that output, where a parameter lies at or before the layer:
 *                        elsewhere backward computes none; <layer>.dz instead, the gradient at its
 *                        pre-activation, for a relu whose only reader, a max pool, applies relu's
 *                        gradient: ct_cpu_relu_grad_in_reader) and, for dropout, <layer>.mask (1
 *                        kept, 0 dropped)
 *
 * All three are written by the export's safetensors writer (ct_export_safetensors, whose names and
 * layouts docs/export.md gives, and ct_safetensors_write), so the Python side reads one format and
 * the weights' layouts are the export's, not a second converter's.
 *
 * Gradients are read from the graph's own backward, not recovered from an optimizer step: SGD at
 * lr 1 leaves w - (w - g) in fp32, which keeps only the bits of g that survive next to w (a
 * gradient 1e-3 of its weight loses about 1e-4 of itself), far coarser than the 1e-5 compared.
 *
 * Usage: dump_step CONFIG OUT_DIR onednn|im2col (the data from CT_FMNIST_DIR). im2col runs every
 * convolution on the im2col + GEMM fallback: the backend's oneDNN handle is dropped and the network
 * bound again, which is what a build without oneDNN does (there is no run-time switch). Exit 0
 * written, 1 failed, 77 when onednn is asked of a build (or machine) without it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "checkpoint/snapshot.h"
#include "cpu/cpu_backend.h"
#include "export/export.h"
#include "tests/fmnist_form.h"

enum { SKIPPED = 77 };

/* What the step's passes leave, copied as each layer finishes (activation gradients share
 * buffers, so each is read while it is live). */
typedef struct capture {
    ct_graph *g;
    int n;
    float **y, **dy, **mask;   /* per layer, (n, out) each; mask only for dropout */
} capture;

// src: (count) fp32; returns a malloc'd copy (NULL when out of memory)
static float *copy_floats(const float *src, size_t count)
{
    float *d = malloc((count ? count : 1) * sizeof *d);
    if (d && count)
        memcpy(d, src, count * sizeof *d);
    return d;
}

static ct_status captured(capture *c, float *p, const char *what, int layer, ct_err *err)
{
    return p ? CT_OK
             : ct_fail(err, CT_ERR_NOMEM, "out of memory copying [%s]'s %s", c->g->layers[layer].cfg->name, what);
}

// y: (n, out) fp32; a dropout layer's aux: (n, out) uint8
static ct_status after_forward(void *ctx, int i, ct_err *err)
{
    capture *c = ctx;
    const ct_layer *l = &c->g->layers[i];
    size_t count = (size_t)c->n * ct_shape_size(l->out);
    c->y[i] = copy_floats(ct_f32(l->y), count);
    ct_status st = captured(c, c->y[i], "output", i, err);
    if (st == CT_OK && l->type == CT_LAYER_DROPOUT) {
        const uint8_t *kept = l->aux->data;
        c->mask[i] = malloc(count * sizeof(float));
        st = captured(c, c->mask[i], "dropout mask", i, err);
        for (size_t j = 0; st == CT_OK && j < count; j++)
            c->mask[i][j] = kept[j];
    }
    return st;
}

/* Backward runs from the last layer down, and every consumer of a layer comes after it: once
 * layer i is done, layer i - 1's gradient has every contribution it will get. */
// dy: (n, out) fp32
static ct_status take_dy(capture *c, int i, ct_err *err)
{
    const ct_layer *l = &c->g->layers[i];
    c->dy[i] = copy_floats(ct_f32(l->dy), (size_t)c->n * ct_shape_size(l->out));
    return captured(c, c->dy[i], "gradient", i, err);
}

static ct_status after_backward(void *ctx, int i, ct_err *err)
{
    return i > 0 ? take_dy(ctx, i - 1, err) : CT_OK;
}

/* Biases, batch-norm gammas and betas and the running statistics start at constants (0, 1): moved
 * off them, so that their gradients and updates are checked on values that tell errors apart. */
// params, state: the graph's flat fp32 tensors, host memory (the CPU device's)
static void move_off_constants(ct_graph *g, uint64_t seed)
{
    ct_rng rng = {seed};
    float *params = ct_f32(&g->params), *state = ct_f32(&g->state);
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        for (size_t k = 0; k < l->b_count; k++)
            params[l->b_off + k] += 0.2f * (ct_rng_uniform(&rng) - 0.5f);
        if (l->type != CT_LAYER_BATCHNORM)
            continue;
        size_t c = l->w_count;
        for (size_t k = 0; k < c; k++) {
            params[l->w_off + k] += 0.5f * (ct_rng_uniform(&rng) - 0.5f);
            state[l->state_off + k] += 0.2f * (ct_rng_uniform(&rng) - 0.5f);
            state[l->state_off + c + k] *= 0.5f + ct_rng_uniform(&rng);
        }
    }
}

/* The graph's parameter gradients packed as a checkpoint's params (each layer's weights, then its
 * biases), over ck's own. */
// grads: the graph's flat fp32 gradients (param_span, aligned per tensor); ck->params: (n_params)
static void pack_gradients(const ct_graph *g, ct_checkpoint *ck)
{
    const float *grads = ct_f32(&g->grads);
    float *p = ck->params;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        memcpy(p, grads + l->w_off, l->w_count * sizeof *p);
        p += l->w_count;
        memcpy(p, grads + l->b_off, l->b_count * sizeof *p);
        p += l->b_count;
    }
}

static ct_status write_buffer(const char *dir, const char *file, const ct_pb *out, ct_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return out->nomem ? ct_fail(err, CT_ERR_NOMEM, "out of memory writing %s", path)
                      : ct_checkpoint_write_file(path, out->buf, out->len, err);
}

/* ck (parameters or gradients, and statistics) as the export writes weights. */
static ct_status write_weights(ct_run *run, const ct_checkpoint *ck, const char *dir, const char *file, ct_err *err)
{
    const ct_graph *g = &run->replicas[0].graph;
    size_t *packed_off = malloc((size_t)g->n_layers * sizeof *packed_off);
    if (!packed_off)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory writing %s", file);
    ct_status st = ct_export_check(g, ck, file, packed_off, err);
    ct_pb out = ct_pb_growing();
    if (st == CT_OK) {
        ct_export_net en = {.graph = g, .data = &run->cfg.data, .ck = ck, .config_text = "", .source = file,
                            .packed_off = packed_off};
        st = ct_export_safetensors(&en, 0, &out, err);
    }
    st = st == CT_OK ? write_buffer(dir, file, &out, err) : st;
    ct_pb_free(&out);
    free(packed_off);
    return st;
}

// data: (batch, s.h, s.w, s.c) fp32, written as that 4-d tensor named "<layer>.<what>" (or "<what>")
static void add_tensor(ct_st_tensor *t, size_t *n, const char *layer, const char *what, const float *data, int batch,
                       ct_shape s)
{
    ct_st_tensor *e = &t[(*n)++];
    *e = (ct_st_tensor){.data = data, .count = (size_t)batch * ct_shape_size(s), .shape = {batch, s.h, s.w, s.c},
                        .nd = 4};
    snprintf(e->name, sizeof e->name, "%s%s%s", layer, *layer ? "." : "", what);
}

/* Which path ran each convolution, "c1=onednn,c2=winograd,c3=im2col", as the backend decides it. */
static void conv_paths(ct_backend *be, const ct_graph *g, int n, char *text, size_t size)
{
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        if (l->type != CT_LAYER_CONV2D)
            continue;
        const char *path = ct_cpu_conv2d_path(be, l, n);
        int w = snprintf(text + used, size - used, "%s%s=%s", used ? "," : "", l->cfg->name, path);
        used += w > 0 && (size_t)w < size - used ? (size_t)w : 0;
    }
}

/* The convolutions whose backward ran over their gradient's non-zeros alone, "c2,c5": those whose
 * captured gradient is the one their backward read (linear, or relu's applied by its max pool). */
static void sparse_backwards(ct_backend *be, const capture *c, char *text, size_t size)
{
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < c->g->n_layers; i++) {
        const ct_layer *l = &c->g->layers[i];
        int dz_captured = l->act == CT_ACT_LINEAR || ct_cpu_relu_grad_in_reader(l);
        if (l->type != CT_LAYER_CONV2D || !c->dy[i] || !dz_captured ||
            !ct_cpu_conv2d_backward_is_sparse(be, l, c->n, c->dy[i]))
            continue;
        int w = snprintf(text + used, size - used, "%s%s", used ? "," : "", l->cfg->name);
        used += w > 0 && (size_t)w < size - used ? (size_t)w : 0;
    }
}

static ct_status write_tensors(ct_replica *r, const capture *c, double loss, const float *eval_logits,
                               const char *paths, const char *sparse, const char *dir, ct_err *err)
{
    ct_graph *g = &r->graph;
    int n = c->n;
    ct_st_tensor *t = malloc(((size_t)g->n_layers * 3 + 4) * sizeof *t);
    float *labels = malloc((size_t)n * sizeof *labels);
    if (!t || !labels) {
        free(t);
        free(labels);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory writing tensors.safetensors");
    }
    for (int i = 0; i < n; i++)
        labels[i] = (float)ct_i32(&g->labels)[i];
    float mean_loss = (float)loss;
    size_t k = 0;
    add_tensor(t, &k, "", "input", ct_f32(&g->x), n, g->input);
    add_tensor(t, &k, "", "labels", labels, n, (ct_shape){1, 1, 1});
    add_tensor(t, &k, "", "loss", &mean_loss, 1, (ct_shape){1, 1, 1});
    add_tensor(t, &k, "", "eval_logits", eval_logits, n, ct_graph_output(g)->out);
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        add_tensor(t, &k, l->cfg->name, "y", c->y[i], n, l->out);
        /* below the first parameters backward computes no gradient; where the relu's gradient is
         * applied by the max pool that reads it, the buffer holds the pre-activation's (dz) */
        if (l->learns)
            add_tensor(t, &k, l->cfg->name, ct_cpu_relu_grad_in_reader(l) ? "dz" : "dy", c->dy[i], n, l->out);
        if (c->mask[i])
            add_tensor(t, &k, l->cfg->name, "mask", c->mask[i], n, l->out);
    }
    const char *meta[] = {"conv_paths", paths, "sparse_backward", sparse};
    ct_pb out = ct_pb_growing();
    ct_status st = ct_safetensors_write(t, k, meta, 2, 0, &out, err);
    st = st == CT_OK ? write_buffer(dir, "tensors.safetensors", &out, err) : st;
    ct_pb_free(&out);
    free(t);
    free(labels);
    return st;
}

/* Drops the backend's oneDNN handle and binds the network again: every convolution on im2col. */
static ct_status bind_without_onednn(ct_run *run, ct_err *err)
{
    ct_replica *r = &run->replicas[0];
    ct_replica_unbind(r);
    ct_cpu_dnnl_destroy(ct_cpu_of(r->be)->dnnl);
    ct_cpu_of(r->be)->dnnl = NULL;
    return ct_replica_bind(r, &run->cfg, run->graph.input, run->graph.classes, run->batch, run->cfg.train.seed, 0,
                           err);
}

/* The step: staged batch, training forward, loss, backward, then an evaluation forward; every
 * file written. */
static ct_status dump(ct_run *run, const char *dir, capture *c, ct_err *err)
{
    ct_replica *r = &run->replicas[0];
    ct_graph *g = &r->graph;
    ct_backend *be = r->be;
    int n = g->batch;
    c->g = g;
    c->n = n;
    move_off_constants(g, run->cfg.train.seed);
    long *idx = malloc((size_t)n * sizeof *idx);
    float *eval_logits = NULL;
    ct_checkpoint before = {0}, after = {0};
    if (!idx)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the batch's indices");
    for (int i = 0; i < n; i++)
        idx[i] = i;
    double loss = 0.0;
    long correct;
    ct_step_scalars fixed = {.lr = 0.0f, .t = 1, .bias1 = 1.0f, .bias2 = 1.0f, .dropout_seed = 2024, .samples = n};
    ct_status st = ct_train_stage_batch(run, r, &run->train, idx, n, 0, 0, err);
    if (st == CT_OK)
        st = ct_run_snapshot(run, -1.0, &before, err);
    if (st == CT_OK)
        st = be->ops->set_step(be, &fixed, err);
    if (st == CT_OK)
        st = be->ops->read_metrics(be, &loss, &correct, 1, err);
    if (st == CT_OK)
        st = ct_graph_forward_each(g, n, 1, after_forward, c, err);
    if (st == CT_OK)
        st = be->ops->loss(be, ct_graph_output(g)->y, &g->labels, ct_graph_output(g)->dy, n, err);
    if (st == CT_OK)
        st = take_dy(c, g->n_layers - 1, err);
    if (st == CT_OK)
        st = ct_graph_backward_each(g, n, after_backward, c, err);
    if (st == CT_OK)
        st = be->ops->read_metrics(be, &loss, &correct, 1, err);
    if (st == CT_OK)
        st = ct_run_snapshot(run, -1.0, &after, err);
    if (st == CT_OK) {
        pack_gradients(g, &after);
        st = ct_graph_forward(g, n, 0, err);
    }
    if (st == CT_OK) {
        eval_logits = copy_floats(ct_f32(ct_graph_output(g)->y), (size_t)n * ct_shape_size(ct_graph_output(g)->out));
        if (!eval_logits)
            st = ct_fail(err, CT_ERR_NOMEM, "out of memory copying the evaluation's logits");
    }
    char paths[4096], sparse[4096];
    conv_paths(be, g, n, paths, sizeof paths);
    sparse_backwards(be, c, sparse, sizeof sparse);
    if (st == CT_OK)
        st = write_weights(run, &before, dir, "params.safetensors", err);
    if (st == CT_OK)
        st = write_weights(run, &after, dir, "grads.safetensors", err);
    if (st == CT_OK)
        st = write_tensors(r, c, loss / n, eval_logits, paths, sparse, dir, err);
    if (st == CT_OK)
        printf("dump_step: %d layers, batch %d, loss %.6f, convolutions %s, sparse backward %s\n", g->n_layers, n,
               loss / n, paths[0] ? paths : "none", sparse[0] ? sparse : "none");
    ct_checkpoint_free(&before);
    ct_checkpoint_free(&after);
    free(eval_logits);
    free(idx);
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[3], "onednn") != 0 && strcmp(argv[3], "im2col") != 0)) {
        fprintf(stderr, "usage: dump_step CONFIG OUT_DIR onednn|im2col\n");
        return 1;
    }
    ct_net *net = NULL;
    ct_status st = ct_open_file(argv[1], &net);
    if (st == CT_OK)
        st = ct_set_fmnist_data(net);
    if (st == CT_OK)
        st = ct_set(net, "train.devices", "cpu");
    if (st == CT_OK)
        st = ct_prepare(net);
    if (st != CT_OK) {
        fprintf(stderr, "dump_step: %s\n", net ? ct_errmsg(net) : "out of memory");
        ct_close(net);
        return 1;
    }
    ct_run *run = &net->run;
    int on_onednn = ct_cpu_of(run->replicas[0].be)->dnnl != NULL;
    if (strcmp(argv[3], "onednn") == 0 && !on_onednn) {
        printf("dump_step: this build (or machine) has no oneDNN: its convolutions run on im2col only\n");
        ct_close(net);
        return SKIPPED;
    }
    if (strcmp(argv[3], "im2col") == 0 && on_onednn)
        st = bind_without_onednn(run, &run->err);
    int layers = run->replicas[0].graph.n_layers;
    capture c = {.y = calloc((size_t)layers, sizeof(float *)), .dy = calloc((size_t)layers, sizeof(float *)),
                 .mask = calloc((size_t)layers, sizeof(float *))};
    if (st == CT_OK && (!c.y || !c.dy || !c.mask))
        st = ct_fail(&run->err, CT_ERR_NOMEM, "out of memory for the captured tensors");
    if (st == CT_OK)
        st = dump(run, argv[2], &c, &run->err);
    if (st != CT_OK)
        fprintf(stderr, "dump_step: %s: %s\n", argv[1], ct_errmsg(net));
    for (int i = 0; c.y && c.dy && c.mask && i < layers; i++) {
        free(c.y[i]);
        free(c.dy[i]);
        free(c.mask[i]);
    }
    free(c.y);
    free(c.dy);
    free(c.mask);
    ct_close(net);
    return st == CT_OK ? 0 : 1;
}
