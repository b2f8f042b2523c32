/* Convolution through cuDNN's descriptor API, NHWC, in the layer's dtype (fp32; or fp16 / bf16
 * tensors with fp32 accumulation and tensor-op math, the half copy of the weights, and the dtype
 * staging of layer_common.h at the front of the workspace): activations (n, h, w, c), filters
 * (f, kh, kw, c) (cuDNN's NHWC filter format, KRSC), bias (f), and the fused activation after it.
 *
 * Algorithms. Each direction's (forward, backward data, backward filter) is measured once per
 * shape with cudnnFind*AlgorithmEx on our own buffers and the shared workspace (the non-Ex searches
 * allocate their own memory, whatever our workspace limit), and cached with the descriptors it was
 * measured with: a step only looks its shape up, enqueues and returns, without allocating or
 * waiting. The fastest usable algorithm runs; with deterministic = on the fastest deterministic
 * one, or, where none fits, the fastest of all and a note on the backend. One generic search
 * serves the three directions: a small adapter per direction runs its cuDNN call and turns its
 * perf structs into one common form.
 *
 * Epilogue. cuDNN writes the product into z, then one kernel pass adds the bias and applies the
 * activation: y = act(z + b). z is y itself unless the activation's gradient needs its input
 * (gelu; ct_layer_keeps_preactivation), when the same pass also leaves z + b in z. cuDNN's own
 * fused cudnnConvolutionBiasActivationForward is not used: it offers relu alone (identity only
 * with IMPLICIT_PRECOMP_GEMM), which would tie the algorithm choice to the activation.
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
    int dtype;                       /* ct_dtype of x, w, y (the layer's): fp32, fp16 or bf16 */
} conv_key;

/* The three directions of a convolution, each with its own algorithm. */
enum { FWD, BWD_DATA, BWD_FILTER, DIRECTIONS };

/* One direction's measured choice. */
typedef struct conv_choice {
    int ready;          /* searched */
    int algo;           /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    size_t bytes;       /* its workspace */
} conv_choice;

typedef struct conv_entry {
    conv_key key;
    cudnnTensorDescriptor_t x;       /* (n, hp, wp, c): x, or its padded copy; also dx */
    cudnnTensorDescriptor_t y;       /* (n, oh, ow, f): z and dz */
    cudnnFilterDescriptor_t w;       /* (f, kh, kw, c): w and dw */
    /* one per direction: each carries the math type its algorithm was measured with */
    cudnnConvolutionDescriptor_t conv[DIRECTIONS];
    conv_choice choice[DIRECTIONS];
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
    g.key = (conv_key){d.n, d.h, d.w, d.c, d.f, d.kh, d.kw, d.stride, d.pad_t, d.pad_l, 0, 0, (int)l->dtype};
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

// bytes: the dtype staging (layer_common.h), 2 padded (n, h + extra_h, w + extra_w, c) copies
// when needed (sized at 4 bytes an element), then the algorithms'
static size_t conv_workspace(ct_backend *be, const ct_layer *l, int n)
{
    (void)be;
    conv_geom g = conv_geometry(l, n);
    return ct_cuda_stage_need(l, n) + 2 * g.pad_bytes + CT_CUDNN_WORKSPACE_LIMIT;
}

static int is_half_key(const conv_key *k) { return ct_dtype_is_half((ct_dtype)k->dtype); }

static cudnnDataType_t dnn_type(int dtype)
{
    return dtype == CT_DTYPE_F16 ? CUDNN_DATA_HALF : dtype == CT_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

/* The algorithm search synchronises (and a backward-data one may allocate a throwaway output), which a
 * CUDA graph capture forbids; the first run of each step is never captured, so reaching this
 * inside one is a caller's bug. */
static ct_status ready_to_search(ct_cuda *cu, ct_err *err)
{
    enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CT_CUDA_CHECK(cudaStreamIsCapturing(cu->compute, &capture), err);
    if (capture != cudaStreamCaptureStatusNone)
        return ct_fail(err, CT_ERR_INTERNAL,
                       "a new convolution shape reached cuDNN's algorithm search inside a CUDA graph capture "
                       "(run each step shape once uncaptured first)");
    /* the search reads the inputs the queued work writes (the padded copy, dz), and finishing
     * that work first keeps it out of the timings */
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->compute), err);
    /* an error left pending before the search is reported, never cleared with the search's own
     * (clear_search_error) */
    if (cudaPeekAtLastError() != cudaSuccess)
        CT_CUDA_CHECK(cudaGetLastError(), err);
    return CT_OK;
}

