/* A convolution's backward over the non-zero entries of its output gradient alone.
 *
 * Behind a relu and a max pool, a convolution's output gradient is mostly zeros: the pool routes
 * each window's gradient to one cell of its four, and relu drops every window whose maximum is not
 * positive (fmnist_convnet's conv2 trains with 2% of its gradient non-zero). The dense kernels
 * multiply every zero. Here each non-zero dz[n, i, j, f] adds dz times the filter's weights to the
 * input cells its window covers (dx, position by position) and dz times that window of the input to
 * the filter's weight gradient (dw, filter by filter), so the work follows the non-zeros.
 *
 * Each element of dx and dw is summed by one thread in a fixed order (images, then positions, then
 * filters), so the result does not depend on the thread count. */
#include <omp.h>
#include <stddef.h>
#include <string.h>

#include "cpu/cpu_ops.h"

/* The accumulation below is built for AVX-512 and AVX2 besides the baseline, and the loader picks
 * the one the processor runs (GCC's function multi-versioning), as oneDNN picks its kernels at run
 * time: a baseline build would otherwise leave three quarters of each vector unit idle. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CT_MULTI_ISA __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CT_MULTI_ISA
#endif

/* A gradient whose non-zero share is at most 1/SPARSE_SHARE takes this path. The dense kernels run
 * at these cores' peak and ours at about a third of it per product (rows of weights or inputs read
 * from cache for one multiply-add each, where a matrix product reuses them), so with fmnist_convnet's
 * conv2 the two cross near a fifth; a sixteenth leaves room for shapes where the dense side runs
 * Winograd. */
enum { SPARSE_SHARE = 16 };

/* Entries compacted per position in dx's pass: the filters are taken 64 at a time. */
enum { DX_BLOCK = 64 };

typedef float v16 __attribute__((vector_size(64), aligned(4), may_alias));

/* acc[t] += sum over e < cnt of g[e] * base[off[e] + t], for t < len: the sums kept in registers
 * over all the entries, 128 floats at a time, then 32, 16 and one by one. */
CT_MULTI_ISA static void rows_axpy(float *restrict acc, int len, int cnt, const float *base, const ptrdiff_t *off,
                                   const float *g)
{
    int t = 0;
    for (; t + 128 <= len; t += 128) {
        v16 a[8];
        for (int q = 0; q < 8; q++) a[q] = *(const v16 *)(acc + t + 16 * q);
        for (int e = 0; e < cnt; e++) {
            const float *s = base + off[e] + t;
            const float ge = g[e];
#pragma GCC unroll 8
            for (int q = 0; q < 8; q++) a[q] += ge * *(const v16 *)(s + 16 * q);
        }
        for (int q = 0; q < 8; q++) *(v16 *)(acc + t + 16 * q) = a[q];
    }
    for (; t + 32 <= len; t += 32) {
        v16 a0 = *(const v16 *)(acc + t), a1 = *(const v16 *)(acc + t + 16);
        for (int e = 0; e < cnt; e++) {
            const float *s = base + off[e] + t;
            a0 += g[e] * *(const v16 *)s;
            a1 += g[e] * *(const v16 *)(s + 16);
        }
        *(v16 *)(acc + t) = a0;
        *(v16 *)(acc + t + 16) = a1;
    }
    for (; t + 16 <= len; t += 16) {
        v16 a0 = *(const v16 *)(acc + t);
        for (int e = 0; e < cnt; e++) a0 += g[e] * *(const v16 *)(base + off[e] + t);
        *(v16 *)(acc + t) = a0;
    }
    for (; t < len; t++) {
        float a = acc[t];
        for (int e = 0; e < cnt; e++) a += g[e] * base[off[e] + t];
        acc[t] = a;
    }
}

/* Chunks that each thread counts before it checks its count against the limit. */
enum { COUNT_CHUNK = 4096 };

int ct_cpu_grad_is_sparse(const float *dz, size_t count)
{
    const size_t limit = count / SPARSE_SHARE;
    size_t total = 0;
    int over = 0;
    /* a thread past the limit alone decides it, so a dense gradient is read only in part */
#pragma omp parallel reduction(+ : total) reduction(| : over) if (count > CT_CPU_PAR_MIN)
    {
        int t = omp_get_thread_num(), threads = omp_get_num_threads();
        size_t q = count * t / threads, end = count * (t + 1) / threads, nz = 0;
        while (q < end && nz <= limit) {
            size_t stop = end - q < COUNT_CHUNK ? end : q + COUNT_CHUNK;
            for (; q < stop; q++) nz += dz[q] != 0.0f;
        }
        total = nz;
        over = nz > limit;
    }
    return !over && total <= limit;
}

/* The input rows and columns a window can reach: the output's last window ends there. */
static int padded_h(const ct_window_geom *g) { return (g->oh - 1) * g->stride + g->kh; }
static int padded_w(const ct_window_geom *g) { return (g->ow - 1) * g->stride + g->kw; }

/* Bytes of the padded input, rounded up to keep the lists after it aligned. */
static size_t padded_bytes(const ct_window_geom *g)
{
    size_t bytes = (size_t)g->n * padded_h(g) * padded_w(g) * g->c * sizeof(float);
    return (bytes + 63) / 64 * 64;
}

int ct_cpu_conv2d_sparse_suits(const ct_window_geom *g) { return g->kw * g->c >= 16; }

size_t ct_cpu_conv2d_sparse_workspace_bytes(const ct_window_geom *g)
{
    size_t padded = padded_bytes(g);
    size_t lists = (size_t)g->f * g->oh * g->ow * (sizeof(ptrdiff_t) + sizeof(float));
    return padded + lists + (size_t)g->f * sizeof(int);
}

