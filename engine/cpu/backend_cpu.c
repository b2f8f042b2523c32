/* The CPU backend: host memory, the reference kernels of cpu_ops.h, OpenMP threads. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cpu/cpu_ops.h"

typedef struct cpu_state {
    double loss_sum;
    long correct;
    ct_step_scalars step;        /* of the step being run */
    float *host_x;               /* input staging: the trainer assembles batches here */
    int32_t *host_y;
    double marks[CT_BACKEND_MARKS];
} cpu_state;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static void *cpu_alloc(ct_backend *be, size_t bytes)
{
    (void)be;
    /* 64-byte alignment suits AVX-512 loads in OpenBLAS and the compiler's vector loops. */
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (p)
        memset(p, 0, rounded ? rounded : 64);
    return p;
}

static void cpu_free(ct_backend *be, void *ptr)
{
    (void)be;
    free(ptr);
}

static ct_status cpu_copy(ct_backend *be, void *dst, const void *src, size_t bytes, ct_err *err)
{
    (void)be; (void)err;
    memcpy(dst, src, bytes);
    return CT_OK;
}

static ct_status cpu_zero(ct_backend *be, void *ptr, size_t bytes, ct_err *err)
{
    (void)be; (void)err;
    memset(ptr, 0, bytes);
    return CT_OK;
}

static ct_status cpu_input_reserve(ct_backend *be, size_t x_bytes, size_t y_bytes, ct_err *err)
{
    cpu_state *st = be->impl;
    free(st->host_x);
    free(st->host_y);
    st->host_x = malloc(x_bytes ? x_bytes : 1);
    st->host_y = malloc(y_bytes ? y_bytes : 1);
    if (!st->host_x || !st->host_y)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for %zu bytes of batch staging", x_bytes + y_bytes);
    return CT_OK;
}

static ct_status cpu_input_host(ct_backend *be, float **host_x, int32_t **host_y, ct_err *err)
{
    cpu_state *st = be->impl;
    if (!st->host_x)
        return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: input_host before input_reserve");
    *host_x = st->host_x;
    *host_y = st->host_y;
    return CT_OK;
}

static ct_status cpu_input_commit(ct_backend *be, float *dst_x, int32_t *dst_y, size_t x_bytes, size_t y_bytes,
                                  ct_err *err)
{
    (void)err;
    cpu_state *st = be->impl;
    memcpy(dst_x, st->host_x, x_bytes);
    memcpy(dst_y, st->host_y, y_bytes);
    return CT_OK;
}

static void *cpu_host_alloc(ct_backend *be, size_t bytes)
{
    return cpu_alloc(be, bytes);
}

// b->x: (n, h, w, c) fp32; the CPU backend trains on host memory, so this is one copy
static ct_status cpu_input_submit(ct_backend *be, const ct_input_batch *b, float *dst_x, int32_t *dst_y,
                                  long *ticket, ct_err *err)
{
    (void)be;
    if (!b->x)
        return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: uint8 batches are augmented on the host, not here");
    memcpy(dst_x, b->x, (size_t)b->n * ct_shape_size(b->shape) * sizeof(float));
    memcpy(dst_y, b->y, (size_t)b->n * sizeof(int32_t));
    *ticket = 0;
    return CT_OK;
}

static ct_status cpu_input_wait(ct_backend *be, long ticket, ct_err *err)
{
    (void)be; (void)ticket; (void)err;
    return CT_OK;  /* the copy was done by input_submit */
}

static ct_status cpu_set_step(ct_backend *be, const ct_step_scalars *s, ct_err *err)
{
    (void)err;
    ((cpu_state *)be->impl)->step = *s;
    return CT_OK;
}

/* Nothing to capture on the CPU: the step runs as it is. */
static ct_status cpu_run_step(ct_backend *be, int key, ct_step_fn fn, void *ctx, ct_err *err)
{
    (void)be; (void)key;
    return fn(ctx, err);
}

static ct_status cpu_mark(ct_backend *be, int slot, ct_err *err)
{
    if (slot < 0 || slot >= CT_BACKEND_MARKS)
        return ct_fail(err, CT_ERR_USAGE, "timing mark %d out of range", slot);
    ((cpu_state *)be->impl)->marks[slot] = now_ms();
    return CT_OK;
}

static ct_status cpu_elapsed(ct_backend *be, int a, int b, double *ms, ct_err *err)
{
    if (a < 0 || a >= CT_BACKEND_MARKS || b < 0 || b >= CT_BACKEND_MARKS)
        return ct_fail(err, CT_ERR_USAGE, "timing marks %d, %d out of range", a, b);
    cpu_state *st = be->impl;
    *ms = st->marks[b] - st->marks[a];
    return CT_OK;
}

static ct_conv_geom conv_geom(const ct_layer *l, int n)
{
    return (ct_conv_geom){n, l->in_shape.h, l->in_shape.w, l->in_shape.c, l->out.c, l->kh, l->kw,
                          l->stride, l->pad_t, l->pad_l, l->out.h, l->out.w};
}

