/* Convolutions on oneDNN's C API (onednn.h). Activations stay in the backend's NHWC and the
 * weights in their (f, kh, kw, c) order; each primitive picks its own weights layout ("any"), and
 * a cached reorder converts them into the workspace (forward and backward data) or converts the
 * weight gradient back out of it (backward weights): a few hundred KiB per step against the
 * batch's megabytes. Each execution waits for its stream, so the caller sees finished results.
 *
 * A 3x3 stride-1 convolution whose channels come in sixteens may run Winograd's F(4x4, 3x3)
 * (ct_cpu_dnnl_conv.winograd): 2.1-2.8x faster than the direct kernels on ResNet's shapes, with
 * about 5x their rounding error (2e-6 of the largest output, against 4e-7). oneDNN's Winograd
 * reads only its blocked layout (nChw16c), so such a primitive's activations are reordered into
 * the workspace and back: two passes over each tensor, a fifth of what Winograd saves. */
#include <omp.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "cpu/cpu_ops.h"
#include "cpu/onednn.h"

/* The one check for oneDNN calls: the call's text and oneDNN's status name in the message. */
#define CT_DNNL_CHECK(call)                                                                          \
    do {                                                                                             \
        dnnl_status_t s_ = (call);                                                                   \
        if (s_ != dnnl_success)                                                                      \
            return ct_fail(err, CT_ERR_BACKEND, "oneDNN: %s failed (status %d)", #call, (int)s_);  \
    } while (0)

enum { WS_ALIGN = 64 };   /* bytes: every region of the workspace starts on a cache line */

static size_t aligned(size_t bytes) { return (bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

typedef enum conv_kind { CONV_FWD, CONV_BWD_DATA, CONV_BWD_WEIGHTS } conv_kind;
typedef enum conv_algo { ALGO_DIRECT, ALGO_WINOGRAD } conv_algo;

/* What one cached primitive is specific to. Built field by field from zero, so memcmp compares.
 * oneDNN splits the work for the OpenMP thread count at creation (the weight gradient's reduction
 * among them), so a primitive is made for, and runs on, one count: results are the same for the
 * same count whichever thread made the primitive. */
typedef struct conv_key {
    int kind;
    int algo;                /* conv_algo */
    ct_window_geom g;
    int bias, act;
    int threads;
} conv_key;

/* M_SRC and M_DST are the caller's NHWC tensors (the data or its gradient); M_BLK_SRC and
 * M_BLK_DST their blocked copies in the workspace, for a primitive that does not read NHWC. */
enum { M_SRC, M_WEIGHTS, M_BIAS, M_DST, M_SCRATCH, M_PLAIN_W, M_BLK_SRC, M_BLK_DST, M_COUNT };

/* A primitive and what its execution needs: the memory objects whose data handles are set per
 * call, the reorder between the plain weights and the primitive's own layout (NULL when they are
 * the same), and those between the NHWC activations and the primitive's (NULL when it reads NHWC):
 * src_reorder brings the input in (forward, weight gradient) or takes the input gradient out
 * (backward data); dst_reorder takes the output out (forward) or brings its gradient in.
 * Workspace: [scratchpad][weights in the primitive's layout][blocked src][blocked dst]. */
typedef struct conv_entry {
    conv_key key;
    dnnl_primitive_t prim, reorder, src_reorder, dst_reorder;
    dnnl_memory_t mem[M_COUNT];
    size_t scratch_bytes, wblock_bytes, blk_src_bytes, blk_dst_bytes;
    struct conv_entry *next;
} conv_entry;

struct ct_cpu_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    conv_entry *entries;
};

static void entry_free(conv_entry *e)
{
    if (!e)
        return;
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    if (e->reorder)
        dnnl_primitive_destroy(e->reorder);
    if (e->src_reorder)
        dnnl_primitive_destroy(e->src_reorder);
    if (e->dst_reorder)
        dnnl_primitive_destroy(e->dst_reorder);
    for (int i = 0; i < M_COUNT; i++)
        if (e->mem[i])
            dnnl_memory_destroy(e->mem[i]);
    free(e);
}

ct_status ct_cpu_dnnl_create(ct_cpu_dnnl **out, ct_err *err)
{
    (void)err;
    *out = NULL;
    ct_cpu_dnnl *d = calloc(1, sizeof *d);
    if (!d)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating the oneDNN context");
    if (dnnl_engine_create(&d->engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags) != dnnl_success) {
        /* no CPU engine (an unsupported processor): the im2col path serves */
        ct_cpu_dnnl_destroy(d);
        return CT_OK;
    }
    *out = d;
    return CT_OK;
}

void ct_cpu_dnnl_destroy(ct_cpu_dnnl *d)
{
    if (!d)
        return;
    for (conv_entry *e = d->entries, *next; e; e = next) {
        next = e->next;
        entry_free(e);
    }
    if (d->stream)
        dnnl_stream_destroy(d->stream);
    if (d->engine)
        dnnl_engine_destroy(d->engine);
    free(d);
}

int ct_cpu_dnnl_fuses(ct_activation act) { return act == CT_ACT_RELU || act == CT_ACT_LEAKY; }

/* ---- descriptors ---- */

/* src and dst: the caller's NHWC; prim_src and prim_dst: what the primitive reads and writes
 * (the same for the direct kernels, nChw16c for Winograd). */
typedef struct conv_mds {
    dnnl_memory_desc_t src, dst, prim_src, prim_dst, weights_any, weights_plain, bias;
    dnnl_alg_kind_t alg;
    dnnl_dims_t strides, pad_l, pad_r;
} conv_mds;

/* The bottom and right padding that make oneDNN's output size (in - k + pl + pr) / s + 1 equal
 * ours: TensorFlow's `same` puts the extra there; a valid window that leaves input over needs 0. */
static int64_t pad_after(int in, int k, int stride, int before, int out)
{
    int64_t p = (int64_t)(out - 1) * stride + k - in - before;
    return p > 0 ? p : 0;
}

static ct_status make_mds(const ct_window_geom *g, conv_algo algo, conv_mds *m, ct_err *err)
{
    dnnl_dims_t src = {g->n, g->c, g->h, g->w}, dst = {g->n, g->f, g->oh, g->ow};
    dnnl_dims_t wts = {g->f, g->c, g->kh, g->kw}, bias = {g->f};
    dnnl_format_tag_t prim_tag = algo == ALGO_WINOGRAD ? dnnl_nChw16c : dnnl_nhwc;
    m->alg = algo == ALGO_WINOGRAD ? dnnl_convolution_winograd : dnnl_convolution_direct;
    CT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&m->src, 4, src, dnnl_f32, dnnl_nhwc));
    CT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&m->dst, 4, dst, dnnl_f32, dnnl_nhwc));
    CT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&m->prim_src, 4, src, dnnl_f32, prim_tag));
    CT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&m->prim_dst, 4, dst, dnnl_f32, prim_tag));
    CT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&m->weights_plain, 4, wts, dnnl_f32, dnnl_ohwi));
    CT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&m->weights_any, 4, wts, dnnl_f32, dnnl_format_tag_any));
    CT_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&m->bias, 1, bias, dnnl_f32, dnnl_x));
    m->strides[0] = m->strides[1] = g->stride;
    m->pad_l[0] = g->pad_t;
    m->pad_l[1] = g->pad_l;
    m->pad_r[0] = pad_after(g->h, g->kh, g->stride, g->pad_t, g->oh);
    m->pad_r[1] = pad_after(g->w, g->kw, g->stride, g->pad_l, g->ow);
    return CT_OK;
}

