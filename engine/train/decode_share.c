/* The CPU share of decode = gpu, measured (train/decode_share.h). */
#include "train/decode_share.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"

enum { MAX_IMAGES = 128, ROUNDS = 3 };

typedef struct probe {
    const ct_dataset *ds;
    ct_sample_reader *rd;
    int augment;
    uint64_t seed;
    long idx[MAX_IMAGES];
    int n;
    uint8_t *x;
    int32_t y[MAX_IMAGES];
    ct_encoded_batch enc;
} probe;

/* The images of the spread sample the device takes, in p->idx (p->n of them). */
static ct_status pick_images(probe *p, long count, int batch, ct_err *err)
{
    int m = batch < MAX_IMAGES ? batch : MAX_IMAGES;
    if (count < m)
        m = (int)count;
    long spread[MAX_IMAGES];
    for (int i = 0; i < m; i++)
        spread[i] = (long)((double)i * (double)count / (double)m);
    ct_status st = ct_read_batch_encoded(p->ds, p->rd, spread, m, p->augment, p->seed, 0.0, p->x, p->y, &p->enc, err);
    p->n = 0;
    for (int i = 0; st == CT_OK && i < m; i++)
        if (p->enc.images[i].size > 0)
            p->idx[p->n++] = spread[i];
    return st;
}

static ct_status measure(ct_run *run, const ct_pipeline_config *pc, probe *p, ct_decode_share *out, ct_err *err)
{
    ct_status st = ct_sample_reader_new(p->ds, &p->rd, err);
    if (st == CT_OK)
        st = pick_images(p, p->ds->count, pc->batch, err);
    out->images = p->n;
    if (st != CT_OK || p->n == 0)
        return st;
    ct_backend *be = run->replicas[0].be;
    double best[3] = {0, 0, 0};
    for (int r = 0; r < ROUNDS && st == CT_OK; r++) {
        double t[3] = {0, 0, 0}, t0 = ct_clock_seconds();
        st = ct_read_batch_u8(p->ds, p->rd, p->idx, p->n, p->augment, p->seed, p->x, p->y, err);
        t[0] = ct_clock_seconds() - t0;
        t0 = ct_clock_seconds();
        if (st == CT_OK)
            st = ct_read_batch_encoded(p->ds, p->rd, p->idx, p->n, p->augment, p->seed, 0.0, p->x, p->y, &p->enc, err);
        t[1] = ct_clock_seconds() - t0;
        if (st == CT_OK)
            st = be->ops->image_decode_time(be, &p->enc, p->ds->shape, &t[2], err);
        for (int k = 0; k < 3; k++)
            best[k] = r == 0 || t[k] < best[k] ? t[k] : best[k];
    }
    if (st != CT_OK)
        return st;
    out->cpu_s = best[0] / p->n;
    out->handover_s = best[1] / p->n;
    out->device_s = best[2] / p->n / (run->n_replicas > 0 ? run->n_replicas : 1);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    out->workers = pc->workers > 0 ? pc->workers : cores > 2 ? (int)(cores - 1) : 1;
    out->share = ct_encoded_balanced_share(out->cpu_s, out->handover_s, out->device_s, out->workers);
    return CT_OK;
}

ct_status ct_decode_share_measure(ct_run *run, const ct_pipeline_config *pc, ct_decode_share *out, ct_err *err)
{
    memset(out, 0, sizeof *out);
    ct_backend *be = run->n_replicas > 0 ? run->replicas[0].be : NULL;
    if (!be || !be->ops->image_decode_time)
        return ct_fail(err, CT_ERR_USAGE, "the CPU share is measured on a backend with an image decoder");
    probe *p = calloc(1, sizeof *p);
    if (!p)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the decode measurement");
    p->ds = pc->ds;
    p->augment = pc->augment;
    p->seed = run->cfg.train.seed;
    p->x = malloc((size_t)MAX_IMAGES * ct_shape_size(p->ds->shape));
    ct_status st = p->x ? measure(run, pc, p, out, err)
                        : ct_fail(err, CT_ERR_NOMEM, "out of memory for the decode measurement");
    ct_encoded_batch_free(&p->enc);
    ct_sample_reader_free(p->rd);
    free(p->x);
    free(p);
    return st;
}
