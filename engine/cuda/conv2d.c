/* Convolution through cuDNN's descriptor API, NHWC fp32: activations (n, h, w, c), filters
 * (f, kh, kw, c) (cuDNN's NHWC filter format, KRSC), bias (f), and the fused activation after it.
 * The algorithms of each direction are measured once per shape with the non-Ex
 * cudnnFind* calls, which run on buffers of their own (so a search never overwrites the gradients
 * we accumulate into), and cached with the descriptors they were measured with: a step only looks
 * its shape up, enqueues and returns, without allocating or waiting.
 *
 * TensorFlow's 'same' padding puts the odd unit of padding at the bottom/right, which cuDNN's
 * symmetric padding cannot say. Such a layer convolves a copy of x with the extra zero row and
 * column appended ((n, h + extra_h, w + extra_w, c), in the shared workspace) under the symmetric
 * padding (pad_t, pad_l); its input gradient comes out at the padded size and is cropped back.
 *
 * Shared workspace of a convolution at batch n (the backend's, from reserve):
 *   [ padded x | padded dx ]  only when an extra row or column is needed, each rounded to 256 bytes
 *   [ cuDNN algorithm workspace, up to CT_CUDNN_WORKSPACE_LIMIT ] */
#include <string.h>

#include "cuda/layer_common.h"

/* ---- the per-shape caches ---- */

/* What fixes a convolution's descriptors and algorithms (ints only: the cache compares bytes). */
typedef struct conv_key {
    int n, h, w, c, f, kh, kw, stride, pad_t, pad_l, extra_h, extra_w;
} conv_key;

/* One direction's measured choice. */
typedef struct conv_choice {
    int ready;          /* searched */
    int algo;           /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    size_t bytes;       /* its workspace */
} conv_choice;

typedef struct conv_entry {
    conv_key key;
    cudnnTensorDescriptor_t x;       /* (n, hp, wp, c): x, or its padded copy; also dx */
    cudnnTensorDescriptor_t y;       /* (n, oh, ow, f): y and dz */
    cudnnFilterDescriptor_t w;       /* (f, kh, kw, c): w and dw */
    /* one per direction: each carries the math type its algorithm was measured with */
    cudnnConvolutionDescriptor_t conv_fwd, conv_bwd_data, conv_bwd_filter;
    conv_choice fwd, bwd_data, bwd_filter;
} conv_entry;

/* ---- geometry ---- */

typedef struct conv_geom {
    conv_key key;
    int oh, ow;
    int hp, wp;                      /* input as convolved: h + extra_h, w + extra_w */
    size_t pad_bytes;                /* one padded copy, rounded up; 0 when no extra is needed */
} conv_geom;

enum { WS_ALIGN = 256 };             /* cudaMalloc's alignment; cuDNN's workspace keeps it */

