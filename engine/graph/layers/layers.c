#include <math.h>

#include "graph/layer.h"

extern const ct_layer_kind ct_dense_kind, ct_conv2d_kind, ct_maxpool_kind, ct_avgpool_kind,
    ct_batchnorm_kind, ct_dropout_kind, ct_flatten_kind, ct_activation_kind, ct_add_kind;

const ct_layer_kind *ct_layer_kind_of(ct_layer_type type)
{
    static const ct_layer_kind *const kinds[CT_LAYER_TYPE_COUNT] = {
        [CT_LAYER_DENSE] = &ct_dense_kind,         [CT_LAYER_CONV2D] = &ct_conv2d_kind,
        [CT_LAYER_MAXPOOL] = &ct_maxpool_kind,     [CT_LAYER_AVGPOOL] = &ct_avgpool_kind,
        [CT_LAYER_BATCHNORM] = &ct_batchnorm_kind, [CT_LAYER_DROPOUT] = &ct_dropout_kind,
        [CT_LAYER_FLATTEN] = &ct_flatten_kind,     [CT_LAYER_ACTIVATION] = &ct_activation_kind,
        [CT_LAYER_ADD] = &ct_add_kind,
    };
    return (unsigned)type < CT_LAYER_TYPE_COUNT ? kinds[type] : NULL;
}

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
