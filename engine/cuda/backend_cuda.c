/* The CUDA backend: device memory, a compute stream and a copy stream, every layer type (dense
 * through cuBLASLt in cuda_blas.c, convolution and batch norm through cuDNN in cuda_dnn.c, the
 * rest through the kernels of kernels/kernels.h), the loss with device-side metrics, the
 * optimizers, and the per-step scalars that let a captured step replay (cuda_graph.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"

enum { STEP_SLOTS = 64 };

static void *cuda_alloc(ct_backend *be, size_t bytes)
{
    ct_cuda *cu = ct_cuda_of(be);
    void *p = NULL;
    if (cudaSetDevice(cu->device) != cudaSuccess || cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError();  /* an allocation failure is reported by the caller, not by the next launch */
        return NULL;
    }
    /* The clear goes on the compute stream, in order before every later use. cudaMemset would run
     * on the legacy default stream, asynchronously to the host and unordered with the non-blocking
     * compute stream: an upload or copy into the buffer could land before the zeros. */
    if (cudaMemsetAsync(p, 0, bytes ? bytes : 1, cu->compute) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void cuda_free(ct_backend *be, void *ptr)
{
    (void)be;
    cudaFree(ptr); /* nothing useful to do with a failure while releasing */
}

static ct_status cuda_upload(ct_backend *be, void *dst, const void *src, size_t bytes, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu->compute), err);
    /* From pageable memory the async copy "might be synchronous" (CUDA's API synchronization
     * notes), no more: callers free src on return (init_params, checkpoint restore), and uploads
     * are setup work, so wait until the copy has read it. */
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->compute), err);
    return CT_OK;
}

static ct_status cuda_download(ct_backend *be, void *dst, const void *src, size_t bytes, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu->compute), err);
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->compute), err);
    return CT_OK;
}

static ct_status cuda_copy(ct_backend *be, void *dst, const void *src, size_t bytes, ct_err *err)
{
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ct_cuda_of(be)->compute), err);
    return CT_OK;
}

static ct_status cuda_zero(ct_backend *be, void *ptr, size_t bytes, ct_err *err)
{
    CT_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, ct_cuda_of(be)->compute), err);
    return CT_OK;
}

static size_t cuda_workspace_bytes(ct_backend *be, const ct_layer *l, int n)
{
    (void)be;
    if (l->type == CT_LAYER_CONV2D)
        return ct_cuda_conv_workspace(l, n);
    if (l->type == CT_LAYER_DENSE)
        return CT_CUBLASLT_WORKSPACE;
    return 0;
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
                                           .dropout_seed = (unsigned long long)s->dropout_seed};
    CT_CUDA_CHECK(cudaMemcpyAsync(cu->step, &cu->step_host[slot], sizeof *cu->step, cudaMemcpyHostToDevice,
                                  cu->compute), err);
    CT_CUDA_CHECK(cudaEventRecord(cu->step_done[slot], cu->compute), err);
    return CT_OK;
}

static ct_pool_dims pool_dims(const ct_layer *l, int n)
{
    return (ct_pool_dims){n, l->in_shape.h, l->in_shape.w, l->in_shape.c, l->kh, l->kw,
                          l->stride, l->pad_t, l->pad_l, l->out.h, l->out.w};
}

/* y = act(z) for the layers that fuse an activation (conv2d, add); dense does its own. */
static ct_status apply_activation(ct_cuda *cu, const ct_layer *l, long count, ct_err *err)
{
    if (l->act != CT_ACT_LINEAR)
        CT_CUDA_CHECK(ct_launch_activation_forward(l->z, l->y, count, (int)l->act, cu->compute), err);
    return CT_OK;
}

