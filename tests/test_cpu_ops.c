/* Tests for the CPU kernels (engine/cpu/cpu_ops.h): finite-difference gradient checks of every
 * backward, forward outputs against naive reference loops, and hand-computed values for the
 * loss, optimizers, batch norm, pooling and dropout. */
#include <stdint.h>

#include "cpu/cpu_ops.h"
#include "cpu/gemm.h"
#include "base/rng.h"
#include "tests/test_util.h"

/* Input gradients start at this value when a backward is asked to add into them (accumulate =
 * 1), so one that overwrites instead fails the gradient checks. Buffers a backward must write
 * (parameter gradients, and input gradients at accumulate = 0) start as NaN, so one that adds
 * into them, or leaves a value out, fails. */
#define PREFILL 0.25f

/* ---- helpers ---- */

static float *alloc_floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static void fill_uniform(float *v, size_t n, float lo, float hi, ct_rng *rng)
{
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * ct_rng_uniform(rng);
}

static void fill_const(float *v, size_t n, float value)
{
    for (size_t i = 0; i < n; i++) v[i] = value;
}

/* Distinct values 0.05 apart in random order, so no finite-difference step changes a max. */
static void fill_distinct(float *v, size_t n, ct_rng *rng)
{
    for (size_t i = 0; i < n; i++) v[i] = 0.05f * (float)i - 0.025f * (float)n;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(ct_rng_uniform(rng) * (float)i) % i;
        float t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static void subtract_prefill(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) v[i] -= PREFILL;
}

static void fill_nan(float *v, size_t n) { fill_const(v, n, NAN); }

/* What a backward writes at accumulate = 0 over NaN (`wrote`) must be, bit for bit, what it adds
 * at accumulate = 1 into zeros (`added`): writing replaces clearing the buffer first. */
static void check_written(const char *what, const float *wrote, const float *added, size_t n)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&wrote[i], &added[i], sizeof(float)) != 0 && bad++ == 0)
            first = i;
    CHECK_MSG(bad == 0, "%s: %zu of %zu values written differ from those added into zeros (first [%zu]: %.9g vs %.9g)",
              what, bad, n, first, bad ? wrote[first] : 0.0, bad ? added[first] : 0.0);
}

/* Largest |a - b| / max(|a|, |b|, floor) over n values: relative, but absolute near zero. */
static double max_rel_err(const float *a, const float *b, size_t n, double floor)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double magnitude = fmax(fmax(fabs(a[i]), fabs(b[i])), floor);
        double err = fabs((double)a[i] - b[i]) / magnitude;
        if (!(err <= worst)) worst = err; /* NaN counts as worst */
    }
    return worst;
}

/* Runs the forward pass of a case and returns its scalar loss. */
typedef double (*loss_fn)(void *ctx);

/* Compares analytic[i] with the central difference of the loss in param[i]. */
static void check_grad(const char *what, loss_fn loss, void *ctx, float *param,
                       const float *analytic, size_t n, float eps, double tol)
{
    double worst = 0.0, worst_a = 0.0, worst_num = 0.0;
    size_t worst_i = 0;
    for (size_t i = 0; i < n; i++) {
        const float saved = param[i];
        const float hi = saved + eps, lo = saved - eps;
        param[i] = hi;
        double lp = loss(ctx);
        param[i] = lo;
        double lm = loss(ctx);
        param[i] = saved;
        /* divide by the step float actually took, not the nominal 2 eps */
        double num = (lp - lm) / ((double)hi - lo);
        double err = fabs(analytic[i] - num) / fmax(fmax(fabs(analytic[i]), fabs(num)), 0.1);
        if (!(err <= worst)) {
            worst = err;
            worst_i = i;
            worst_a = analytic[i];
            worst_num = num;
        }
    }
    if (getenv("CT_VERBOSE")) printf("%-40s worst rel err %.3g\n", what, worst);
    CHECK_MSG(worst <= tol, "%s: worst at %zu: analytic %.6g numeric %.6g (rel err %.3g)", what,
              worst_i, worst_a, worst_num, worst);
}

/* ---- dense ---- */

typedef struct dense_case {
    float *x, *w, *b, *y, *r, *ws;
    size_t ws_floats;
    int n, k, m;
} dense_case;

static double dense_loss(void *p)
{
    dense_case *d = p;
    ct_cpu_dense_forward(d->x, d->w, d->b, d->y, d->n, d->k, d->m, d->ws, d->ws_floats);
    return dot(d->y, d->r, (size_t)d->n * d->m);
}

/* n rows of k inputs to m units; with its workspace (NaN-filled: the forward must write before it
 * reads), which a oneDNN build takes where m >= 4 n for the product transposed (gemm.h) */
static void test_dense(int with_bias, int n, int k, int m)
{
    ct_rng rng = {(uint64_t)(42 + with_bias + n)};
    dense_case d = {.n = n, .k = k, .m = m};
    size_t nx = (size_t)d.n * d.k, nw = (size_t)d.m * d.k, ny = (size_t)d.n * d.m;
    size_t nws = ct_cpu_dense_workspace(n, m);
#ifdef CUTRAIN_HAVE_ONEDNN
    CHECK(nws == ((size_t)m >= 4 * (size_t)n ? ny : 0));
#else
    CHECK(nws == 0);
#endif
    d.ws = nws ? alloc_floats(nws) : NULL;
    d.ws_floats = nws;
    if (d.ws) fill_nan(d.ws, nws);
    d.x = alloc_floats(nx), d.w = alloc_floats(nw), d.y = alloc_floats(ny), d.r = alloc_floats(ny);
    d.b = with_bias ? alloc_floats(d.m) : NULL;
    fill_uniform(d.x, nx, -1, 1, &rng);
    fill_uniform(d.w, nw, -1, 1, &rng);
    fill_uniform(d.r, ny, -1, 1, &rng);
    if (d.b) fill_uniform(d.b, d.m, -1, 1, &rng);

    /* forward against the definition */
    dense_loss(&d);
    double worst = 0.0;
    for (int i = 0; i < d.n; i++) {
        for (int j = 0; j < d.m; j++) {
            double s = d.b ? d.b[j] : 0.0;
            for (int t = 0; t < d.k; t++) s += (double)d.x[i * d.k + t] * d.w[j * d.k + t];
            worst = fmax(worst, fabs(s - d.y[i * d.m + j]));
        }
    }
    CHECK_MSG(worst < 1e-5 * sqrt((double)d.k), "dense forward (%d, %d, %d) off by %g", n, k, m, worst);
    if (d.ws) {
        /* a workspace one float short (planned at another batch): the product goes straight into y,
         * leaving the workspace alone, to the same result within rounding */
        float *y_ws = alloc_floats(ny);
        memcpy(y_ws, d.y, ny * sizeof *y_ws);
        fill_nan(d.ws, nws);
        d.ws_floats = nws - 1;
        dense_loss(&d);
        CHECK(isnan(d.ws[0]) && isnan(d.ws[nws - 1]));
        CHECK(max_rel_err(d.y, y_ws, ny, 1.0) < 1e-5);
        d.ws_floats = nws;
        free(y_ws);
    }

    /* dx added to, dw and db written */
    float *dx = alloc_floats(nx), *dw = alloc_floats(nw), *db = alloc_floats(d.m);
    fill_const(dx, nx, PREFILL), fill_nan(dw, nw), fill_nan(db, d.m);
    ct_cpu_dense_backward(d.x, d.w, d.r, dx, dw, d.b ? db : NULL, d.n, d.k, d.m, 1);
    subtract_prefill(dx, nx);
    check_grad("dense dx", dense_loss, &d, d.x, dx, nx, 1e-2f, 1e-3);
    check_grad("dense dw", dense_loss, &d, d.w, dw, nw, 1e-2f, 1e-3);
    if (d.b) check_grad("dense db", dense_loss, &d, d.b, db, d.m, 1e-2f, 1e-3);
    else CHECK(isnan(db[0])); /* NULL db left alone */

    /* dx written over NaN: what adding into zeros gives; dw and db again the same */
    float *dx2 = alloc_floats(nx), *dw2 = alloc_floats(nw), *db2 = alloc_floats(d.m), *dx0 = alloc_floats(nx);
    fill_nan(dx2, nx), fill_nan(dw2, nw), fill_nan(db2, d.m);
    ct_cpu_dense_backward(d.x, d.w, d.r, dx2, dw2, db2, d.n, d.k, d.m, 0);
    ct_cpu_dense_backward(d.x, d.w, d.r, dx0, dw2, db2, d.n, d.k, d.m, 1);
    check_written("dense dx", dx2, dx0, nx);
    CHECK(max_rel_err(dx, dx2, nx, 1.0) < 1e-5);
    check_written("dense dw", dw2, dw, nw);
    if (d.b) check_written("dense db", db2, db, d.m);

    /* NULL dx and db: only dw, unchanged */
    float *dw3 = alloc_floats(nw);
    fill_nan(dw3, nw);
    ct_cpu_dense_backward(d.x, d.w, d.r, NULL, dw3, NULL, d.n, d.k, d.m, 0);
    check_written("dense dw alone", dw3, dw, nw);

    free(d.x), free(d.w), free(d.b), free(d.y), free(d.r), free(d.ws);
    free(dx), free(dw), free(db), free(dx2), free(dw2), free(db2), free(dx0), free(dw3);
}