static void conv_entry_destroy(void *entry)
{
    conv_entry *e = entry;
    /* nothing useful to do with a failure while releasing */
    if (e->x) cudnnDestroyTensorDescriptor(e->x);
    if (e->y) cudnnDestroyTensorDescriptor(e->y);
    if (e->w) cudnnDestroyFilterDescriptor(e->w);
    for (int d = 0; d < DIRECTIONS; d++)
        if (e->conv[d]) cudnnDestroyConvolutionDescriptor(e->conv[d]);
    memset(e, 0, sizeof *e);
}


/* ---- convolution descriptors and algorithm search ---- */

/* fp32 math without TF32 (CUDNN_FMA_MATH) unless TF32 is allowed, as PyTorch's
 * torch.backends.cudnn.allow_tf32 does: with CUDNN_DEFAULT_MATH the search may also pick tensor-op
 * (TF32) algorithms, and reports which math type each result used. */
static cudnnMathType_t search_math(const ct_cuda *cu, const conv_key *k)
{
    /* half tensors: tensor cores, accumulating in fp32 (the descriptor's compute type) */
    if (is_half_key(k))
        return CUDNN_TENSOR_OP_MATH;
    return cu->allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

static ct_status make_conv_descriptor(ct_cuda *cu, const conv_geom *g, cudnnConvolutionDescriptor_t *out,
                                      ct_err *err)
{
    CT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(out), err);
    /* cross-correlation, as every framework's "convolution"; fp32 accumulation (compute type
     * CUDNN_DATA_FLOAT) for half tensors too */
    CT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(*out, g->key.pad_t, g->key.pad_l, g->key.stride, g->key.stride,
                                                   1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), err);
    CT_CUDNN_CHECK(cudnnSetConvolutionMathType(*out, search_math(cu, &g->key)), err);
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
    CT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NHWC, dnn_type(k->dtype), k->n, k->c, g->hp, g->wp),
                   err);
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->y), err);
    CT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->y, CUDNN_TENSOR_NHWC, dnn_type(k->dtype), k->n, k->f, g->oh, g->ow),
                   err);
    CT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->w), err);
    /* (k, c, h, w) are named in that order whatever the layout; NHWC stores them (k, h, w, c) */
    CT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(e->w, dnn_type(k->dtype), CUDNN_TENSOR_NHWC, k->f, k->c, k->kh, k->kw),
                   err);
    for (int d = 0; d < DIRECTIONS; d++) {
        ct_status st = make_conv_descriptor(cu, g, &e->conv[d], err);
        if (st != CT_OK)
            return st;
    }

    /* the padded geometry must give exactly the layer's output size */
    int on = 0, oc = 0, oh = 0, ow = 0;
    CT_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(e->conv[FWD], e->x, e->w, &on, &oc, &oh, &ow), err);
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

/* The cached entry for the layer's shape at batch n, created (descriptors only) on a miss. */
static ct_status conv_entry_get(ct_cuda *cu, const conv_geom *g, conv_entry **out, ct_err *err)
{
    void *e = NULL;
    ct_status st = ct_cuda_dnn_cache_get(cu, &cu->conv, &conv_entries, &g->key, g, &e, err);
    *out = e;
    return st;
}

typedef ct_conv_algo_perf algo_perf;

/* The three cuDNN perf structs differ only in their algo's enum type. */
#define COPY_PERF(dst, src, count) do { \
    for (int i_ = 0; i_ < (count); i_++) \
        (dst)[i_] = (algo_perf){(int)(src)[i_].algo, (src)[i_].status, (src)[i_].time, (src)[i_].memory, \
                                (src)[i_].determinism, (src)[i_].mathType}; \
} while (0)

enum { MAX_ALGOS = 32 };   /* above any of cuDNN 9's *_ALGO_COUNT */

