/* The CPU backend's fp16 / bf16 path: every layer type's fp32 ops, run on fp32 copies of the
 * layer's half tensors, the results rounded back to half exactly where the GPU stores half.
 *
 * Per op: half inputs (x, y and z where backward reads them, dy) are widened into fp32 staging
 * (exact); a half layer reads its inputs rounded to its own type (an fp32 producer's output is
 * rounded as a half kernel's cast would) and its weights from the half copy (dense, conv2d); the
 * fp32 op runs on a copy of the layer pointing at the staging; half outputs (y, z, dx) are rounded
 * to half once, to nearest even (base/half.h, as CUDA's __float2half_rn). A gradient that is added
 * to (dx_accumulate) is widened first, added to in fp32 and rounded once. Parameter gradients,
 * batch-norm parameters, statistics and aux stay as they are (fp32, int32, uint8). A layer with
 * nothing half (every layer of an fp32 run) runs its fp32 op directly: no copy, the same bits.
 *
 * The staging sits in the shared workspace after the fp32 op's own part (workspace_bytes asks
 * for both), so nothing is allocated inside a step. */
#include <string.h>

#include "base/half.h"
#include "cpu/cpu_backend.h"

#define CT_CPU_LAYER_OPS(upper, lower) [CT_LAYER_##upper] = &ct_cpu_##lower##_ops,
static const ct_layer_ops *const fp32_ops[CT_LAYER_TYPE_COUNT] = {CT_LAYER_TYPES(CT_CPU_LAYER_OPS)};
#undef CT_CPU_LAYER_OPS

enum { STAGE_ALIGN = 64 };   /* bytes: each staged tensor starts on a cache line */

