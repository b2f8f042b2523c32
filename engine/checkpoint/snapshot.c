/* The network's state as a checkpoint and back: parameters, optimizer moments, batch-norm
 * running statistics and the training position, checked layer by layer against the config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/checkpoint.h"
#include "api/handle.h"

static ct_status download_floats(ct_net *net, float **host, const float *dev, size_t count, ct_err *err)
{
    *host = malloc((count ? count : 1) * sizeof(float));
    if (!*host)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory saving %zu values", count);
    return count ? net->be->ops->download(net->be, *host, dev, count * sizeof(float), err) : CT_OK;
}

ct_status ct_net_snapshot(ct_net *net, double test_accuracy, ct_checkpoint *ck, ct_err *err)
{
    const ct_graph *g = &net->graph;
    memset(ck, 0, sizeof *ck);
    ck->layers = calloc((size_t)g->n_layers, sizeof *ck->layers);
    if (!ck->layers)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory saving a checkpoint");
    ck->n_layers = (uint32_t)g->n_layers;
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        ct_checkpoint_layer *cl = &ck->layers[i];
        cl->name = strdup(l->cfg->name);
        if (!cl->name)
            return ct_fail(err, CT_ERR_NOMEM, "out of memory saving a checkpoint");
        cl->type = (uint32_t)l->type;
        cl->h = l->out.h;
        cl->w = l->out.w;
        cl->c = l->out.c;
        cl->w_count = l->w_count;
        cl->b_count = l->b_count;
        cl->state_count = l->state_count;
    }
    ck->optimizer = (uint32_t)net->cfg.train.optimizer;
    ck->n_params = g->n_params;
    ck->n_state = g->n_state;
    ck->epoch = net->epoch;
    ck->step = net->step;
    ck->seed = net->cfg.train.seed;
    ck->loss_scale = 1.0f;
    ck->test_accuracy = test_accuracy;
    ct_status st = download_floats(net, &ck->params, g->params, g->n_params, err);
    if (st == CT_OK && g->opt_m)
        st = download_floats(net, &ck->m, g->opt_m, g->n_params, err);
    if (st == CT_OK && g->opt_v)
        st = download_floats(net, &ck->v, g->opt_v, g->n_params, err);
    if (st == CT_OK)
        st = download_floats(net, &ck->state, g->state, g->n_state, err);
    return st;
}

/* Names the first layer that differs between the network and the checkpoint. */
static ct_status check_layers(const ct_graph *g, const ct_checkpoint *ck, const char *source, ct_err *err)
{
    if ((int)ck->n_layers != g->n_layers)
        return ct_fail(err, CT_ERR_DATA, "%s holds %u layers but the config has %d", source, ck->n_layers,
                       g->n_layers);
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        const ct_checkpoint_layer *cl = &ck->layers[i];
        char want[48], got[48];
        ct_shape_text(l->out, want, sizeof want);
        ct_shape_text((ct_shape){cl->h, cl->w, cl->c}, got, sizeof got);
        if (strcmp(cl->name, l->cfg->name) != 0 || cl->type != (uint32_t)l->type)
            return ct_fail(err, CT_ERR_DATA, "%s: layer %d is [%s] (%s) in the config but [%s] (%s) in the checkpoint",
                           source, i + 1, l->cfg->name, ct_layer_type_name(l->type), cl->name,
                           ct_layer_type_name((ct_layer_type)cl->type));
        if (cl->h != l->out.h || cl->w != l->out.w || cl->c != l->out.c || cl->w_count != l->w_count ||
            cl->b_count != l->b_count || cl->state_count != l->state_count)
            return ct_fail(err, CT_ERR_DATA,
                           "%s: layer [%s] expects output %s with %zu weights and %zu biases, the checkpoint "
                           "has %s with %llu and %llu", source, l->cfg->name, want, l->w_count, l->b_count, got,
                           (unsigned long long)cl->w_count, (unsigned long long)cl->b_count);
    }
    return CT_OK;
}

ct_status ct_net_restore(ct_net *net, const ct_checkpoint *ck, const char *source, ct_err *err)
{
    ct_graph *g = &net->graph;
    ct_status st = check_layers(g, ck, source, err);
    if (st != CT_OK)
        return st;
    int same_optimizer = ck->optimizer == (uint32_t)net->cfg.train.optimizer;
    ct_backend *be = net->be;
    st = be->ops->upload(be, g->params, ck->params, g->n_params * sizeof(float), err);
    if (st == CT_OK && g->n_state)
        st = be->ops->upload(be, g->state, ck->state, g->n_state * sizeof(float), err);
    /* moments only carry over to the same optimizer; another one starts its own from zero */
    if (st == CT_OK && same_optimizer && g->opt_m && ck->m)
        st = be->ops->upload(be, g->opt_m, ck->m, g->n_params * sizeof(float), err);
    if (st == CT_OK && same_optimizer && g->opt_v && ck->v)
        st = be->ops->upload(be, g->opt_v, ck->v, g->n_params * sizeof(float), err);
    if (st == CT_OK) {
        net->epoch = ck->epoch;
        net->step = ck->step;
    }
    return st;
}