/* An attribute with the scratchpad in the caller's memory and, for a forward, the fused activation. */
static ct_status make_attr(dnnl_primitive_attr_t *attr, int act, ct_err *err)
{
    CT_DNNL_CHECK(dnnl_primitive_attr_create(attr));
    CT_DNNL_CHECK(dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user));
    if (ct_cpu_dnnl_fuses((ct_activation)act)) {
        dnnl_post_ops_t ops;
        CT_DNNL_CHECK(dnnl_post_ops_create(&ops));
        /* relu with a negative slope is leaky: x > 0 ? x : slope x, the bits of our own pass */
        dnnl_status_t s = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu,
                                                       act == CT_ACT_LEAKY ? CT_LEAKY_SLOPE : 0.0f, 0.0f);
        if (s == dnnl_success)
            s = dnnl_primitive_attr_set_post_ops(*attr, ops);
        dnnl_post_ops_destroy(ops);
        CT_DNNL_CHECK(s);
    }
    return CT_OK;
}

/* The forward descriptor: the primitive itself, or the hint a backward one is made from. */
static dnnl_status_t forward_pd(ct_cpu_dnnl *d, const conv_mds *m, int bias, const_dnnl_primitive_attr_t attr,
                                dnnl_primitive_desc_t *pd)
{
    dnnl_convolution_desc_t cd;
    dnnl_status_t s = dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, m->alg, &m->prim_src,
                                                         &m->weights_any, bias ? &m->bias : NULL, &m->prim_dst,
                                                         m->strides, m->pad_l, m->pad_r);
    return s == dnnl_success ? dnnl_primitive_desc_create(pd, &cd, attr, d->engine, NULL) : s;
}

