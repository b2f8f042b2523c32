/* Batch normalisation on the GPU, NHWC, x, y, dy and dx in the layer's dtype (fp32, fp16 or bf16)
 * with gamma, beta and the statistics fp32 in every precision. aux keeps the batch (mean[c],
 * invstd[c]) as the CPU backend does; state keeps (running mean[c], running var[c]).
 *
 * fp32 and fp16 go through cuDNN's legacy batch norm, which computes in fp32 and rounds y and dx
 * once (its derived parameter descriptor is fp32 for half data): spatial (per channel over n*h*w)
 * in CUDNN_BATCHNORM_SPATIAL, not the faster SPATIAL_PERSISTENT, which cudnn_ops.h says "imposes
 * some limits on the range of values" and PyTorch's cuDNN batch norm notes loses accuracy with. The
 * tensor descriptors are made once per shape and cached.
 *
 * Kernels of our own (kernels/batchnorm.cu) do the CPU backend's batch norm step by step for the
 * rest, all in stream order on the compute stream, their scratch from the workspace:
 * - sync_bn = on (the trainer sets be->bn_sync for a training step): cuDNN takes no outside
 *   statistics, so the hook averages the per-channel figures over the replicas between the
 *   kernels (its collectives join back into the compute stream);
 * - bf16, in training the same kernels with no hook (the replica's own statistics), in
 *   evaluation a scale and shift from the running statistics: cuDNN documents no bf16 for its
 *   legacy batch norm, and PyTorch never sends bf16 batch norm to it either. */
#include <string.h>

#include "cuda/layer_common.h"

typedef struct bn_key {
    int n, h, w, c;
    int dtype;                       /* ct_dtype of x, y, dy, dx */
} bn_key;

typedef struct bn_entry {
    bn_key key;                      /* first: the cache compares its bytes */
    cudnnTensorDescriptor_t x;       /* (n, h, w, c): x, y, dy, dx */
    cudnnTensorDescriptor_t param;   /* (1, c, 1, 1): gamma, beta, means, variances */
} bn_entry;

/* Teardown: nothing useful to do with a failure while releasing. */
static void bn_entry_destroy(void *entry)
{
    bn_entry *e = entry;
    if (e->x) cudnnDestroyTensorDescriptor(e->x);
    if (e->param) cudnnDestroyTensorDescriptor(e->param);
    memset(e, 0, sizeof *e);
}

// entry: zeroed but for its key; x: (n, h, w, c) NHWC of the key's dtype (fp32 or fp16: bf16 takes
// our kernels); param: cuDNN's derived (1, c, 1, 1) for the spatial mode, fp32 for both
static ct_status bn_entry_make(ct_cuda *cu, const void *how, void *entry, ct_err *err)
{
    (void)cu;
    (void)how;
    bn_entry *e = entry;
    const bn_key *k = &e->key;
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x), err);
    cudnnDataType_t type = k->dtype == CT_DTYPE_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    CT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NHWC, type, k->n, k->c, k->h, k->w), err);
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->param), err);
    CT_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(e->param, e->x, CUDNN_BATCHNORM_SPATIAL), err);
    return CT_OK;
}

static const ct_dnn_entry_type bn_entries = {sizeof(bn_entry), sizeof(bn_key), bn_entry_make, bn_entry_destroy};

/* The checks both directions share, and the layer's cached descriptors. */
static ct_status bn_prepare(ct_backend *be, const ct_layer *l, int n, bn_entry **e, ct_err *err)
{
    /* cuDNN 9 sets CUDNN_BN_MIN_EPSILON to 0.0 (1e-5 before 7.5); the same epsilon goes to
     * forward and backward. !(>=) also refuses NaN. */
    if (!((double)l->cfg->epsilon >= CUDNN_BN_MIN_EPSILON))
        return ct_fail(err, CT_ERR_CONFIG, "batch norm epsilon %g is below cuDNN's minimum %g",
                       (double)l->cfg->epsilon, (double)CUDNN_BN_MIN_EPSILON);
    ct_shape s = l->out;
    if (!ct_cuda_dnn_fits_int((size_t)n, (size_t)s.h, (size_t)s.w, (size_t)s.c))
        return ct_fail(err, CT_ERR_BACKEND,
                       "a batch of %d is too large for cuDNN's 32-bit tensor indexing in this layer", n);
    if (l->dtype != CT_DTYPE_F32 && l->dtype != CT_DTYPE_F16)
        return ct_fail(err, CT_ERR_INTERNAL, "cuDNN's batch norm is for fp32 and fp16 layers, not %s",
                       ct_dtype_name(l->dtype));
    ct_cuda *cu = ct_cuda_of(be);
    bn_key key = {n, s.h, s.w, s.c, (int)l->dtype};
    void *entry = NULL;
    ct_status st = ct_cuda_dnn_cache_get(cu, &cu->bn, &bn_entries, &key, NULL, &entry, err);
    *e = entry;
    return st;
}

