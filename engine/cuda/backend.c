/* The CUDA backend on a CUDA device (device.c): the layer table (one file per type), the workspace
 * and scratch it reserves, the per-step scalars that let a captured step replay (capture.c), the
 * optimizers, and the finite check. The loss and its metrics are in loss.c, input staging in
 * input.c. */
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"

enum { STEP_SLOTS = 64 };

#define CT_CUDA_LAYER_ENTRY(upper, lower) [CT_LAYER_##upper] = &ct_cuda_##lower##_ops,
static const ct_layer_ops *const cuda_layers[CT_LAYER_TYPE_COUNT] = {CT_LAYER_TYPES(CT_CUDA_LAYER_ENTRY)};
#undef CT_CUDA_LAYER_ENTRY

#define CT_CUDA_DTYPES_ENTRY(upper, lower) [CT_LAYER_##upper] = &ct_cuda_##lower##_dtypes,
static const unsigned *const cuda_layer_dtypes[CT_LAYER_TYPE_COUNT] = {CT_LAYER_TYPES(CT_CUDA_DTYPES_ENTRY)};
#undef CT_CUDA_DTYPES_ENTRY

const ct_layer_ops *const *ct_cuda_layer_table(void) { return cuda_layers; }

int ct_cuda_layer_supports(ct_layer_type type, ct_dtype dtype)
{
    if ((int)type < 0 || type >= CT_LAYER_TYPE_COUNT || !cuda_layer_dtypes[type] || (int)dtype < 0 || (int)dtype > 30)
        return 0;
    return (*cuda_layer_dtypes[type] >> (unsigned)dtype) & 1u;
}

/* Teardown of the reserved buffers; the caller has waited for the work that used them. */
static void release_buffers(ct_cuda *cu)
{
    cu->dev->ops->free(cu->dev, cu->workspace);
    cu->dev->ops->free(cu->dev, cu->scratch);
    cu->workspace = NULL;
    cu->scratch = NULL;
    cu->workspace_size = cu->scratch_size = 0;
}

/* Setup work: waits for the queued steps (they read the buffers being replaced) and drops the
 * captured ones, which hold the old addresses. */
static ct_status cuda_reserve(ct_backend *be, size_t workspace, size_t scratch, size_t x_bytes, size_t y_bytes,
                              ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    CT_CUDA_CHECK(cudaSetDevice(be->dev->ordinal), err);
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->compute), err);
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->copy), err);
    ct_cuda_capture_reset(cu);
    release_buffers(cu);
    cu->workspace = be->dev->ops->alloc(be->dev, workspace);
    cu->scratch = be->dev->ops->alloc(be->dev, scratch);
    if (!cu->workspace || !cu->scratch) {
        release_buffers(cu);
        return ct_fail(err, CT_ERR_NOMEM, "out of device memory for the %zu-byte workspace and %zu-byte scratch",
                       workspace, scratch);
    }
    cu->workspace_size = workspace;
    cu->scratch_size = scratch;
    return ct_cuda_input_reserve(cu, x_bytes, y_bytes, err);
}

/* The ring slot's last copy has run before its host memory is rewritten: that bounds how far
 * the host runs ahead (STEP_SLOTS steps), it does not wait for the step in flight. */
static ct_status cuda_set_step(ct_backend *be, const ct_step_scalars *s, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    int slot = cu->step_next;
    cu->step_next = (slot + 1) % cu->step_slots;
    CT_CUDA_CHECK(cudaEventSynchronize(cu->step_done[slot]), err);
    cu->step_host[slot] = (ct_device_step){.lr = s->lr, .bias1 = s->bias1, .bias2 = s->bias2,
                                           .dropout_seed = (unsigned long long)s->dropout_seed,
                                           .first_sample = (unsigned long long)s->first_sample,
                                           .samples = s->samples};
    CT_CUDA_CHECK(cudaMemcpyAsync(cu->step, &cu->step_host[slot], sizeof *cu->step, cudaMemcpyHostToDevice,
                                  cu->compute), err);
    CT_CUDA_CHECK(cudaEventRecord(cu->step_done[slot], cu->compute), err);
    return CT_OK;
}

// params, grads: (count) fp32, count = params->count; m, v: the same or NULL where the kind keeps none;
// params_half: (count) fp16 / bf16 or NULL
/* With step->scaled the kernels read the scaler's verdict (a non-finite gradient: nothing changes)
 * and Adam's t from its applied_steps, and ct_launch_scaler_update follows in stream order: no
 * host read. With params_half the update also rewrites the half copy the forward reads. */