/* The primitive descriptor of key k; *declined = 1 (CT_OK) when oneDNN has no implementation. */
static ct_status make_pd(ct_cpu_dnnl *d, const conv_key *k, dnnl_primitive_desc_t *pd, int *declined, ct_err *err)
{
    conv_mds m;
    ct_status st = make_mds(&k->g, (conv_algo)k->algo, &m, err);
    if (st != CT_OK)
        return st;
    dnnl_primitive_attr_t attr;
    if ((st = make_attr(&attr, k->kind == CONV_FWD ? k->act : CT_ACT_LINEAR, err)) != CT_OK)
        return st;
    dnnl_status_t s;
    *pd = NULL;
    if (k->kind == CONV_FWD) {
        s = forward_pd(d, &m, k->bias, attr, pd);
    } else {
        dnnl_primitive_desc_t hint = NULL;
        s = forward_pd(d, &m, k->bias, NULL, &hint);
        dnnl_convolution_desc_t cd;
        if (s == dnnl_success)
            s = k->kind == CONV_BWD_DATA
                    ? dnnl_convolution_backward_data_desc_init(&cd, m.alg, &m.prim_src, &m.weights_any, &m.prim_dst,
                                                               m.strides, m.pad_l, m.pad_r)
                    : dnnl_convolution_backward_weights_desc_init(&cd, m.alg, &m.prim_src, &m.weights_any,
                                                                  k->bias ? &m.bias : NULL, &m.prim_dst, m.strides,
                                                                  m.pad_l, m.pad_r);
        if (s == dnnl_success)
            s = dnnl_primitive_desc_create(pd, &cd, attr, d->engine, hint);
        if (hint)
            dnnl_primitive_desc_destroy(hint);
    }
    dnnl_primitive_attr_destroy(attr);
    *declined = s == dnnl_unimplemented;
    if (*declined)
        return CT_OK;
    CT_DNNL_CHECK(s);
    return CT_OK;
}

static ct_status new_memory(ct_cpu_dnnl *d, dnnl_memory_t *mem, const dnnl_memory_desc_t *md, ct_err *err)
{
    CT_DNNL_CHECK(dnnl_memory_create(mem, md, d->engine, DNNL_MEMORY_NONE));
    return CT_OK;
}

static ct_status new_reorder(ct_cpu_dnnl *d, dnnl_primitive_t *prim, const dnnl_memory_desc_t *from,
                             const dnnl_memory_desc_t *to, ct_err *err)
{
    dnnl_primitive_desc_t rpd;
    CT_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&rpd, from, d->engine, to, d->engine, NULL));
    dnnl_status_t s = dnnl_primitive_create(prim, rpd);
    dnnl_primitive_desc_destroy(rpd);
    CT_DNNL_CHECK(s);
    return CT_OK;
}

