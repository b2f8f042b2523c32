/* The CUDA backend, first slice: device memory, one compute stream, the softmax cross-entropy
 * loss with device-side metric accumulators, and the SGD/momentum optimizer, all through the
 * kernels of kernels/kernels.h. Layer forward/backward (cuDNN, cuBLASLt) and Adam come with the
 * CUDA backend issue; until then the trainer does not select this backend, and a layer call
 * fails with a message naming the layer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/kernels.h"
#include "../backend.h"
#include "cuda_check.h"

typedef struct cuda_state {
    int device;
    cudaStream_t compute;
    float *loss_sum;      /* device accumulators, read back only by read_metrics */
    unsigned *correct;
} cuda_state;

static cuda_state *state_of(ct_backend *be) { return be->impl; }

static void *cuda_alloc(ct_backend *be, size_t bytes)
{
    void *p = NULL;
    if (cudaSetDevice(state_of(be)->device) != cudaSuccess || cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
        return NULL;
    /* setup time, not a step: a synchronous clear keeps alloc's "zeroed" promise simple */
    if (cudaMemset(p, 0, bytes ? bytes : 1) != cudaSuccess) {
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
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, state_of(be)->compute), err);
    return CT_OK;
}

static ct_status cuda_download(ct_backend *be, void *dst, const void *src, size_t bytes, ct_err *err)
{
    cuda_state *st = state_of(be);
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, st->compute), err);
    CT_CUDA_CHECK(cudaStreamSynchronize(st->compute), err);
    return CT_OK;
}

static ct_status cuda_zero(ct_backend *be, void *ptr, size_t bytes, ct_err *err)
{
    CT_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, state_of(be)->compute), err);
    return CT_OK;
}

static size_t cuda_workspace_bytes(ct_backend *be, const ct_layer *l, int n)
{
    (void)be; (void)l; (void)n;
    return 0;
}

static ct_status cuda_forward(ct_backend *be, ct_layer *l, int n, int training, uint64_t seed, ct_err *err)
{
    (void)be; (void)n; (void)training; (void)seed;
    return ct_fail(err, CT_ERR_BACKEND, "the CUDA backend cannot run layer [%s] (%s) yet", l->cfg->name,
                   ct_layer_type_name(l->type));
}

static ct_status cuda_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    return cuda_forward(be, l, n, 1, 0, err);
}

static ct_status cuda_loss(ct_backend *be, const float *logits, const int32_t *labels, float *dlogits,
                           int n, int k, ct_err *err)
{
    cuda_state *st = state_of(be);
    CT_CUDA_CHECK(ct_launch_softmax_xent(logits, labels, dlogits, st->loss_sum, st->correct, n, k,
                                         1.0f / (float)n, st->compute), err);
    return CT_OK;
}

static ct_status cuda_read_metrics(ct_backend *be, double *loss_sum, long *correct, int reset, ct_err *err)
{
    cuda_state *st = state_of(be);
    float loss = 0.0f;
    unsigned hits = 0;
    CT_CUDA_CHECK(cudaMemcpyAsync(&loss, st->loss_sum, sizeof loss, cudaMemcpyDeviceToHost, st->compute), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(&hits, st->correct, sizeof hits, cudaMemcpyDeviceToHost, st->compute), err);
    if (reset) {
        CT_CUDA_CHECK(cudaMemsetAsync(st->loss_sum, 0, sizeof *st->loss_sum, st->compute), err);
        CT_CUDA_CHECK(cudaMemsetAsync(st->correct, 0, sizeof *st->correct, st->compute), err);
    }
    CT_CUDA_CHECK(cudaStreamSynchronize(st->compute), err);
    *loss_sum = loss;
    *correct = (long)hits;
    return CT_OK;
}

static ct_status cuda_optimizer_step(ct_backend *be, const ct_optim_step *s, ct_err *err)
{
    cuda_state *st = state_of(be);
    switch (s->kind) {
    case CT_OPT_SGD:
        CT_CUDA_CHECK(ct_launch_sgd_step(s->params, s->grads, NULL, (long)s->count, s->lr, 0.0f, 0,
                                         s->weight_decay, st->compute), err);
        return CT_OK;
    case CT_OPT_MOMENTUM:
        CT_CUDA_CHECK(ct_launch_sgd_step(s->params, s->grads, s->m, (long)s->count, s->lr, s->momentum,
                                         s->nesterov, s->weight_decay, st->compute), err);
        return CT_OK;
    default:
        return ct_fail(err, CT_ERR_BACKEND, "the CUDA backend has no Adam/AdamW kernel yet");
    }
}

/* Off the step's path (it diagnoses a failure), so a blocking read in small pieces is fine. */
static int cuda_all_finite(ct_backend *be, const float *x, size_t n)
{
    float chunk[4096];
    ct_err err;
    for (size_t i = 0; i < n; i += 4096) {
        size_t m = n - i < 4096 ? n - i : 4096;
        if (cuda_download(be, chunk, x + i, m * sizeof(float), &err) != CT_OK)
            return 0;
        for (size_t j = 0; j < m; j++)
            if (!isfinite(chunk[j]))
                return 0;
    }
    return 1;
}

static void cuda_destroy(ct_backend *be)
{
    if (!be)
        return;
    cuda_state *st = be->impl;
    if (st) {
        cudaFree(st->loss_sum);
        cudaFree(st->correct);
        if (st->compute)
            cudaStreamDestroy(st->compute);
        free(st);
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
    .workspace_bytes = cuda_workspace_bytes,
    .forward = cuda_forward,
    .backward = cuda_backward,
    .loss = cuda_loss,
    .read_metrics = cuda_read_metrics,
    .optimizer_step = cuda_optimizer_step,
    .all_finite = cuda_all_finite,
    .destroy = cuda_destroy,
};

ct_status ct_cuda_backend_create(ct_backend **out, int device, ct_err *err)
{
    *out = NULL;
    ct_backend *be = calloc(1, sizeof *be);
    cuda_state *st = calloc(1, sizeof *st);
    if (!be || !st) {
        free(be);
        free(st);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating the CUDA backend");
    }
    be->ops = &cuda_ops;
    be->impl = st;
    st->device = device;
    ct_status status = CT_CUDA_STATUS(cudaSetDevice(device), err);
    if (status == CT_OK)
        status = CT_CUDA_STATUS(cudaStreamCreateWithFlags(&st->compute, cudaStreamNonBlocking), err);
    if (status == CT_OK)
        status = CT_CUDA_STATUS(cudaMalloc((void **)&st->loss_sum, sizeof *st->loss_sum), err);
    if (status == CT_OK)
        status = CT_CUDA_STATUS(cudaMalloc((void **)&st->correct, sizeof *st->correct), err);
    if (status == CT_OK)
        status = CT_CUDA_STATUS(cudaMemset(st->loss_sum, 0, sizeof *st->loss_sum), err);
    if (status == CT_OK)
        status = CT_CUDA_STATUS(cudaMemset(st->correct, 0, sizeof *st->correct), err);
    if (status != CT_OK) {
        cuda_destroy(be);
        return status;
    }
    *out = be;
    return CT_OK;
}
