/* The CPU backend: the per-type ops of engine/cpu/<type>.c, the loss and the optimizer on host
 * memory, OpenMP threads. Memory comes from the device it is bound to (device.c). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "cpu/cpu_backend.h"

/* Every type through the half path (half.c), which runs the type's fp32 ops (ct_cpu_<type>_ops)
 * directly for a layer with nothing half: an fp32 network runs exactly its fp32 ops. */
#define CT_CPU_LAYER_OPS(upper, lower) [CT_LAYER_##upper] = &ct_cpu_half_ops,
static const ct_layer_ops *const cpu_layers[CT_LAYER_TYPE_COUNT] = {CT_LAYER_TYPES(CT_CPU_LAYER_OPS)};
#undef CT_CPU_LAYER_OPS

static void release_buffers(ct_backend *be)
{
    ct_cpu_state *st = ct_cpu_of(be);
    be->dev->ops->free(be->dev, st->workspace);
    be->dev->ops->free(be->dev, st->scratch);
    st->workspace = NULL;
    st->scratch = NULL;
    st->workspace_bytes = 0;
}

/* Input staging needs nothing on the CPU: input_submit copies straight into the network's input. */
static ct_status cpu_reserve(ct_backend *be, size_t workspace, size_t scratch, size_t x_bytes, size_t y_bytes,
                             ct_err *err)
{
    (void)x_bytes; (void)y_bytes;
    ct_cpu_state *st = ct_cpu_of(be);
    release_buffers(be);
    st->workspace = be->dev->ops->alloc(be->dev, workspace);
    st->scratch = be->dev->ops->alloc(be->dev, scratch);
    if (!st->workspace || !st->scratch) {
        release_buffers(be);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the %zu-byte workspace", workspace + scratch);
    }
    st->workspace_bytes = workspace;
    return CT_OK;
}

// b->x: (n, h, w, c) fp32 into x; b->y: (n) int32 into labels. The CPU backend trains on host
// memory, so this is one copy.
static ct_status cpu_input_submit(ct_backend *be, const ct_input_batch *b, ct_tensor *x, ct_tensor *labels,
                                  long *ticket, ct_err *err)
{
    (void)be;
    if (!b->x)
        return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: uint8 batches are augmented on the host, not here");
    memcpy(x->data, b->x, (size_t)b->n * ct_shape_size(b->shape) * sizeof(float));
    memcpy(labels->data, b->y, (size_t)b->n * sizeof(int32_t));
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
    ct_cpu_of(be)->step = *s;
    return CT_OK;
}

/* Nothing to capture on the CPU: the step runs as it is, subnormals flushed (denormals.c). */
static ct_status cpu_run_step(ct_backend *be, const ct_step_key *key, void *ctx, ct_err *err)
{
    (void)be;
    return ct_cpu_run_flushed(key->fn, ctx, err);
}

/* Nothing kept for a network. */
static void cpu_forget(ct_backend *be, const void *net)
{
    (void)be; (void)net;
}

// logits, dlogits: (n, k) fp32 with k = logits->shape.c; labels: (n) int32
static ct_status cpu_loss(ct_backend *be, const ct_tensor *logits, const ct_tensor *labels, ct_tensor *dlogits,
                          int n, ct_err *err)
{
    (void)err;
    ct_cpu_state *st = ct_cpu_of(be);
    long correct = 0;
    st->loss_sum += ct_cpu_softmax_xent(ct_f32(logits), ct_i32(labels), ct_f32(dlogits), n, logits->shape.c,
                                        1.0f / (float)n, &correct);
    /* the scale as a second rounding, ((p - onehot) * (1/n)) * scale, as the CUDA kernel
     * (ct_launch_softmax_xent_scaled) does; exact for dynamic scaling's powers of two */
    if (st->loss_scaling && dlogits) {
        float *d = ct_f32(dlogits), loss_scale = st->scaler.loss_scale;
        size_t count = (size_t)n * (size_t)logits->shape.c;
        for (size_t i = 0; i < count; i++)
            d[i] *= loss_scale;
    }
    st->correct += correct;
    return CT_OK;
}

static ct_status cpu_peek_metrics(ct_backend *be, long tag, double *loss_sum, long *correct, long *tag_out,
                                  ct_err *err)
{
    (void)err;
    ct_cpu_state *st = ct_cpu_of(be);
    *loss_sum = st->loss_sum;
    *correct = st->correct;
    *tag_out = tag;   /* the CPU's figures are always current */
    return CT_OK;
}

static ct_status cpu_read_metrics(ct_backend *be, double *loss_sum, long *correct, int reset, ct_err *err)
{
    (void)err;
    ct_cpu_state *st = ct_cpu_of(be);
    *loss_sum = st->loss_sum;
    *correct = st->correct;
    if (reset) {
        st->loss_sum = 0.0;
        st->correct = 0;
    }
    return CT_OK;
}