/* The blocked copies of a primitive that does not read NHWC, and their reorders, each way as the
 * kind needs it (conv_entry). */
static ct_status fill_blocked(ct_cpu_dnnl *d, conv_entry *e, const conv_mds *m, ct_err *err)
{
    if (dnnl_memory_desc_equal(&m->prim_src, &m->src))
        return CT_OK;
    conv_kind kind = (conv_kind)e->key.kind;
    e->blk_src_bytes = dnnl_memory_desc_get_size(&m->prim_src);
    e->blk_dst_bytes = dnnl_memory_desc_get_size(&m->prim_dst);
    ct_status st;
    if ((st = new_memory(d, &e->mem[M_BLK_SRC], &m->prim_src, err)) != CT_OK ||
        (st = new_memory(d, &e->mem[M_BLK_DST], &m->prim_dst, err)) != CT_OK)
        return st;
    st = kind == CONV_BWD_DATA ? new_reorder(d, &e->src_reorder, &m->prim_src, &m->src, err)
                               : new_reorder(d, &e->src_reorder, &m->src, &m->prim_src, err);
    if (st != CT_OK)
        return st;
    return kind == CONV_FWD ? new_reorder(d, &e->dst_reorder, &m->prim_dst, &m->dst, err)
                            : new_reorder(d, &e->dst_reorder, &m->dst, &m->prim_dst, err);
}

/* The primitive of pd and its memory objects; the reorder between the plain weights and the
 * primitive's layout where they differ. */