/* ---- conv2d ---- */

typedef struct conv_spec {
    const char *name;
    int n, h, w, c, f, kh, kw, stride, pad_t, pad_l, pad_b, pad_r, bias;
} conv_spec;

typedef struct conv_case {
    ct_window_geom g;
    float *x, *w, *b, *y, *r, *ws;
} conv_case;

static double conv_loss(void *p)
{
    conv_case *cc = p;
    ct_cpu_conv2d_forward(&cc->g, cc->x, cc->w, cc->b, cc->y, cc->ws);
    return dot(cc->y, cc->r, (size_t)cc->g.n * cc->g.oh * cc->g.ow * cc->g.f);
}

/* Direct convolution, the definition the im2col path must reproduce. */
static double conv_reference_err(const conv_case *cc)
{
    const ct_window_geom *g = &cc->g;
    double worst = 0.0;
    for (int s = 0; s < g->n; s++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (int f = 0; f < g->f; f++) {
                    double acc = cc->b ? cc->b[f] : 0.0;
                    for (int ky = 0; ky < g->kh; ky++)
                        for (int kx = 0; kx < g->kw; kx++) {
                            int iy = oy * g->stride - g->pad_t + ky, ix = ox * g->stride - g->pad_l + kx;
                            if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
                            for (int ch = 0; ch < g->c; ch++)
                                acc += (double)cc->x[((s * g->h + iy) * g->w + ix) * g->c + ch] *
                                       cc->w[((f * g->kh + ky) * g->kw + kx) * g->c + ch];
                        }
                    double got = cc->y[((s * g->oh + oy) * g->ow + ox) * g->f + f];
                    worst = fmax(worst, fabs(acc - got));
                }
    return worst;
}

static void test_conv(const conv_spec *sp, int seed)
{
    ct_rng rng = {(uint64_t)seed};
    conv_case cc = {0};
    ct_window_geom *g = &cc.g;
    *g = (ct_window_geom){.n = sp->n, .h = sp->h, .w = sp->w, .c = sp->c, .f = sp->f, .kh = sp->kh,
                          .kw = sp->kw, .stride = sp->stride, .pad_t = sp->pad_t, .pad_l = sp->pad_l};
    g->oh = (sp->h + sp->pad_t + sp->pad_b - sp->kh) / sp->stride + 1;
    g->ow = (sp->w + sp->pad_l + sp->pad_r - sp->kw) / sp->stride + 1;
    size_t nx = (size_t)g->n * g->h * g->w * g->c, nw = (size_t)g->f * g->kh * g->kw * g->c;
    size_t ny = (size_t)g->n * g->oh * g->ow * g->f;
    cc.x = alloc_floats(nx), cc.w = alloc_floats(nw), cc.y = alloc_floats(ny), cc.r = alloc_floats(ny);
    cc.b = sp->bias ? alloc_floats(g->f) : NULL;
    cc.ws = alloc_floats(ct_cpu_conv2d_workspace(g));
    fill_uniform(cc.x, nx, -1, 1, &rng);
    fill_uniform(cc.w, nw, -1, 1, &rng);
    fill_uniform(cc.r, ny, -1, 1, &rng);
    if (cc.b) fill_uniform(cc.b, g->f, -1, 1, &rng);

    conv_loss(&cc);
    double ferr = conv_reference_err(&cc);
    CHECK_MSG(ferr < 1e-4, "conv %s forward off by %g", sp->name, ferr);

    /* dx added to, dw and db written */
    float *dx = alloc_floats(nx), *dw = alloc_floats(nw), *db = alloc_floats(g->f);
    fill_const(dx, nx, PREFILL), fill_nan(dw, nw), fill_nan(db, g->f);
    ct_cpu_conv2d_backward(g, cc.x, cc.w, cc.r, dx, dw, cc.b ? db : NULL, cc.ws, 1);
    subtract_prefill(dx, nx);
    char what[128];
    snprintf(what, sizeof what, "conv %s dx", sp->name);
    check_grad(what, conv_loss, &cc, cc.x, dx, nx, 1e-2f, 2e-3);
    snprintf(what, sizeof what, "conv %s dw", sp->name);
    check_grad(what, conv_loss, &cc, cc.w, dw, nw, 1e-2f, 2e-3);
    if (cc.b) {
        snprintf(what, sizeof what, "conv %s db", sp->name);
        check_grad(what, conv_loss, &cc, cc.b, db, g->f, 1e-2f, 2e-3);
    }

    /* dx written over NaN (cells no window reads included): what adding into zeros gives; dw
     * and db the same again; NULL dx and db leave dw as it was */
    float *dx2 = alloc_floats(nx), *dw2 = alloc_floats(nw), *db2 = alloc_floats(g->f), *dx0 = alloc_floats(nx);
    fill_nan(dx2, nx), fill_nan(dw2, nw), fill_nan(db2, g->f);
    ct_cpu_conv2d_backward(g, cc.x, cc.w, cc.r, dx2, dw2, cc.b ? db2 : NULL, cc.ws, 0);
    ct_cpu_conv2d_backward(g, cc.x, cc.w, cc.r, dx0, NULL, NULL, cc.ws, 1);
    snprintf(what, sizeof what, "conv %s dx written", sp->name);
    check_written(what, dx2, dx0, nx);
    CHECK_MSG(max_rel_err(dx, dx2, nx, 1.0) < 1e-5, "conv %s dx written vs added", sp->name);
    snprintf(what, sizeof what, "conv %s dw written", sp->name);
    check_written(what, dw2, dw, nw);
    if (cc.b) {
        snprintf(what, sizeof what, "conv %s db written", sp->name);
        check_written(what, db2, db, g->f);
    }
    float *dw3 = alloc_floats(nw);
    fill_nan(dw3, nw);
    ct_cpu_conv2d_backward(g, cc.x, cc.w, cc.r, NULL, dw3, NULL, cc.ws, 0);
    snprintf(what, sizeof what, "conv %s dw with NULL dx, db", sp->name);
    check_written(what, dw3, dw, nw);

    free(cc.x), free(cc.w), free(cc.b), free(cc.y), free(cc.r), free(cc.ws);
    free(dx), free(dw), free(db), free(dx2), free(dw2), free(db2), free(dx0), free(dw3);
}

static void test_convs(void)
{
    static const conv_spec specs[] = {
        /* name                 n  h  w  c  f kh kw  s pt pl pb pr bias */
        {"3x3 valid",           2, 6, 6, 2, 3, 3, 3, 1, 0, 0, 0, 0, 1},
        {"3x3 same",            2, 5, 5, 3, 2, 3, 3, 1, 1, 1, 1, 1, 1},
        {"5x5 same",            1, 6, 6, 2, 2, 5, 5, 1, 2, 2, 2, 2, 0},
        {"3x3 stride 2 pad 1",  2, 7, 7, 2, 3, 3, 3, 2, 1, 1, 1, 1, 1},
        {"3x3 stride 2 pad after only", 2, 8, 8, 2, 2, 3, 3, 2, 0, 0, 1, 1, 1},
        {"1x1",                 2, 4, 4, 3, 5, 1, 1, 1, 0, 0, 0, 0, 1},
        {"1x1 stride 2",        2, 5, 5, 3, 2, 1, 1, 2, 0, 0, 0, 0, 1},
        {"non-square 3x2",      2, 5, 7, 3, 4, 3, 2, 1, 1, 0, 1, 1, 1},
        {"5 channels 7 filters", 2, 6, 5, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1},
        {"windows all padding", 1, 3, 3, 2, 2, 2, 2, 1, 3, 3, 3, 3, 1},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) test_conv(&specs[i], 100 + (int)i);
}

/* ---- pooling ---- */

typedef struct pool_spec {
    const char *name;
    int n, h, w, c, kh, kw, stride, pad_t, pad_l, pad_b, pad_r;
} pool_spec;

typedef struct pool_case {
    ct_window_geom g;
    int is_max;
    float *x, *y, *r;
    int32_t *argmax;
} pool_case;

static size_t pool_out_size(const ct_window_geom *g) { return (size_t)g->n * g->oh * g->ow * g->c; }

static double pool_loss(void *p)
{
    pool_case *pc = p;
    if (pc->is_max) ct_cpu_maxpool_forward(&pc->g, pc->x, pc->y, pc->argmax);
    else ct_cpu_avgpool_forward(&pc->g, pc->x, pc->y);
    return dot(pc->y, pc->r, pool_out_size(&pc->g));
}

/* Naive pooling: the window's max (first on ties, with its index) or mean over in-input cells.
 * Returns the worst difference from pc->y; *argmax_ok says whether all indices matched. */
static double pool_reference_err(const pool_case *pc, int *argmax_ok)
{
    const ct_window_geom *g = &pc->g;
    double worst = 0.0;
    *argmax_ok = 1;
    for (int s = 0; s < g->n; s++)
        for (int oy = 0; oy < g->oh; oy++)
            for (int ox = 0; ox < g->ow; ox++)
                for (int ch = 0; ch < g->c; ch++) {
                    double best = -INFINITY, sum = 0.0;
                    int best_i = -1, count = 0;
                    for (int ky = 0; ky < g->kh; ky++)
                        for (int kx = 0; kx < g->kw; kx++) {
                            int iy = oy * g->stride - g->pad_t + ky, ix = ox * g->stride - g->pad_l + kx;
                            if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
                            int idx = (iy * g->w + ix) * g->c + ch;
                            float v = pc->x[(size_t)s * g->h * g->w * g->c + idx];
                            sum += v;
                            count++;
                            /* row-major window order meets the lower index first */
                            if (v > best) {
                                best = v;
                                best_i = idx;
                            }
                        }
                    size_t o = (((size_t)s * g->oh + oy) * g->ow + ox) * g->c + ch;
                    double want = pc->is_max ? best : sum / count;
                    worst = fmax(worst, fabs(want - pc->y[o]));
                    if (pc->is_max && pc->argmax[o] != best_i) *argmax_ok = 0;
                }
    return worst;
}

static void test_pool(const pool_spec *sp, int is_max, int seed)
{
    ct_rng rng = {(uint64_t)seed};
    pool_case pc = {.is_max = is_max};
    ct_window_geom *g = &pc.g;
    *g = (ct_window_geom){.n = sp->n, .h = sp->h, .w = sp->w, .c = sp->c, .f = sp->c, .kh = sp->kh,
                          .kw = sp->kw, .stride = sp->stride, .pad_t = sp->pad_t, .pad_l = sp->pad_l};
    g->oh = (sp->h + sp->pad_t + sp->pad_b - sp->kh) / sp->stride + 1;
    g->ow = (sp->w + sp->pad_l + sp->pad_r - sp->kw) / sp->stride + 1;
    size_t nx = (size_t)g->n * g->h * g->w * g->c, ny = pool_out_size(g);
    pc.x = alloc_floats(nx), pc.y = alloc_floats(ny), pc.r = alloc_floats(ny);
    pc.argmax = calloc(ny, sizeof(int32_t));
    fill_distinct(pc.x, nx, &rng);
    fill_uniform(pc.r, ny, -1, 1, &rng);
    const char *kind = is_max ? "maxpool" : "avgpool";

    pool_loss(&pc);
    int argmax_ok;
    double ferr = pool_reference_err(&pc, &argmax_ok);
    CHECK_MSG(ferr < 1e-5, "%s %s forward off by %g", kind, sp->name, ferr);
    CHECK_MSG(argmax_ok, "%s %s argmax", kind, sp->name);

    float *dx = alloc_floats(nx), *dx2 = alloc_floats(nx), *dx0 = alloc_floats(nx);
    fill_const(dx, nx, PREFILL);
    if (is_max) ct_cpu_maxpool_backward(g, pc.r, pc.argmax, NULL, dx, 1);
    else ct_cpu_avgpool_backward(g, pc.r, dx, 1);
    subtract_prefill(dx, nx);
    char what[128];
    snprintf(what, sizeof what, "%s %s dx", kind, sp->name);
    /* a step well under the 0.05 spacing of the inputs never changes which cell is the max */
    check_grad(what, pool_loss, &pc, pc.x, dx, nx, 1e-2f, 1e-3);

    /* written over NaN, cells no window reaches included */
    fill_nan(dx2, nx);
    if (is_max) {
        ct_cpu_maxpool_backward(g, pc.r, pc.argmax, NULL, dx2, 0);
        ct_cpu_maxpool_backward(g, pc.r, pc.argmax, NULL, dx0, 1);
    } else {
        ct_cpu_avgpool_backward(g, pc.r, dx2, 0);
        ct_cpu_avgpool_backward(g, pc.r, dx0, 1);
    }
    snprintf(what, sizeof what, "%s %s dx written", kind, sp->name);
    check_written(what, dx2, dx0, nx);

    free(pc.x), free(pc.y), free(pc.r), free(pc.argmax), free(dx), free(dx2), free(dx0);
}

static void test_pools(void)
{
    static const pool_spec specs[] = {
        /* name                   n  h  w  c kh kw  s pt pl pb pr */
        {"2x2 stride 2",          2, 6, 6, 3, 2, 2, 2, 0, 0, 0, 0},
        /* enough channels for the vectorised channel loop and its remainder */
        {"2x2 stride 2, 35 ch",   2, 4, 6, 35, 2, 2, 2, 0, 0, 0, 0},
        /* windows that never overlap, and cells no window reads */
        {"2x2 stride 2, odd size", 2, 7, 5, 3, 2, 2, 2, 0, 0, 0, 0},
        {"2x2 stride 2 pad after", 1, 5, 5, 2, 2, 2, 2, 0, 0, 1, 1},
        {"2x2 stride 3 (gaps)",   1, 7, 8, 2, 2, 2, 3, 0, 0, 0, 0},
        {"3x3 stride 3 pad 1",    1, 7, 7, 2, 3, 3, 3, 1, 1, 1, 1},
        {"3x3 stride 2 pad 1",    2, 7, 7, 2, 3, 3, 2, 1, 1, 1, 1},
        {"3x3 stride 2 pad after", 1, 6, 5, 2, 3, 3, 2, 0, 0, 1, 0},
        {"3x3 stride 1 pad 1",    1, 4, 5, 2, 3, 3, 1, 1, 1, 1, 1},
        {"global",                2, 5, 4, 3, 5, 4, 1, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        test_pool(&specs[i], 1, 200 + (int)i);
        test_pool(&specs[i], 0, 300 + (int)i);
    }
}

/* A max pool over a relu's output with relu's gradient folded in (relu_y, the pool's output): the
 * bits of the pool's backward followed by relu's, on tiling and on overlapping windows, with relu's
 * zeros tying in whole windows and NaN in the written buffers beforehand. */
static void test_maxpool_relu_fold(void)
{
    enum { C = 37 };
    const ct_window_geom geoms[] = {
        {.n = 2, .h = 6, .w = 6, .c = C, .f = C, .kh = 2, .kw = 2, .stride = 2, .oh = 3, .ow = 3},
        {.n = 2, .h = 5, .w = 5, .c = C, .f = C, .kh = 3, .kw = 3, .stride = 1, .pad_t = 1, .pad_l = 1, .oh = 5,
         .ow = 5},
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++) {
        const ct_window_geom *g = &geoms[k];
        ct_rng rng = {(uint64_t)(950 + k)};
        size_t nx = (size_t)g->n * g->h * g->w * g->c, ny = pool_out_size(g);
        float *z = alloc_floats(nx), *x = alloc_floats(nx), *y = alloc_floats(ny), *dy = alloc_floats(ny);
        float *dpool = alloc_floats(nx), *want = alloc_floats(nx), *got = alloc_floats(nx);
        int32_t *am = malloc(ny * sizeof *am);
        fill_uniform(z, nx, -1, 0.5f, &rng);  /* two thirds negative: windows of zeros after relu */
        fill_uniform(dy, ny, -1, 1, &rng);
        ct_cpu_activation_forward(CT_ACT_RELU, z, x, nx);
        ct_cpu_maxpool_forward(g, x, y, am);
        fill_nan(dpool, nx), fill_nan(want, nx), fill_nan(got, nx);
        ct_cpu_maxpool_backward(g, dy, am, NULL, dpool, 0);
        ct_cpu_activation_backward(CT_ACT_RELU, x, x, dpool, want, nx, 0);
        ct_cpu_maxpool_backward(g, dy, am, y, got, 0);
        size_t differ = 0, zero_windows = 0, masked = 0;
        for (size_t i = 0; i < nx; i++)
            differ += !(got[i] == want[i]);
        for (size_t i = 0; i < ny; i++) {
            zero_windows += y[i] == 0.0f;
            masked += y[i] == 0.0f && dy[i] != 0.0f;
        }
        CHECK_MSG(differ == 0, "relu folded into maxpool (geometry %zu): %zu of %zu values differ", k, differ, nx);
        /* the case means something: windows whose max is relu's zero, their gradient dropped */
        CHECK_MSG(zero_windows > ny / 50 && masked > 0, "geometry %zu: %zu zero windows of %zu", k, zero_windows, ny);
        free(z), free(x), free(y), free(dy), free(dpool), free(want), free(got), free(am);
    }
}

static void test_pool_hand_values(void)
{
    /* 2x2 stride 2 on one 4x4 channel; the last window ties (9, 9) and the first 9 wins */
    const float x[16] = {1, 3, 2, 4, 5, 6, 8, 7, -1, 0, 9, 9, 2, 1, 3, 0};
    ct_window_geom g = {.n = 1, .h = 4, .w = 4, .c = 1, .f = 1, .kh = 2, .kw = 2, .stride = 2, .oh = 2, .ow = 2};
    float y[4];
    int32_t am[4];
    ct_cpu_maxpool_forward(&g, x, y, am);
    const float want_y[4] = {6, 8, 2, 9};
    const int32_t want_am[4] = {5, 6, 12, 10};
    for (int i = 0; i < 4; i++) {
        CHECK_NEAR(y[i], want_y[i], 0);
        CHECK(am[i] == want_am[i]);
    }
    float dx[16] = {0}, dy[4] = {1, 2, 3, 4};
    ct_cpu_maxpool_backward(&g, dy, am, NULL, dx, 1);
    CHECK_NEAR(dx[5], 1, 0); CHECK_NEAR(dx[6], 2, 0); CHECK_NEAR(dx[12], 3, 0); CHECK_NEAR(dx[10], 4, 0);
    CHECK_NEAR(dx[11], 0, 0);

    /* all-negative input, 3x3 stride 2 pad 1: a zero from the padding must never win */
    float neg[16];
    for (int i = 0; i < 16; i++) neg[i] = -(float)(i + 1);
    g = (ct_window_geom){.n = 1, .h = 4, .w = 4, .c = 1, .f = 1, .kh = 3, .kw = 3, .stride = 2, .pad_t = 1,
                         .pad_l = 1, .oh = 2, .ow = 2};
    ct_cpu_maxpool_forward(&g, neg, y, am);
    const float want_neg[4] = {-1, -2, -5, -6};
    const int32_t want_neg_am[4] = {0, 1, 4, 5};
    for (int i = 0; i < 4; i++) {
        CHECK_NEAR(y[i], want_neg[i], 0);
        CHECK(am[i] == want_neg_am[i]);
    }

    /* argmax indexes the sample's (h, w, c) volume: two channels, second sample */
    const float x2[2 * 2 * 2 * 2] = {0, 0, 0, 0, 0, 0, 0, 0, /* sample 1: */ 1, 9, 4, 2, 3, 5, 2, 8};
    g = (ct_window_geom){.n = 2, .h = 2, .w = 2, .c = 2, .f = 2, .kh = 2, .kw = 2, .stride = 2, .oh = 1, .ow = 1};
    float y2[4];
    int32_t am2[4];
    ct_cpu_maxpool_forward(&g, x2, y2, am2);
    CHECK_NEAR(y2[2], 4, 0); CHECK_NEAR(y2[3], 9, 0);
    CHECK(am2[2] == 2 && am2[3] == 1);

    /* ties in every channel of a wide window (relu's zeros): the first cell wins in each, in the
     * vectorised channel loop as in its remainder */
    enum { WIDE = 37 };
    float zeros[2 * 2 * WIDE] = {0}, yw[WIDE];
    int32_t amw[WIDE];
    zeros[3 * WIDE + 5] = 1.0f;  /* one channel's last cell wins outright */
    g = (ct_window_geom){.n = 1, .h = 2, .w = 2, .c = WIDE, .f = WIDE, .kh = 2, .kw = 2, .stride = 2, .oh = 1,
                         .ow = 1};
    ct_cpu_maxpool_forward(&g, zeros, yw, amw);
    for (int ch = 0; ch < WIDE; ch++) {
        CHECK_NEAR(yw[ch], ch == 5 ? 1.0f : 0.0f, 0);
        CHECK_MSG(amw[ch] == (ch == 5 ? 3 * WIDE + 5 : ch), "wide tie: channel %d argmax %d", ch, (int)amw[ch]);
    }

    /* avgpool 3x3 stride 1 pad 1 on 1..9: padded cells are not counted */
    const float nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    g = (ct_window_geom){.n = 1, .h = 3, .w = 3, .c = 1, .f = 1, .kh = 3, .kw = 3, .stride = 1, .pad_t = 1,
                         .pad_l = 1, .oh = 3, .ow = 3};
    float avg[9], ones[9], dnine[9] = {0};
    ct_cpu_avgpool_forward(&g, nine, avg);
    CHECK_NEAR(avg[0], (1 + 2 + 4 + 5) / 4.0, 1e-6);
    CHECK_NEAR(avg[1], (1 + 2 + 3 + 4 + 5 + 6) / 6.0, 1e-6);
    CHECK_NEAR(avg[4], 5, 1e-6);
    CHECK_NEAR(avg[8], (5 + 6 + 8 + 9) / 4.0, 1e-6);
    fill_const(ones, 9, 1.0f);
    ct_cpu_avgpool_backward(&g, ones, dnine, 1);
    /* the corner is in 4 windows of 4, 6, 6 and 9 cells; the centre in all nine */
    CHECK_NEAR(dnine[0], 1 / 4.0 + 2 / 6.0 + 1 / 9.0, 1e-6);
    CHECK_NEAR(dnine[4], 4 / 4.0 + 4 / 6.0 + 1 / 9.0, 1e-6);
}

/* ---- batch norm ---- */

typedef struct bn_case {
    float *x, *gamma, *beta, *y, *r, *mean, *invstd, *run_mean, *run_var;
    int rows, c;
} bn_case;

static double bn_loss(void *p)
{
    bn_case *b = p;
    ct_cpu_batchnorm_forward_train(b->x, b->gamma, b->beta, b->y, b->mean, b->invstd, b->run_mean,
                                   b->run_var, b->rows, b->c, 0.1f, 1e-5f, 0);
    return dot(b->y, b->r, (size_t)b->rows * b->c);
}

static void test_batchnorm_grad(int rows, int c, int seed)
{
    ct_rng rng = {(uint64_t)seed};
    bn_case b = {.rows = rows, .c = c};
    size_t nx = (size_t)rows * c;
    b.x = alloc_floats(nx), b.y = alloc_floats(nx), b.r = alloc_floats(nx);
    b.gamma = alloc_floats(c), b.beta = alloc_floats(c), b.mean = alloc_floats(c);
    b.invstd = alloc_floats(c), b.run_mean = alloc_floats(c), b.run_var = alloc_floats(c);
    fill_uniform(b.x, nx, -1, 2, &rng);
    fill_uniform(b.r, nx, -1, 1, &rng);
    fill_uniform(b.gamma, c, 0.5f, 1.5f, &rng);
    fill_uniform(b.beta, c, -0.5f, 0.5f, &rng);

    bn_loss(&b);
    float *dx = alloc_floats(nx), *dgamma = alloc_floats(c), *dbeta = alloc_floats(c);
    fill_const(dx, nx, PREFILL), fill_nan(dgamma, c), fill_nan(dbeta, c);
    ct_cpu_batchnorm_backward(b.x, b.gamma, b.beta, b.r, b.mean, b.invstd, dx, dgamma, dbeta, rows, c, 1, 0);
    subtract_prefill(dx, nx);
    char what[128];
    snprintf(what, sizeof what, "batchnorm %dx%d dx", rows, c);
    check_grad(what, bn_loss, &b, b.x, dx, nx, 1e-2f, 5e-3);
    snprintf(what, sizeof what, "batchnorm %dx%d dgamma", rows, c);
    check_grad(what, bn_loss, &b, b.gamma, dgamma, c, 1e-2f, 1e-3);
    snprintf(what, sizeof what, "batchnorm %dx%d dbeta", rows, c);
    check_grad(what, bn_loss, &b, b.beta, dbeta, c, 1e-2f, 1e-3);

    float *dx2 = alloc_floats(nx), *dx0 = alloc_floats(nx), *dg2 = alloc_floats(c), *db2 = alloc_floats(c);
    fill_nan(dx2, nx), fill_nan(dg2, c), fill_nan(db2, c);
    ct_cpu_batchnorm_backward(b.x, b.gamma, b.beta, b.r, b.mean, b.invstd, dx2, dg2, db2, rows, c, 0, 0);
    ct_cpu_batchnorm_backward(b.x, b.gamma, b.beta, b.r, b.mean, b.invstd, dx0, NULL, NULL, rows, c, 1, 0);
    snprintf(what, sizeof what, "batchnorm %dx%d dx written", rows, c);
    check_written(what, dx2, dx0, nx);
    snprintf(what, sizeof what, "batchnorm %dx%d dgamma, dbeta again", rows, c);
    check_written(what, dg2, dgamma, c);
    check_written(what, db2, dbeta, c);
    free(dx2), free(dx0), free(dg2), free(db2);

    free(b.x), free(b.y), free(b.r), free(b.gamma), free(b.beta), free(b.mean), free(b.invstd);
    free(b.run_mean), free(b.run_var), free(dx), free(dgamma), free(dbeta);
}

/* batchnorm with its relu fused (activation = relu) is the batch norm, then the relu, bit for bit:
 * forward's y is max(0, the plain y), backward with the output's gradient equals the plain backward
 * given that gradient where the plain y is positive and 0 elsewhere (its mask, recomputed from x,
 * is the forward's). In training and in evaluation; c = 70 spans two channel blocks. */
static void test_batchnorm_relu_fused(int rows, int c, int seed)
{
    ct_rng rng = {(uint64_t)seed};
    size_t nx = (size_t)rows * c;
    float *x = alloc_floats(nx), *r = alloc_floats(nx), *gamma = alloc_floats(c), *beta = alloc_floats(c);
    float *y_plain = alloc_floats(nx), *y_fused = alloc_floats(nx), *dz = alloc_floats(nx);
    float *stats = alloc_floats(8 * (size_t)c);  /* mean, invstd, running mean, running var: plain then fused */
    fill_uniform(x, nx, -1, 2, &rng);
    fill_uniform(r, nx, -1, 1, &rng);
    fill_uniform(gamma, c, 0.5f, 1.5f, &rng);
    fill_uniform(beta, c, -0.5f, 0.5f, &rng);
    float *plain = stats, *fused = stats + 4 * (size_t)c;
    for (int k = 0; k < 2; k++) {
        float *s = k ? fused : plain;
        fill_const(s + 2 * (size_t)c, c, 0.0f);
        fill_const(s + 3 * (size_t)c, c, 1.0f);
        ct_cpu_batchnorm_forward_train(x, gamma, beta, k ? y_fused : y_plain, s, s + c, s + 2 * (size_t)c,
                                       s + 3 * (size_t)c, rows, c, 0.1f, 1e-5f, k);
    }
    size_t off = 0, y_diff = 0;
    for (size_t i = 0; i < nx; i++) {
        off += !(y_plain[i] > 0.0f);
        y_diff += y_fused[i] != (y_plain[i] > 0.0f ? y_plain[i] : 0.0f);
        dz[i] = y_plain[i] > 0.0f ? r[i] : 0.0f;
    }
    char what[128];
    snprintf(what, sizeof what, "batchnorm+relu %dx%d", rows, c);
    CHECK_MSG(off > nx / 5 && off < nx * 4 / 5, "%s: the relu is off at %zu of %zu values", what, off, nx);
    CHECK_MSG(y_diff == 0, "%s: forward differs from batch norm then relu at %zu values", what, y_diff);
    CHECK_MSG(memcmp(plain, fused, 4 * (size_t)c * sizeof(float)) == 0, "%s: the statistics differ", what);

    float *dx_plain = alloc_floats(nx), *dx_fused = alloc_floats(nx), *dp = alloc_floats(4 * (size_t)c);
    ct_cpu_batchnorm_backward(x, gamma, beta, dz, plain, plain + c, dx_plain, dp, dp + c, rows, c, 0, 0);
    ct_cpu_batchnorm_backward(x, gamma, beta, r, plain, plain + c, dx_fused, dp + 2 * c, dp + 3 * c, rows, c, 0, 1);
    CHECK_MSG(memcmp(dx_plain, dx_fused, nx * sizeof(float)) == 0, "%s: dx differs from the plain backward of "
              "the relu's gradient", what);
    CHECK_MSG(memcmp(dp, dp + 2 * c, 2 * (size_t)c * sizeof(float)) == 0, "%s: dgamma or dbeta differs", what);

    ct_cpu_batchnorm_forward_eval(x, gamma, beta, plain + 2 * (size_t)c, plain + 3 * (size_t)c, y_plain, rows, c,
                                  1e-5f, 0);
    ct_cpu_batchnorm_forward_eval(x, gamma, beta, plain + 2 * (size_t)c, plain + 3 * (size_t)c, y_fused, rows, c,
                                  1e-5f, 1);
    y_diff = 0;
    for (size_t i = 0; i < nx; i++)
        y_diff += y_fused[i] != (y_plain[i] > 0.0f ? y_plain[i] : 0.0f);
    CHECK_MSG(y_diff == 0, "%s: evaluation differs from batch norm then relu at %zu values", what, y_diff);
    free(x), free(r), free(gamma), free(beta), free(y_plain), free(y_fused), free(dz), free(stats);
    free(dx_plain), free(dx_fused), free(dp);
}

static void test_batchnorm_values(void)
{
    /* channel 0: 1 2 3 4 (mean 2.5, biased var 1.25, unbiased 5/3);
     * channel 1: 2 2 2 6 (mean 3, biased var 3, unbiased 4) */
    const float x[8] = {1, 2, 2, 2, 3, 2, 4, 6};
    const float gamma[2] = {2, 0.5f}, beta[2] = {1, -1};
    float y[8], mean[2], invstd[2], run_mean[2] = {0, 0}, run_var[2] = {1, 1};
    ct_cpu_batchnorm_forward_train(x, gamma, beta, y, mean, invstd, run_mean, run_var, 4, 2, 0.1f, 1e-5f, 0);
    CHECK_NEAR(mean[0], 2.5, 1e-6); CHECK_NEAR(mean[1], 3, 1e-6);
    CHECK_NEAR(invstd[0], 1 / sqrt(1.25 + 1e-5), 1e-6); CHECK_NEAR(invstd[1], 1 / sqrt(3 + 1e-5), 1e-6);
    CHECK_NEAR(run_mean[0], 0.25, 1e-6); CHECK_NEAR(run_mean[1], 0.3, 1e-6);
    CHECK_NEAR(run_var[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-6); CHECK_NEAR(run_var[1], 0.9 + 0.4, 1e-6);
    CHECK_NEAR(y[0], 2 * (1 - 2.5) / sqrt(1.25 + 1e-5) + 1, 1e-5);
    CHECK_NEAR(y[7], 0.5 * (6 - 3) / sqrt(3 + 1e-5) - 1, 1e-5);

    /* eval mode uses the running statistics */
    float ye[8];
    const float rm[2] = {0.5f, -1}, rv[2] = {4, 0.25f};
    ct_cpu_batchnorm_forward_eval(x, gamma, beta, rm, rv, ye, 4, 2, 1e-3f, 0);
    double worst = 0.0;
    for (int i = 0; i < 8; i++) {
        int j = i % 2;
        double want = gamma[j] * (x[i] - rm[j]) / sqrt(rv[j] + 1e-3) + beta[j];
        worst = fmax(worst, fabs(want - ye[i]));
    }
    CHECK_MSG(worst < 1e-5, "batchnorm eval off by %g", worst);

    /* a large mean over a small spread: statistics must not cancel away */
    enum { ROWS = 1000 };
    float *big = alloc_floats(ROWS), *ybig = alloc_floats(ROWS);
    for (int i = 0; i < ROWS; i++) big[i] = 1000.0f + (i % 2 ? 0.01f : -0.01f);
    float g1 = 1, b0 = 0, m1, s1, rm1 = 0, rv1 = 1;
    ct_cpu_batchnorm_forward_train(big, &g1, &b0, ybig, &m1, &s1, &rm1, &rv1, ROWS, 1, 0.1f, 0.0f, 0);
    double true_std = 0.0;
    for (int i = 0; i < ROWS; i++) true_std += ((double)big[i] - 1000.0) * ((double)big[i] - 1000.0);
    true_std = sqrt(true_std / ROWS);
    CHECK_NEAR(s1 * true_std, 1.0, 1e-3);
    CHECK_NEAR(ybig[0], -1.0, 1e-2); CHECK_NEAR(ybig[1], 1.0, 1e-2);
    free(big), free(ybig);
}

/* ---- elementwise ---- */

typedef struct act_case {
    ct_activation act;
    float *x, *y, *r;
    size_t n;
} act_case;

static double act_loss(void *p)
{
    act_case *a = p;
    ct_cpu_activation_forward(a->act, a->x, a->y, a->n);
    return dot(a->y, a->r, a->n);
}

static void test_activation_grad(ct_activation act, int seed)
{
    ct_rng rng = {(uint64_t)seed};
    act_case a = {.act = act, .n = 64};
    a.x = alloc_floats(a.n), a.y = alloc_floats(a.n), a.r = alloc_floats(a.n);
    /* |x| in [0.1, 3]: well clear of the relu and leaky kinks at 0 */
    fill_uniform(a.x, a.n, 0.1f, 3.0f, &rng);
    for (size_t i = 0; i < a.n; i += 2) a.x[i] = -a.x[i];
    fill_uniform(a.r, a.n, -1, 1, &rng);
    float *dx = alloc_floats(a.n), *dx2 = alloc_floats(a.n), *dx0 = alloc_floats(a.n);
    act_loss(&a);
    fill_const(dx, a.n, PREFILL);
    ct_cpu_activation_backward(act, a.x, a.y, a.r, dx, a.n, 1);
    subtract_prefill(dx, a.n);
    static const char *const names[CT_ACT_COUNT] = {"linear", "relu", "leaky", "sigmoid", "tanh", "gelu"};
    char what[64];
    snprintf(what, sizeof what, "activation %s dx", names[act]);
    check_grad(what, act_loss, &a, a.x, dx, a.n, 1e-2f, 1e-3);
    fill_nan(dx2, a.n);
    ct_cpu_activation_backward(act, a.x, a.y, a.r, dx2, a.n, 0);
    ct_cpu_activation_backward(act, a.x, a.y, a.r, dx0, a.n, 1);
    snprintf(what, sizeof what, "activation %s dx written", names[act]);
    check_written(what, dx2, dx0, a.n);
    free(a.x), free(a.y), free(a.r), free(dx), free(dx2), free(dx0);
}

static void test_activation_values(void)
{
    const float x[4] = {-2, -0.5f, 0.5f, 1};
    float y[4];
    ct_cpu_activation_forward(CT_ACT_RELU, x, y, 4);
    CHECK(y[0] == 0 && y[1] == 0 && y[2] == 0.5f && y[3] == 1);
    ct_cpu_activation_forward(CT_ACT_LEAKY, x, y, 4);
    CHECK_NEAR(y[0], -0.2, 1e-7); CHECK_NEAR(y[1], -0.05, 1e-7); CHECK_NEAR(y[3], 1, 0);
    ct_cpu_activation_forward(CT_ACT_TANH, x, y, 4);
    CHECK_NEAR(y[2], 0.46211716, 1e-6);
    ct_cpu_activation_forward(CT_ACT_GELU, x, y, 4);
    CHECK_NEAR(y[3], 0.84134475, 1e-6); CHECK_NEAR(y[0], -0.04550026, 1e-6);
    const float big[3] = {-100, 0, 100};
    float s[3];
    ct_cpu_activation_forward(CT_ACT_SIGMOID, big, s, 3);
    CHECK_NEAR(s[0], 0, 1e-30); CHECK_NEAR(s[1], 0.5, 0); CHECK_NEAR(s[2], 1, 0);
    /* in place, and linear copies */
    float inplace[4] = {-2, -0.5f, 0.5f, 1};
    ct_cpu_activation_forward(CT_ACT_RELU, inplace, inplace, 4);
    CHECK(inplace[0] == 0 && inplace[3] == 1);
    ct_cpu_activation_forward(CT_ACT_LINEAR, x, y, 4);
    CHECK(memcmp(x, y, sizeof x) == 0);
    /* gelu'(0) = 0.5 (from x), sigmoid'(0) = 0.25 (from y = 0.5), both added to what dx held */
    const float zero = 0, mid = 0.5f, one = 1;
    float d = 1;
    ct_cpu_activation_backward(CT_ACT_GELU, &zero, NULL, &one, &d, 1, 1);
    CHECK_NEAR(d, 1.5, 1e-6);
    ct_cpu_activation_backward(CT_ACT_SIGMOID, NULL, &mid, &one, &d, 1, 1);
    CHECK_NEAR(d, 1.75, 1e-6);
    /* relu and leaky given y in x's place, as a fused activation without its pre-activation does:
     * y > 0 exactly where x > 0, so the same gradients */
    const float xs[4] = {-2, -0.0f, 0.5f, 3}, dys[4] = {1, 2, 3, 4};
    for (int a = CT_ACT_RELU; a <= CT_ACT_LEAKY; a++) {
        float ys[4], from_x[4] = {0}, from_y[4] = {0};
        ct_cpu_activation_forward((ct_activation)a, xs, ys, 4);
        ct_cpu_activation_backward((ct_activation)a, xs, ys, dys, from_x, 4, 1);
        ct_cpu_activation_backward((ct_activation)a, ys, ys, dys, from_y, 4, 1);
        CHECK_MSG(memcmp(from_x, from_y, sizeof from_x) == 0, "%s: the gradient from y differs from x's",
                  ct_activation_name((ct_activation)a));
    }
    /* written: a gradient of -0 comes out +0, as adding it into a cleared buffer gave */
    const float minus_zero = -0.0f, two = 2;
    d = NAN;
    ct_cpu_activation_backward(CT_ACT_RELU, &two, NULL, &minus_zero, &d, 1, 0);
    CHECK(d == 0.0f && !signbit(d));
}

typedef struct dropout_case {
    float *x, *y, *r;
    uint8_t *mask;
    size_t n;
    float rate;
} dropout_case;

static double dropout_loss(void *p)
{
    dropout_case *d = p;
    ct_cpu_dropout_forward(d->x, d->y, d->mask, d->n, d->rate, 7, 3);
    return dot(d->y, d->r, d->n);
}

static void test_dropout(void)
{
    ct_rng rng = {500};
    dropout_case d = {.n = 60, .rate = 0.4f};
    d.x = alloc_floats(d.n), d.y = alloc_floats(d.n), d.r = alloc_floats(d.n);
    d.mask = calloc(d.n, 1);
    fill_uniform(d.x, d.n, -1, 1, &rng);
    fill_uniform(d.r, d.n, -1, 1, &rng);
    dropout_loss(&d);
    float *dx = alloc_floats(d.n), *dx2 = alloc_floats(d.n), *dx0 = alloc_floats(d.n);
    fill_const(dx, d.n, PREFILL);
    ct_cpu_dropout_backward(d.r, d.mask, dx, d.n, d.rate, 1);
    subtract_prefill(dx, d.n);
    check_grad("dropout dx", dropout_loss, &d, d.x, dx, d.n, 1e-2f, 1e-3);
    fill_nan(dx2, d.n);
    ct_cpu_dropout_backward(d.r, d.mask, dx2, d.n, d.rate, 0);
    ct_cpu_dropout_backward(d.r, d.mask, dx0, d.n, d.rate, 1);
    check_written("dropout dx written", dx2, dx0, d.n);
    free(d.x), free(d.y), free(d.r), free(d.mask), free(dx), free(dx2), free(dx0);

    /* a million elements: the dropped fraction is within 6 sigma of the rate */
    const size_t n = 1000000;
    const float rate = 0.3f;
    float *x = alloc_floats(n), *y = alloc_floats(n), *y2 = alloc_floats(n);
    uint8_t *m1 = malloc(n), *m2 = malloc(n), *m3 = malloc(n);
    fill_uniform(x, n, -1, 1, &rng);
    ct_cpu_dropout_forward(x, y, m1, n, rate, 11, 5);
    ct_cpu_dropout_forward(x, y2, m2, n, rate, 11, 5);
    CHECK(memcmp(m1, m2, n) == 0 && memcmp(y, y2, n * sizeof(float)) == 0);
    ct_cpu_dropout_forward(x, y2, m3, n, rate, 11, 6);
    CHECK(memcmp(m1, m3, n) != 0); /* another stream, another mask */
    size_t dropped = 0, bad_values = 0;
    for (size_t i = 0; i < n; i++) {
        dropped += !m1[i];
        float want = m1[i] ? x[i] / (1 - rate) : 0.0f;
        bad_values += fabsf(y[i] - want) > 1e-6f;
        bad_values += m1[i] != (ct_uniform(11, 5, i) >= rate);
    }
    CHECK_NEAR((double)dropped / n, rate, 0.003);
    CHECK(bad_values == 0);
    ct_cpu_dropout_forward(x, y, m1, n, 0.0f, 11, 5);
    CHECK(memcmp(x, y, n * sizeof(float)) == 0);
    free(x), free(y), free(y2), free(m1), free(m2), free(m3);
}

typedef struct add_case {
    float *a, *b, *y, *r;
    size_t n;
} add_case;

static double add_loss(void *p)
{
    add_case *c = p;
    ct_cpu_add_forward(c->a, c->b, c->y, c->n);
    return dot(c->y, c->r, c->n);
}

static void test_add(void)
{
    ct_rng rng = {600};
    add_case c = {.n = 20};
    c.a = alloc_floats(c.n), c.b = alloc_floats(c.n), c.y = alloc_floats(c.n), c.r = alloc_floats(c.n);
    fill_uniform(c.a, c.n, -1, 1, &rng);
    fill_uniform(c.b, c.n, -1, 1, &rng);
    fill_uniform(c.r, c.n, -1, 1, &rng);
    add_loss(&c);
    CHECK_NEAR(c.y[3], (double)c.a[3] + c.b[3], 1e-7);
    float *da = alloc_floats(c.n), *db = alloc_floats(c.n);
    /* a added to, b written over NaN */
    fill_const(da, c.n, PREFILL), fill_nan(db, c.n);
    ct_cpu_accumulate(c.r, da, c.n, 1);
    ct_cpu_accumulate(c.r, db, c.n, 0);
    subtract_prefill(da, c.n);
    check_grad("add da", add_loss, &c, c.a, da, c.n, 1e-2f, 1e-3);
    check_grad("add db", add_loss, &c, c.b, db, c.n, 1e-2f, 1e-3);
    free(c.a), free(c.b), free(c.y), free(c.r), free(da), free(db);

    float rows[6] = {0, 1, 2, 3, 4, 5};
    const float bias[2] = {10, 20};
    ct_cpu_add_bias(rows, bias, 3, 2);
    CHECK(rows[0] == 10 && rows[1] == 21 && rows[4] == 14 && rows[5] == 25);
}

static void test_all_finite(void)
{
    const size_t n = 100000;
    float *v = alloc_floats(n);
    CHECK(ct_cpu_all_finite(v, n) == 1);
    v[n - 1] = INFINITY;
    CHECK(ct_cpu_all_finite(v, n) == 0);
    v[n - 1] = -INFINITY;
    CHECK(ct_cpu_all_finite(v, n) == 0);
    v[n - 1] = NAN;
    CHECK(ct_cpu_all_finite(v, n) == 0);
    v[n - 1] = 3.4e38f;
    CHECK(ct_cpu_all_finite(v, n) == 1);
    free(v);
}

/* ---- loss ---- */

typedef struct xent_case {
    float *logits;
    int32_t *labels;
    int n, k;
    float grad_scale;
} xent_case;

static double xent_loss(void *p)
{
    xent_case *c = p;
    return c->grad_scale * ct_cpu_softmax_xent(c->logits, c->labels, NULL, c->n, c->k, 1.0f, NULL);
}

static void test_xent_grad(void)
{
    ct_rng rng = {700};
    xent_case c = {.n = 4, .k = 5, .grad_scale = 0.25f};
    size_t nl = (size_t)c.n * c.k;
    c.logits = alloc_floats(nl);
    c.labels = calloc(c.n, sizeof(int32_t));
    fill_uniform(c.logits, nl, -3, 3, &rng);
    for (int i = 0; i < c.n; i++) c.labels[i] = (i * 3 + 1) % c.k;
    float *d = alloc_floats(nl);
    fill_const(d, nl, 7.0f); /* dlogits is overwritten, not accumulated */
    ct_cpu_softmax_xent(c.logits, c.labels, d, c.n, c.k, c.grad_scale, NULL);
    check_grad("softmax xent dlogits", xent_loss, &c, c.logits, d, nl, 1e-2f, 1e-3);
    free(c.logits), free(c.labels), free(d);
}

static void test_xent_values(void)
{
    /* rows: right; wrong; a tie resolved to the first class (wrong); a tie won by the label */
    const float logits[12] = {1, 2, 3, 5, 1, 0, 2, 2, 0, 0, 4, 4};
    const int32_t labels[4] = {2, 1, 1, 1};
    float d[12];
    long correct = -1;
    double loss = ct_cpu_softmax_xent(logits, labels, d, 1, 3, 1.0f, &correct);
    CHECK_NEAR(loss, 0.40760596, 1e-7);
    CHECK(correct == 1);
    CHECK_NEAR(d[0], 0.09003057, 1e-7); CHECK_NEAR(d[1], 0.24472847, 1e-7);
    CHECK_NEAR(d[2], 0.66524096 - 1, 1e-7);
    loss = ct_cpu_softmax_xent(logits, labels, NULL, 4, 3, 1.0f, &correct);
    double want = 0.40760596 + log(exp(5) + exp(1) + 1) - 1 + log(2 * exp(2) + 1) - 2 +
                  log(1 + 2 * exp(4)) - 4;
    CHECK_NEAR(loss, want, 1e-6);
    CHECK(correct == 2);
    ct_cpu_softmax_xent(logits + 6, labels + 2, NULL, 1, 3, 1.0f, &correct);
    CHECK(correct == 0); /* 2 2 0: the first maximum, class 0, is the prediction */
    ct_cpu_softmax_xent(logits + 9, labels + 3, NULL, 1, 3, 1.0f, &correct);
    CHECK(correct == 1); /* 0 4 4: class 1 */
    /* huge logits neither overflow nor lose the answer */
    const float huge[3] = {1000, 0, -1000};
    const int32_t first = 0, second = 1;
    CHECK_NEAR(ct_cpu_softmax_xent(huge, &first, NULL, 1, 3, 1.0f, &correct), 0, 1e-9);
    CHECK_NEAR(ct_cpu_softmax_xent(huge, &second, NULL, 1, 3, 1.0f, NULL), 1000, 1e-3);
}

/* ---- optimizers ---- */

static void test_sgd(void)
{
    float w = 1, g = 0.5f;
    ct_cpu_sgd_step(&w, &g, NULL, 1, 0.1f, 0.0f, 0, 0.0f);
    CHECK_NEAR(w, 0.95, 1e-7);
    w = 1;
    ct_cpu_sgd_step(&w, &g, NULL, 1, 0.1f, 0.0f, 0, 0.1f); /* g + 0.1 w = 0.6 */
    CHECK_NEAR(w, 0.94, 1e-7);

    /* heavy ball: vel 0.5 then 0.9 * 0.5 + 0.5 = 0.95 */
    float vel = 0;
    w = 1;
    ct_cpu_sgd_step(&w, &g, &vel, 1, 0.1f, 0.9f, 0, 0.0f);
    CHECK_NEAR(w, 0.95, 1e-7); CHECK_NEAR(vel, 0.5, 1e-7);
    ct_cpu_sgd_step(&w, &g, &vel, 1, 0.1f, 0.9f, 0, 0.0f);
    CHECK_NEAR(w, 0.855, 1e-6); CHECK_NEAR(vel, 0.95, 1e-7);

    /* Nesterov steps by g + 0.9 vel: 0.95, then 0.5 + 0.9 * 0.95 = 1.355 */
    vel = 0;
    w = 1;
    ct_cpu_sgd_step(&w, &g, &vel, 1, 0.1f, 0.9f, 1, 0.0f);
    CHECK_NEAR(w, 0.905, 1e-6);
    ct_cpu_sgd_step(&w, &g, &vel, 1, 0.1f, 0.9f, 1, 0.0f);
    CHECK_NEAR(w, 0.7695, 1e-6);

    /* momentum with weight decay folds the decay into the velocity */
    vel = 0;
    w = 2;
    ct_cpu_sgd_step(&w, &g, &vel, 1, 0.1f, 0.9f, 0, 0.5f); /* g' = 1.5 */
    CHECK_NEAR(vel, 1.5, 1e-7); CHECK_NEAR(w, 1.85, 1e-6);
}

/* One Adam step in double, straight from the formulas. */
static double adam_ref(double *w, double g, double *m, double *v, double lr, double b1, double b2,
                       double eps, long t)
{
    *m = b1 * *m + (1 - b1) * g;
    *v = b2 * *v + (1 - b2) * g * g;
    double mhat = *m / (1 - pow(b1, t)), vhat = *v / (1 - pow(b2, t));
    *w -= lr * mhat / (sqrt(vhat) + eps);
    return *w;
}

static void test_adam(void)
{
    const float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    /* first step: mhat = g, vhat = g^2, so each weight moves lr g / (|g| + eps) */
    float w[3] = {1, 1, 1}, g[3] = {0.5f, -2, 1e-3f}, m[3] = {0}, v[3] = {0};
    ct_cpu_adam_step(w, g, m, v, 3, lr, b1, b2, eps, 0.0f, 0, 1);
    CHECK_NEAR(w[0], 1 - lr * 0.5 / (0.5 + 1e-8), 1e-6);
    CHECK_NEAR(w[1], 1 + lr * 2 / (2 + 1e-8), 1e-6);
    CHECK_NEAR(w[2], 1 - lr * 1e-3 / (1e-3 + 1e-8), 1e-6);

    /* second step with another gradient, against the formulas in double */
    double wd = w[0], md = 0, vd = 0, w0 = 1;
    adam_ref(&w0, 0.5, &md, &vd, lr, b1, b2, eps, 1);
    float g2 = -0.3f;
    ct_cpu_adam_step(w, &g2, m, v, 1, lr, b1, b2, eps, 0.0f, 0, 2);
    adam_ref(&wd, g2, &md, &vd, lr, b1, b2, eps, 2);
    CHECK_NEAR(m[0], md, 1e-7); CHECK_NEAR(v[0], vd, 1e-9);
    CHECK_NEAR(w[0], wd, 1e-6);

    /* L2 decay (Adam) joins the gradient: g' = -0.05 + 0.1 * 1 > 0, so w goes down by ~lr */
    float wa = 1, ga = -0.05f, ma = 0, va = 0;
    ct_cpu_adam_step(&wa, &ga, &ma, &va, 1, lr, b1, b2, eps, 0.1f, 0, 1);
    CHECK_NEAR(wa, 0.99, 1e-6);
    /* decoupled decay (AdamW) shrinks w by lr wd first, then the step follows g < 0 */
    float ww = 1, mw = 0, vw = 0;
    ct_cpu_adam_step(&ww, &ga, &mw, &vw, 1, lr, b1, b2, eps, 0.1f, 1, 1);
    CHECK_NEAR(ww, 1 * (1 - 0.01 * 0.1) + 0.01, 1e-6);

    /* a buffer long enough for the vectorised loop and its remainder: the same bits as the
     * formula evaluated one element at a time */
    enum { LONG = 37 };
    ct_rng rng = {920};
    float wl[LONG], gl[LONG], ml[LONG], vl[LONG], we[LONG], me[LONG], ve[LONG];
    fill_uniform(wl, LONG, -1, 1, &rng);
    fill_uniform(gl, LONG, -1, 1, &rng);
    fill_uniform(ml, LONG, -0.1f, 0.1f, &rng);
    fill_uniform(vl, LONG, 0, 0.01f, &rng);
    memcpy(we, wl, sizeof wl), memcpy(me, ml, sizeof ml), memcpy(ve, vl, sizeof vl);
    ct_cpu_adam_step(wl, gl, ml, vl, LONG, lr, b1, b2, eps, 0.0f, 0, 3);
    const float bc1 = (float)(1.0 - pow(b1, 3.0)), bc2 = (float)(1.0 - pow(b2, 3.0));
    const float step = (float)((double)lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt((double)bc2));
    for (int i = 0; i < LONG; i++) {
        double wr = we[i], mr = me[i], vr = ve[i];
        me[i] = b1 * me[i] + (1.0f - b1) * gl[i];
        ve[i] = b2 * ve[i] + (1.0f - b2) * gl[i] * gl[i];
        we[i] = we[i] - step * me[i] / (sqrtf(ve[i]) * inv_sqrt_bc2 + eps);
        CHECK_MSG(wl[i] == we[i] && ml[i] == me[i] && vl[i] == ve[i], "adam element %d: %.9g, want %.9g", i,
                  wl[i], we[i]);
        /* and within float rounding of the formulas in double */
        adam_ref(&wr, gl[i], &mr, &vr, lr, b1, b2, eps, 3);
        CHECK_MSG(fabs(wl[i] - wr) <= 1e-6 * fmax(1.0, fabs(wr)), "adam element %d: %.9g, in double %.9g", i,
                  wl[i], wr);
    }
}

/* The matrix product, as the backend uses it (oneDNN or OpenBLAS when built with them) and the loop
 * nest, against a double-precision triple loop: every transpose, beta 0 (C holding NaN, which must
 * not be read) and beta 1, padded leading dimensions, sizes that fill no vector evenly. */
static void test_gemm_case(int ta, int tb, int m, int n, int k, float beta, ct_rng *rng)
{
    int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
    size_t asz = (size_t)(ta ? k : m) * lda, bsz = (size_t)(tb ? n : k) * ldb, csz = (size_t)m * ldc;
    float *a = malloc(asz * sizeof *a), *b = malloc(bsz * sizeof *b), *c0 = malloc(csz * sizeof *c0);
    float *c1 = malloc(csz * sizeof *c1), *c2 = malloc(csz * sizeof *c2);
    fill_uniform(a, asz, -1.0f, 1.0f, rng);
    fill_uniform(b, bsz, -1.0f, 1.0f, rng);
    fill_uniform(c0, csz, -1.0f, 1.0f, rng);
    for (size_t i = 0; i < csz; i++) {
        c1[i] = beta == 0.0f ? NAN : c0[i];
        c2[i] = c1[i];
    }
    ct_cpu_sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c1, ldc);
    ct_cpu_sgemm_reference(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c2, ldc);
    double worst = 0.0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double want = beta == 0.0f ? 0.0 : (double)beta * c0[(size_t)i * ldc + j];
            for (int p = 0; p < k; p++) {
                double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                want += 0.5 * av * bv;
            }
            for (int which = 0; which < 2; which++) {
                double got = (which ? c2 : c1)[(size_t)i * ldc + j];
                double d = isnan(got) ? INFINITY : fabs(got - want);
                if (d > worst)
                    worst = d;
            }
        }
    CHECK_MSG(worst < 1e-4 * (1 + k), "sgemm ta=%d tb=%d %dx%dx%d beta=%g: error %g", ta, tb, m, n, k, beta, worst);
    free(a), free(b), free(c0), free(c1), free(c2);
}

static void test_gemm(void)
{
    ct_rng rng = {777};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            test_gemm_case(ta, tb, 7, 5, 3, 0.0f, &rng);
            test_gemm_case(ta, tb, 33, 17, 65, 1.0f, &rng);
            test_gemm_case(ta, tb, 64, 130, 9, 0.0f, &rng);
            test_gemm_case(ta, tb, 1, 1, 1, 1.0f, &rng);
        }
}

int main(void)
{
    test_gemm();
    test_dense(1, 3, 5, 4);
    test_dense(0, 3, 5, 4);
    test_dense(1, 4, 37, 40); /* transposed in a oneDNN build */
    test_convs();
    test_pools();
    test_pool_hand_values();
    test_maxpool_relu_fold();
    test_batchnorm_grad(12, 3, 400);
    test_batchnorm_grad(6, 70, 401);
    test_batchnorm_grad(50, 2, 402);
    test_batchnorm_relu_fused(40, 3, 403);
    test_batchnorm_relu_fused(24, 70, 404);
    test_batchnorm_values();
    for (int a = 0; a < CT_ACT_COUNT; a++) test_activation_grad((ct_activation)a, 450 + a);
    test_activation_values();
    test_dropout();
    test_add();
    test_all_finite();
    test_xent_grad();
    test_xent_values();
    test_sgd();
    test_adam();
    return ct_test_done();
}