static ct_status cuda_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    long count = (long)n * (long)ct_shape_size(l->out);
    if (l->dtype != CT_DTYPE_F32)
        return ct_fail(err, CT_ERR_BACKEND, "[%s] the CUDA backend runs fp32 layers only so far", l->cfg->name);
    switch (l->type) {
    case CT_LAYER_DENSE:
        return ct_cuda_dense_forward(be, l, n, err);
    case CT_LAYER_CONV2D: {
        ct_status st = ct_cuda_conv_forward(be, l, n, err);
        return st == CT_OK ? apply_activation(cu, l, count, err) : st;
    }
    case CT_LAYER_MAXPOOL: {
        ct_pool_dims d = pool_dims(l, n);
        CT_CUDA_CHECK(ct_launch_maxpool_forward(&d, l->x[0], l->y, l->aux, cu->compute), err);
        return CT_OK;
    }
    case CT_LAYER_AVGPOOL: {
        ct_pool_dims d = pool_dims(l, n);
        CT_CUDA_CHECK(ct_launch_avgpool_forward(&d, l->x[0], l->y, cu->compute), err);
        return CT_OK;
    }
    case CT_LAYER_BATCHNORM:
        return ct_cuda_batchnorm_forward(be, l, n, training, err);
    case CT_LAYER_DROPOUT:
        if (training)
            CT_CUDA_CHECK(ct_launch_dropout_forward(l->x[0], l->y, l->aux, count, l->cfg->rate, cu->step,
                                                    (unsigned long long)l->index, cu->compute), err);
        else
            CT_CUDA_CHECK(cudaMemcpyAsync(l->y, l->x[0], (size_t)count * sizeof(float), cudaMemcpyDeviceToDevice,
                                          cu->compute), err);
        return CT_OK;
    case CT_LAYER_FLATTEN:
        if (l->y != l->x[0])
            CT_CUDA_CHECK(cudaMemcpyAsync(l->y, l->x[0], (size_t)count * sizeof(float), cudaMemcpyDeviceToDevice,
                                          cu->compute), err);
        return CT_OK;
    case CT_LAYER_ACTIVATION:
        CT_CUDA_CHECK(ct_launch_activation_forward(l->x[0], l->y, count, (int)l->act, cu->compute), err);
        return CT_OK;
    case CT_LAYER_ADD:
        CT_CUDA_CHECK(ct_launch_add(l->x[0], l->x[1], l->z, count, cu->compute), err);
        return apply_activation(cu, l, count, err);
    default:
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: layer type %d has no forward", (int)l->type);
    }
}

/* The gradient at the pre-activation: dy itself for linear, else act'(z) dy in the scratch.
 * relu and leaky read y, so a dense layer that fused relu into its epilogue needs no z. */
static ct_status preactivation_grad(ct_backend *be, const ct_layer *l, long count, const float **dz, ct_err *err)
{
    *dz = l->dy;
    if (l->act == CT_ACT_LINEAR)
        return CT_OK;
    CT_CUDA_CHECK(ct_launch_activation_backward(l->z, l->y, l->dy, be->scratch, count, (int)l->act, 0,
                                                ct_cuda_of(be)->compute), err);
    *dz = be->scratch;
    return CT_OK;
}

static ct_status cuda_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    long count = (long)n * (long)ct_shape_size(l->out);
    const float *dz = NULL;
    ct_status st;
    switch (l->type) {
    case CT_LAYER_DENSE:
        st = preactivation_grad(be, l, count, &dz, err);
        return st == CT_OK ? ct_cuda_dense_backward(be, l, dz, n, err) : st;
    case CT_LAYER_CONV2D:
        st = preactivation_grad(be, l, count, &dz, err);
        return st == CT_OK ? ct_cuda_conv_backward(be, l, dz, n, err) : st;
    case CT_LAYER_MAXPOOL:
        if (l->dx[0]) {
            ct_pool_dims d = pool_dims(l, n);
            CT_CUDA_CHECK(ct_launch_maxpool_backward(&d, l->dy, l->aux, l->dx[0], cu->compute), err);
        }
        return CT_OK;
    case CT_LAYER_AVGPOOL:
        if (l->dx[0]) {
            ct_pool_dims d = pool_dims(l, n);
            CT_CUDA_CHECK(ct_launch_avgpool_backward(&d, l->dy, l->dx[0], cu->compute), err);
        }
        return CT_OK;
    case CT_LAYER_BATCHNORM:
        return ct_cuda_batchnorm_backward(be, l, n, err);
    case CT_LAYER_DROPOUT:
        if (l->dx[0])
            CT_CUDA_CHECK(ct_launch_dropout_backward(l->dy, l->aux, l->dx[0], count, l->cfg->rate, cu->compute), err);
        return CT_OK;
    case CT_LAYER_FLATTEN:
        /* aliased to its input (same buffers) unless it had to copy */
        if (l->dx[0] && l->dx[0] != l->dy)
            CT_CUDA_CHECK(ct_launch_accumulate(l->dy, l->dx[0], count, cu->compute), err);
        return CT_OK;
    case CT_LAYER_ACTIVATION:
        if (l->dx[0])
            CT_CUDA_CHECK(ct_launch_activation_backward(l->x[0], l->y, l->dy, l->dx[0], count, (int)l->act, 1,
                                                        cu->compute), err);
        return CT_OK;
    case CT_LAYER_ADD:
        st = preactivation_grad(be, l, count, &dz, err);
        for (int i = 0; i < 2 && st == CT_OK; i++)
            if (l->dx[i])
                st = CT_CUDA_STATUS(ct_launch_accumulate(dz, l->dx[i], count, cu->compute), err);
        return st;
    default:
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: layer type %d has no backward", (int)l->type);
    }
}