static size_t align_up(size_t bytes) { return (bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

static int max_int(int a, int b) { return a > b ? a : b; }

/* The layer's geometry at batch n. extra_* is what the symmetric padding pad_* falls short of
 * the 'same' output size: (oh - 1) * stride + kh = the rows the windows span = h + pads. It is 0
 * for 'valid' layers and for 'same' ones whose total padding is even. */
static conv_geom conv_geometry(const ct_layer *l, int n)
{
    conv_geom g;
    memset(&g, 0, sizeof g);
    ct_window_geom d = ct_layer_window(l, n);
    g.key = (conv_key){d.n, d.h, d.w, d.c, d.f, d.kh, d.kw, d.stride, d.pad_t, d.pad_l, 0, 0};
    g.oh = d.oh;
    g.ow = d.ow;
    g.key.extra_h = max_int(0, (d.oh - 1) * d.stride + d.kh - d.h - 2 * d.pad_t);
    g.key.extra_w = max_int(0, (d.ow - 1) * d.stride + d.kw - d.w - 2 * d.pad_l);
    g.hp = g.key.h + g.key.extra_h;
    g.wp = g.key.w + g.key.extra_w;
    if (g.key.extra_h || g.key.extra_w)
        g.pad_bytes = align_up((size_t)n * g.hp * g.wp * g.key.c * sizeof(float));
    return g;
}

// bytes: 2 padded (n, h + extra_h, w + extra_w, c) fp32 copies when needed, then the algorithms'
static size_t conv_workspace(ct_backend *be, const ct_layer *l, int n)
{
    (void)be;
    conv_geom g = conv_geometry(l, n);
    return 2 * g.pad_bytes + CT_CUDNN_WORKSPACE_LIMIT;
}

/* The algorithm search allocates and synchronises, which a CUDA graph capture forbids; the first
 * run of each step is never captured, so reaching this inside one is a caller's bug. */
static ct_status ready_to_search(ct_cuda *cu, ct_err *err)
{
    enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CT_CUDA_CHECK(cudaStreamIsCapturing(cu->compute, &capture), err);
    if (capture != cudaStreamCaptureStatusNone)
        return ct_fail(err, CT_ERR_INTERNAL,
                       "a new convolution shape reached cuDNN's algorithm search inside a CUDA graph capture "
                       "(run each step shape once uncaptured first)");
    /* the non-Ex searches read no data of ours, but finishing the queued work first keeps it out
     * of their timings */
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->compute), err);
    return CT_OK;
}

static void conv_entry_destroy(void *entry)
{
    conv_entry *e = entry;
    /* nothing useful to do with a failure while releasing */
    if (e->x) cudnnDestroyTensorDescriptor(e->x);
    if (e->y) cudnnDestroyTensorDescriptor(e->y);
    if (e->w) cudnnDestroyFilterDescriptor(e->w);
    if (e->conv_fwd) cudnnDestroyConvolutionDescriptor(e->conv_fwd);
    if (e->conv_bwd_data) cudnnDestroyConvolutionDescriptor(e->conv_bwd_data);
    if (e->conv_bwd_filter) cudnnDestroyConvolutionDescriptor(e->conv_bwd_filter);
    memset(e, 0, sizeof *e);
}


/* ---- convolution descriptors and algorithm search ---- */

/* fp32 math without TF32 (CUDNN_FMA_MATH) unless TF32 is allowed, as PyTorch's
 * torch.backends.cudnn.allow_tf32 does: with CUDNN_DEFAULT_MATH the search may also pick tensor-op
 * (TF32) algorithms, and reports which math type each result used. */
static cudnnMathType_t search_math(const ct_cuda *cu)
{
    return cu->allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

static ct_status make_conv_descriptor(ct_cuda *cu, const conv_geom *g, cudnnConvolutionDescriptor_t *out,
                                      ct_err *err)
{
    CT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(out), err);
    /* cross-correlation, as every framework's "convolution"; fp32 accumulation */
    CT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(*out, g->key.pad_t, g->key.pad_l, g->key.stride, g->key.stride,
                                                   1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), err);
    CT_CUDNN_CHECK(cudnnSetConvolutionMathType(*out, search_math(cu)), err);
    return CT_OK;
}

// entry: zeroed but for its key; fills its descriptors for the conv_geom `how` (x (n, hp, wp, c),
// w (f, kh, kw, c), y (n, oh, ow, f))
static ct_status conv_entry_make(ct_cuda *cu, const void *how, void *entry, ct_err *err)
{
    const conv_geom *g = how;
    conv_entry *e = entry;
    const conv_key *k = &e->key;
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x), err);
    CT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, k->n, k->c, g->hp, g->wp),
                   err);
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->y), err);
    CT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, k->n, k->f, g->oh, g->ow),
                   err);
    CT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->w), err);
    /* (k, c, h, w) are named in that order whatever the layout; NHWC stores them (k, h, w, c) */
    CT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(e->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, k->f, k->c, k->kh, k->kw),
                   err);
    ct_status st = make_conv_descriptor(cu, g, &e->conv_fwd, err);
    if (st == CT_OK) st = make_conv_descriptor(cu, g, &e->conv_bwd_data, err);
    if (st == CT_OK) st = make_conv_descriptor(cu, g, &e->conv_bwd_filter, err);
    if (st != CT_OK)
        return st;

    /* the padded geometry must give exactly the layer's output size */
    int on = 0, oc = 0, oh = 0, ow = 0;
    CT_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(e->conv_fwd, e->x, e->w, &on, &oc, &oh, &ow), err);
    if (on != k->n || oc != k->f || oh != g->oh || ow != g->ow)
        return ct_fail(err, CT_ERR_INTERNAL,
                       "cuDNN's output %dx%dx%dx%d differs from the layer's %dx%dx%dx%d (input %dx%d padded to "
                       "%dx%d, pads %d,%d, stride %d)",
                       on, oh, ow, oc, k->n, g->oh, g->ow, k->f, k->h, k->w, g->hp, g->wp, k->pad_t, k->pad_l,
                       k->stride);
    return CT_OK;
}

