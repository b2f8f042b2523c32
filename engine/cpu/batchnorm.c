/* Batch normalisation over (rows, c) where rows = n*h*w: statistics per channel. */
#include <math.h>

#include "cpu/cpu_backend.h"

/* A fused relu's output is live where x gain + offset > 0. Forward and backward evaluate this same
 * expression on the same floats (bn_coefficients), so the backward's mask is the forward's without
 * storing or reading y. */
static inline int bn_live(float x, float gain, float offset)
{
    return x * gain + offset > 0.0f;
}

/* Per-channel reductions split the rows into a fixed number of chunks, summed in parallel and
 * combined in order: results don't depend on the thread count, and nothing is allocated. */
enum { CHUNKS = 16, BLOCK = 64 };

/* One chunk's rows [r0, r1) of centered_sums_block into a1, a2 (nj each, from 0). square: q is p
 * and qc is pc, so u v is u u; centred: pc is not all zeros; masked: u counts only where the fused
 * relu let the forward through (bn_live on q, gain, offset). Called with constants for each, so that
 * each variant compiles without the work it does not need (the same bits: u - 0 is u). */
static inline void chunk_sums(const float *p, const float *pcb, const float *q, const float *qcb, const float *gain,
                              const float *offset, int r0, int r1, int c, int j0, int nj, double *a1, double *a2,
                              int square, int centred, int masked)
{
    for (int i = r0; i < r1; i++) {
        const float *pr = p + (size_t)i * c + j0, *qr = q + (size_t)i * c + j0;
        for (int j = 0; j < nj; j++) {
            float pv = masked ? ct_cpu_select(bn_live(qr[j], gain[j], offset[j]), pr[j], 0.0f) : pr[j];
            double u = centred ? (double)pv - pcb[j] : (double)pv;
            a1[j] += u;
            a2[j] += u * (square ? u : (double)qr[j] - qcb[j]);
        }
    }
}

/* For channels [j0, j0 + nj): s1[j] = sum_i u, s2[j] = sum_i u v with u = p - pc, v = q - qc
 * (a NULL centre is 0), u taken as 0 where a fused relu was off (gain and offset given: bn_live of
 * q). p, q: (rows, c); pc, qc: (c) or NULL; gain, offset: (nj) or NULL; s1, s2: (nj). */
static void centered_sums_block(const float *p, const float *pc, const float *q, const float *qc,
                                const float *gain, const float *offset, int rows, int c, int j0, int nj,
                                double *s1, double *s2)
{
    float pcb[BLOCK], qcb[BLOCK];
    for (int j = 0; j < nj; j++) {
        pcb[j] = pc ? pc[j0 + j] : 0.0f;
        qcb[j] = qc ? qc[j0 + j] : 0.0f;
    }
    const int square = p == q && pc == qc, centred = pc != NULL, masked = gain != NULL;
    double part1[CHUNKS][BLOCK], part2[CHUNKS][BLOCK];
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < CHUNKS; ch++) {
        int r0 = (int)((long long)rows * ch / CHUNKS), r1 = (int)((long long)rows * (ch + 1) / CHUNKS);
        double a1[BLOCK] = {0}, a2[BLOCK] = {0};
        if (masked)   /* backward under a fused relu: dy against x, not centred */
            chunk_sums(p, pcb, q, qcb, gain, offset, r0, r1, c, j0, nj, a1, a2, 0, 0, 1);
        else if (square && centred)
            chunk_sums(p, pcb, q, qcb, NULL, NULL, r0, r1, c, j0, nj, a1, a2, 1, 1, 0);
        else if (square)
            chunk_sums(p, pcb, q, qcb, NULL, NULL, r0, r1, c, j0, nj, a1, a2, 1, 0, 0);
        else if (centred)
            chunk_sums(p, pcb, q, qcb, NULL, NULL, r0, r1, c, j0, nj, a1, a2, 0, 1, 0);
        else
            chunk_sums(p, pcb, q, qcb, NULL, NULL, r0, r1, c, j0, nj, a1, a2, 0, 0, 0);
        for (int j = 0; j < nj; j++) {
            part1[ch][j] = a1[j];
            part2[ch][j] = a2[j];
        }
    }
    for (int j = 0; j < nj; j++) {
        s1[j] = s2[j] = 0.0;
        for (int ch = 0; ch < CHUNKS; ch++) {
            s1[j] += part1[ch][j];
            s2[j] += part2[ch][j];
        }
    }
}