static ct_status fill_entry(ct_cpu_dnnl *d, conv_entry *e, dnnl_primitive_desc_t pd, ct_err *err)
{
    const conv_key *k = &e->key;
    conv_mds m;
    ct_status st = make_mds(&k->g, (conv_algo)k->algo, &m, err);
    if (st != CT_OK || (st = fill_blocked(d, e, &m, err)) != CT_OK)
        return st;
    CT_DNNL_CHECK(dnnl_primitive_create(&e->prim, pd));
    const dnnl_memory_desc_t *scratch = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(
        pd, k->kind == CONV_BWD_WEIGHTS ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
    e->scratch_bytes = scratch ? dnnl_memory_desc_get_size(scratch) : 0;
    if ((st = new_memory(d, &e->mem[M_SRC], &m.src, err)) != CT_OK ||
        (st = new_memory(d, &e->mem[M_DST], &m.dst, err)) != CT_OK ||
        (st = new_memory(d, &e->mem[M_BIAS], &m.bias, err)) != CT_OK ||
        (st = new_memory(d, &e->mem[M_WEIGHTS], wmd, err)) != CT_OK)
        return st;
    if (e->scratch_bytes && (st = new_memory(d, &e->mem[M_SCRATCH], scratch, err)) != CT_OK)
        return st;
    if (dnnl_memory_desc_equal(wmd, &m.weights_plain))
        return CT_OK;
    e->wblock_bytes = dnnl_memory_desc_get_size(wmd);
    if ((st = new_memory(d, &e->mem[M_PLAIN_W], &m.weights_plain, err)) != CT_OK)
        return st;
    /* the weights into the primitive's layout, or its weight gradient out of it */
    return k->kind == CONV_BWD_WEIGHTS ? new_reorder(d, &e->reorder, wmd, &m.weights_plain, err)
                                       : new_reorder(d, &e->reorder, &m.weights_plain, wmd, err);
}

/* The cached primitive of key k, made on first use; *out = NULL (CT_OK) when oneDNN declines it. */
static ct_status lookup(ct_cpu_dnnl *d, const conv_key *k, conv_entry **out, ct_err *err)
{
    *out = NULL;
    for (conv_entry *e = d->entries; e; e = e->next)
        if (memcmp(&e->key, k, sizeof *k) == 0) {
            *out = e->prim ? e : NULL;
            return CT_OK;
        }
    conv_entry *e = calloc(1, sizeof *e);
    if (!e)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for a oneDNN primitive");
    e->key = *k;
    dnnl_primitive_desc_t pd = NULL;
    int declined = 0;
    /* oneDNN reads the calling thread's OpenMP thread count (a per-thread setting) at creation */
    int caller = omp_get_max_threads();
    omp_set_num_threads(k->threads);
    ct_status st = make_pd(d, k, &pd, &declined, err);
    if (st == CT_OK && !declined)
        st = fill_entry(d, e, pd, err);
    omp_set_num_threads(caller);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (st != CT_OK) {
        entry_free(e);
        return st;
    }
    /* a declined key stays cached without a primitive, so that oneDNN is asked once */
    e->next = d->entries;
    d->entries = e;
    *out = e->prim ? e : NULL;
    return CT_OK;
}

/* The plan sizes the workspace for one thread per processor, a count that does not depend on the
 * asking thread (the half path asks again inside a step); a step runs on its own thread's count,
 * or on the plan's where that one's scratchpad would not fit (more threads than processors). */
static int plan_threads(void) { return omp_get_num_procs(); }

static conv_key key_of(const ct_cpu_dnnl_conv *c, conv_kind kind, conv_algo algo, int threads)
{
    conv_key k;
    memset(&k, 0, sizeof k);
    k.kind = kind;
    k.algo = algo;
    k.threads = threads;
    k.g = c->g;
    k.bias = c->bias;
    k.act = kind == CONV_FWD && ct_cpu_dnnl_fuses(c->act) ? (int)c->act : CT_ACT_LINEAR;
    return k;
}

/* The shapes oneDNN's Winograd takes without padding channels (whose blocked copies would be
 * larger than the tensors). */
static int winograd_shape(const ct_window_geom *g)
{
    return g->kh == 3 && g->kw == 3 && g->stride == 1 && g->c % 16 == 0 && g->f % 16 == 0;
}

/* The cached primitive of c's pass `kind` on `threads`: Winograd where c allows it and oneDNN takes
 * it, else the direct kernels; *out = NULL (CT_OK) when oneDNN declines both. */
static ct_status find(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, conv_kind kind, int threads, conv_entry **out,
                      ct_err *err)
{
    if (c->winograd && winograd_shape(&c->g)) {
        conv_key k = key_of(c, kind, ALGO_WINOGRAD, threads);
        ct_status st = lookup(d, &k, out, err);
        if (st != CT_OK || *out)
            return st;
    }
    conv_key k = key_of(c, kind, ALGO_DIRECT, threads);
    return lookup(d, &k, out, err);
}

static size_t entry_bytes(const conv_entry *e)
{
    return aligned(e->scratch_bytes) + aligned(e->wblock_bytes) + aligned(e->blk_src_bytes) +
           aligned(e->blk_dst_bytes);
}

/* Bytes of the accumulated input gradient's temporary. */
static size_t dx_bytes(const ct_window_geom *g) { return aligned((size_t)g->n * g->h * g->w * g->c * sizeof(float)); }

int ct_cpu_dnnl_conv2d_workspace(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, size_t *bytes)
{
    *bytes = 0;
    if (!d || c->g.n <= 0)
        return 0;
    conv_entry *fwd, *bwd_w, *bwd_d = NULL;
    int t = plan_threads();
    ct_err ignored = {0};
    /* a failure here is a decline: the im2col path runs, and the forward that could not make its
     * primitive would fail the same way, with its message, if it were asked to */
    if (find(d, c, CONV_FWD, t, &fwd, &ignored) != CT_OK || !fwd ||
        find(d, c, CONV_BWD_WEIGHTS, t, &bwd_w, &ignored) != CT_OK || !bwd_w ||
        (c->input_grad && (find(d, c, CONV_BWD_DATA, t, &bwd_d, &ignored) != CT_OK || !bwd_d)))
        return 0;
    size_t need = entry_bytes(fwd);
    if (entry_bytes(bwd_w) > need)
        need = entry_bytes(bwd_w);
    /* backward data may have to add into dx: its result goes to a temporary after its own part */
    if (bwd_d && entry_bytes(bwd_d) + dx_bytes(&c->g) > need)
        need = entry_bytes(bwd_d) + dx_bytes(&c->g);
    *bytes = need;
    return 1;
}

const char *ct_cpu_dnnl_conv2d_algorithm(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c)
{
    conv_entry *e = NULL;
    ct_err ignored = {0};
    if (!d || find(d, c, CONV_FWD, plan_threads(), &e, &ignored) != CT_OK || !e)
        return NULL;
    return e->key.algo == ALGO_WINOGRAD ? "winograd" : "direct";
}

/* The primitive of `kind` a step runs: made for the calling thread's OpenMP count, or for the
 * plan's where that one needs more than the ws_bytes reserved (extra: bytes the caller puts
 * after its part). *out = NULL when oneDNN declined it. */
static ct_status step_entry(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, conv_kind kind, size_t ws_bytes,
                            size_t extra, conv_entry **out, ct_err *err)
{
    int threads = omp_get_max_threads();
    ct_status st = find(d, c, kind, threads, out, err);
    if (st != CT_OK || (*out && entry_bytes(*out) + extra <= ws_bytes) || threads == plan_threads())
        return st;
    return find(d, c, kind, plan_threads(), out, err);
}

/* Points the entry's scratchpad, blocked weights and blocked activations into ws; fails when ws is
 * too small (a batch larger than the plan's) or not aligned. */
static ct_status place(conv_entry *e, void *ws, size_t ws_bytes, size_t extra, ct_err *err)
{
    if (entry_bytes(e) + extra > ws_bytes)
        return ct_fail(err, CT_ERR_INTERNAL, "oneDNN convolution: needs %zu bytes of workspace, the plan has %zu",
                       entry_bytes(e) + extra, ws_bytes);
    /* Winograd's kernels read their scratchpad with aligned loads: a misaligned one would crash */
    if ((uintptr_t)ws % WS_ALIGN != 0)
        return ct_fail(err, CT_ERR_INTERNAL, "oneDNN convolution: the workspace is not aligned to %d bytes",
                       WS_ALIGN);
    if (e->mem[M_SCRATCH])
        CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_SCRATCH], ws));
    char *at = (char *)ws + aligned(e->scratch_bytes);
    if (e->reorder)
        CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_WEIGHTS], at));
    at += aligned(e->wblock_bytes);
    if (e->mem[M_BLK_SRC]) {
        CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_BLK_SRC], at));
        CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_BLK_DST], at + aligned(e->blk_src_bytes)));
    }
    return CT_OK;
}