static const ct_dnn_entry_type conv_entries = {sizeof(conv_entry), sizeof(conv_key), conv_entry_make,
                                               conv_entry_destroy};

void ct_cuda_conv_cache_free(ct_cuda *cu) { ct_cuda_dnn_cache_free(&cu->conv, &conv_entries); }

/* The cached entry for the layer's shape at batch n, created (descriptors only) on a miss. */
static ct_status conv_entry_get(ct_cuda *cu, const conv_geom *g, conv_entry **out, ct_err *err)
{
    void *e = NULL;
    ct_status st = ct_cuda_dnn_cache_get(cu, &cu->conv, &conv_entries, &g->key, g, &e, err);
    *out = e;
    return st;
}

/* Whether a measured result is one we may run: it ran, fits the algorithm workspace, gives the
 * same bits every time (a replayed CUDA graph must match direct launches exactly), and stays in
 * plain fp32 unless TF32 is allowed. TENSOR_OP_MATH_ALLOW_CONVERSION may round fp32 to fp16: never. */
static int usable(const ct_cuda *cu, cudnnStatus_t status, size_t memory, cudnnDeterminism_t determinism,
                  cudnnMathType_t math, size_t limit)
{
    if (status != CUDNN_STATUS_SUCCESS || memory > limit || determinism != CUDNN_DETERMINISTIC)
        return 0;
    if (math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
        return 0;
    if (!cu->allow_tf32 && math == CUDNN_TENSOR_OP_MATH)
        return 0;
    return 1;
}

/* The math type to run a chosen result with: its own, except that without TF32 the descriptor
 * stays CUDNN_FMA_MATH, the setting the search ran under. */
static ct_status set_math(const ct_cuda *cu, cudnnConvolutionDescriptor_t conv, cudnnMathType_t math, ct_err *err)
{
    CT_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, cu->allow_tf32 ? math : CUDNN_FMA_MATH), err);
    return CT_OK;
}

/* The search tries every algorithm, each with the workspace it asks for: one that cannot get its
 * memory is reported in its perf entry, but the runtime may keep the failed allocation as its last
 * error, which the next kernel launcher's cudaGetLastError would then report as its own. Our own
 * calls are checked where they happen and a kernel fault is sticky, so clearing hides nothing. */
static void clear_search_error(void) { (void)cudaGetLastError(); }

enum { MAX_ALGOS = 32 };   /* above any of cuDNN 9's *_ALGO_COUNT */

static int clamp_count(int count) { return count < 1 ? 1 : count > MAX_ALGOS ? MAX_ALGOS : count; }

static ct_status no_algorithm(ct_err *err, const char *what, int returned, size_t limit)
{
    return ct_fail(err, CT_ERR_BACKEND,
                   "cuDNN offers no deterministic %s algorithm within %zu MiB of workspace (%d measured)", what,
                   limit >> 20, returned);
}