static ct_status cuda_loss(ct_backend *be, const float *logits, const int32_t *labels, float *dlogits,
                           int n, int k, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    CT_CUDA_CHECK(ct_launch_softmax_xent(logits, labels, dlogits, cu->loss_sum, cu->correct, n, k,
                                         1.0f / (float)n, cu->compute), err);
    return CT_OK;
}

static ct_status cuda_read_metrics(ct_backend *be, double *loss_sum, long *correct, int reset, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    CT_CUDA_CHECK(cudaMemcpyAsync(cu->snap_loss, cu->loss_sum, sizeof *cu->snap_loss, cudaMemcpyDeviceToHost,
                                  cu->compute), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(cu->snap_correct, cu->correct, sizeof *cu->snap_correct, cudaMemcpyDeviceToHost,
                                  cu->compute), err);
    if (reset) {
        CT_CUDA_CHECK(cudaMemsetAsync(cu->loss_sum, 0, sizeof *cu->loss_sum, cu->compute), err);
        CT_CUDA_CHECK(cudaMemsetAsync(cu->correct, 0, sizeof *cu->correct, cu->compute), err);
    }
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->compute), err);
    *loss_sum = *cu->snap_loss;
    *correct = (long)*cu->snap_correct;
    /* a snapshot requested before this read is complete now, and stale after a reset */
    cu->snap_tag = cu->snap_tag_done = -1;
    return CT_OK;
}

static ct_status cuda_peek_metrics(ct_backend *be, long tag, double *loss_sum, long *correct, long *tag_out,
                                   ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    if (cu->snap_tag >= 0) {
        cudaError_t rc = cudaEventQuery(cu->snap_event);
        if (rc == cudaSuccess) {
            cu->last_loss = *cu->snap_loss;
            cu->last_correct = (long)*cu->snap_correct;
            cu->snap_tag_done = cu->snap_tag;
            cu->snap_tag = -1;
        } else if (rc == cudaErrorNotReady) {
            /* the runtime records "not ready" as its last error too, which the next kernel
             * launcher's cudaGetLastError would report as its own failure: clear it */
            (void)cudaGetLastError();
        } else {
            CT_CUDA_CHECK(rc, err);
        }
    }
    if (cu->snap_tag < 0) {
        CT_CUDA_CHECK(cudaMemcpyAsync(cu->snap_loss, cu->loss_sum, sizeof *cu->snap_loss, cudaMemcpyDeviceToHost,
                                      cu->compute), err);
        CT_CUDA_CHECK(cudaMemcpyAsync(cu->snap_correct, cu->correct, sizeof *cu->snap_correct,
                                      cudaMemcpyDeviceToHost, cu->compute), err);
        CT_CUDA_CHECK(cudaEventRecord(cu->snap_event, cu->compute), err);
        cu->snap_tag = tag;
    }
    *loss_sum = cu->last_loss;
    *correct = cu->last_correct;
    *tag_out = cu->snap_tag_done;
    return CT_OK;
}