// x: (n, h, w, c) any dtype (cast to the layer's first); y: (n, h, w, c) l->dtype; gamma (w), beta
// (b): (c) fp32 (batch norm keeps fp32 parameters in every precision); aux: (mean[c], invstd[c]) of the batch, written
// in training; state: (running mean[c], running var[c]), updated in training, read in evaluation
static ct_status batchnorm_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    bn_entry *e = NULL;
    ct_status st = bn_prepare(be, l, n, &e, err);
    if (st != CT_OK)
        return st;
    const int c = l->out.c;
    const double eps = l->cfg->epsilon;
    const float one = 1.0f, zero = 0.0f;
    const float *gamma = ct_f32(l->w), *beta = ct_f32(l->b);
    float *run_mean = ct_f32(l->state), *run_var = run_mean + c;
    void *y = l->z->data;  /* the normalised values; the op applies a fused activation after */
    const void *x = NULL;
    ct_cuda_stage stage;
    ct_cuda_stage_begin(cu, 0, &stage);
    st = ct_cuda_input_as(be, l, 0, n, l->dtype, &stage, &x, err);
    if (st != CT_OK)
        return st;
    if (!training) {
        CT_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(cu->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, e->x,
                                                               x, e->x, y, e->param, gamma, beta, run_mean, run_var,
                                                               eps), err);
        return CT_OK;
    }
    if (!l->aux)
        return ct_fail(err, CT_ERR_INTERNAL, "batch norm has no tensor for its saved statistics");
    float *save_mean = ct_f32(l->aux), *save_invstd = save_mean + c;
    const double momentum = l->cfg->momentum;
    if ((long)n * l->out.h * l->out.w > 1) {
        /* run = (1 - factor) run + factor batch: PyTorch's momentum is that factor, and cuDNN's
         * running variance is the unbiased one, as PyTorch's (which hands running_var to cuDNN as
         * is). The saved "inverse variance" is 1 / sqrt(var + eps) of the biased batch variance,
         * the CPU's invstd. */
        CT_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(cu->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, e->x,
                                                              x, e->x, y, e->param, gamma, beta, momentum, run_mean,
                                                              run_var, eps, save_mean, save_invstd), err);
        return CT_OK;
    }
    /* One value per channel has no unbiased variance (n/(n-1) divides by zero), so the CPU
     * backend blends in the biased 0 instead. cuDNN takes no running statistics here (both
     * pointers NULL) and the blend is done apart: mean = m batch + (1 - m) mean, var *= 1 - m. */
    const float m = (float)momentum, keep = 1.0f - (float)momentum;
    CT_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(cu->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, e->x, x,
                                                          e->x, y, e->param, gamma, beta, momentum, NULL, NULL, eps,
                                                          save_mean, save_invstd), err);
    CT_CUDNN_CHECK(cudnnAddTensor(cu->dnn, &m, e->param, save_mean, &keep, e->param, run_mean), err);
    CT_CUDNN_CHECK(cudnnScaleTensor(cu->dnn, e->param, run_var, &keep), err);
    return CT_OK;
}

