/* The convolution backward over a mostly-zero output gradient (cpu/conv_sparse.c) against the
 * dense im2col path (whose gradients test_cpu_ops checks by finite differences): dx, dw and db
 * within 1e-5 of the largest value on geometries that take every branch (padding on each side,
 * strides, windows past the input's end, rows that are and are not whole vectors, more filters than
 * one block), dx added to or written, each gradient asked alone, the same bits for 1, 2 and 3
 * threads, and the share at which ct_cpu_grad_is_sparse says yes. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "base/rng.h"
#include "cpu/cpu_ops.h"
#include "tests/test_util.h"

typedef struct {
    const char *name;
    ct_window_geom g;
} geom_case;

static const geom_case cases[] = {
    {"5x5 same, 32 to 64 channels (fmnist_convnet's conv2)", {3, 14, 14, 32, 64, 5, 5, 1, 2, 2, 14, 14}},
    {"3x3 stride 2, 5 to 70 channels (a filter block and a remainder)", {2, 9, 11, 5, 70, 3, 3, 2, 1, 1, 5, 6}},
    {"7x7, 20 channels (rows of 140), padding 3 above and 2 left", {2, 12, 10, 20, 9, 7, 7, 1, 3, 2, 12, 10}},
    {"1x1, 16 to 24 channels", {2, 5, 5, 16, 24, 1, 1, 1, 0, 0, 5, 5}},
    {"1x5, 3 channels", {2, 6, 8, 3, 4, 1, 5, 1, 0, 2, 6, 8}},
    {"3x3 stride 2 unpadded, the last row and column read by no window", {2, 8, 8, 16, 32, 3, 3, 2, 0, 0, 3, 3}},
};

static float *floats(size_t n) { return malloc((n ? n : 1) * sizeof(float)); }

static void fill(float *v, size_t n, ct_rng *rng)
{
    for (size_t i = 0; i < n; i++) v[i] = 2.0f * ct_rng_uniform(rng) - 1.0f;
}

static void fill_value(float *v, size_t n, float value)
{
    for (size_t i = 0; i < n; i++) v[i] = value;
}

/* max |a - b| over max |b|: the error relative to the reference's scale */
static double rel_err(const float *a, const float *b, size_t n)
{
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= diff)) diff = d; /* a NaN left in a stays the error */
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    }
    return diff / (scale > 0 ? scale : 1);
}

