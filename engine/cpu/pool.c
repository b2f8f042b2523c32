/* Max and average pooling over NHWC activations. Each output pixel's window is clipped to the
 * input first, so padding is never read: it never wins a max and never counts in an average. */
#include <string.h>

#include "cpu/cpu_backend.h"

/* A window clipped to the input: rows [y0, y1), columns [x0, x1). */
typedef struct window {
    int y0, y1, x0, x1;
} window;

static int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static window pool_window(const ct_window_geom *g, int oy, int ox)
{
    int ys = oy * g->stride - g->pad_t, xs = ox * g->stride - g->pad_l;
    window win = {clamp(ys, 0, g->h), clamp(ys + g->kh, 0, g->h), clamp(xs, 0, g->w),
                  clamp(xs + g->kw, 0, g->w)};
    return win;
}

static size_t sample_size(const ct_window_geom *g) { return (size_t)g->h * g->w * g->c; }

/* One output pixel, all channels. xs: the sample (h, w, c); yo, ao: (c). The window's first
 * cell seeds the max and later cells replace it only when strictly greater, so ties keep the
 * first maximum as the reference frameworks do. The index is chosen by a mask rather than a
 * conditional, which lets the channel loop vectorise. */
static void max_window(const ct_window_geom *g, const float *restrict xs, window win,
                       float *restrict yo, int32_t *restrict ao)
{
    const int c = g->c;
    if (win.y1 <= win.y0 || win.x1 <= win.x0) {
        /* a window entirely in the padding has no input to pick: 0, and no gradient */
        for (int ch = 0; ch < c; ch++) {
            yo[ch] = 0.0f;
            ao[ch] = -1;
        }
        return;
    }
    const int32_t first = (win.y0 * g->w + win.x0) * c;
    for (int ch = 0; ch < c; ch++) {
        yo[ch] = xs[first + ch];
        ao[ch] = first + ch;
    }
    for (int iy = win.y0; iy < win.y1; iy++) {
        for (int ix = win.x0; ix < win.x1; ix++) {
            const int32_t base = (iy * g->w + ix) * c;
            const float *xi = xs + base;
            for (int ch = 0; ch < c; ch++) {
                float v = xi[ch], m = yo[ch];
                int32_t gt = -(int32_t)(v > m);  /* all ones where v wins */
                yo[ch] = v > m ? v : m;
                ao[ch] = (ao[ch] & ~gt) | ((base + ch) & gt);
            }
        }
    }
}

// x: (n, h, w, c); y, argmax: (n, oh, ow, c)
void ct_cpu_maxpool_forward(const ct_window_geom *g, const float *x, float *y, int32_t *argmax)
{
    const int c = g->c;
#pragma omp parallel for collapse(2) schedule(static)
    for (int s = 0; s < g->n; s++) {
        for (int oy = 0; oy < g->oh; oy++) {
            const float *xs = x + s * sample_size(g);
            for (int ox = 0; ox < g->ow; ox++) {
                size_t o = (((size_t)s * g->oh + oy) * g->ow + ox) * c;
                max_window(g, xs, pool_window(g, oy, ox), y + o, argmax + o);
            }
        }
    }
}

/* True when the windows tile the input: each input cell lies in exactly one window. */
static int windows_tile(const ct_window_geom *g)
{
    return g->kh == g->stride && g->kw == g->stride && g->pad_t == 0 && g->pad_l == 0 &&
           g->oh * g->stride == g->h && g->ow * g->stride == g->w;
}

/* The gradient a window routes to its maximum: dy, or with relu_y (the pool's output over a relu's)
 * relu's gradient too, dy where that maximum is positive and 0 where it is not: the max of a
 * relu's outputs is the relu's output at the argmax, so this is what relu's backward would give
 * that cell, as select(x > 0, dy, 0) (ct_cpu_activation_backward). */
static inline float routed(const float *relu_y, size_t i, const float *dy)
{
    return relu_y ? ct_cpu_select(relu_y[i] > 0.0f, dy[i], 0.0f) : dy[i];
}

