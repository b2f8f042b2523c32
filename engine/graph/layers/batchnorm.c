/* batchnorm: per-channel normalisation over (n, h, w) with learned gamma (w) and beta (b), then
 * `activation =` (linear by default); state holds the running mean then the running variance. */
#include <stddef.h>

#include "config/table.h"
#include "graph/layer.h"

static const ct_key_spec bn_rows[] = {
    {.name = "momentum", .kind = CT_KEY_FLOAT, .offset = offsetof(ct_layer_config, momentum), .def = "0.1",
     .flags = CT_KEY_HAS_MIN | CT_KEY_HAS_MAX, .min = 0, .max = 1},
    {.name = "epsilon", .kind = CT_KEY_FLOAT, .offset = offsetof(ct_layer_config, epsilon), .def = "1e-5",
     .flags = CT_KEY_HAS_MIN | CT_KEY_MIN_OPEN, .min = 0},
};
static const ct_key_table bn_keys = CT_KEY_TABLE(bn_rows);

static ct_status bn_infer(ct_layer *l, const char *file, ct_err *err)
{
    (void)file; (void)err;
    int c = l->in_shape.c;
    l->out = l->in_shape;
    l->w_count = l->b_count = (size_t)c;
    l->state_count = 2 * (size_t)c;
    return CT_OK;
}

static double bn_flops(const ct_layer *l)
{
    return 4.0 * (double)ct_shape_size(l->out);
}

/* Saved batch mean and inverse standard deviation for backward. */
static size_t bn_aux(const ct_layer *l, int n, ct_dtype *dtype)
{
    (void)n;
    *dtype = CT_DTYPE_F32;
    return 2 * (size_t)l->out.c;
}

static void bn_init(const ct_layer *l, float *gamma, float *beta, float *state, ct_rng *rng)
{
    (void)rng;
    size_t c = (size_t)l->out.c;
    for (size_t i = 0; i < c; i++) {
        gamma[i] = 1.0f;
        beta[i] = 0.0f;
        state[i] = 0.0f;      /* running mean */
        state[c + i] = 1.0f;  /* running variance */
    }
}

const ct_layer_def ct_layer_def_batchnorm = {
    .min_inputs = 1, .max_inputs = 1, .batch_statistics = 1, .fused_activation = 1,
    .keys = (const ct_key_table *const[]){&bn_keys, &ct_dtype_keys, NULL},
    .infer = bn_infer, .flops = bn_flops, .aux_count = bn_aux, .init = bn_init,
};
