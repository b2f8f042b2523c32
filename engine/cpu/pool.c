/* Max and average pooling over NHWC activations. Each output pixel's window is clipped to the
 * input first, so padding is never read: it never wins a max and never counts in an average. */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"

/* A window clipped to the input: rows [y0, y1), columns [x0, x1). */
typedef struct window {
    int y0, y1, x0, x1;
} window;

static int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static window pool_window(const ct_pool_geom *g, int oy, int ox)
{
    int ys = oy * g->stride - g->pad_t, xs = ox * g->stride - g->pad_l;
    window win = {clamp(ys, 0, g->h), clamp(ys + g->kh, 0, g->h), clamp(xs, 0, g->w),
                  clamp(xs + g->kw, 0, g->w)};
    return win;
}

static size_t sample_size(const ct_pool_geom *g) { return (size_t)g->h * g->w * g->c; }

// x: (n, h, w, c); y, argmax: (n, oh, ow, c)
void ct_cpu_maxpool_forward(const ct_pool_geom *g, const float *x, float *y, int32_t *argmax)
{
    const int c = g->c;
#pragma omp parallel for collapse(2) schedule(static)
    for (int s = 0; s < g->n; s++) {
        for (int oy = 0; oy < g->oh; oy++) {
            const float *xs = x + s * sample_size(g);
            for (int ox = 0; ox < g->ow; ox++) {
                size_t o = (((size_t)s * g->oh + oy) * g->ow + ox) * c;
                window win = pool_window(g, oy, ox);
                float *yo = y + o;
                int32_t *ao = argmax + o;
                /* a window entirely in the padding has no input to pick: 0, and no gradient */
                for (int ch = 0; ch < c; ch++) {
                    yo[ch] = -INFINITY;
                    ao[ch] = -1;
                }
                for (int iy = win.y0; iy < win.y1; iy++) {
                    for (int ix = win.x0; ix < win.x1; ix++) {
                        int32_t base = (int32_t)(((size_t)iy * g->w + ix) * c);
                        /* strict > keeps the first maximum, as the reference frameworks do */
                        for (int ch = 0; ch < c; ch++) {
                            if (xs[base + ch] > yo[ch] || ao[ch] < 0) {
                                yo[ch] = xs[base + ch];
                                ao[ch] = base + ch;
                            }
                        }
                    }
                }
                for (int ch = 0; ch < c; ch++) {
                    if (ao[ch] < 0) yo[ch] = 0.0f;
                }
            }
        }
    }
}

// dy, argmax: (n, oh, ow, c); dx: (n, h, w, c) += dy routed to each window's maximum
void ct_cpu_maxpool_backward(const ct_pool_geom *g, const float *dy, const int32_t *argmax, float *dx)
{
    const size_t per_out = (size_t)g->oh * g->ow * g->c;
    /* overlapping windows can route to the same input, but only within a sample */
#pragma omp parallel for schedule(static)
    for (int s = 0; s < g->n; s++) {
        float *dxs = dx + s * sample_size(g);
        const float *dys = dy + s * per_out;
        const int32_t *as = argmax + s * per_out;
        for (size_t i = 0; i < per_out; i++) {
            if (as[i] >= 0) dxs[as[i]] += dys[i];
        }
    }
}

// x: (n, h, w, c); y: (n, oh, ow, c)
void ct_cpu_avgpool_forward(const ct_pool_geom *g, const float *x, float *y)
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
                memset(yo, 0, (size_t)c * sizeof(float));
                for (int iy = win.y0; iy < win.y1; iy++) {
                    for (int ix = win.x0; ix < win.x1; ix++) {
                        const float *xi = xs + ((size_t)iy * g->w + ix) * c;
                        for (int ch = 0; ch < c; ch++) yo[ch] += xi[ch];
                    }
                }
                float inv = count > 0 ? 1.0f / (float)count : 0.0f;
                for (int ch = 0; ch < c; ch++) yo[ch] *= inv;
            }
        }
    }
}

// dy: (n, oh, ow, c); dx: (n, h, w, c) += dy shared evenly over each window's input cells
void ct_cpu_avgpool_backward(const ct_pool_geom *g, const float *dy, float *dx)
{
    const int c = g->c;
#pragma omp parallel for schedule(static)
    for (int s = 0; s < g->n; s++) {
        float *dxs = dx + s * sample_size(g);
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