static ct_status cuda_optimizer_step(ct_backend *be, const ct_optim_step *s, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    long n = (long)s->count;
    switch (s->kind) {
    case CT_OPT_SGD:
        CT_CUDA_CHECK(ct_launch_sgd_step(s->params, s->grads, NULL, n, cu->step, 0.0f, 0, s->weight_decay,
                                         cu->compute), err);
        return CT_OK;
    case CT_OPT_MOMENTUM:
        CT_CUDA_CHECK(ct_launch_sgd_step(s->params, s->grads, s->m, n, cu->step, s->momentum, s->nesterov,
                                         s->weight_decay, cu->compute), err);
        return CT_OK;
    case CT_OPT_ADAM:
    case CT_OPT_ADAMW:
        CT_CUDA_CHECK(ct_launch_adam_step(s->params, s->grads, s->m, s->v, n, cu->step, s->beta1, s->beta2,
                                          s->epsilon, s->weight_decay, s->kind == CT_OPT_ADAMW, cu->compute), err);
        return CT_OK;
    }
    return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: unknown optimizer %d", (int)s->kind);
}

/* Off the step's path (it diagnoses a failure), so it may wait. */
static int cuda_all_finite(ct_backend *be, const float *x, size_t n)
{
    ct_cuda *cu = ct_cuda_of(be);
    unsigned bad = 1;
    if (cudaMemsetAsync(cu->nonfinite, 0, sizeof *cu->nonfinite, cu->compute) != cudaSuccess ||
        ct_launch_count_nonfinite(x, (long)n, cu->nonfinite, cu->compute) != 0 ||
        cudaMemcpyAsync(&bad, cu->nonfinite, sizeof bad, cudaMemcpyDeviceToHost, cu->compute) != cudaSuccess ||
        cudaStreamSynchronize(cu->compute) != cudaSuccess)
        return 0;
    return bad == 0;
}

static ct_status cuda_mark(ct_backend *be, int slot, ct_err *err)
{
    if (slot < 0 || slot >= CT_BACKEND_MARKS)
        return ct_fail(err, CT_ERR_USAGE, "timing mark %d out of range", slot);
    ct_cuda *cu = ct_cuda_of(be);
    CT_CUDA_CHECK(cudaEventRecord(cu->marks[slot], cu->compute), err);
    return CT_OK;
}

static ct_status cuda_elapsed(ct_backend *be, int a, int b, double *ms, ct_err *err)
{
    if (a < 0 || a >= CT_BACKEND_MARKS || b < 0 || b >= CT_BACKEND_MARKS)
        return ct_fail(err, CT_ERR_USAGE, "timing marks %d, %d out of range", a, b);
    ct_cuda *cu = ct_cuda_of(be);
    float elapsed = 0.0f;
    CT_CUDA_CHECK(cudaEventSynchronize(cu->marks[b]), err);
    CT_CUDA_CHECK(cudaEventElapsedTime(&elapsed, cu->marks[a], cu->marks[b]), err);
    *ms = elapsed;
    return CT_OK;
}

static void cuda_destroy(ct_backend *be)
{
    if (!be)
        return;
    ct_cuda *cu = be->impl;
    if (cu) {
        cudaSetDevice(cu->device);
        if (cu->compute)
            cudaStreamSynchronize(cu->compute);
        ct_cuda_graph_free(cu);
        ct_cuda_input_free(cu);
        ct_cuda_dnn_free(cu);
        ct_cuda_blas_free(cu);
        cudaFree(cu->loss_sum);
        cudaFree(cu->correct);
        cudaFree(cu->step);
        cudaFree(cu->nonfinite);
        cudaFreeHost(cu->step_host);
        cudaFreeHost(cu->snap_loss);
        cudaFreeHost(cu->snap_correct);
        for (int i = 0; cu->step_done && i < cu->step_slots; i++)
            if (cu->step_done[i])
                cudaEventDestroy(cu->step_done[i]);
        free(cu->step_done);
        if (cu->snap_event)
            cudaEventDestroy(cu->snap_event);
        for (int i = 0; i < CT_BACKEND_MARKS; i++)
            if (cu->marks[i])
                cudaEventDestroy(cu->marks[i]);
        if (cu->copy)
            cudaStreamDestroy(cu->copy);
        if (cu->compute)
            cudaStreamDestroy(cu->compute);
        free(cu);
    }
    free(be);
}