/* The memory objects the primitive itself reads and writes: the caller's or their blocked copies. */
static dnnl_memory_t prim_src(const conv_entry *e) { return e->src_reorder ? e->mem[M_BLK_SRC] : e->mem[M_SRC]; }
static dnnl_memory_t prim_dst(const conv_entry *e) { return e->dst_reorder ? e->mem[M_BLK_DST] : e->mem[M_DST]; }

static ct_status run(ct_cpu_dnnl *d, dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args, ct_err *err)
{
    CT_DNNL_CHECK(dnnl_primitive_execute(p, d->stream, nargs, args));
    CT_DNNL_CHECK(dnnl_stream_wait(d->stream));
    return CT_OK;
}

/* An activation reorder of e (NULL: the primitive reads the caller's tensor): in moves the caller's
 * NHWC into the blocked copy, out the blocked copy into the caller's. On all threads: these are
 * the batch's megabytes, and the copy's results do not depend on the count. */
static ct_status run_blocked(ct_cpu_dnnl *d, dnnl_primitive_t reorder, dnnl_memory_t nhwc, dnnl_memory_t blocked,
                             int in, ct_err *err)
{
    if (!reorder)
        return CT_OK;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, in ? nhwc : blocked}, {DNNL_ARG_TO, in ? blocked : nhwc}};
    return run(d, reorder, 2, args, err);
}