static int clamp_count(int count) { return count < 1 ? 1 : count > MAX_ALGOS ? MAX_ALGOS : count; }

/* The buffers a search runs on, as the step has them: the direction's inputs (forward: x, w;
 * backward data: w, dy; backward filter: x, dy), its output (z, dx or dw), which the search
 * overwrites with arbitrary values, and the algorithm workspace, whose size bounds the search. */
typedef struct search_io {
    const void *x, *w, *dy;
    void *out;
    void *ws;
    size_t ws_bytes;
} search_io;

/* One direction's measurement: cudnnFind*AlgorithmEx over e's descriptors and io's buffers, its
 * results into out (MAX_ALGOS entries), their number into *returned. */
typedef ct_status (*find_fn)(ct_cuda *cu, const conv_entry *e, const search_io *io, int *returned, algo_perf *out,
                             ct_err *err);

// x: (n, hp, wp, c); w: (f, kh, kw, c); out: (n, oh, ow, f)
static ct_status find_forward(ct_cuda *cu, const conv_entry *e, const search_io *io, int *returned, algo_perf *out,
                              ct_err *err)
{
    cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
    int max = 0;
    CT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(cu->dnn, &max), err);
    CT_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(cu->dnn, e->x, io->x, e->w, io->w, e->conv[FWD], e->y,
                                                          io->out, clamp_count(max), returned, perf, io->ws,
                                                          io->ws_bytes), err);
    COPY_PERF(out, perf, *returned);
    return CT_OK;
}

// w: (f, kh, kw, c); dy: (n, oh, ow, f); out: (n, hp, wp, c)
static ct_status find_backward_data(ct_cuda *cu, const conv_entry *e, const search_io *io, int *returned,
                                    algo_perf *out, ct_err *err)
{
    cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
    int max = 0;
    CT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cu->dnn, &max), err);
    CT_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(cu->dnn, e->w, io->w, e->y, io->dy, e->conv[BWD_DATA],
                                                               e->x, io->out, clamp_count(max), returned, perf,
                                                               io->ws, io->ws_bytes), err);
    COPY_PERF(out, perf, *returned);
    return CT_OK;
}

// x: (n, hp, wp, c); dy: (n, oh, ow, f); out: (f, kh, kw, c)
static ct_status find_backward_filter(ct_cuda *cu, const conv_entry *e, const search_io *io, int *returned,
                                      algo_perf *out, ct_err *err)
{
    cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
    int max = 0;
    CT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cu->dnn, &max), err);
    CT_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(cu->dnn, e->x, io->x, e->y, io->dy,
                                                                 e->conv[BWD_FILTER], e->w, io->out, clamp_count(max),
                                                                 returned, perf, io->ws, io->ws_bytes), err);
    COPY_PERF(out, perf, *returned);
    return CT_OK;
}

static const struct {
    const char *name;
    find_fn find;
} DIRECTION[DIRECTIONS] = {
    [FWD] = {"forward", find_forward},
    [BWD_DATA] = {"backward-data", find_backward_data},
    [BWD_FILTER] = {"backward-filter", find_backward_filter},
};

/* Whether a measured result is one we may run: it ran, fits the algorithm workspace, and stays in
 * plain fp32 unless TF32 is allowed. TENSOR_OP_MATH_ALLOW_CONVERSION may round fp32 to fp16:
 * never. */