static const ct_backend_ops cuda_ops = {
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .zero = cuda_zero,
    .copy = cuda_copy,
    .workspace_bytes = cuda_workspace_bytes,
    .input_reserve = ct_cuda_input_reserve,
    .input_host = ct_cuda_input_host,
    .input_commit = ct_cuda_input_commit,
    .host_alloc = ct_cuda_host_alloc,
    .host_free = ct_cuda_host_free,
    .input_submit = ct_cuda_input_submit,
    .input_wait = ct_cuda_input_wait,
    .set_step = cuda_set_step,
    .run_step = ct_cuda_run_step,
    .forward = cuda_forward,
    .backward = cuda_backward,
    .loss = cuda_loss,
    .read_metrics = cuda_read_metrics,
    .peek_metrics = cuda_peek_metrics,
    .optimizer_step = cuda_optimizer_step,
    .all_finite = cuda_all_finite,
    .mark = cuda_mark,
    .elapsed = cuda_elapsed,
    .destroy = cuda_destroy,
};

/* Streams, events and the small device and pinned buffers every step uses. */
static ct_status create_resources(ct_cuda *cu, ct_err *err)
{
    CT_CUDA_CHECK(cudaSetDevice(cu->device), err);
    CT_CUDA_CHECK(cudaStreamCreateWithFlags(&cu->compute, cudaStreamNonBlocking), err);
    CT_CUDA_CHECK(cudaStreamCreateWithFlags(&cu->copy, cudaStreamNonBlocking), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&cu->loss_sum, sizeof *cu->loss_sum), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&cu->correct, sizeof *cu->correct), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&cu->nonfinite, sizeof *cu->nonfinite), err);
    CT_CUDA_CHECK(cudaMalloc((void **)&cu->step, sizeof *cu->step), err);
    /* on the compute stream, which does not wait for the legacy default stream's cudaMemset */
    CT_CUDA_CHECK(cudaMemsetAsync(cu->loss_sum, 0, sizeof *cu->loss_sum, cu->compute), err);
    CT_CUDA_CHECK(cudaMemsetAsync(cu->correct, 0, sizeof *cu->correct, cu->compute), err);
    CT_CUDA_CHECK(cudaMemsetAsync(cu->step, 0, sizeof *cu->step, cu->compute), err);
    CT_CUDA_CHECK(cudaHostAlloc((void **)&cu->step_host, STEP_SLOTS * sizeof *cu->step_host, cudaHostAllocDefault), err);
    CT_CUDA_CHECK(cudaHostAlloc((void **)&cu->snap_loss, sizeof *cu->snap_loss, cudaHostAllocDefault), err);
    CT_CUDA_CHECK(cudaHostAlloc((void **)&cu->snap_correct, sizeof *cu->snap_correct, cudaHostAllocDefault), err);
    cu->step_done = calloc(STEP_SLOTS, sizeof *cu->step_done);
    if (!cu->step_done)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating the CUDA backend");
    cu->step_slots = STEP_SLOTS;
    for (int i = 0; i < STEP_SLOTS; i++)
        CT_CUDA_CHECK(cudaEventCreateWithFlags(&cu->step_done[i], cudaEventDisableTiming), err);
    CT_CUDA_CHECK(cudaEventCreateWithFlags(&cu->snap_event, cudaEventDisableTiming), err);
    for (int i = 0; i < CT_BACKEND_MARKS; i++)
        CT_CUDA_CHECK(cudaEventCreate(&cu->marks[i]), err);
    cu->snap_tag = cu->snap_tag_done = -1;
    return CT_OK;
}

ct_status ct_cuda_backend_create(ct_backend **out, const ct_cuda_options *opt, ct_err *err)
{
    *out = NULL;
    if (!opt)
        return ct_fail(err, CT_ERR_USAGE, "ct_cuda_backend_create: no options");
    ct_backend *be = calloc(1, sizeof *be);
    ct_cuda *cu = calloc(1, sizeof *cu);
    if (!be || !cu) {
        free(be);
        free(cu);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating the CUDA backend");
    }
    be->ops = &cuda_ops;
    be->impl = cu;
    be->graphs = opt->graphs != 0;
    cu->device = opt->device;
    cu->graphs = opt->graphs != 0;
    cu->allow_tf32 = opt->allow_tf32 != 0;
    ct_status st = create_resources(cu, err);
    if (st == CT_OK)
        st = ct_cuda_blas_init(cu, err);
    if (st == CT_OK)
        st = ct_cuda_dnn_init(cu, err);
    if (st == CT_OK)
        st = ct_cuda_graph_init(cu, err);
    if (st != CT_OK) {
        cuda_destroy(be);
        return st;
    }
    *out = be;
    return CT_OK;
}