static size_t stage_bytes(size_t count) { return (count * sizeof(float) + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN; }

static int is_half(const ct_tensor *t) { return t && ct_dtype_is_half(t->dtype); }

/* 1 when the layer has a half tensor, so its ops go through staging; an aliasing flatten does
 * nothing with the values it shares, so it never needs to. */
static int needs_staging(const ct_layer *l)
{
    if (l->def->aliases_input && l->in[0] != CT_INPUT_NODE)
        return 0;
    return l->touches_half;
}

// src: (count) of t's dtype (fp32, fp16, bf16); dst: (count) fp32; round: fp16 / bf16 to round
// fp32 values to (what a half layer reads of an fp32 tensor), fp32 for none; f16: the backend's
// table of every fp16 value
static void widen(const ct_tensor *t, size_t count, float *dst, ct_dtype round, const float *f16)
{
    const void *src = t->data;
    if (t->dtype == CT_DTYPE_F16) {
        const uint16_t *h = src;
#pragma omp parallel for schedule(static) if (count > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < count; i++) dst[i] = f16[h[i]];
    } else if (t->dtype == CT_DTYPE_BF16) {
        const uint16_t *h = src;
#pragma omp parallel for schedule(static) if (count > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < count; i++) dst[i] = ct_f32_from_bf16(h[i]);
    } else if (round == CT_DTYPE_F16) {
        const float *f = src;
#pragma omp parallel for schedule(static) if (count > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < count; i++) dst[i] = ct_round_f16(f[i]);
    } else if (round == CT_DTYPE_BF16) {
        const float *f = src;
#pragma omp parallel for schedule(static) if (count > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < count; i++) dst[i] = ct_round_bf16(f[i]);
    } else {
        memcpy(dst, src, count * sizeof(float));
    }
}

// src: (count) fp32; t: (count) fp16 / bf16, written rounded to nearest even
static void narrow(const float *src, size_t count, ct_tensor *t)
{
    uint16_t *h = t->data;
    if (t->dtype == CT_DTYPE_F16) {
#pragma omp parallel for schedule(static) if (count > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < count; i++) h[i] = ct_f16_from_f32(src[i]);
    } else {
#pragma omp parallel for schedule(static) if (count > CT_CPU_PAR_MIN)
        for (size_t i = 0; i < count; i++) h[i] = ct_bf16_from_f32(src[i]);
    }
}

/* Whether a type's fp32 backward reads its inputs x and its outputs y / z: those that do not
 * (pools route dy by argmax or evenly, dropout by its mask, add and concat pass dy on) are not
 * widened for it. */
static int backward_reads_x(const ct_layer *l)
{
    return l->type == CT_LAYER_DENSE || l->type == CT_LAYER_CONV2D || l->type == CT_LAYER_BATCHNORM ||
           l->type == CT_LAYER_ACTIVATION;
}

static int backward_reads_y(const ct_layer *l)
{
    return l->type == CT_LAYER_ACTIVATION || (l->def->fused_activation && l->act != CT_ACT_LINEAR);
}

/* The staging of one op: a bump allocator over the workspace's tail, and the fp32 stand-ins. */
typedef struct stage {
    char *next;
    ct_layer copy;                      /* the layer as the fp32 op sees it */
    ct_tensor x[CT_MAX_INPUTS], dx[CT_MAX_INPUTS], y, z, dy, w, b;
} stage;

static float *take(stage *s, size_t count)
{
    float *p = (float *)s->next;
    s->next += stage_bytes(count);
    return p;
}

/* An fp32 stand-in for t's first `count` elements (same shape), in the staging. */
static ct_tensor *stand_in(stage *s, ct_tensor *slot, const ct_tensor *t, size_t count)
{
    *slot = *t;
    slot->dtype = CT_DTYPE_F32;
    slot->data = take(s, count);
    return slot;
}

static size_t rows_count(const ct_tensor *t, int n) { return (size_t)n * ct_shape_size(t->shape); }

/* Sets up s->copy: inputs widened (rounded to the layer's type when it is half), weights from the
 * half copy, y and z (and, for backward, dy and dx) as fp32 stand-ins, filled from the layer's
 * tensors where `fill` says the op reads them. */
static void stage_layer(ct_backend *be, const ct_layer *l, int n, int backward, stage *s)
{
    ct_cpu_state *cs = ct_cpu_of(be);
    const ct_layer_ops *inner = fp32_ops[l->type];
    size_t own = inner->workspace_bytes ? inner->workspace_bytes(be, l, n) : 0;
    s->next = (char *)cs->workspace + (own + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
    s->copy = *l;
    ct_layer *c = &s->copy;
    const ct_dtype round = ct_dtype_is_half(l->dtype) ? l->dtype : CT_DTYPE_F32;
    for (int k = 0; k < l->n_in && (!backward || backward_reads_x(l)); k++) {
        const ct_tensor *x = l->x[k];
        if (is_half(x) || round != CT_DTYPE_F32) {
            size_t count = rows_count(x, n);
            c->x[k] = stand_in(s, &s->x[k], x, count);
            widen(x, count, ct_f32(c->x[k]), round, cs->f16_values);
        }
    }
    if (l->w_half) {
        c->w = stand_in(s, &s->w, l->w_half, l->w_count);
        widen(l->w_half, l->w_count, ct_f32(c->w), CT_DTYPE_F32, cs->f16_values);
        if (l->b_half) {
            c->b = stand_in(s, &s->b, l->b_half, l->b_count);
            widen(l->b_half, l->b_count, ct_f32(c->b), CT_DTYPE_F32, cs->f16_values);
        }
    }
    if (is_half(l->y) && (!backward || backward_reads_y(l))) {
        size_t count = rows_count(l->y, n);
        c->y = stand_in(s, &s->y, l->y, count);
        c->z = c->y;
        if (backward)
            widen(l->y, count, ct_f32(c->y), CT_DTYPE_F32, cs->f16_values);
        if (l->z != l->y) {
            c->z = stand_in(s, &s->z, l->z, count);
            if (backward)
                widen(l->z, count, ct_f32(c->z), CT_DTYPE_F32, cs->f16_values);
        }
    }
    if (!backward)
        return;
    if (is_half(l->dy)) {
        size_t count = rows_count(l->dy, n);
        c->dy = stand_in(s, &s->dy, l->dy, count);
        widen(l->dy, count, ct_f32(c->dy), CT_DTYPE_F32, cs->f16_values);
    }
    for (int k = 0; k < l->n_in; k++) {
        ct_tensor *dx = l->dx[k];
        if (!is_half(dx))
            continue;
        /* a layer reading one tensor twice adds both gradients into one buffer: one stand-in */
        int j = 0;
        while (j < k && !(l->dx[j] && l->dx[j]->data == dx->data))
            j++;
        if (j < k) {
            c->dx[k] = c->dx[j];
            continue;
        }
        size_t count = rows_count(dx, n);
        c->dx[k] = stand_in(s, &s->dx[k], dx, count);
        if (l->dx_accumulate[k])
            widen(dx, count, ct_f32(c->dx[k]), CT_DTYPE_F32, cs->f16_values);
    }
}

// x: the layer's inputs, any of fp32 / fp16 / bf16; y, z: (n, out) of l->dtype
static ct_status half_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    const ct_layer_ops *inner = fp32_ops[l->type];
    if (!needs_staging(l))
        return inner->forward(be, l, n, training, err);
    stage s;
    stage_layer(be, l, n, 0, &s);
    ct_status st = inner->forward(be, &s.copy, n, training, err);
    if (st != CT_OK)
        return st;
    if (is_half(l->y)) {
        narrow(ct_f32(s.copy.y), rows_count(l->y, n), l->y);
        if (l->z != l->y)
            narrow(ct_f32(s.copy.z), rows_count(l->z, n), l->z);
    }
    return CT_OK;
}

// dy: (n, out) of l->dtype; dx[k]: its producer's dtype, written or added to; dw, db: fp32
static ct_status half_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    const ct_layer_ops *inner = fp32_ops[l->type];
    if (!needs_staging(l))
        return inner->backward(be, l, n, err);
    stage s;
    stage_layer(be, l, n, 1, &s);
    ct_status st = inner->backward(be, &s.copy, n, err);
    if (st != CT_OK)
        return st;
    for (int k = 0; k < l->n_in; k++) {
        int first = 1;   /* each buffer rounded once, from its one stand-in */
        for (int j = 0; j < k; j++)
            first = first && !(l->dx[j] && l->dx[k] && l->dx[j]->data == l->dx[k]->data);
        if (is_half(l->dx[k]) && first)
            narrow(ct_f32(s.copy.dx[k]), rows_count(l->dx[k], n), l->dx[k]);
    }
    return CT_OK;
}

/* The fp32 op's workspace, then room for every stand-in stage_layer may take. */
static size_t half_workspace_bytes(ct_backend *be, const ct_layer *l, int n)
{
    const ct_layer_ops *inner = fp32_ops[l->type];
    size_t own = inner->workspace_bytes ? inner->workspace_bytes(be, l, n) : 0;
    if (!needs_staging(l))
        return own;
    size_t bytes = (own + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
    size_t out = (size_t)n * ct_shape_size(l->out);
    for (int k = 0; k < l->n_in; k++)
        bytes += 2 * stage_bytes((size_t)n * ct_shape_size(l->in_shapes[k]));   /* x, dx */
    bytes += 3 * stage_bytes(out);                                             /* y, z, dy */
    if (ct_layer_reads_half_weights(l))
        bytes += stage_bytes(l->w_count) + stage_bytes(l->b_count);
    return bytes;
}

const ct_layer_ops ct_cpu_half_ops = {
    .forward = half_forward,
    .backward = half_backward,
    .workspace_bytes = half_workspace_bytes,
};