static int usable(const algo_perf *p, size_t limit, int allow_tf32)
{
    if (p->status != CUDNN_STATUS_SUCCESS || p->memory > limit)
        return 0;
    if (p->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
        return 0;
    if (!allow_tf32 && p->math == CUDNN_TENSOR_OP_MATH)
        return 0;
    return 1;
}

/* Deterministic algorithms give the same bits every run, so that a replayed CUDA graph matches
 * direct launches exactly; without the request the fastest runs, as PyTorch does. */
int ct_cuda_conv_pick(const ct_conv_algo_perf *perf, int count, size_t limit, int allow_tf32, int deterministic,
                      int *fell_back)
{
    int best = -1, best_det = -1;
    for (int i = 0; i < count; i++) {
        if (!usable(&perf[i], limit, allow_tf32))
            continue;
        if (best < 0 || perf[i].time < perf[best].time)
            best = i;
        if (perf[i].determinism == CUDNN_DETERMINISTIC && (best_det < 0 || perf[i].time < perf[best_det].time))
            best_det = i;
    }
    *fell_back = deterministic && best_det < 0 && best >= 0;
    return deterministic && best_det >= 0 ? best_det : best;
}

/* The math type to run a chosen result with: its own, except that without TF32 the descriptor
 * stays CUDNN_FMA_MATH, the setting the search ran under. */
static ct_status set_math(const ct_cuda *cu, const conv_key *k, cudnnConvolutionDescriptor_t conv,
                          cudnnMathType_t math, ct_err *err)
{
    CT_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, cu->allow_tf32 || is_half_key(k) ? math : CUDNN_FMA_MATH), err);
    return CT_OK;
}

/* A search times every algorithm: one that fails (it cannot get its workspace from the limit we
 * give, or its launch fails) is reported in its perf entry, but the runtime may keep that failure
 * as its last error, which the next kernel launcher's cudaGetLastError would then report as its
 * own. ready_to_search reported anything pending before the search, and a kernel fault is sticky
 * (every later call returns it), so what this clears is the search's own. */
static void clear_search_error(void) { (void)cudaGetLastError(); }

static const char *conv_name(const ct_layer *l) { return l->cfg ? l->cfg->name : "conv2d"; }

/* Said once per backend: the first convolution that had to, and that others may follow. */
static void note_nondeterministic(ct_backend *be, const ct_layer *l, int dir, size_t limit)
{
    ct_cuda *cu = ct_cuda_of(be);
    if (cu->nondeterministic_noted)
        return;
    cu->nondeterministic_noted = 1;
    char text[400];
    snprintf(text, sizeof text,
             "deterministic = on, but cuDNN has no deterministic %s algorithm for [%s] within %zu MiB of workspace: "
             "it runs the fastest one, which may differ from run to run (so may other such convolutions)",
             DIRECTION[dir].name, conv_name(l), limit >> 20);
    ct_backend_add_note(be, text);
}

// Measures direction dir's algorithms for e's shape on io's buffers and keeps the one
// ct_cuda_conv_pick chooses. The caller has called ready_to_search.
static ct_status search(ct_backend *be, const ct_layer *l, conv_entry *e, int dir, const search_io *io,
                        ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    algo_perf perf[MAX_ALGOS];
    int returned = 0, fell_back = 0;
    ct_status st = DIRECTION[dir].find(cu, e, io, &returned, perf, err);
    clear_search_error();
    if (st != CT_OK)
        return st;
    /* half tensors run on tensor cores: their math is what was asked for, not a rounding of fp32 */
    int best = ct_cuda_conv_pick(perf, returned, io->ws_bytes, cu->allow_tf32 || is_half_key(&e->key),
                                 cu->deterministic, &fell_back);
    if (best < 0)
        return ct_fail(err, CT_ERR_BACKEND, "cuDNN offers no %s algorithm that runs within %zu MiB of workspace "
                       "(%d measured)", DIRECTION[dir].name, io->ws_bytes >> 20, returned);
    if (fell_back)
        note_nondeterministic(be, l, dir, io->ws_bytes);
    st = set_math(cu, &e->key, e->conv[dir], perf[best].math, err);
    if (st != CT_OK)
        return st;
    e->choice[dir] = (conv_choice){1, perf[best].algo, perf[best].memory};
    return CT_OK;
}

/* A throwaway output for a backward-data search whose real output, dx, another consumer has
 * already written (this layer adds to it): the search overwrites its output with arbitrary values.
 * Allocated for one search, outside any capture, from the device's allocator like every device
 * allocation (counted in its peak, under its cap; the plan does not count it, as it lives only for
 * the search). */
static ct_status search_scratch(ct_device *dev, size_t bytes, void **out, ct_err *err)
{
    *out = dev->ops->alloc(dev, bytes);
    if (!*out)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory on %s for a %.1f MiB output for cuDNN's algorithm search",
                       dev->label, (double)bytes / (1024.0 * 1024.0));
    return CT_OK;
}