// params, grads, m, v: (count) fp32; m, v may be NULL (or hold NULL) when the optimizer keeps none;
// params_half: (count) fp16 / bf16 or NULL
static ct_status cpu_update(ct_backend *be, const ct_optim_step *s, ct_err *err)
{
    ct_cpu_state *cs = ct_cpu_of(be);
    const ct_step_scalars *now = &cs->step;
    float *w = ct_f32(s->params), *m = ct_f32(s->m), *v = ct_f32(s->v);
    const float *g = ct_f32(s->grads);
    size_t count = s->params->count;
    switch (s->kind) {
    case CT_OPT_SGD:
        ct_cpu_sgd_step(w, g, NULL, count, now->lr, 0.0f, 0, s->weight_decay);
        return CT_OK;
    case CT_OPT_MOMENTUM:
        ct_cpu_sgd_step(w, g, m, count, now->lr, s->momentum, s->nesterov, s->weight_decay);
        return CT_OK;
    case CT_OPT_ADAM:
    case CT_OPT_ADAMW:
        /* scaled: t counts applied updates only, so a skipped step leaves Adam where it was; the
         * bias corrections come from t here, in double as for fp32 and in the CUDA kernel
         * (ct_launch_adam_step_dt), so that both backends agree */
        ct_cpu_adam_step(w, g, m, v, count, now->lr, s->beta1, s->beta2, s->epsilon, s->weight_decay,
                         s->kind == CT_OPT_ADAMW, s->scaled ? (long)(cs->scaler.applied_steps + 1) : now->t);
        return CT_OK;
    }
    return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: unknown optimizer %d", (int)s->kind);
}

static ct_status cpu_optimizer_step(ct_backend *be, const ct_optim_step *s, ct_err *err)
{
    ct_cpu_state *cs = ct_cpu_of(be);
    if (s->scaled && !cs->loss_scaling)
        return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: a scaled update without a loss scaler (scaler_set)");
    ct_status st = CT_OK;
    if (!s->scaled || cs->scaler.nonfinite == 0) {
        st = cpu_update(be, s, err);
        if (st == CT_OK && s->params_half)
            ct_cpu_round_params(ct_f32(s->params), s->params_half->data, s->params->count, s->params_half->dtype);
    }
    if (st == CT_OK && s->scaled)
        ct_scaler_update(&cs->scaler);
    return st;
}

static ct_status cpu_scaler_set(ct_backend *be, const ct_scaler *s, ct_err *err)
{
    (void)err;
    ct_cpu_state *cs = ct_cpu_of(be);
    cs->loss_scaling = s != NULL;
    if (s)
        cs->scaler = *s;
    return CT_OK;
}

static ct_status cpu_scaler_get(ct_backend *be, ct_scaler *out, ct_err *err)
{
    ct_cpu_state *cs = ct_cpu_of(be);
    if (!cs->loss_scaling)
        return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: no loss scaler is set");
    *out = cs->scaler;
    return CT_OK;
}

// grads: flat fp32
static ct_status cpu_unscale(ct_backend *be, ct_tensor *grads, ct_err *err)
{
    ct_cpu_state *cs = ct_cpu_of(be);
    if (!cs->loss_scaling)
        return ct_fail(err, CT_ERR_INTERNAL, "cpu backend: unscale without a loss scaler (scaler_set)");
    /* multiplied by the reciprocal, as PyTorch's GradScaler: exact for power-of-two scales */
    long bad = ct_cpu_unscale(ct_f32(grads), grads->count, 1.0f / cs->scaler.loss_scale);
    cs->scaler.nonfinite += bad > INT32_MAX - cs->scaler.nonfinite ? INT32_MAX - cs->scaler.nonfinite : (int32_t)bad;
    return CT_OK;
}

// t: fp32, at least count elements
static int cpu_all_finite(ct_backend *be, const ct_tensor *t, size_t count)
{
    (void)be;
    return ct_cpu_all_finite(ct_f32(t), count);
}

/* Frees what reserve took on the device, which must outlive the backend. */
static void cpu_destroy(ct_backend *be)
{
    if (!be)
        return;
    if (be->impl) {
        release_buffers(be);
        free(ct_cpu_of(be)->f16_values);
        ct_cpu_dnnl_destroy(ct_cpu_of(be)->dnnl);
    }
    free(be->impl);
    free(be);
}

static const ct_backend_ops cpu_ops = {
    .name = "cpu",
    .layers = cpu_layers,
    .reserve = cpu_reserve,
    .input_submit = cpu_input_submit,
    .input_wait = cpu_input_wait,
    .set_step = cpu_set_step,
    .run_step = cpu_run_step,
    .forget = cpu_forget,
    .loss = cpu_loss,
    .read_metrics = cpu_read_metrics,
    .peek_metrics = cpu_peek_metrics,
    .optimizer_step = cpu_optimizer_step,
    .scaler_set = cpu_scaler_set,
    .scaler_get = cpu_scaler_get,
    .unscale = cpu_unscale,
    .all_finite = cpu_all_finite,
    .destroy = cpu_destroy,
};

ct_status ct_cpu_backend_create(ct_backend **out, ct_device *dev, const ct_backend_options *opt, ct_err *err)
{
    if (!dev || !dev->host_memory)
        return ct_fail(err, CT_ERR_USAGE, "the CPU backend needs a device with host memory (ct_cpu_device_create)");
    ct_backend *be = calloc(1, sizeof *be);
    ct_cpu_state *st = calloc(1, sizeof *st);
    float *f16 = malloc(65536 * sizeof *f16);
    if (!be || !st || !f16) {
        free(be);
        free(st);
        free(f16);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating the CPU backend");
    }
    ct_status dst = ct_cpu_dnnl_create(&st->dnnl, err);
    if (dst != CT_OK) {
        free(be);
        free(st);
        free(f16);
        return dst;
    }
    for (uint32_t h = 0; h < 65536; h++)
        f16[h] = ct_f32_from_f16((uint16_t)h);
    st->f16_values = f16;
    st->winograd = opt && opt->allow_winograd;
    st->sparse_backward = opt && opt->allow_sparse_backward;
    be->ops = &cpu_ops;
    be->dev = dev;
    be->impl = st;
    *out = be;
    return CT_OK;
}