static ct_pool_geom pool_geom(const ct_layer *l, int n)
{
    return (ct_pool_geom){n, l->in_shape.h, l->in_shape.w, l->in_shape.c, l->kh, l->kw,
                          l->stride, l->pad_t, l->pad_l, l->out.h, l->out.w};
}

static size_t cpu_workspace_bytes(ct_backend *be, const ct_layer *l, int n)
{
    (void)be;
    if (l->type != CT_LAYER_CONV2D)
        return 0;
    ct_conv_geom g = conv_geom(l, n);
    return ct_cpu_conv2d_workspace(&g) * sizeof(float);
}

static ct_status cpu_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    uint64_t seed = ((cpu_state *)be->impl)->step.dropout_seed;
    size_t in_count = (size_t)n * ct_shape_size(l->in_shape);
    size_t out_count = (size_t)n * ct_shape_size(l->out);
    switch (l->type) {
    case CT_LAYER_DENSE:
        ct_cpu_dense_forward(l->x[0], l->w, l->b, l->z, n, (int)ct_shape_size(l->in_shape), l->out.c);
        break;
    case CT_LAYER_CONV2D: {
        ct_conv_geom g = conv_geom(l, n);
        ct_cpu_conv2d_forward(&g, l->x[0], l->w, l->b, l->z, be->workspace);
        break;
    }
    case CT_LAYER_MAXPOOL: {
        ct_pool_geom g = pool_geom(l, n);
        ct_cpu_maxpool_forward(&g, l->x[0], l->y, l->aux);
        return CT_OK;
    }
    case CT_LAYER_AVGPOOL: {
        ct_pool_geom g = pool_geom(l, n);
        ct_cpu_avgpool_forward(&g, l->x[0], l->y);
        return CT_OK;
    }
    case CT_LAYER_BATCHNORM: {
        int rows = n * l->in_shape.h * l->in_shape.w, c = l->in_shape.c;
        float *saved = l->aux;
        if (training)
            ct_cpu_batchnorm_forward_train(l->x[0], l->w, l->b, l->y, saved, saved + c, l->state,
                                           l->state + c, rows, c, l->cfg->momentum, l->cfg->epsilon);
        else
            ct_cpu_batchnorm_forward_eval(l->x[0], l->w, l->b, l->state, l->state + c, l->y, rows, c,
                                          l->cfg->epsilon);
        return CT_OK;
    }
    case CT_LAYER_DROPOUT:
        if (training)
            ct_cpu_dropout_forward(l->x[0], l->y, l->aux, out_count, l->cfg->rate, seed, (uint64_t)l->index);
        else
            memcpy(l->y, l->x[0], out_count * sizeof(float));
        return CT_OK;
    case CT_LAYER_FLATTEN:
        if (l->y != l->x[0])
            memcpy(l->y, l->x[0], in_count * sizeof(float));
        return CT_OK;
    case CT_LAYER_ACTIVATION:
        ct_cpu_activation_forward(l->act, l->x[0], l->y, out_count);
        return CT_OK;
    case CT_LAYER_ADD:
        ct_cpu_add_forward(l->x[0], l->x[1], l->z, out_count);
        break;
    default:
        return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: layer type %d has no forward", (int)l->type);
    }
    /* dense, conv2d and add end with their fused activation */
    if (l->act != CT_ACT_LINEAR)
        ct_cpu_activation_forward(l->act, l->z, l->y, out_count);
    return CT_OK;
}

/* The gradient at the pre-activation: dy itself for linear, else act'(z) dy in the scratch. */
static const float *preactivation_grad(ct_backend *be, const ct_layer *l, size_t out_count)
{
    if (l->act == CT_ACT_LINEAR)
        return l->dy;
    memset(be->scratch, 0, out_count * sizeof(float));
    ct_cpu_activation_backward(l->act, l->z, l->y, l->dy, be->scratch, out_count);
    return be->scratch;
}

static ct_status cpu_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    size_t out_count = (size_t)n * ct_shape_size(l->out);
    switch (l->type) {
    case CT_LAYER_DENSE: {
        const float *dz = preactivation_grad(be, l, out_count);
        ct_cpu_dense_backward(l->x[0], l->w, dz, l->dx[0], l->dw, l->db, n,
                              (int)ct_shape_size(l->in_shape), l->out.c);
        return CT_OK;
    }
    case CT_LAYER_CONV2D: {
        const float *dz = preactivation_grad(be, l, out_count);
        ct_conv_geom g = conv_geom(l, n);
        ct_cpu_conv2d_backward(&g, l->x[0], l->w, dz, l->dx[0], l->dw, l->db, be->workspace);
        return CT_OK;
    }
    case CT_LAYER_MAXPOOL:
        if (l->dx[0]) {
            ct_pool_geom g = pool_geom(l, n);
            ct_cpu_maxpool_backward(&g, l->dy, l->aux, l->dx[0]);
        }
        return CT_OK;
    case CT_LAYER_AVGPOOL:
        if (l->dx[0]) {
            ct_pool_geom g = pool_geom(l, n);
            ct_cpu_avgpool_backward(&g, l->dy, l->dx[0]);
        }
        return CT_OK;
    case CT_LAYER_BATCHNORM: {
        int rows = n * l->in_shape.h * l->in_shape.w, c = l->in_shape.c;
        const float *saved = l->aux;
        ct_cpu_batchnorm_backward(l->x[0], l->w, l->dy, saved, saved + c, l->dx[0], l->dw, l->db, rows, c);
        return CT_OK;
    }
    case CT_LAYER_DROPOUT:
        if (l->dx[0])
            ct_cpu_dropout_backward(l->dy, l->aux, l->dx[0], out_count, l->cfg->rate);
        return CT_OK;
    case CT_LAYER_FLATTEN:
        /* aliased to its input (same buffers) unless it had to copy */
        if (l->dx[0] && l->dx[0] != l->dy)
            ct_cpu_accumulate(l->dy, l->dx[0], out_count);
        return CT_OK;
    case CT_LAYER_ACTIVATION:
        if (l->dx[0])
            ct_cpu_activation_backward(l->act, l->x[0], l->y, l->dy, l->dx[0], out_count);
        return CT_OK;
    case CT_LAYER_ADD: {
        const float *dz = preactivation_grad(be, l, out_count);
        for (int i = 0; i < 2; i++)
            if (l->dx[i])
                ct_cpu_accumulate(dz, l->dx[i], out_count);
        return CT_OK;
    }
    default:
        return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: layer type %d has no backward", (int)l->type);
    }
}

