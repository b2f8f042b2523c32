/* 2-D convolution as im2col + one GEMM over the whole batch.
 *
 * The cols matrix has one row per output pixel, (n*oh*ow, kh*kw*c), and its columns run in the
 * weights' (kh, kw, c) order: with NHWC input, the in-bounds part of each kernel row is one
 * contiguous run of x to copy, and y (n*oh*ow, f) = cols w^T comes out NHWC. */
#include <string.h>

#include "cpu/cpu_backend.h"
#include "cpu/gemm.h"
#include "cpu/onednn.h"

/* A 1x1 stride-1 unpadded conv's cols matrix is the input itself. */
static int cols_is_input(const ct_window_geom *g)
{
    return g->kh == 1 && g->kw == 1 && g->stride == 1 && g->pad_t == 0 && g->pad_l == 0 &&
           g->oh == g->h && g->ow == g->w;
}

/* 0 for the 1x1 fast path, whose ws may then be NULL. */
size_t ct_cpu_conv2d_workspace(const ct_window_geom *g)
{
    if (cols_is_input(g)) return 0;
    return (size_t)g->n * g->oh * g->ow * g->kh * g->kw * g->c;
}

// x: (n, h, w, c); cols: (n*oh*ow, kh*kw*c)
static void im2col(const ct_window_geom *g, const float *x, float *cols)
{
    const int c = g->c, kw = g->kw;
    const size_t krow = (size_t)kw * c, kcols = g->kh * krow;
#pragma omp parallel for collapse(2) schedule(static)
    for (int s = 0; s < g->n; s++) {
        for (int oy = 0; oy < g->oh; oy++) {
            const float *xs = x + (size_t)s * g->h * g->w * c;
            for (int ox = 0; ox < g->ow; ox++) {
                float *row = cols + (((size_t)s * g->oh + oy) * g->ow + ox) * kcols;
                int iy0 = oy * g->stride - g->pad_t, ix0 = ox * g->stride - g->pad_l;
                int kx0, kx1;
                ct_window_taps(ix0, kw, g->w, &kx0, &kx1);
                for (int ky = 0; ky < g->kh; ky++) {
                    float *dst = row + ky * krow;
                    int iy = iy0 + ky;
                    if (iy < 0 || iy >= g->h) {
                        memset(dst, 0, krow * sizeof(float));
                        continue;
                    }
                    /* the in-bounds taps of a kernel row are one contiguous run of NHWC input */
                    memset(dst, 0, (size_t)kx0 * c * sizeof(float));
                    if (kx1 > kx0)
                        memcpy(dst + (size_t)kx0 * c, xs + ((size_t)iy * g->w + ix0 + kx0) * c,
                               (size_t)(kx1 - kx0) * c * sizeof(float));
                    memset(dst + (size_t)kx1 * c, 0, (size_t)(kw - kx1) * c * sizeof(float));
                }
            }
        }
    }
}

// cols: (n*oh*ow, kh*kw*c); dx: (n, h, w, c) += the cols scattered back onto the pixels they read
static void col2im_add(const ct_window_geom *g, const float *cols, float *dx)
{
    const int c = g->c, kw = g->kw;
    const size_t krow = (size_t)kw * c, kcols = g->kh * krow;
    /* windows overlap within a sample but never across samples, so samples can run in parallel */
#pragma omp parallel for schedule(static)
    for (int s = 0; s < g->n; s++) {
        float *dxs = dx + (size_t)s * g->h * g->w * c;
        for (int oy = 0; oy < g->oh; oy++) {
            int iy0 = oy * g->stride - g->pad_t, ky0, ky1;
            ct_window_taps(iy0, g->kh, g->h, &ky0, &ky1);
            for (int ox = 0; ox < g->ow; ox++) {
                const float *row = cols + (((size_t)s * g->oh + oy) * g->ow + ox) * kcols;
                int ix0 = ox * g->stride - g->pad_l, kx0, kx1;
                ct_window_taps(ix0, kw, g->w, &kx0, &kx1);
                size_t len = (size_t)(kx1 - kx0) * c;
                if (len == 0) continue;
                for (int ky = ky0; ky < ky1; ky++) {
                    const float *src = row + ky * krow + (size_t)kx0 * c;
                    float *dst = dxs + ((size_t)(iy0 + ky) * g->w + ix0 + kx0) * c;
                    for (size_t i = 0; i < len; i++) dst[i] += src[i];
                }
            }
        }
    }
}