/* What one convolution call works with: its cache entry, the pad buffers and the algorithm
 * workspace carved out of the shared workspace. */
typedef struct conv_run {
    conv_geom g;
    conv_entry *e;
    ct_cuda_stage stage;             /* the dtype staging, at the front of the workspace */
    void *xp, *dxp;                  /* padded x and dx (NULL when no extra row or column) */
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
    size_t staging = ct_cuda_stage_need(l, n), pads = staging + 2 * g->pad_bytes;
    if (!cu->workspace || cu->workspace_size < pads)
        return ct_fail(err, CT_ERR_INTERNAL, "the shared workspace (%zu bytes) is smaller than the %zu bytes of dtype "
                       "staging and pad buffers this convolution needs", cu->workspace_size, pads);
    r->stage.next = cu->workspace;
    r->stage.end = (char *)cu->workspace + staging;
    r->xp = g->pad_bytes ? (char *)cu->workspace + staging : NULL;
    r->dxp = g->pad_bytes ? (char *)cu->workspace + staging + g->pad_bytes : NULL;
    r->algo_ws = (char *)cu->workspace + pads;
    r->algo_ws_bytes = cu->workspace_size - pads;
    return conv_entry_get(cu, g, &r->e, err);
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

/* The search's view of the run's algorithm workspace: no more than CT_CUDNN_WORKSPACE_LIMIT,
 * which is what the shared workspace holds when the network sized it from conv_workspace. */
static void search_workspace(const conv_run *r, search_io *io)
{
    io->ws = r->algo_ws;
    io->ws_bytes = r->algo_ws_bytes < CT_CUDNN_WORKSPACE_LIMIT ? r->algo_ws_bytes : CT_CUDNN_WORKSPACE_LIMIT;
}

/* The weights and bias the layer convolves with: the fp32 masters for an fp32 layer, the half copy
 * for a half one, as the CPU's half path. */
static const void *conv_weights(const ct_layer *l) { return ct_dtype_is_half(l->dtype) ? l->w_half->data : l->w->data; }

static const void *conv_bias(const ct_layer *l)
{
    if (ct_dtype_is_half(l->dtype))
        return l->b_half ? l->b_half->data : NULL;
    return l->b ? l->b->data : NULL;
}

// x: (n, h, w, c) any dtype (cast to the layer's first); w: (f, kh, kw, c); b: (f) or NULL;
// z: (n, oh, ow, f) = conv + b, kept only where it is not y; y: (n, oh, ow, f) = act(conv + b); w,
// b, z, y in the layer's dtype. Half: cuDNN accumulates in fp32 and stores the product in half,
// then the epilogue adds the bias in fp32 and rounds once more (the CPU rounds only the sum).
static ct_status conv_forward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    const ct_dtype dt = l->dtype;
    if (ct_dtype_is_half(dt) && !l->w_half)
        return ct_fail(err, CT_ERR_INTERNAL, "a %s convolution without the half copy of its weights",
                       ct_dtype_name(dt));
    conv_run r;
    ct_status st = conv_prepare(be, l, n, &r, err);
    if (st != CT_OK)
        return st;
    conv_entry *e = r.e;
    const conv_geom *g = &r.g;
    const void *x = NULL, *w = conv_weights(l);
    st = ct_cuda_input_as(be, l, 0, n, dt, &r.stage, &x, err);
    if (st != CT_OK)
        return st;
    if (r.xp) {
        CT_CUDA_CHECK(ct_launch_pad_nhwc_dt(x, r.xp, n, g->key.h, g->key.w, g->key.c, g->hp, g->wp, (int)dt,
                                            cu->compute), err);
        x = r.xp;
    }
    void *z = l->z->data, *y = l->y->data;
    if (!e->choice[FWD].ready) {
        /* on the step's own input and weights; its output is z, which the convolution overwrites */
        search_io io = {.x = x, .w = w, .out = z};
        search_workspace(&r, &io);
        st = ready_to_search(cu, err);
        if (st == CT_OK)
            st = search(be, l, e, FWD, &io, err);
        if (st != CT_OK)
            return st;
    }
    const conv_choice *c = &e->choice[FWD];
    st = check_fits(&r, c, err);
    if (st != CT_OK)
        return st;
    /* alpha and beta are floats for fp32, fp16 and bf16 data alike */
    const float one = 1.0f, zero = 0.0f;
    CT_CUDNN_CHECK(cudnnConvolutionForward(cu->dnn, &one, e->x, x, e->w, w, e->conv[FWD],
                                           (cudnnConvolutionFwdAlgo_t)c->algo, r.algo_ws, c->bytes, &zero, e->y, z),
                   err);
    /* the epilogue in one pass: y = act(z + b), and z = z + b where z is kept apart from y */
    CT_CUDA_CHECK(ct_launch_bias_activation_keep_dt(z, conv_bias(l), y, (long)n * g->oh * g->ow, g->key.f,
                                                    (int)l->act, (int)dt, (int)dt, cu->compute), err);
    return CT_OK;
}