// x: (n, h, w, c) any dtype (cast to the layer's); dy: (n, h, w, c) l->dtype; gamma: (c) fp32;
// aux: the forward's (mean[c], invstd[c]); dx: like x in its producer's dtype, written or added to
// (l->dx_accumulate) (NULL: the network's input, computed into the scratch and dropped); dgamma
// (dw), dbeta (db): (c) fp32, written
static ct_status batchnorm_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    bn_entry *e = NULL;
    ct_status st = bn_prepare(be, l, n, &e, err);
    if (st != CT_OK)
        return st;
    if (!l->aux || !l->dw || !l->db)
        return ct_fail(err, CT_ERR_INTERNAL, "batch norm backward lacks its saved statistics or parameter gradients");
    const int c = l->out.c;
    const float one = 1.0f, zero = 0.0f;
    /* cuDNN always writes dx; with no producer to receive it, the scratch takes it (beta 0 so its
     * old contents are not read) */
    ct_cuda_stage stage;
    ct_cuda_stage_begin(cu, 0, &stage);
    const void *x = NULL;
    void *dx = NULL;
    int accumulate = 0;
    st = ct_cuda_input_as(be, l, 0, n, l->dtype, &stage, &x, err);
    if (st == CT_OK)
        st = ct_cuda_grad_begin(l, 0, n, l->dtype, &stage, &dx, &accumulate, err);
    if (st != CT_OK)
        return st;
    const float *beta_dx = accumulate ? &one : &zero;
    if (!dx) {
        if (!cu->scratch || (void *)cu->scratch == l->dy->data ||
            cu->scratch_size < (size_t)ct_cuda_out_count(l, n) * ct_cuda_elem(l->dy))
            return ct_fail(err, CT_ERR_INTERNAL, "batch norm backward has no scratch to discard dx into");
        dx = cu->scratch;
        beta_dx = &zero;
    }
    const float *saved = ct_f32(l->aux);
    CT_CUDNN_CHECK(cudnnBatchNormalizationBackward(cu->dnn, CUDNN_BATCHNORM_SPATIAL, &one, beta_dx, &one, &zero, e->x,
                                                   x, e->x, l->dy->data, e->x, dx, e->param, ct_f32(l->w),
                                                   ct_f32(l->dw), ct_f32(l->db), (double)l->cfg->epsilon, saved,
                                                   saved + c), err);
    return l->dx[0] ? ct_cuda_grad_end(be, l, 0, n, l->dtype, dx, err) : CT_OK;
}

/* ---- our kernels: sync_bn = on, and bf16 ---- */

static size_t round256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

/* The kernels' pieces of the workspace after the staging: per-channel coefficients (3c fp32:
 * scale, shift in forward and evaluation; k, a, b in backward), the hook's sums (2c fp32) and the
 * partial sums. */
static size_t kernel_bytes(const ct_layer *l, int n)
{
    int c = l->in_shape.c;
    long rows = (long)n * l->in_shape.h * l->in_shape.w;
    return round256(3 * (size_t)c * sizeof(float)) + round256(2 * (size_t)c * sizeof(float)) +
           round256(ct_bn_sums_workspace(rows, c));
}

/* The kernels' scratch from the stage: coef (3c), sums (2c), partials. */
static ct_status kernel_scratch(const ct_layer *l, long rows, ct_cuda_stage *stage, float **coef, float **sums,
                                void **partials, size_t *partial_bytes, ct_err *err)
{
    int c = l->in_shape.c;
    *partial_bytes = ct_bn_sums_workspace(rows, c);
    ct_status st = ct_cuda_stage_take(stage, 3 * (size_t)c * sizeof(float), (void **)coef, err);
    if (st == CT_OK)
        st = ct_cuda_stage_take(stage, 2 * (size_t)c * sizeof(float), (void **)sums, err);
    if (st == CT_OK && *partial_bytes)
        st = ct_cuda_stage_take(stage, *partial_bytes, partials, err);
    return st;
}

/* The global batch's samples the last set_step gave (the host's copy): what the normalise kernel
 * will read on the device. */
static int step_samples(const ct_cuda *cu)
{
    return cu->step_host[(cu->step_next + cu->step_slots - 1) % cu->step_slots].samples;
}

/* The CPU's forward_train_synced: the per-channel mean (through the hook, when there is one: -> the
 * global mean), then the variance about that mean (likewise -> the global biased variance), then
 * normalise with them. The running variance is unbiased with the batch's rows: synced, the global
 * batch's, which the kernel reads from the step's scalars on the device (a captured step is keyed
 * on this replica's slice, which the same slice of another global batch shares); else this
 * replica's own, fixed with the capture.
 * x: (n, h, w, c) any dtype (cast to the layer's); y: (n, h, w, c) l->dtype; n may be 0 when synced */