// x: (n, h, w, c); w: (f, kh, kw, c); b: (f) or NULL; y: (n, oh, ow, f); ws: workspace floats
void ct_cpu_conv2d_forward(const ct_window_geom *g, const float *x, const float *w, const float *b,
                           float *y, float *ws)
{
    const int rows = g->n * g->oh * g->ow, kcols = g->kh * g->kw * g->c;
    const float *cols = x;
    if (!cols_is_input(g)) {
        im2col(g, x, ws);
        cols = ws;
    }
    ct_cpu_sgemm(0, 1, rows, g->f, kcols, 1.0f, cols, kcols, w,
                kcols, 0.0f, y, g->f);
    if (b) ct_cpu_add_bias(y, b, (size_t)rows, g->f);
}

// x: (n, h, w, c); w: (f, kh, kw, c); dy: (n, oh, ow, f); dx: like x, dw: like w, db: (f), each
// may be NULL; ws: workspace floats
void ct_cpu_conv2d_backward(const ct_window_geom *g, const float *x, const float *w, const float *dy,
                            float *dx, float *dw, float *db, float *ws, int accumulate)
{
    const int rows = g->n * g->oh * g->ow, kcols = g->kh * g->kw * g->c;
    const int direct = cols_is_input(g);
    if (db) ct_cpu_column_sums(dy, db, (size_t)rows, g->f);
    if (dw) {
        /* the forward's cols are long gone (the workspace is shared), so rebuild them */
        const float *cols = x;
        if (!direct) {
            im2col(g, x, ws);
            cols = ws;
        }
        ct_cpu_sgemm(1, 0, g->f, kcols, rows, 1.0f, dy, g->f,
                    cols, kcols, 0.0f, dw, kcols);
    }
    if (!dx) return;
    if (direct) {
        /* dcols is dx itself, so the product can write or accumulate into it directly */
        ct_cpu_sgemm(0, 0, rows, kcols, g->f, 1.0f, dy, g->f, w,
                    kcols, accumulate ? 1.0f : 0.0f, dx, kcols);
        return;
    }
    ct_cpu_sgemm(0, 0, rows, kcols, g->f, 1.0f, dy, g->f, w,
                kcols, 0.0f, ws, kcols);
    /* col2im adds, window by window, and leaves cells no window reads untouched: the first
     * writer clears the batch's own samples first */
    if (!accumulate)
        memset(dx, 0, (size_t)g->n * g->h * g->w * g->c * sizeof(float));
    col2im_add(g, ws, dx);
}

/* The layer as oneDNN's path sees it (cpu/onednn.h). */
static ct_cpu_dnnl_conv dnnl_conv_of(ct_backend *be, const ct_layer *l, int n)
{
    ct_cpu_dnnl_conv c = {ct_layer_window(l, n), l->b_count > 0, l->act, l->in[0] != CT_INPUT_NODE,
                          ct_cpu_of(be)->winograd};
    /* a pre-activation kept apart (gelu) is the convolution's output, the activation a pass of its own */
    if (ct_layer_keeps_preactivation(l))
        c.act = CT_ACT_LINEAR;
    return c;
}

/* 1 when oneDNN runs this layer at batch n, with *bytes of workspace; asked the same way by the plan
 * and by each pass, so that both take the same path. A pass keeps to those bytes, not the whole
 * reservation: the half path stages its tensors right after them (half.c). */
static int on_dnnl(ct_backend *be, const ct_layer *l, int n, ct_cpu_dnnl_conv *c, size_t *bytes)
{
    *c = dnnl_conv_of(be, l, n);
    return ct_cpu_dnnl_conv2d_workspace(ct_cpu_of(be)->dnnl, c, bytes);
}

int ct_cpu_conv2d_on_onednn(ct_backend *be, const ct_layer *l, int n)
{
    ct_cpu_dnnl_conv c;
    size_t bytes;
    return on_dnnl(be, l, n, &c, &bytes);
}

const char *ct_cpu_conv2d_path(ct_backend *be, const ct_layer *l, int n)
{
    ct_cpu_dnnl_conv c;
    size_t bytes;
    if (!on_dnnl(be, l, n, &c, &bytes))
        return "im2col";
    const char *algo = ct_cpu_dnnl_conv2d_algorithm(ct_cpu_of(be)->dnnl, &c);
    return algo && strcmp(algo, "winograd") == 0 ? "winograd" : "onednn";
}

/* The bytes a pass may use: its own part, within what reserve took. */
static size_t pass_bytes(ct_backend *be, size_t bytes)
{
    size_t reserved = ct_cpu_of(be)->workspace_bytes;
    return bytes < reserved ? bytes : reserved;
}

/* 1 when the layer's backward may run over its gradient's non-zeros (cpu/conv_sparse.c), as the
 * plan and each backward ask alike; the gradient's share decides, step by step. */