/* Tiling windows: every input cell written once, its window's gradient where it was the maximum and
 * 0 elsewhere, by a select the channel loop vectorises: no clearing pass, no scatter.
 * dy, argmax, relu_y: (n, oh, ow, c), relu_y may be NULL; dx: (n, h, w, c) */
static void maxpool_backward_tiled(const ct_window_geom *g, const float *dy, const int32_t *argmax,
                                   const float *relu_y, float *dx, int accumulate)
{
    const int c = g->c;
#pragma omp parallel for collapse(2) schedule(static)
    for (int s = 0; s < g->n; s++) {
        for (int oy = 0; oy < g->oh; oy++) {
            float *dxs = dx + s * sample_size(g);
            for (int ox = 0; ox < g->ow; ox++) {
                size_t o = (((size_t)s * g->oh + oy) * g->ow + ox) * c;
                const float *restrict dyo = dy + o;
                const float *restrict ryo = relu_y ? relu_y + o : NULL;
                const int32_t *restrict ao = argmax + o;
                for (int iy = oy * g->stride; iy < (oy + 1) * g->stride; iy++) {
                    for (int ix = ox * g->stride; ix < (ox + 1) * g->stride; ix++) {
                        const int32_t base = (iy * g->w + ix) * c;
                        float *restrict dxi = dxs + base;
                        if (accumulate)
                            for (int ch = 0; ch < c; ch++)
                                dxi[ch] += ct_cpu_select(ao[ch] == base + ch, routed(ryo, ch, dyo), 0.0f);
                        else
                            for (int ch = 0; ch < c; ch++)
                                dxi[ch] = ct_cpu_select(ao[ch] == base + ch, routed(ryo, ch, dyo), 0.0f);
                    }
                }
            }
        }
    }
}

// dy, argmax, relu_y (or NULL): (n, oh, ow, c); dx: (n, h, w, c) = (+= with accumulate) dy routed
// to each window's maximum (where positive, with relu_y)
void ct_cpu_maxpool_backward(const ct_window_geom *g, const float *dy, const int32_t *argmax,
                             const float *relu_y, float *dx, int accumulate)
{
    if (windows_tile(g)) {
        maxpool_backward_tiled(g, dy, argmax, relu_y, dx, accumulate);
        return;
    }
    const size_t per_out = (size_t)g->oh * g->ow * g->c;
    /* overlapping windows can route to the same input, but only within a sample: a sample is one
     * thread's. A scatter, so the first writer clears the sample first (windows may not reach
     * every cell), on the thread that then scatters into it while it is in that core's cache. */
#pragma omp parallel for schedule(static)
    for (int s = 0; s < g->n; s++) {
        float *dxs = dx + s * sample_size(g);
        const float *dys = dy + s * per_out;
        const float *rys = relu_y ? relu_y + s * per_out : NULL;
        const int32_t *as = argmax + s * per_out;
        if (!accumulate)
            memset(dxs, 0, sample_size(g) * sizeof(float));
        for (size_t i = 0; i < per_out; i++) {
            if (as[i] >= 0) dxs[as[i]] += routed(rys, i, dys);
        }
    }
}

// x: (n, h, w, c); y: (n, oh, ow, c)
void ct_cpu_avgpool_forward(const ct_window_geom *g, const float *x, float *y)
{
    const int c = g->c;
#pragma omp parallel for collapse(2) schedule(static)
    for (int s = 0; s < g->n; s++) {
        for (int oy = 0; oy < g->oh; oy++) {
            const float *xs = x + s * sample_size(g);
            for (int ox = 0; ox < g->ow; ox++) {
                float *yo = y + (((size_t)s * g->oh + oy) * g->ow + ox) * c;
                window win = pool_window(g, oy, ox);
                int count = (win.y1 - win.y0) * (win.x1 - win.x0);
                /* summed in double: a global pool of a large plane (224x224 = 50176 cells) summed in
                 * float drifts by ~1e-5 relative, which other runtimes (onnxruntime) do not */
                for (int ch = 0; ch < c; ch++) {
                    double sum = 0.0;
                    for (int iy = win.y0; iy < win.y1; iy++)
                        for (int ix = win.x0; ix < win.x1; ix++)
                            sum += xs[((size_t)iy * g->w + ix) * c + ch];
                    yo[ch] = count > 0 ? (float)(sum / count) : 0.0f;
                }
            }
        }
    }
}