static ct_status cuda_optimizer_step(ct_backend *be, const ct_optim_step *s, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    size_t count = s->params->count;
    if (s->scaled && !cu->loss_scaling)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: a scaled update without a loss scaler (scaler_set)");
    const ct_tensor *all[4] = {s->params, s->grads, s->m, s->v};
    for (int i = 0; i < 4; i++)
        if (all[i] && all[i]->data && (all[i]->dtype != CT_DTYPE_F32 || all[i]->count < count))
            return ct_fail(err, CT_ERR_INTERNAL, "the CUDA optimizer takes fp32 parameters, gradients and moments "
                                                 "of %zu values each", count);
    void *w_half = NULL;
    int half_dtype = CT_DTYPE_F16;
    if (s->params_half && s->params_half->data) {
        if (!ct_dtype_is_half(s->params_half->dtype) || s->params_half->count < count)
            return ct_fail(err, CT_ERR_INTERNAL, "the half copy of the parameters must be fp16 or bf16 and hold %zu "
                                                 "values", count);
        w_half = s->params_half->data;
        half_dtype = (int)s->params_half->dtype;
    }
    const ct_scaler *scaler = s->scaled ? cu->scaler : NULL;
    long n = (long)count;
    float *w = ct_f32(s->params), *m = ct_f32(s->m), *v = ct_f32(s->v);
    const float *g = ct_f32(s->grads);
    switch (s->kind) {
    case CT_OPT_SGD:
        CT_CUDA_CHECK(ct_launch_sgd_step_dt(w, g, NULL, n, cu->step, 0.0f, 0, s->weight_decay, scaler, w_half,
                                            half_dtype, cu->compute), err);
        break;
    case CT_OPT_MOMENTUM:
        CT_CUDA_CHECK(ct_launch_sgd_step_dt(w, g, m, n, cu->step, s->momentum, s->nesterov, s->weight_decay, scaler,
                                            w_half, half_dtype, cu->compute), err);
        break;
    case CT_OPT_ADAM:
    case CT_OPT_ADAMW:
        CT_CUDA_CHECK(ct_launch_adam_step_dt(w, g, m, v, n, cu->step, s->beta1, s->beta2, s->epsilon, s->weight_decay,
                                             s->kind == CT_OPT_ADAMW, scaler, w_half, half_dtype, cu->compute), err);
        break;
    default:
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: unknown optimizer %d", (int)s->kind);
    }
    if (s->scaled)
        CT_CUDA_CHECK(ct_launch_scaler_update(cu->scaler, cu->compute), err);
    return CT_OK;
}

/* Outside steps (before training, at a checkpoint load): waits for queued work, which may read the
 * scaler, then copies the state in. Turning scaling on or off changes which loss kernel a step
 * enqueues, so the captured steps are dropped then. */
static ct_status cuda_scaler_set(ct_backend *be, const ct_scaler *s, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    int loss_scaling = s != NULL;
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->compute), err);
    if (loss_scaling != cu->loss_scaling)
        ct_cuda_capture_reset(cu);
    cu->loss_scaling = loss_scaling;
    if (!s)
        return CT_OK;
    *cu->scaler_host = *s;
    CT_CUDA_CHECK(cudaMemcpyAsync(cu->scaler, cu->scaler_host, sizeof *cu->scaler, cudaMemcpyHostToDevice,
                                  cu->compute), err);
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->compute), err);
    return CT_OK;
}

/* Waits for queued work and copies the state out (epoch ends, checkpoints; never inside a step). */
static ct_status cuda_scaler_get(ct_backend *be, ct_scaler *out, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    if (!cu->loss_scaling)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: no loss scaler is set");
    CT_CUDA_CHECK(cudaMemcpyAsync(cu->scaler_host, cu->scaler, sizeof *cu->scaler, cudaMemcpyDeviceToHost,
                                  cu->compute), err);
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->compute), err);
    *out = *cu->scaler_host;
    return CT_OK;
}