// Measures the forward algorithms for e's shape; keeps the fastest usable one.
static ct_status search_forward(ct_cuda *cu, conv_entry *e, size_t limit, ct_err *err)
{
    cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
    int max = 0, returned = 0, best = -1;
    CT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(cu->dnn, &max), err);
    CT_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(cu->dnn, e->x, e->w, e->conv_fwd, e->y, clamp_count(max),
                                                        &returned, perf), err);
    clear_search_error();
    for (int i = 0; i < returned; i++)
        if (usable(cu, perf[i].status, perf[i].memory, perf[i].determinism, perf[i].mathType, limit) &&
            (best < 0 || perf[i].time < perf[best].time))
            best = i;
    if (best < 0)
        return no_algorithm(err, "forward convolution", returned, limit);
    ct_status st = set_math(cu, e->conv_fwd, perf[best].mathType, err);
    if (st != CT_OK)
        return st;
    e->fwd = (conv_choice){1, (int)perf[best].algo, perf[best].memory};
    return CT_OK;
}

// Measures the backward-data algorithms (dx from dz and w); keeps the fastest usable one.
static ct_status search_backward_data(ct_cuda *cu, conv_entry *e, size_t limit, ct_err *err)
{
    cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
    int max = 0, returned = 0, best = -1;
    CT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cu->dnn, &max), err);
    CT_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(cu->dnn, e->w, e->y, e->conv_bwd_data, e->x,
                                                             clamp_count(max), &returned, perf), err);
    clear_search_error();
    for (int i = 0; i < returned; i++)
        if (usable(cu, perf[i].status, perf[i].memory, perf[i].determinism, perf[i].mathType, limit) &&
            (best < 0 || perf[i].time < perf[best].time))
            best = i;
    if (best < 0)
        return no_algorithm(err, "backward-data convolution", returned, limit);
    ct_status st = set_math(cu, e->conv_bwd_data, perf[best].mathType, err);
    if (st != CT_OK)
        return st;
    e->bwd_data = (conv_choice){1, (int)perf[best].algo, perf[best].memory};
    return CT_OK;
}

// Measures the backward-filter algorithms (dw from x and dz); keeps the fastest usable one.
static ct_status search_backward_filter(ct_cuda *cu, conv_entry *e, size_t limit, ct_err *err)
{
    cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
    int max = 0, returned = 0, best = -1;
    CT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cu->dnn, &max), err);
    CT_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(cu->dnn, e->x, e->y, e->conv_bwd_filter, e->w,
                                                               clamp_count(max), &returned, perf), err);
    clear_search_error();
    for (int i = 0; i < returned; i++)
        if (usable(cu, perf[i].status, perf[i].memory, perf[i].determinism, perf[i].mathType, limit) &&
            (best < 0 || perf[i].time < perf[best].time))
            best = i;
    if (best < 0)
        return no_algorithm(err, "backward-filter convolution", returned, limit);
    ct_status st = set_math(cu, e->conv_bwd_filter, perf[best].mathType, err);
    if (st != CT_OK)
        return st;
    e->bwd_filter = (conv_choice){1, (int)perf[best].algo, perf[best].memory};
    return CT_OK;
}

/* What one convolution call works with: its cache entry, the pad buffers and the algorithm
 * workspace carved out of the shared workspace. */
typedef struct conv_run {
    conv_geom g;
    conv_entry *e;
    float *xp, *dxp;                 /* padded x and dx (NULL when no extra row or column) */
    void *algo_ws;
    size_t algo_ws_bytes;            /* what the shared workspace leaves after the pad buffers */
} conv_run;