/* x, y: (rows, c); for channels [j0, j0 + nj): y = x * gain + offset, and with relu max(0, that)
 * (bn_live's test); gain, offset: (nj) */
static void scale_shift_block(const float *x, float *y, int rows, int c, int j0, int nj,
                              const float *gain, const float *offset, int relu)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < rows; i++) {
        const float *xr = x + (size_t)i * c + j0;
        float *yr = y + (size_t)i * c + j0;
        if (relu)
            for (int j = 0; j < nj; j++)
                yr[j] = ct_cpu_select(bn_live(xr[j], gain[j], offset[j]), xr[j] * gain[j] + offset[j], 0.0f);
        else
            for (int j = 0; j < nj; j++) yr[j] = xr[j] * gain[j] + offset[j];
    }
}

static int block_len(int c, int j0) { return c - j0 < BLOCK ? c - j0 : BLOCK; }

/* The normalisation as one multiply-add per value, from the statistics saved for backward:
 * gain = gamma invstd, offset = beta - mean gamma invstd, for channels [j0, j0 + nj). Forward and
 * the fused relu's backward both take them from here. gamma, beta, save_mean, save_invstd: (c);
 * gain, offset: (nj) */
static void bn_coefficients(const float *gamma, const float *beta, const float *save_mean, const float *save_invstd,
                            int j0, int nj, float *gain, float *offset)
{
    for (int j = 0; j < nj; j++) {
        double k = (double)gamma[j0 + j] * save_invstd[j0 + j];
        gain[j] = (float)k;
        offset[j] = (float)(beta[j0 + j] - (double)save_mean[j0 + j] * k);
    }
}

/* Training forward's end for channels [j0, j0 + nj), given the batch's mean and biased variance
 * (nj each): saves mean and invstd for backward, moves the running statistics (the variance
 * unbiased by `unbias`) and normalises (then the fused relu, with relu). x, y: (rows, c); the
 * rest: (c) */
static void normalise_block(const float *x, float *y, int rows, int c, int j0, int nj, const double *mean,
                            const double *var, const float *gamma, const float *beta, float *save_mean,
                            float *save_invstd, float *run_mean, float *run_var, double unbias, float momentum,
                            float eps, int relu)
{
    for (int j = 0; j < nj; j++) {
        double invstd = 1.0 / sqrt(var[j] + eps);
        save_mean[j0 + j] = (float)mean[j];
        save_invstd[j0 + j] = (float)invstd;
        run_mean[j0 + j] = (float)((1.0 - momentum) * run_mean[j0 + j] + momentum * mean[j]);
        run_var[j0 + j] = (float)((1.0 - momentum) * run_var[j0 + j] + momentum * var[j] * unbias);
    }
    float gain[BLOCK], offset[BLOCK];
    bn_coefficients(gamma, beta, save_mean, save_invstd, j0, nj, gain, offset);
    scale_shift_block(x, y, rows, c, j0, nj, gain, offset, relu);
}

// x, y: (rows, c); gamma, beta, save_mean, save_invstd, run_mean, run_var: (c)
void ct_cpu_batchnorm_forward_train(const float *x, const float *gamma, const float *beta, float *y,
                                    float *save_mean, float *save_invstd, float *run_mean,
                                    float *run_var, int rows, int c, float momentum, float eps, int relu)
{
    /* PyTorch's running variance is unbiased; a single row has none, so keep the biased 0 */
    const double unbias = rows > 1 ? (double)rows / (rows - 1) : 1.0;
    for (int j0 = 0; j0 < c; j0 += BLOCK) {
        int nj = block_len(c, j0);
        double sum[BLOCK], sumsq[BLOCK];
        /* centring on the first row keeps the one-pass variance from cancelling when the
         * mean is large relative to the spread */
        centered_sums_block(x, x, x, x, NULL, NULL, rows, c, j0, nj, sum, sumsq);
        double mean[BLOCK], var[BLOCK];
        for (int j = 0; j < nj; j++) {
            double d = sum[j] / rows;
            var[j] = sumsq[j] / rows - d * d;
            mean[j] = x[j0 + j] + d;
            if (var[j] < 0.0) var[j] = 0.0;
        }
        normalise_block(x, y, rows, c, j0, nj, mean, var, gamma, beta, save_mean, save_invstd, run_mean, run_var,
                        unbias, momentum, eps, relu);
    }
}