static ct_status cpu_loss(ct_backend *be, const float *logits, const int32_t *labels, float *dlogits,
                          int n, int k, ct_err *err)
{
    (void)err;
    cpu_state *st = be->impl;
    long correct = 0;
    st->loss_sum += ct_cpu_softmax_xent(logits, labels, dlogits, n, k, 1.0f / (float)n, &correct);
    st->correct += correct;
    return CT_OK;
}

static ct_status cpu_peek_metrics(ct_backend *be, long tag, double *loss_sum, long *correct, long *tag_out,
                                  ct_err *err)
{
    (void)err;
    cpu_state *st = be->impl;
    *loss_sum = st->loss_sum;
    *correct = st->correct;
    *tag_out = tag;   /* the CPU's figures are always current */
    return CT_OK;
}

static ct_status cpu_read_metrics(ct_backend *be, double *loss_sum, long *correct, int reset, ct_err *err)
{
    (void)err;
    cpu_state *st = be->impl;
    *loss_sum = st->loss_sum;
    *correct = st->correct;
    if (reset) {
        st->loss_sum = 0.0;
        st->correct = 0;
    }
    return CT_OK;
}

static ct_status cpu_optimizer_step(ct_backend *be, const ct_optim_step *s, ct_err *err)
{
    const ct_step_scalars *now = &((cpu_state *)be->impl)->step;
    switch (s->kind) {
    case CT_OPT_SGD:
        ct_cpu_sgd_step(s->params, s->grads, NULL, s->count, now->lr, 0.0f, 0, s->weight_decay);
        return CT_OK;
    case CT_OPT_MOMENTUM:
        ct_cpu_sgd_step(s->params, s->grads, s->m, s->count, now->lr, s->momentum, s->nesterov, s->weight_decay);
        return CT_OK;
    case CT_OPT_ADAM:
    case CT_OPT_ADAMW:
        ct_cpu_adam_step(s->params, s->grads, s->m, s->v, s->count, now->lr, s->beta1, s->beta2,
                         s->epsilon, s->weight_decay, s->kind == CT_OPT_ADAMW, now->t);
        return CT_OK;
    }
    return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: unknown optimizer %d", (int)s->kind);
}

static int cpu_all_finite(ct_backend *be, const float *x, size_t n)
{
    (void)be;
    return ct_cpu_all_finite(x, n);
}

static void cpu_destroy(ct_backend *be)
{
    if (!be)
        return;
    cpu_state *st = be->impl;
    if (st) {
        free(st->host_x);
        free(st->host_y);
    }
    free(st);
    free(be);
}

static const ct_backend_ops cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .workspace_bytes = cpu_workspace_bytes,
    .input_reserve = cpu_input_reserve,
    .input_host = cpu_input_host,
    .input_commit = cpu_input_commit,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_free,
    .input_submit = cpu_input_submit,
    .input_wait = cpu_input_wait,
    .set_step = cpu_set_step,
    .run_step = cpu_run_step,
    .forward = cpu_forward,
    .backward = cpu_backward,
    .loss = cpu_loss,
    .read_metrics = cpu_read_metrics,
    .peek_metrics = cpu_peek_metrics,
    .optimizer_step = cpu_optimizer_step,
    .all_finite = cpu_all_finite,
    .mark = cpu_mark,
    .elapsed = cpu_elapsed,
    .destroy = cpu_destroy,
};

ct_status ct_cpu_backend_create(ct_backend **out, ct_err *err)
{
    ct_backend *be = calloc(1, sizeof *be);
    cpu_state *st = calloc(1, sizeof *st);
    if (!be || !st) {
        free(be);
        free(st);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating the CPU backend");
    }
    be->ops = &cpu_ops;
    be->impl = st;
    be->host_memory = 1;
    *out = be;
    return CT_OK;
}
