/* What the layer types with parameters share: their key tables (`bias`, `init`, `dtype`) and the
 * fan-scaled initialisation. Apart from the table of records (layers.c), which lists the types
 * that use these: the records look down to this file, the table down to the records. */
#include <math.h>
#include <stddef.h>

#include "config/table.h"
#include "graph/layer.h"

static const char *const init_names[] = {"auto", "he", "glorot", NULL};

static const ct_key_spec weight_rows[] = {
    {.name = "bias", .kind = CT_KEY_BOOL, .offset = offsetof(ct_layer_config, bias), .def = "on"},
    {.name = "init", .kind = CT_KEY_ENUM, .offset = offsetof(ct_layer_config, init), .def = "auto",
     .names = init_names, .label = "init"},
};
const ct_key_table ct_weight_keys = CT_KEY_TABLE(weight_rows);

static const char *const layer_dtype_names[] = {"auto", "fp32", NULL};

/* Only types with parameters list it: pinning a layer without any to fp32 buys no accuracy (its
 * output is rounded to half by the next half layer's input anyway), so it is a config error. */
static const ct_key_spec dtype_rows[] = {
    {.name = "dtype", .kind = CT_KEY_ENUM, .offset = offsetof(ct_layer_config, dtype), .def = "auto",
     .names = layer_dtype_names, .label = "dtype", .flags = CT_KEY_EXPLAIN_MISPLACED},
};
const ct_key_table ct_dtype_keys = CT_KEY_TABLE(dtype_rows);

void ct_init_uniform_fan(float *w, size_t count, int fan_in, int fan_out, ct_init init,
                         ct_activation act, ct_rng *rng)
{
    if (init == CT_INIT_AUTO)
        init = (act == CT_ACT_RELU || act == CT_ACT_LEAKY || act == CT_ACT_GELU) ? CT_INIT_HE : CT_INIT_GLOROT;
    /* He: variance 2/fan_in keeps relu activations' scale through depth; Glorot: 2/(in+out). */
    double limit = init == CT_INIT_HE ? sqrt(6.0 / fan_in) : sqrt(6.0 / (fan_in + fan_out));
    for (size_t i = 0; i < count; i++)
        w[i] = (float)((2.0 * ct_rng_uniform(rng) - 1.0) * limit);
}