// x, y: (rows, c); gamma, beta, run_mean, run_var: (c)
void ct_cpu_batchnorm_forward_eval(const float *x, const float *gamma, const float *beta,
                                   const float *run_mean, const float *run_var, float *y, int rows,
                                   int c, float eps, int relu)
{
    for (int j0 = 0; j0 < c; j0 += BLOCK) {
        int nj = block_len(c, j0);
        float gain[BLOCK], offset[BLOCK];
        for (int j = 0; j < nj; j++) {
            double k = gamma[j0 + j] / sqrt((double)run_var[j0 + j] + eps);
            gain[j] = (float)k;
            offset[j] = (float)(beta[j0 + j] - run_mean[j0 + j] * k);
        }
        scale_shift_block(x, y, rows, c, j0, nj, gain, offset, relu);
    }
}

/* dx = (accumulate ? dx : 0) + k (dy - a - (x - m) b) for channels [j0, j0 + nj), dy taken as 0
 * where a fused relu was off (gain and offset given: bn_live of x).
 * x, dy, dx: (rows, c); k, a, b, m: (nj); gain, offset: (nj) or NULL */
static void dx_block(const float *x, const float *dy, float *dx, int rows, int c, int j0, int nj, const float *k,
                     const float *a, const float *b, const float *m, const float *gain, const float *offset,
                     int accumulate)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < rows; i++) {
        const float *xr = x + (size_t)i * c + j0, *dyr = dy + (size_t)i * c + j0;
        float *dxr = dx + (size_t)i * c + j0;
        if (gain)
            for (int j = 0; j < nj; j++) {
                float g = ct_cpu_select(bn_live(xr[j], gain[j], offset[j]), dyr[j], 0.0f);
                dxr[j] = (accumulate ? dxr[j] : 0.0f) + k[j] * (g - a[j] - (xr[j] - m[j]) * b[j]);
            }
        else
            for (int j = 0; j < nj; j++)
                dxr[j] = (accumulate ? dxr[j] : 0.0f) + k[j] * (dyr[j] - a[j] - (xr[j] - m[j]) * b[j]);
    }
}

/* With xhat = (x - mean) invstd and N rows, the batch statistics' own dependence on x gives
 *   dx = gamma invstd (dy - mean(dy) - xhat mean(dy xhat)),
 * where under a fused relu dy is the output's gradient where the output was live, else 0.
 * x, dy, dx: (rows, c); gamma, beta, save_mean, save_invstd, dgamma, dbeta: (c); dx may be NULL.
 * dgamma and dbeta are written: their sums start from +0, so none is -0, and writing gives the bits
 * adding into cleared buffers gave. */
void ct_cpu_batchnorm_backward(const float *x, const float *gamma, const float *beta, const float *dy,
                               const float *save_mean, const float *save_invstd, float *dx,
                               float *dgamma, float *dbeta, int rows, int c, int accumulate, int relu)
{
    for (int j0 = 0; j0 < c; j0 += BLOCK) {
        int nj = block_len(c, j0);
        float gain[BLOCK], offset[BLOCK];
        if (relu)
            bn_coefficients(gamma, beta, save_mean, save_invstd, j0, nj, gain, offset);
        const float *mask_gain = relu ? gain : NULL, *mask_offset = relu ? offset : NULL;
        double sum_dy[BLOCK], sum_dy_xc[BLOCK];
        centered_sums_block(dy, NULL, x, save_mean, mask_gain, mask_offset, rows, c, j0, nj, sum_dy, sum_dy_xc);
        float k[BLOCK], a[BLOCK], b[BLOCK], m[BLOCK];
        for (int j = 0; j < nj; j++) {
            double invstd = save_invstd[j0 + j];
            if (dgamma) dgamma[j0 + j] = (float)(sum_dy_xc[j] * invstd);
            if (dbeta) dbeta[j0 + j] = (float)sum_dy[j];
            k[j] = (float)(gamma[j0 + j] * invstd);
            a[j] = (float)(sum_dy[j] / rows);
            b[j] = (float)(sum_dy_xc[j] * invstd * invstd / rows);
            m[j] = save_mean[j0 + j];
        }
        if (!dx) continue;
        dx_block(x, dy, dx, rows, c, j0, nj, k, a, b, m, mask_gain, mask_offset, accumulate);
    }
}