// grads: (count) fp32, in place: *= 1 / scale, non-finite values counted into the scaler's verdict
static ct_status cuda_unscale(ct_backend *be, ct_tensor *grads, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    if (!cu->loss_scaling)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: unscale without a loss scaler (scaler_set)");
    if (grads->dtype != CT_DTYPE_F32)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: unscale takes fp32 gradients");
    CT_CUDA_CHECK(ct_launch_unscale_gradients(ct_f32(grads), (long)grads->count, cu->scaler, cu->compute), err);
    return CT_OK;
}

/* Off the step's path (it diagnoses a failure), so it may wait. */
// t: fp32, its first `count` elements read
static int cuda_all_finite(ct_backend *be, const ct_tensor *t, size_t count)
{
    ct_cuda *cu = ct_cuda_of(be);
    unsigned bad = 1;
    if (t->dtype != CT_DTYPE_F32 || count > t->count)
        return 0;
    if (cudaMemsetAsync(cu->nonfinite, 0, sizeof *cu->nonfinite, cu->compute) != cudaSuccess ||
        ct_launch_count_nonfinite(ct_f32(t), (long)count, cu->nonfinite, cu->compute) != 0 ||
        cudaMemcpyAsync(&bad, cu->nonfinite, sizeof bad, cudaMemcpyDeviceToHost, cu->compute) != cudaSuccess ||
        cudaStreamSynchronize(cu->compute) != cudaSuccess)
        return 0;
    return bad == 0;
}

/* The step scalars' device buffers (create_resources); NULL ones are skipped by the allocator. */
static void release_scalars(ct_cuda *cu)
{
    ct_device *dev = cu->dev;
    dev->ops->free(dev, cu->loss_sum);
    dev->ops->free(dev, cu->correct);
    dev->ops->free(dev, cu->step);
    dev->ops->free(dev, cu->nonfinite);
    dev->ops->free(dev, cu->scaler);
}

/* What the backend allocates on the device besides the workspace and scratch, as the allocator counts
 * it (each allocation rounded to CT_TENSOR_ALIGN): the five step scalars of create_resources and
 * input staging's slots for batches of x_bytes and y_bytes (input.c). */
static size_t cuda_own_bytes(ct_backend *be, size_t x_bytes, size_t y_bytes)
{
    ct_cuda *cu = ct_cuda_of(be);
    size_t scalars = ct_devmem_block_bytes(sizeof *cu->loss_sum) + ct_devmem_block_bytes(sizeof *cu->correct) +
                     ct_devmem_block_bytes(sizeof *cu->nonfinite) + ct_devmem_block_bytes(sizeof *cu->step) +
                     ct_devmem_block_bytes(sizeof *cu->scaler);
    return scalars + ct_cuda_input_bytes(x_bytes, y_bytes);
}

/* Teardown: nothing useful to do with a failure while releasing. The device stays: its owner
 * destroys it after every backend on it. */
static void cuda_destroy(ct_backend *be)
{
    if (!be)
        return;
    ct_cuda *cu = be->impl;
    if (cu) {
        cudaSetDevice(be->dev->ordinal);
        cudaStreamSynchronize(cu->compute);
        cudaStreamSynchronize(cu->copy);
        ct_cuda_capture_free(cu);
        ct_cuda_jpeg_free(cu);
        ct_cuda_input_free(cu);
        ct_cuda_dnn_free(cu);
        ct_cuda_matmul_free(cu);
        release_buffers(cu);
        release_scalars(cu);
        cudaFreeHost(cu->scaler_host);
        cudaFreeHost(cu->step_host);
        cudaFreeHost(cu->snap_loss);
        cudaFreeHost(cu->snap_correct);
        for (int i = 0; cu->step_done && i < cu->step_slots; i++)
            if (cu->step_done[i])
                cudaEventDestroy(cu->step_done[i]);
        free(cu->step_done);
        if (cu->snap_event)
            cudaEventDestroy(cu->snap_event);
        free(cu);
    }
    free(be);
}

static const ct_backend_ops cuda_ops = {
    .name = "cuda",
    .layers = cuda_layers,
    .reserve = cuda_reserve,
    .own_bytes = cuda_own_bytes,
    .input_submit = ct_cuda_input_submit,
    .input_wait = ct_cuda_input_wait,
    .image_decoder = ct_cuda_image_decoder,
    .image_decode_time = ct_cuda_image_decode_time,
    .set_step = cuda_set_step,
    .run_step = ct_cuda_run_step,
    .forget = ct_cuda_capture_forget,
    .loss = ct_cuda_loss,
    .read_metrics = ct_cuda_read_metrics,
    .peek_metrics = ct_cuda_peek_metrics,
    .optimizer_step = cuda_optimizer_step,
    .scaler_set = cuda_scaler_set,
    .scaler_get = cuda_scaler_get,
    .unscale = cuda_unscale,
    .all_finite = cuda_all_finite,
    .destroy = cuda_destroy,
};