/* The backward searches that are due, on the step's own dz, x (its padded copy when there is one,
 * which the caller has made) and w. The backward then writes dw (beta 0), so the filter search
 * may write there too; dx only when this layer is its first writer and there is no padded copy,
 * else the padded copy (free until the backward-data convolution) or a throwaway buffer. */
static ct_status search_backward(ct_backend *be, const ct_layer *l, const conv_run *r, const void *x,
                                 const void *w, const void *dz, void *dw, void *dx, int accumulate, int need_filter,
                                 int need_data, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    conv_entry *e = r->e;
    const conv_geom *g = &r->g;
    int filter = need_filter && !e->choice[BWD_FILTER].ready, data = need_data && !e->choice[BWD_DATA].ready;
    if (!filter && !data)
        return CT_OK;
    ct_status st = ready_to_search(cu, err);
    if (st == CT_OK && filter) {
        search_io io = {.x = x, .dy = dz, .out = dw};
        search_workspace(r, &io);
        st = search(be, l, e, BWD_FILTER, &io, err);
    }
    if (st == CT_OK && data) {
        void *dx_direct = !r->dxp && !accumulate ? dx : NULL;
        search_io io = {.w = w, .dy = dz, .out = r->dxp ? r->dxp : dx_direct};
        search_workspace(r, &io);
        int own = io.out == NULL;
        if (own)
            st = search_scratch(be->dev,
                                (size_t)g->key.n * g->hp * g->wp * g->key.c * ct_dtype_size((ct_dtype)g->key.dtype),
                                &io.out, err);
        if (st == CT_OK)
            st = search(be, l, e, BWD_DATA, &io, err);
        if (own)
            be->dev->ops->free(be->dev, io.out);
    }
    return st;
}