/* sync_bn = on: the statistics of the global batch, over every replica's rows. This replica's
 * per-channel mean goes through sync->mean, which returns the global mean; then its variance
 * about that global mean, which returns the global variance (two passes, so nothing cancels).
 * rows: this replica's (0 is fine: its figures weigh nothing); rows_total: the global batch's.
 * x, y: (rows, c); gamma, beta, save_mean, save_invstd, run_mean, run_var: (c) */
static ct_status forward_train_synced(const ct_bn_sync *sync, const float *x, const float *gamma, const float *beta,
                                      float *y, float *save_mean, float *save_invstd, float *run_mean, float *run_var,
                                      int rows, int rows_total, int c, float momentum, float eps, ct_err *err)
{
    double s1[BLOCK], s2[BLOCK];
    for (int j0 = 0; j0 < c; j0 += BLOCK) {
        int nj = block_len(c, j0);
        centered_sums_block(x, NULL, x, NULL, NULL, NULL, rows, c, j0, nj, s1, s2);
        for (int j = 0; j < nj; j++)
            save_mean[j0 + j] = rows ? (float)(s1[j] / rows) : 0.0f;
    }
    ct_status st = sync->mean(sync->ctx, save_mean, c, err);
    if (st != CT_OK)
        return st;
    float *var = save_invstd;  /* the variance until it becomes invstd */
    for (int j0 = 0; j0 < c; j0 += BLOCK) {
        int nj = block_len(c, j0);
        centered_sums_block(x, save_mean, x, save_mean, NULL, NULL, rows, c, j0, nj, s1, s2);
        for (int j = 0; j < nj; j++)
            var[j0 + j] = rows ? (float)(s2[j] / rows) : 0.0f;
    }
    if ((st = sync->mean(sync->ctx, var, c, err)) != CT_OK)
        return st;
    const double unbias = rows_total > 1 ? (double)rows_total / (rows_total - 1) : 1.0;
    for (int j0 = 0; j0 < c; j0 += BLOCK) {
        int nj = block_len(c, j0);
        double mean[BLOCK], v[BLOCK];
        for (int j = 0; j < nj; j++) {
            mean[j] = save_mean[j0 + j];
            v[j] = var[j0 + j];
        }
        normalise_block(x, y, rows, c, j0, nj, mean, v, gamma, beta, save_mean, save_invstd, run_mean, run_var,
                        unbias, momentum, eps, 0);
    }
    return CT_OK;
}

/* sync_bn's backward: mean(dy) and mean(dy xhat) are the global batch's. Each replica's dy is
 * its own loss's gradient (scaled by 1 / its samples), so the term its dx needs is the weighted
 * mean over replicas of their sums, divided by its own rows; dgamma and dbeta stay this
 * replica's, averaged later with the other gradients.
 * x, dy, dx: (rows, c); gamma, save_mean, save_invstd, dgamma, dbeta: (c); sums: (2c) scratch */
static ct_status backward_synced(const ct_bn_sync *sync, const float *x, const float *gamma, const float *dy,
                                 const float *save_mean, const float *save_invstd, float *dx, float *dgamma,
                                 float *dbeta, float *sums, int rows, int c, int accumulate, ct_err *err)
{
    for (int j0 = 0; j0 < c; j0 += BLOCK) {
        int nj = block_len(c, j0);
        double sum_dy[BLOCK], sum_dy_xc[BLOCK];
        centered_sums_block(dy, NULL, x, save_mean, NULL, NULL, rows, c, j0, nj, sum_dy, sum_dy_xc);
        for (int j = 0; j < nj; j++) {
            double invstd = save_invstd[j0 + j];
            if (dgamma) dgamma[j0 + j] = (float)(sum_dy_xc[j] * invstd);
            if (dbeta) dbeta[j0 + j] = (float)sum_dy[j];
            sums[j0 + j] = (float)sum_dy[j];
            sums[c + j0 + j] = (float)sum_dy_xc[j];
        }
    }
    ct_status st = sync->mean(sync->ctx, sums, 2 * c, err);
    if (st != CT_OK || !dx || rows == 0)
        return st;
    for (int j0 = 0; j0 < c; j0 += BLOCK) {
        int nj = block_len(c, j0);
        float k[BLOCK], a[BLOCK], b[BLOCK], m[BLOCK];
        for (int j = 0; j < nj; j++) {
            double invstd = save_invstd[j0 + j];
            k[j] = (float)(gamma[j0 + j] * invstd);
            a[j] = (float)((double)sums[j0 + j] / rows);
            b[j] = (float)((double)sums[c + j0 + j] * invstd * invstd / rows);
            m[j] = save_mean[j0 + j];
        }
        dx_block(x, dy, dx, rows, c, j0, nj, k, a, b, m, NULL, NULL, accumulate);
    }
    return CT_OK;
}