static ct_status forward_kernels(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    const ct_bn_sync *sync = be->bn_sync.mean ? &be->bn_sync : NULL;
    const int c = l->out.c, hw = l->out.h * l->out.w;
    const long rows = (long)n * hw;
    if (!l->aux)
        return ct_fail(err, CT_ERR_INTERNAL, "batch norm has no tensor for its saved statistics");
    if (sync && step_samples(cu) != sync->total)
        return ct_fail(err, CT_ERR_INTERNAL, "sync_bn over a global batch of %d, but the step's scalars say %d",
                       sync->total, step_samples(cu));
    float *save_mean = ct_f32(l->aux), *save_invstd = save_mean + c;
    float *run_mean = ct_f32(l->state), *run_var = run_mean + c;
    ct_cuda_stage stage;
    ct_cuda_stage_begin(cu, 0, &stage);
    const void *x = NULL;
    float *coef = NULL, *sums = NULL;
    void *partials = NULL;
    size_t partial_bytes = 0;
    ct_status st = ct_cuda_input_as(be, l, 0, n, l->dtype, &stage, &x, err);
    if (st == CT_OK)
        st = kernel_scratch(l, rows, &stage, &coef, &sums, &partials, &partial_bytes, err);
    if (st != CT_OK)
        return st;
    int dt = (int)l->dtype;
    CT_CUDA_CHECK(ct_launch_bn_mean_dt(x, save_mean, rows, c, partials, partial_bytes, dt, cu->compute), err);
    if (sync && (st = sync->mean(sync->ctx, save_mean, c, err)) != CT_OK)
        return st;
    float *var = save_invstd;  /* the variance until it becomes invstd */
    CT_CUDA_CHECK(ct_launch_bn_variance_dt(x, save_mean, var, rows, c, partials, partial_bytes, dt, cu->compute), err);
    if (sync && (st = sync->mean(sync->ctx, var, c, err)) != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_bn_normalise_dt(x, l->z->data, ct_f32(l->w), ct_f32(l->b), save_mean, save_invstd,
                                            run_mean, run_var, coef, rows, c, sync ? &cu->step->samples : NULL, hw,
                                            l->cfg->momentum, l->cfg->epsilon, dt, cu->compute), err);
    return CT_OK;
}

/* Evaluation: y = x scale + shift per channel from the running statistics (the CPU's forward_eval).
 * x: (n, h, w, c) any dtype (cast to the layer's); y: (n, h, w, c) l->dtype; state: read */