/* Weights up to this many bytes are reordered on the calling thread alone: a copy of a few
 * hundred KiB takes microseconds, less than waking the other threads, and on a machine shared
 * with other work each parallel region may wait for a descheduled thread. */
enum { SERIAL_REORDER_BYTES = 1 << 20 };

/* A reorder of the weights (bytes of them) between e's layouts; its results do not depend on the
 * thread count. */
static ct_status run_reorder(ct_cpu_dnnl *d, conv_entry *e, const dnnl_exec_arg_t args[2], ct_err *err)
{
    if (e->wblock_bytes > SERIAL_REORDER_BYTES)
        return run(d, e->reorder, 2, args, err);
    /* oneDNN reads the calling thread's OpenMP count when it executes */
    int caller = omp_get_max_threads();
    omp_set_num_threads(1);
    ct_status st = run(d, e->reorder, 2, args, err);
    omp_set_num_threads(caller);
    return st;
}

/* The weights w (f, kh, kw, c) as e's primitive reads them: converted into the workspace, or w. */
static ct_status bind_weights(ct_cpu_dnnl *d, conv_entry *e, const float *w, ct_err *err)
{
    if (!e->reorder) {
        CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_WEIGHTS], (void *)w));
        return CT_OK;
    }
    CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_PLAIN_W], (void *)w));
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, e->mem[M_PLAIN_W]}, {DNNL_ARG_TO, e->mem[M_WEIGHTS]}};
    return run_reorder(d, e, args, err);
}

static ct_status missing(const ct_cpu_dnnl_conv *c, const char *what, ct_err *err)
{
    return ct_fail(err, CT_ERR_INTERNAL, "oneDNN declined the %s of a %dx%d convolution it had accepted (%d -> %d "
                   "channels, batch %d)", what, c->g.kh, c->g.kw, c->g.c, c->g.f, c->g.n);
}

// x: (n, h, w, c); w: (f, kh, kw, c); b: (f) or NULL; y: (n, oh, ow, f)
ct_status ct_cpu_dnnl_conv2d_forward(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, const float *x, const float *w,
                                     const float *b, float *y, void *ws, size_t ws_bytes, ct_err *err)
{
    conv_entry *e;
    ct_status st = step_entry(d, c, CONV_FWD, ws_bytes, 0, &e, err);
    if (st != CT_OK)
        return st;
    if (!e)
        return missing(c, "forward", err);
    if ((st = place(e, ws, ws_bytes, 0, err)) != CT_OK || (st = bind_weights(d, e, w, err)) != CT_OK)
        return st;
    CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_SRC], (void *)x));
    CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_DST], y));
    if ((st = run_blocked(d, e->src_reorder, e->mem[M_SRC], e->mem[M_BLK_SRC], 1, err)) != CT_OK)
        return st;
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, prim_src(e)}, {DNNL_ARG_WEIGHTS, e->mem[M_WEIGHTS]},
                               {DNNL_ARG_DST, prim_dst(e)}};
    int nargs = 3;
    if (e->mem[M_SCRATCH])
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->mem[M_SCRATCH]};
    if (b) {
        CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_BIAS], (void *)b));
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, e->mem[M_BIAS]};
    }
    if ((st = run(d, e->prim, nargs, args, err)) != CT_OK)
        return st;
    return run_blocked(d, e->dst_reorder, e->mem[M_DST], e->mem[M_BLK_DST], 0, err);
}