static int takes_sparse(ct_backend *be, const ct_layer *l, int n)
{
    ct_window_geom g = ct_layer_window(l, n);
    return ct_cpu_of(be)->sparse_backward && ct_cpu_conv2d_sparse_suits(&g);
}

// dz: (n, oh, ow, f) fp32
int ct_cpu_conv2d_backward_is_sparse(ct_backend *be, const ct_layer *l, int n, const float *dz)
{
    return takes_sparse(be, l, n) && ct_cpu_grad_is_sparse(dz, ct_cpu_out_count(l, n));
}

// x: (n, h, w, c) fp32; z, y: (n, oh, ow, f)
static ct_status conv2d_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)training;
    ct_cpu_state *cs = ct_cpu_of(be);
    ct_cpu_dnnl_conv c;
    size_t bytes;
    if (on_dnnl(be, l, n, &c, &bytes)) {
        ct_status st = ct_cpu_dnnl_conv2d_forward(cs->dnnl, &c, ct_f32(l->x[0]), ct_f32(l->w), ct_f32(l->b),
                                                  ct_f32(l->z), cs->workspace, pass_bytes(be, bytes), err);
        /* relu and leaky were applied by the convolution's output pass */
        if (st == CT_OK && !ct_cpu_dnnl_fuses(c.act))
            ct_cpu_fused_activation_forward(l, n, NULL);
        return st;
    }
    ct_window_geom g = ct_layer_window(l, n);
    /* the bias with the activation, in one pass over the product */
    ct_cpu_conv2d_forward(&g, ct_f32(l->x[0]), ct_f32(l->w), NULL, ct_f32(l->z), cs->workspace);
    ct_cpu_fused_activation_forward(l, n, ct_f32(l->b));
    return CT_OK;
}

// dy: (n, oh, ow, f) fp32; dx: (n, h, w, c) or NULL, written or added to (l->dx_accumulate)
static ct_status conv2d_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    ct_cpu_state *cs = ct_cpu_of(be);
    const float *dz = ct_cpu_preactivation_grad(be, l, n);
    if (ct_cpu_conv2d_backward_is_sparse(be, l, n, dz)) {
        ct_window_geom g = ct_layer_window(l, n);
        ct_cpu_conv2d_sparse_backward(&g, ct_f32(l->x[0]), ct_f32(l->w), dz, ct_f32(l->dx[0]), ct_f32(l->dw),
                                      ct_f32(l->db), cs->workspace, l->dx_accumulate[0]);
        return CT_OK;
    }
    ct_cpu_dnnl_conv c;
    size_t bytes;
    if (on_dnnl(be, l, n, &c, &bytes)) {
        /* oneDNN's weight pass gives the bias gradient too; a trained layer has both or neither */
        if ((l->db != NULL) != c.bias || (l->db && !l->dw))
            return ct_fail(err, CT_ERR_INTERNAL, "conv2d %s: oneDNN gives the weight and bias gradients together, asked for one alone",
                           l->cfg->name);
        return ct_cpu_dnnl_conv2d_backward(cs->dnnl, &c, ct_f32(l->x[0]), ct_f32(l->w), dz, ct_f32(l->dx[0]),
                                           ct_f32(l->dw), ct_f32(l->db), l->dx_accumulate[0], cs->workspace,
                                           pass_bytes(be, bytes), err);
    }
    ct_window_geom g = ct_layer_window(l, n);
    ct_cpu_conv2d_backward(&g, ct_f32(l->x[0]), ct_f32(l->w), dz, ct_f32(l->dx[0]), ct_f32(l->dw), ct_f32(l->db),
                           cs->workspace, l->dx_accumulate[0]);
    return CT_OK;
}

/* The dense path's bytes, or the sparse backward's where it may run and needs more. */
static size_t conv2d_workspace_bytes(ct_backend *be, const ct_layer *l, int n)
{
    ct_cpu_dnnl_conv c;
    size_t bytes;
    ct_window_geom g = ct_layer_window(l, n);
    if (!on_dnnl(be, l, n, &c, &bytes))
        bytes = ct_cpu_conv2d_workspace(&g) * sizeof(float);
    size_t sparse = takes_sparse(be, l, n) ? ct_cpu_conv2d_sparse_workspace_bytes(&g) : 0;
    return sparse > bytes ? sparse : bytes;
}

const ct_layer_ops ct_cpu_conv2d_ops = {
    .forward = conv2d_forward,
    .backward = conv2d_backward,
    .workspace_bytes = conv2d_workspace_bytes,
};
