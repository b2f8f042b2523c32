/* dense: y (n, units) = act(x (n, in) w^T + b); the input must be flat (put a flatten before). */
#include <stddef.h>
#include <string.h>

#include "config/table.h"
#include "graph/layer.h"

static const ct_key_spec dense_rows[] = {
    {.name = "units", .kind = CT_KEY_INT, .offset = offsetof(ct_layer_config, units),
     .flags = CT_KEY_REQUIRED | CT_KEY_HAS_MIN, .min = 1},
};
static const ct_key_table dense_keys = CT_KEY_TABLE(dense_rows);

static ct_status dense_infer(ct_layer *l, const char *file, ct_err *err)
{
    if (l->in_shape.h != 1 || l->in_shape.w != 1) {
        char a[48];
        ct_shape_text(l->in_shape, a, sizeof a);
        return ct_fail_at(err, CT_ERR_CONFIG, file, l->cfg->line,
                          "[%s] dense needs a flat input but gets %s; put a flatten layer before it",
                          l->cfg->name, a);
    }
    size_t in = ct_shape_size(l->in_shape);
    l->out = (ct_shape){1, 1, l->cfg->units};
    l->w_count = (size_t)l->cfg->units * in;
    l->b_count = l->cfg->bias ? (size_t)l->cfg->units : 0;
    return CT_OK;
}

static double dense_flops(const ct_layer *l)
{
    return 2.0 * (double)l->w_count + (double)l->b_count;
}

static void dense_init(const ct_layer *l, float *w, float *b, float *state, ct_rng *rng)
{
    (void)state;
    int in = (int)ct_shape_size(l->in_shape);
    ct_init_uniform_fan(w, l->w_count, in, l->cfg->units, l->cfg->init, l->act, rng);
    if (b)
        memset(b, 0, l->b_count * sizeof *b);
}

const ct_layer_def ct_layer_def_dense = {
    .min_inputs = 1, .max_inputs = 1, .fused_activation = 1,
    .keys = (const ct_key_table *const[]){&dense_keys, &ct_weight_keys, &ct_dtype_keys, NULL},
    .infer = dense_infer, .flops = dense_flops, .init = dense_init,
};