/* Events and the small device and pinned buffers every step uses. */
static ct_status create_resources(ct_cuda *cu, ct_err *err)
{
    CT_CUDA_CHECK(cudaSetDevice(cu->dev->ordinal), err);
    ct_device *dev = cu->dev;
    /* from the device's allocator, like every device allocation, zeroed on the compute stream; the
     * plan counts them (ct_cuda_own_bytes) */
    cu->loss_sum = dev->ops->alloc(dev, sizeof *cu->loss_sum);
    cu->correct = dev->ops->alloc(dev, sizeof *cu->correct);
    cu->nonfinite = dev->ops->alloc(dev, sizeof *cu->nonfinite);
    cu->step = dev->ops->alloc(dev, sizeof *cu->step);
    cu->scaler = dev->ops->alloc(dev, sizeof *cu->scaler);
    if (!cu->loss_sum || !cu->correct || !cu->nonfinite || !cu->step || !cu->scaler)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory on %s for the CUDA backend's step scalars", dev->label);
    CT_CUDA_CHECK(cudaHostAlloc((void **)&cu->scaler_host, sizeof *cu->scaler_host, cudaHostAllocDefault), err);
    CT_CUDA_CHECK(cudaHostAlloc((void **)&cu->step_host, STEP_SLOTS * sizeof *cu->step_host, cudaHostAllocDefault), err);
    memset(cu->step_host, 0, STEP_SLOTS * sizeof *cu->step_host);  /* read (batch norm's check) before a first set_step */
    CT_CUDA_CHECK(cudaHostAlloc((void **)&cu->snap_loss, sizeof *cu->snap_loss, cudaHostAllocDefault), err);
    CT_CUDA_CHECK(cudaHostAlloc((void **)&cu->snap_correct, sizeof *cu->snap_correct, cudaHostAllocDefault), err);
    cu->step_done = calloc(STEP_SLOTS, sizeof *cu->step_done);
    if (!cu->step_done)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating the CUDA backend");
    cu->step_slots = STEP_SLOTS;
    for (int i = 0; i < STEP_SLOTS; i++)
        CT_CUDA_CHECK(cudaEventCreateWithFlags(&cu->step_done[i], cudaEventDisableTiming), err);
    CT_CUDA_CHECK(cudaEventCreateWithFlags(&cu->snap_event, cudaEventDisableTiming), err);
    cu->snap_tag = cu->snap_tag_done = -1;
    return CT_OK;
}

ct_status ct_cuda_backend_create(ct_backend **out, ct_device *dev, const ct_backend_options *opt, ct_err *err)
{
    *out = NULL;
    if (!opt)
        return ct_fail(err, CT_ERR_USAGE, "ct_cuda_backend_create: no options");
    ct_cuda_dev *cd = ct_cuda_dev_of(dev);
    if (!cd)
        return ct_fail(err, CT_ERR_USAGE, "the CUDA backend runs on a CUDA device, not on '%s'",
                       dev ? dev->ops->name : "(none)");
    ct_backend *be = calloc(1, sizeof *be);
    ct_cuda *cu = calloc(1, sizeof *cu);
    if (!be || !cu) {
        free(be);
        free(cu);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating the CUDA backend");
    }
    be->ops = &cuda_ops;
    be->dev = dev;
    be->impl = cu;
    be->capture = opt->capture != 0;
    cu->dev = dev;
    cu->compute = cd->compute;
    cu->copy = cd->copy;
    cu->allow_tf32 = opt->allow_tf32 != 0;
    cu->deterministic = opt->deterministic != 0;
    ct_status st = create_resources(cu, err);
    if (st == CT_OK)
        st = ct_cuda_matmul_init(cu, err);
    if (st == CT_OK)
        st = ct_cuda_dnn_init(cu, err);
    if (st == CT_OK)
        st = ct_cuda_capture_init(cu, err);
    if (st != CT_OK) {
        cuda_destroy(be);
        return st;
    }
    *out = be;
    return CT_OK;
}