static ct_status inference_kernels(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    const int c = l->out.c;
    const float *run_mean = ct_f32(l->state), *run_var = run_mean + c;
    ct_cuda_stage stage;
    ct_cuda_stage_begin(cu, 0, &stage);
    const void *x = NULL;
    float *coef = NULL;
    ct_status st = ct_cuda_input_as(be, l, 0, n, l->dtype, &stage, &x, err);
    if (st == CT_OK)
        st = ct_cuda_stage_take(&stage, 2 * (size_t)c * sizeof(float), (void **)&coef, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(ct_launch_bn_inference_dt(x, l->z->data, ct_f32(l->w), ct_f32(l->b), run_mean, run_var, coef,
                                            (long)n * l->out.h * l->out.w, c, l->cfg->epsilon, (int)l->dtype,
                                            cu->compute), err);
    return CT_OK;
}

/* The CPU's backward_synced: the sums of dy and dy (x - mean) (through the hook, when there is
 * one: their weighted mean over the replicas), dgamma and dbeta from this replica's own sums, dx
 * from the (averaged) ones over its own rows (each replica's dy is its own loss's gradient, scaled
 * by 1 / its samples). With no hook this is the CPU's ct_cpu_batchnorm_backward.
 * x: (n, h, w, c) any dtype (cast); dy: (n, h, w, c) l->dtype; dx: like x in its producer's dtype or
 * NULL, written or added to (l->dx_accumulate); dgamma (dw), dbeta (db): (c) fp32, written; n may be
 * 0 when synced */
static ct_status backward_kernels(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    const ct_bn_sync *sync = be->bn_sync.mean ? &be->bn_sync : NULL;
    const int c = l->out.c;
    const long rows = (long)n * l->out.h * l->out.w;
    if (!l->aux || !l->dw || !l->db)
        return ct_fail(err, CT_ERR_INTERNAL, "batch norm backward lacks its saved statistics or parameter gradients");
    const float *save_mean = ct_f32(l->aux), *save_invstd = save_mean + c;
    ct_cuda_stage stage;
    ct_cuda_stage_begin(cu, 0, &stage);
    const void *x = NULL;
    void *dx = NULL, *partials = NULL;
    int accumulate = 0;
    float *coef = NULL, *sums = NULL;
    size_t partial_bytes = 0;
    ct_status st = ct_cuda_input_as(be, l, 0, n, l->dtype, &stage, &x, err);
    if (st == CT_OK)
        st = ct_cuda_grad_begin(l, 0, n, l->dtype, &stage, &dx, &accumulate, err);
    if (st == CT_OK)
        st = kernel_scratch(l, rows, &stage, &coef, &sums, &partials, &partial_bytes, err);
    if (st != CT_OK)
        return st;
    int dt = (int)l->dtype;
    CT_CUDA_CHECK(ct_launch_bn_backward_sums_dt(x, l->dy->data, save_mean, save_invstd, sums, ct_f32(l->dw),
                                                ct_f32(l->db), rows, c, partials, partial_bytes, dt, cu->compute),
                  err);
    if (sync && (st = sync->mean(sync->ctx, sums, 2 * c, err)) != CT_OK)
        return st;
    if (!dx || rows == 0)
        return CT_OK;
    CT_CUDA_CHECK(ct_launch_bn_backward_dx_dt(x, l->dy->data, ct_f32(l->w), save_mean, save_invstd, sums, dx, coef,
                                              rows, c, accumulate, dt, cu->compute), err);
    return ct_cuda_grad_end(be, l, 0, n, l->dtype, dx, err);
}

// x -> y: (n, h, w, c) l->dtype; failures name the layer
static ct_status batchnorm_forward_op(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    ct_status st = ct_cuda_check_layer(l, n, err);
    const int synced = training && be->bn_sync.mean;
    /* synced, a replica with no samples still takes part in the hook's collectives */
    if (st != CT_OK || (n == 0 && !synced))
        return st;
    if (synced || l->dtype == CT_DTYPE_BF16)
        st = training ? forward_kernels(be, l, n, err) : inference_kernels(be, l, n, err);
    else
        st = batchnorm_forward(be, l, n, training, err);
    if (st == CT_OK)
        st = ct_cuda_apply_activation(be, l, n, err);
    return ct_cuda_named(l, st, err);
}

/* A fused activation's gradient, written over dy: dy is this layer's alone and read by nothing
 * after its backward, and the scratch, where dense and conv2d put theirs, is where batch norm on the
 * network's input discards the dx cuDNN always writes.
 * z, y, dy: (n, h, w, c) l->dtype */
static ct_status activation_grad_in_place(ct_backend *be, const ct_layer *l, int n, ct_err *err)
{
    if (l->act == CT_ACT_LINEAR)
        return CT_OK;
    CT_CUDA_CHECK(ct_launch_activation_backward_dt(l->z->data, l->y->data, l->dy->data, l->dy->data,
                                                   ct_cuda_out_count(l, n), (int)l->act, 0, (int)l->dy->dtype,
                                                   ct_cuda_of(be)->compute), err);
    return CT_OK;
}

// dy: (n, h, w, c) l->dtype -> dx (same, its dtype), dgamma, dbeta (c) fp32, written (dx added to where
// l->dx_accumulate says); failures name the layer
static ct_status batchnorm_backward_op(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_status st = ct_cuda_check_layer(l, n, err);
    const int synced = be->bn_sync.mean != NULL;
    if (st != CT_OK || (n == 0 && !synced))
        return st;
    st = activation_grad_in_place(be, l, n, err);
    if (st == CT_OK)
        st = synced || l->dtype == CT_DTYPE_BF16 ? backward_kernels(be, l, n, err) : batchnorm_backward(be, l, n, err);
    return ct_cuda_named(l, st, err);
}

/* The staging, and our kernels' scratch (sized whatever the dtype and whether or not a step will
 * take it: sync_bn is the trainer's per step, the workspace the backend's at binding) */
static size_t batchnorm_workspace(ct_backend *be, const ct_layer *l, int n)
{
    return ct_cuda_stage_workspace(be, l, n) + kernel_bytes(l, n);
}

const ct_layer_ops ct_cuda_batchnorm_ops = {
    .forward = batchnorm_forward_op,
    .backward = batchnorm_backward_op,
    .workspace_bytes = batchnorm_workspace,
};
const unsigned ct_cuda_batchnorm_dtypes = CT_CUDA_DTYPES_ALL;