static ct_status conv_prepare(ct_backend *be, const ct_layer *l, int n, conv_run *r, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    r->g = conv_geometry(l, n);
    const conv_geom *g = &r->g;
    if (!ct_cuda_dnn_fits_int((size_t)n, (size_t)g->hp, (size_t)g->wp, (size_t)g->key.c) ||
        !ct_cuda_dnn_fits_int((size_t)n, (size_t)g->oh, (size_t)g->ow, (size_t)g->key.f))
        return ct_fail(err, CT_ERR_BACKEND,
                       "a batch of %d is too large for cuDNN's 32-bit tensor indexing in this layer", n);
    size_t pads = 2 * g->pad_bytes;
    if (!cu->workspace || cu->workspace_size < pads)
        return ct_fail(err, CT_ERR_INTERNAL, "the shared workspace (%zu bytes) is smaller than the %zu bytes of pad "
                       "buffers this convolution needs", cu->workspace_size, pads);
    r->xp = g->pad_bytes ? (float *)cu->workspace : NULL;
    r->dxp = g->pad_bytes ? (float *)((char *)cu->workspace + g->pad_bytes) : NULL;
    r->algo_ws = (char *)cu->workspace + pads;
    r->algo_ws_bytes = cu->workspace_size - pads;
    return conv_entry_get(cu, g, &r->e, err);
}

/* The search's workspace allowance: the shared workspace is sized from conv_workspace, so
 * this is CT_CUDNN_WORKSPACE_LIMIT unless the network sized it otherwise. */
static size_t search_limit(const conv_run *r)
{
    return r->algo_ws_bytes < CT_CUDNN_WORKSPACE_LIMIT ? r->algo_ws_bytes : CT_CUDNN_WORKSPACE_LIMIT;
}

/* A cached choice is run only where its workspace fits (it always does when the network sized
 * the workspace from conv_workspace). */
static ct_status check_fits(const conv_run *r, const conv_choice *c, ct_err *err)
{
    if (c->bytes > r->algo_ws_bytes)
        return ct_fail(err, CT_ERR_INTERNAL, "the cuDNN algorithm chosen needs %zu bytes of workspace, %zu are left",
                       c->bytes, r->algo_ws_bytes);
    return CT_OK;
}

// x: (n, h, w, c) fp32; w: (f, kh, kw, c); b: (f) or NULL; z: (n, oh, ow, f), overwritten
static ct_status conv_forward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    conv_run r;
    ct_status st = conv_prepare(be, l, n, &r, err);
    if (st != CT_OK)
        return st;
    conv_entry *e = r.e;
    if (!e->fwd.ready) {
        st = ready_to_search(cu, err);
        if (st == CT_OK)
            st = search_forward(cu, e, search_limit(&r), err);
        if (st != CT_OK)
            return st;
    }
    st = check_fits(&r, &e->fwd, err);
    if (st != CT_OK)
        return st;

    const conv_geom *g = &r.g;
    const float *x = ct_f32(l->x[0]);
    if (r.xp) {
        CT_CUDA_CHECK(ct_launch_pad_nhwc(x, r.xp, n, g->key.h, g->key.w, g->key.c, g->hp, g->wp, cu->compute), err);
        x = r.xp;
    }
    float *z = ct_f32(l->z);
    const float one = 1.0f, zero = 0.0f;
    CT_CUDNN_CHECK(cudnnConvolutionForward(cu->dnn, &one, e->x, x, e->w, ct_f32(l->w), e->conv_fwd,
                                           (cudnnConvolutionFwdAlgo_t)e->fwd.algo, r.algo_ws, e->fwd.bytes, &zero,
                                           e->y, z), err);
    if (l->b)
        CT_CUDA_CHECK(ct_launch_bias_activation_forward(z, ct_f32(l->b), (long)n * g->oh * g->ow, g->key.f,
                                                        (int)CT_ACT_LINEAR, cu->compute), err);
    return ct_cuda_apply_activation(be, l, n, err);
}