// x: (n, h, w, c); xp: (n, padded_h, padded_w, c), x inside the zeros of the padding
static void pad_input(const ct_window_geom *g, const float *x, float *xp)
{
    const int hp = padded_h(g), wp = padded_w(g);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < g->n * hp; r++) {
        int n = r / hp, ip = r % hp, i = ip - g->pad_t;
        float *dst = xp + (size_t)r * wp * g->c;
        memset(dst, 0, (size_t)wp * g->c * sizeof(float));
        if (i < 0 || i >= g->h) continue;
        int j0 = g->pad_l, j1 = g->pad_l + g->w < wp ? g->pad_l + g->w : wp;
        if (j1 > j0)
            memcpy(dst + (size_t)j0 * g->c, x + ((size_t)n * g->h + i) * g->w * g->c,
                   (size_t)(j1 - j0) * g->c * sizeof(float));
    }
}

// xp: (n, padded_h, padded_w, c); dz: (n, oh, ow, f); dw: (f, kh, kw, c) written
static void weight_grad(const ct_window_geom *g, const float *xp, const float *dz, float *dw, void *ws)
{
    const int positions = g->oh * g->ow, hp = padded_h(g), wp = padded_w(g), row = g->kw * g->c;
    const size_t filter = (size_t)g->kh * row;
    ptrdiff_t *offs = ws;
    float *vals = (float *)(offs + (size_t)g->f * positions);
    int *counts = (int *)(vals + (size_t)g->f * positions);
    /* threads over filters: each dw row is one thread's, its lists in that filter's slice */
#pragma omp parallel
    {
        int t = omp_get_thread_num(), threads = omp_get_num_threads();
        int f0 = (int)((long)g->f * t / threads), f1 = (int)((long)g->f * (t + 1) / threads);
        memset(dw + f0 * filter, 0, (size_t)(f1 - f0) * filter * sizeof(float));
        for (int n = 0; n < g->n; n++) {
            for (int f = f0; f < f1; f++) counts[f] = 0;
            for (int p = 0; p < positions; p++) {
                const float *d = dz + ((size_t)n * positions + p) * g->f;
                ptrdiff_t off = ((ptrdiff_t)(p / g->ow) * g->stride * wp + (p % g->ow) * g->stride) * g->c;
                for (int f = f0; f < f1; f++)
                    if (d[f] != 0.0f) {
                        size_t k = (size_t)f * positions + counts[f]++;
                        offs[k] = off;
                        vals[k] = d[f];
                    }
            }
            const float *image = xp + (size_t)n * hp * wp * g->c;
            for (int f = f0; f < f1; f++) {
                if (!counts[f]) continue;
                for (int u = 0; u < g->kh; u++)
                    rows_axpy(dw + f * filter + (size_t)u * row, row, counts[f], image + (size_t)u * wp * g->c,
                              offs + (size_t)f * positions, vals + (size_t)f * positions);
            }
        }
    }
}

// dz: (n, oh, ow, f); w: (f, kh, kw, c); dx: (n, h, w, c) written or added to
static void input_grad(const ct_window_geom *g, const float *w, const float *dz, float *dx, int accumulate)
{
    const size_t image = (size_t)g->h * g->w * g->c, filter = (size_t)g->kh * g->kw * g->c;
    /* threads over images: each dx image is one thread's */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < g->n; n++) {
        float *dxn = dx + n * image;
        if (!accumulate) memset(dxn, 0, image * sizeof(float));
        ptrdiff_t offs[DX_BLOCK];
        float vals[DX_BLOCK];
        for (int i = 0; i < g->oh; i++)
            for (int j = 0; j < g->ow; j++) {
                const float *d = dz + (((size_t)n * g->oh + i) * g->ow + j) * g->f;
                int top = i * g->stride - g->pad_t, left = j * g->stride - g->pad_l, u0, u1, v0, v1;
                ct_window_taps(top, g->kh, g->h, &u0, &u1);
                ct_window_taps(left, g->kw, g->w, &v0, &v1);
                const int len = (v1 - v0) * g->c;
                for (int f0 = 0; f0 < g->f; f0 += DX_BLOCK) {
                    int f1 = g->f - f0 < DX_BLOCK ? g->f : f0 + DX_BLOCK, cnt = 0;
                    for (int f = f0; f < f1; f++) {
                        offs[cnt] = (ptrdiff_t)(f * filter);
                        vals[cnt] = d[f];
                        cnt += d[f] != 0.0f;
                    }
                    if (!cnt || !len) continue;
                    for (int u = u0; u < u1; u++)
                        rows_axpy(dxn + ((size_t)(top + u) * g->w + left + v0) * g->c, len, cnt,
                                  w + ((size_t)u * g->kw + v0) * g->c, offs, vals);
                }
            }
    }
}

// x: (n, h, w, c); w: (f, kh, kw, c); dz: (n, oh, ow, f); dx: like x, dw: like w, db: (f), each may
// be NULL; ws: ct_cpu_conv2d_sparse_workspace_bytes(g) bytes
void ct_cpu_conv2d_sparse_backward(const ct_window_geom *g, const float *x, const float *w, const float *dz,
                                   float *dx, float *dw, float *db, void *ws, int accumulate)
{
    if (db) ct_cpu_column_sums(dz, db, (size_t)g->n * g->oh * g->ow, g->f);
    if (dw) {
        float *xp = ws;
        pad_input(g, x, xp);
        weight_grad(g, xp, dz, dw, (char *)ws + padded_bytes(g));
    }
    if (dx) input_grad(g, w, dz, dx, accumulate);
}