// dy: (n, oh, ow, f) l->dtype -> dz, act' applied; x: (n, h, w, c) any dtype (cast to the layer's);
// dx: like x or NULL, in its producer's dtype, written or added to (l->dx_accumulate); dw: (f, kh,
// kw, c) fp32 or NULL, written; db: (f) fp32 or NULL, column sums of dz, written.
// Half layers: cuDNN's backward filter writes a filter of the data's type, so dw is computed into a
// half buffer in the workspace (fp32 accumulation, one rounding to half) and widened exactly into
// the fp32 master gradient: one rounding the CPU, whose fp32 op stores dw in fp32, does not make.
// A dx of another dtype than the layer's goes through the workspace (ct_cuda_grad_begin).
static ct_status conv_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    const ct_dtype dt = l->dtype;
    const int half = ct_dtype_is_half(dt);
    if (half && !l->w_half)
        return ct_fail(err, CT_ERR_INTERNAL, "a %s convolution without the half copy of its weights",
                       ct_dtype_name(dt));
    float *dw32 = ct_f32(l->dw), *db = ct_f32(l->db);
    const void *w = conv_weights(l), *dz = NULL;
    conv_run r;
    ct_status st = ct_cuda_preactivation_grad(be, l, n, &dz, err);
    if (st == CT_OK)
        st = conv_prepare(be, l, n, &r, err);
    if (st != CT_OK)
        return st;
    conv_entry *e = r.e;
    const conv_geom *g = &r.g;
    int need_filter = dw32 != NULL, need_data = l->dx[0] != NULL;
    const void *x = NULL;
    void *dx = NULL, *dw = dw32;
    int accumulate = 0;
    if (need_filter) {
        st = ct_cuda_input_as(be, l, 0, n, dt, &r.stage, &x, err);
        if (st == CT_OK && half)
            st = ct_cuda_stage_take(&r.stage, l->w_count * ct_dtype_size(dt), &dw, err);
        if (st != CT_OK)
            return st;
    }
    if (need_data) {
        st = ct_cuda_grad_begin(l, 0, n, dt, &r.stage, &dx, &accumulate, err);
        if (st != CT_OK)
            return st;
    }
    if (need_filter && r.xp) {
        /* the forward's padded copy is gone: the workspace is shared by every layer */
        CT_CUDA_CHECK(ct_launch_pad_nhwc_dt(x, r.xp, n, g->key.h, g->key.w, g->key.c, g->hp, g->wp, (int)dt,
                                            cu->compute), err);
        x = r.xp;
    }
    st = search_backward(be, l, &r, x, w, dz, dw, dx, accumulate, need_filter, need_data, err);
    if (st != CT_OK)
        return st;

    const float one = 1.0f, zero = 0.0f;
    /* rows = n * oh * ow and few columns: the two-pass sum, its partials in the algorithm
     * workspace, which nothing else uses at this point of the stream */
    if (db)
        CT_CUDA_CHECK(ct_launch_column_sums_tall_dt(dz, db, (long)n * g->oh * g->ow, g->key.f, r.algo_ws,
                                                    r.algo_ws_bytes, (int)dt, cu->compute), err);
    if (need_filter) {
        const conv_choice *c = &e->choice[BWD_FILTER];
        st = check_fits(&r, c, err);
        if (st != CT_OK)
            return st;
        CT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cu->dnn, &one, e->x, x, e->y, dz, e->conv[BWD_FILTER],
                                                      (cudnnConvolutionBwdFilterAlgo_t)c->algo, r.algo_ws, c->bytes,
                                                      &zero, e->w, dw), err);
        if (dw != (void *)dw32)
            CT_CUDA_CHECK(ct_launch_cast(dw, dw32, (long)l->w_count, (int)dt, (int)CT_DTYPE_F32, cu->compute), err);
    }
    if (need_data) {
        const conv_choice *c = &e->choice[BWD_DATA];
        st = check_fits(&r, c, err);
        if (st != CT_OK)
            return st;
        /* straight into dx (beta 0 writes, beta 1 adds where an earlier consumer wrote it); with
         * padding, into the padded copy (beta 0 overwrites whatever the workspace held) and then
         * the in-bounds part is written or added to dx */
        void *target = r.dxp ? r.dxp : dx;
        CT_CUDNN_CHECK(cudnnConvolutionBackwardData(cu->dnn, &one, e->w, w, e->y, dz, e->conv[BWD_DATA],
                                                    (cudnnConvolutionBwdDataAlgo_t)c->algo, r.algo_ws, c->bytes,
                                                    !r.dxp && accumulate ? &one : &zero, e->x, target), err);
        if (r.dxp)
            CT_CUDA_CHECK(ct_launch_crop_accumulate_nhwc_dt(r.dxp, dx, n, g->key.h, g->key.w, g->key.c, g->hp, g->wp,
                                                            accumulate, (int)dt, cu->compute), err);
        st = ct_cuda_grad_end(be, l, 0, n, dt, dx, err);
    }
    return st;
}

// x: (n, h, w, c) any dtype -> y: (n, oh, ow, f) l->dtype = act(z); failures name the layer
static ct_status conv_forward_op(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_status st = ct_cuda_check_layer(l, n, err);
    return st != CT_OK || n == 0 ? st : ct_cuda_named(l, conv_forward(be, l, n, err), err);
}

// dy: (n, oh, ow, f) l->dtype -> dx (n, h, w, c) its dtype, dw (f, kh, kw, c), db (f) fp32, written (dx added to where
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
const unsigned ct_cuda_conv2d_dtypes = CT_CUDA_DTYPES_ALL;