// dy: (n, oh, ow, c); dx: (n, h, w, c) = (+= with accumulate) dy shared evenly over each window's
// input cells
void ct_cpu_avgpool_backward(const ct_window_geom *g, const float *dy, float *dx, int accumulate)
{
    const int c = g->c;
#pragma omp parallel for schedule(static)
    for (int s = 0; s < g->n; s++) {
        float *dxs = dx + s * sample_size(g);
        if (!accumulate)   /* a scatter, as maxpool's */
            memset(dxs, 0, sample_size(g) * sizeof(float));
        for (int oy = 0; oy < g->oh; oy++) {
            for (int ox = 0; ox < g->ow; ox++) {
                const float *dyo = dy + (((size_t)s * g->oh + oy) * g->ow + ox) * c;
                window win = pool_window(g, oy, ox);
                int count = (win.y1 - win.y0) * (win.x1 - win.x0);
                if (count == 0) continue;
                float inv = 1.0f / (float)count;
                for (int iy = win.y0; iy < win.y1; iy++) {
                    for (int ix = win.x0; ix < win.x1; ix++) {
                        float *dxi = dxs + ((size_t)iy * g->w + ix) * c;
                        for (int ch = 0; ch < c; ch++) dxi[ch] += dyo[ch] * inv;
                    }
                }
            }
        }
    }
}

// x: (n, h, w, c) fp32; y: (n, oh, ow, c); aux: (n, oh, ow, c) int32 argmax
static ct_status maxpool_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)be; (void)training; (void)err;
    ct_window_geom g = ct_layer_window(l, n);
    ct_cpu_maxpool_forward(&g, ct_f32(l->x[0]), ct_f32(l->y), ct_i32(l->aux));
    return CT_OK;
}

// dy, aux, y: (n, oh, ow, c); dx: (n, h, w, c) or NULL, written or added to (l->dx_accumulate)
static ct_status maxpool_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    (void)be; (void)err;
    if (l->dx[0]) {
        ct_window_geom g = ct_layer_window(l, n);
        /* over a relu whose gradient is left to this pass, which saves the relu a pass of its own */
        const float *relu_y = l->src[0] && ct_cpu_relu_grad_in_reader(l->src[0]) ? ct_f32(l->y) : NULL;
        ct_cpu_maxpool_backward(&g, ct_f32(l->dy), ct_i32(l->aux), relu_y, ct_f32(l->dx[0]), l->dx_accumulate[0]);
    }
    return CT_OK;
}

// x: (n, h, w, c) fp32; y: (n, oh, ow, c)
static ct_status avgpool_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)be; (void)training; (void)err;
    ct_window_geom g = ct_layer_window(l, n);
    ct_cpu_avgpool_forward(&g, ct_f32(l->x[0]), ct_f32(l->y));
    return CT_OK;
}

// dy: (n, oh, ow, c) fp32; dx: (n, h, w, c) or NULL, written or added to (l->dx_accumulate)
static ct_status avgpool_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    (void)be; (void)err;
    if (l->dx[0]) {
        ct_window_geom g = ct_layer_window(l, n);
        ct_cpu_avgpool_backward(&g, ct_f32(l->dy), ct_f32(l->dx[0]), l->dx_accumulate[0]);
    }
    return CT_OK;
}

const ct_layer_ops ct_cpu_maxpool_ops = {
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .workspace_bytes = NULL,
};

const ct_layer_ops ct_cpu_avgpool_ops = {
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .workspace_bytes = NULL,
};