// dy: (n, oh, ow, f) -> dz, act' applied; x: (n, h, w, c); dx: like x or NULL, written or added to
// (l->dx_accumulate); dw: (f, kh, kw, c) or NULL, written; db: (f) or NULL, column sums of dz, written
static ct_status conv_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    float *dx = ct_f32(l->dx[0]), *dw = ct_f32(l->dw), *db = ct_f32(l->db);
    const float *w = ct_f32(l->w), *dz = NULL;
    conv_run r;
    ct_status st = ct_cuda_preactivation_grad(be, l, n, &dz, err);
    if (st == CT_OK)
        st = conv_prepare(be, l, n, &r, err);
    if (st != CT_OK)
        return st;
    conv_entry *e = r.e;
    int need_filter = dw != NULL, need_data = dx != NULL;
    if ((need_filter && !e->bwd_filter.ready) || (need_data && !e->bwd_data.ready)) {
        st = ready_to_search(cu, err);
        if (st == CT_OK && need_filter && !e->bwd_filter.ready)
            st = search_backward_filter(cu, e, search_limit(&r), err);
        if (st == CT_OK && need_data && !e->bwd_data.ready)
            st = search_backward_data(cu, e, search_limit(&r), err);
        if (st != CT_OK)
            return st;
    }

    const conv_geom *g = &r.g;
    const float one = 1.0f, zero = 0.0f;
    /* rows = n * oh * ow and few columns: the two-pass sum, its partials in the algorithm
     * workspace, which nothing else uses at this point of the stream */
    if (db)
        CT_CUDA_CHECK(ct_launch_column_sums_tall(dz, db, (long)n * g->oh * g->ow, g->key.f, r.algo_ws,
                                                 r.algo_ws_bytes, cu->compute), err);
    if (need_filter) {
        st = check_fits(&r, &e->bwd_filter, err);
        if (st != CT_OK)
            return st;
        const float *x = ct_f32(l->x[0]);
        if (r.xp) {
            /* the forward's padded copy is gone: the workspace is shared by every layer */
            CT_CUDA_CHECK(ct_launch_pad_nhwc(x, r.xp, n, g->key.h, g->key.w, g->key.c, g->hp, g->wp, cu->compute),
                          err);
            x = r.xp;
        }
        CT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cu->dnn, &one, e->x, x, e->y, dz, e->conv_bwd_filter,
                                                      (cudnnConvolutionBwdFilterAlgo_t)e->bwd_filter.algo, r.algo_ws,
                                                      e->bwd_filter.bytes, &zero, e->w, dw), err);
    }
    if (need_data) {
        st = check_fits(&r, &e->bwd_data, err);
        if (st != CT_OK)
            return st;
        /* straight into dx (beta 0 writes, beta 1 adds where an earlier consumer wrote it); with
         * padding, into the padded copy (beta 0 overwrites whatever the workspace held) and then
         * the in-bounds part is written or added to dx */
        int accumulate = l->dx_accumulate[0];
        float *target = r.dxp ? r.dxp : dx;
        CT_CUDNN_CHECK(cudnnConvolutionBackwardData(cu->dnn, &one, e->w, w, e->y, dz, e->conv_bwd_data,
                                                    (cudnnConvolutionBwdDataAlgo_t)e->bwd_data.algo, r.algo_ws,
                                                    e->bwd_data.bytes, !r.dxp && accumulate ? &one : &zero, e->x,
                                                    target), err);
        if (r.dxp)
            CT_CUDA_CHECK(ct_launch_crop_accumulate_nhwc(r.dxp, dx, n, g->key.h, g->key.w, g->key.c, g->hp, g->wp,
                                                         accumulate, cu->compute), err);
    }
    return CT_OK;
}

// x: (n, h, w, c) fp32 -> y: (n, oh, ow, f) = act(z); failures name the layer
static ct_status conv_forward_op(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    return st != CT_OK || n == 0 ? st : ct_cuda_named(l, conv_forward(be, l, n, err), err);
}

// dy: (n, oh, ow, f) fp32 -> dx (n, h, w, c), dw (f, kh, kw, c), db (f), written (dx added to where
// l->dx_accumulate says); failures name the layer
static ct_status conv_backward_op(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_status st = ct_cuda_check_layer(l, n, err);
    return st != CT_OK || n == 0 ? st : ct_cuda_named(l, conv_backward(be, l, n, err), err);
}

const ct_layer_ops ct_cuda_conv2d_ops = {
    .forward = conv_forward_op,
    .backward = conv_backward_op,
    .workspace_bytes = conv_workspace,
};

