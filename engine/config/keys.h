/* The section readers behind ct_config_load (config.c), one file per section kind, each with its
 * key table and the parsers of its compound values: data_keys.c, train_keys.c, layer_keys.c. */
#ifndef CT_CONFIG_KEYS_H
#define CT_CONFIG_KEYS_H

#include "config/table.h"

/* [data] into vc->cfg->data. */
ct_status ct_config_read_data(ct_value_ctx *vc);
/* [train] into vc->cfg->train; vc->sec NULL (no [train] in the file) gives the defaults. */
ct_status ct_config_read_train(ct_value_ctx *vc);
/* A layer section into vc->cfg->layers[vc->layer]; earlier layers are already read. */
ct_status ct_config_read_layer(ct_value_ctx *vc);

#endif