static void test_case(const geom_case *gc, int seed)
{
    const ct_window_geom *g = &gc->g;
    size_t nx = (size_t)g->n * g->h * g->w * g->c, nw = (size_t)g->f * g->kh * g->kw * g->c;
    size_t nz = (size_t)g->n * g->oh * g->ow * g->f;
    ct_rng rng = {(uint64_t)seed};
    float *x = floats(nx), *w = floats(nw), *dz = floats(nz);
    fill(x, nx, &rng);
    fill(w, nw, &rng);
    /* about one value in 25 non-zero, and the first and last positions' too: the corners' windows */
    size_t nonzero = 0;
    for (size_t i = 0; i < nz; i++) {
        int keep = ct_rng_uniform(&rng) < 0.04f || i < (size_t)g->f || i >= nz - g->f;
        dz[i] = keep ? 2.0f * ct_rng_uniform(&rng) - 1.0f : 0.0f;
        nonzero += dz[i] != 0.0f;
    }

    float *dx_ref = floats(nx), *dw_ref = floats(nw), *db_ref = floats(g->f);
    float *ws_ref = floats(ct_cpu_conv2d_workspace(g));
    ct_cpu_conv2d_backward(g, x, w, dz, dx_ref, dw_ref, db_ref, ws_ref, 0);

    /* exactly the bytes asked for, so that a sanitizer build sees any step past them */
    void *ws = malloc(ct_cpu_conv2d_sparse_workspace_bytes(g));
    float *dx = floats(nx), *dw = floats(nw), *db = floats(g->f);
    fill_value(dx, nx, NAN);
    fill_value(dw, nw, NAN);
    fill_value(db, g->f, NAN);
    ct_cpu_conv2d_sparse_backward(g, x, w, dz, dx, dw, db, ws, 0);
    double ex = rel_err(dx, dx_ref, nx), ew = rel_err(dw, dw_ref, nw), eb = rel_err(db, db_ref, g->f);
    printf("%s: %zu of %zu non-zero; dx %.2g, dw %.2g, db %.2g\n", gc->name, nonzero, nz, ex, ew, eb);
    CHECK_MSG(ex < 1e-5 && ew < 1e-5 && eb < 1e-5, "%s: dx %.3g, dw %.3g, db %.3g from the dense path's", gc->name,
              ex, ew, eb);

    /* accumulate: dx added to what it held, the other gradients not asked for */
    float *dx_add = floats(nx);
    fill_value(dx_add, nx, 0.25f);
    ct_cpu_conv2d_sparse_backward(g, x, w, dz, dx_add, NULL, NULL, ws, 1);
    for (size_t i = 0; i < nx; i++) dx_add[i] -= 0.25f;
    CHECK_MSG(rel_err(dx_add, dx_ref, nx) < 1e-5, "%s: dx added to 0.25 is off by %.3g", gc->name,
              rel_err(dx_add, dx_ref, nx));

    /* the weight gradient alone, and on 1 and 3 threads: the same bits as on 2 */
    int threads[] = {1, 3};
    for (int t = 0; t < 2; t++) {
        float *dw_t = floats(nw), *dx_t = floats(nx);
        fill_value(dx_t, nx, NAN);
        omp_set_num_threads(threads[t]);
        ct_cpu_conv2d_sparse_backward(g, x, w, dz, NULL, dw_t, NULL, ws, 0);
        ct_cpu_conv2d_sparse_backward(g, x, w, dz, dx_t, NULL, NULL, ws, 0);
        omp_set_num_threads(2);
        CHECK_MSG(memcmp(dw_t, dw, nw * sizeof(float)) == 0 && memcmp(dx_t, dx, nx * sizeof(float)) == 0,
                  "%s: %d threads gave other bits than 2", gc->name, threads[t]);
        free(dw_t);
        free(dx_t);
    }
    free(x), free(w), free(dz), free(dx_ref), free(dw_ref), free(db_ref), free(ws_ref), free(ws);
    free(dx), free(dw), free(db), free(dx_add);
}

/* Sparse means at most count / 16 non-zero, wherever they sit, -0 counting as zero. */
static void test_share(void)
{
    const size_t count = 16 * 100000 + 5, limit = count / 16;
    float *v = calloc(count, sizeof(float));
    CHECK(ct_cpu_grad_is_sparse(v, count) == 1);
    for (size_t i = 0; i < limit; i++) v[count - 1 - 7 * i] = 1.0f; /* packed at the end: one thread's part */
    CHECK(ct_cpu_grad_is_sparse(v, count) == 1);
    v[0] = -2.0f;
    CHECK(ct_cpu_grad_is_sparse(v, count) == 0);
    v[0] = -0.0f;
    CHECK(ct_cpu_grad_is_sparse(v, count) == 1);
    fill_value(v, count, 0.5f);
    CHECK(ct_cpu_grad_is_sparse(v, count) == 0);
    /* a small gradient, counted by one thread */
    float small[32] = {0};
    small[3] = 1.0f, small[9] = 1.0f;
    CHECK(ct_cpu_grad_is_sparse(small, 32) == 1);
    small[20] = 1.0f;
    CHECK(ct_cpu_grad_is_sparse(small, 32) == 0);
    free(v);
}

int main(void)
{
    omp_set_num_threads(2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_case(&cases[i], 11 + (int)i);
    test_share();
    return ct_test_done();
}