/* Batch norm layers normalise over rows = n*h*w of the input, per channel c. aux holds the batch's
 * mean then invstd (2c fp32) from forward for backward; state the running mean then variance.
 * A fused relu runs inside the normalising pass and its gradient inside backward's two passes (the
 * mask recomputed from x: nothing more is read); other activations, and relu under sync_bn, run
 * as dense and conv2d run theirs (a pass after forward, the gradient into the scratch first). */

static int relu_inside(const ct_backend *be, const ct_layer *l)
{
    return l->act == CT_ACT_RELU && !be->bn_sync.mean;
}

// x: (n, h, w, c) fp32; z, y: like x (z is y unless the activation keeps its input); aux, state: (2c)
static ct_status batchnorm_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    int rows = n * l->in_shape.h * l->in_shape.w, c = l->in_shape.c;
    float *saved = ct_f32(l->aux), *state = ct_f32(l->state);
    const int relu = relu_inside(be, l);
    ct_status st = CT_OK;
    if (training && be->bn_sync.mean)
        st = forward_train_synced(&be->bn_sync, ct_f32(l->x[0]), ct_f32(l->w), ct_f32(l->b), ct_f32(l->z), saved,
                                  saved + c, state, state + c, rows, be->bn_sync.total * l->in_shape.h * l->in_shape.w,
                                  c, l->cfg->momentum, l->cfg->epsilon, err);
    else if (training)
        ct_cpu_batchnorm_forward_train(ct_f32(l->x[0]), ct_f32(l->w), ct_f32(l->b), ct_f32(l->z), saved,
                                       saved + c, state, state + c, rows, c, l->cfg->momentum, l->cfg->epsilon, relu);
    else
        ct_cpu_batchnorm_forward_eval(ct_f32(l->x[0]), ct_f32(l->w), ct_f32(l->b), state, state + c,
                                      ct_f32(l->z), rows, c, l->cfg->epsilon, relu);
    if (st == CT_OK && !relu)
        ct_cpu_fused_activation_forward(l, n, NULL);
    return st;
}

// x, dy: (n, h, w, c) fp32; dx: like x or NULL, written or added to (l->dx_accumulate); aux: (2c)
static ct_status batchnorm_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    int rows = n * l->in_shape.h * l->in_shape.w, c = l->in_shape.c;
    const float *saved = ct_f32(l->aux);
    const int relu = relu_inside(be, l);
    const float *dz = relu ? ct_f32(l->dy) : ct_cpu_preactivation_grad(be, l, n);
    if (be->bn_sync.mean)
        return backward_synced(&be->bn_sync, ct_f32(l->x[0]), ct_f32(l->w), dz, saved, saved + c,
                               ct_f32(l->dx[0]), ct_f32(l->dw), ct_f32(l->db), ct_cpu_of(be)->workspace, rows, c,
                               l->dx_accumulate[0], err);
    ct_cpu_batchnorm_backward(ct_f32(l->x[0]), ct_f32(l->w), ct_f32(l->b), dz, saved, saved + c, ct_f32(l->dx[0]),
                              ct_f32(l->dw), ct_f32(l->db), rows, c, l->dx_accumulate[0], relu);
    return CT_OK;
}

/* sync_bn's backward gathers its per-channel sums there */
static size_t batchnorm_workspace(ct_backend *be, const ct_layer *l, int n)
{
    (void)be; (void)n;
    return 2 * (size_t)l->in_shape.c * sizeof(float);
}

const ct_layer_ops ct_cpu_batchnorm_ops = {
    .forward = batchnorm_forward,
    .backward = batchnorm_backward,
    .workspace_bytes = batchnorm_workspace,
};