// x: (n, h, w, c); dz: (n, oh, ow, f); dw: (f, kh, kw, c); db: (f)
static ct_status backward_weights(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, const float *x, const float *dz,
                                  float *dw, float *db, void *ws, size_t ws_bytes, ct_err *err)
{
    conv_entry *e;
    ct_status st = step_entry(d, c, CONV_BWD_WEIGHTS, ws_bytes, 0, &e, err);
    if (st != CT_OK)
        return st;
    if (!e)
        return missing(c, "weight gradient", err);
    if ((st = place(e, ws, ws_bytes, 0, err)) != CT_OK)
        return st;
    if (!e->reorder)
        CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_WEIGHTS], dw));
    CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_SRC], (void *)x));
    CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_DST], (void *)dz));
    if ((st = run_blocked(d, e->src_reorder, e->mem[M_SRC], e->mem[M_BLK_SRC], 1, err)) != CT_OK ||
        (st = run_blocked(d, e->dst_reorder, e->mem[M_DST], e->mem[M_BLK_DST], 1, err)) != CT_OK)
        return st;
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, prim_src(e)}, {DNNL_ARG_DIFF_DST, prim_dst(e)},
                               {DNNL_ARG_DIFF_WEIGHTS, e->mem[M_WEIGHTS]}};
    int nargs = 3;
    if (e->mem[M_SCRATCH])
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->mem[M_SCRATCH]};
    if (db) {
        CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_BIAS], db));
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, e->mem[M_BIAS]};
    }
    if ((st = run(d, e->prim, nargs, args, err)) != CT_OK || !e->reorder)
        return st;
    CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_PLAIN_W], dw));
    dnnl_exec_arg_t out[] = {{DNNL_ARG_FROM, e->mem[M_WEIGHTS]}, {DNNL_ARG_TO, e->mem[M_PLAIN_W]}};
    return run_reorder(d, e, out, err);
}

// dz: (n, oh, ow, f); w: (f, kh, kw, c); dx: (n, h, w, c) written or added to
static ct_status backward_data(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, const float *w, const float *dz, float *dx,
                               int accumulate, void *ws, size_t ws_bytes, ct_err *err)
{
    conv_entry *e;
    ct_status st = step_entry(d, c, CONV_BWD_DATA, ws_bytes, accumulate ? dx_bytes(&c->g) : 0, &e, err);
    if (st != CT_OK)
        return st;
    if (!e)
        return missing(c, "input gradient", err);
    size_t count = (size_t)c->g.n * c->g.h * c->g.w * c->g.c;
    if ((st = place(e, ws, ws_bytes, accumulate ? dx_bytes(&c->g) : 0, err)) != CT_OK ||
        (st = bind_weights(d, e, w, err)) != CT_OK)
        return st;
    /* oneDNN writes its result; a gradient to add to goes through the temporary */
    float *out = accumulate ? (float *)((char *)ws + entry_bytes(e)) : dx;
    CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_SRC], out));
    CT_DNNL_CHECK(dnnl_memory_set_data_handle(e->mem[M_DST], (void *)dz));
    if ((st = run_blocked(d, e->dst_reorder, e->mem[M_DST], e->mem[M_BLK_DST], 1, err)) != CT_OK)
        return st;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_DIFF_DST, prim_dst(e)}, {DNNL_ARG_WEIGHTS, e->mem[M_WEIGHTS]},
                               {DNNL_ARG_DIFF_SRC, prim_src(e)}};
    int nargs = 3;
    if (e->mem[M_SCRATCH])
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->mem[M_SCRATCH]};
    if ((st = run(d, e->prim, nargs, args, err)) != CT_OK ||
        (st = run_blocked(d, e->src_reorder, e->mem[M_SRC], e->mem[M_BLK_SRC], 0, err)) != CT_OK || !accumulate)
        return st;
#pragma omp parallel for schedule(static) if (count > CT_CPU_PAR_MIN)
    for (size_t i = 0; i < count; i++) dx[i] += out[i];
    return CT_OK;
}

ct_status ct_cpu_dnnl_conv2d_backward(ct_cpu_dnnl *d, const ct_cpu_dnnl_conv *c, const float *x, const float *w,
                                      const float *dz, float *dx, float *dw, float *db, int accumulate, void *ws,
                                      size_t ws_bytes, ct_err *err)
{
    ct_status st = CT_OK;
    if (dw)
        st = backward_weights(d, c, x, dz, dw, db, ws, ws_bytes, err);
    if (st == CT_OK && dx)
        st = backward_data(d, c, w, dz, dx, accumulate, ws, ws_bytes, err);
    return st;
}
