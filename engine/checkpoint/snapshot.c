/* The network's state as a checkpoint and back: parameters, optimizer moments, batch-norm
 * running statistics and the training position, checked layer by layer against the config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/snapshot.h"
#include "data/format.h"

/* t (fp32) into a new host buffer. */
static ct_status download_floats(ct_device *dev, float **host, const ct_tensor *t, ct_err *err)
{
    *host = malloc((t->count ? t->count : 1) * sizeof(float));
    if (!*host)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory saving %zu values", t->count);
    return t->count ? dev->ops->download(dev, *host, t->data, ct_tensor_bytes(t), err) : CT_OK;
}

/* A checkpoint holds every layer's weights then biases packed, in layer order; the bound tensors
 * hold them at aligned offsets with padding between (graph.h). Packing per tensor keeps the file
 * independent of the alignment: the format is the one before it. */

// span: (g->param_span) as bound; packed: (g->n_params)
static void pack_params(const ct_graph *g, const float *span, float *packed)
{
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        memcpy(packed, span + l->w_off, l->w_count * sizeof(float));
        packed += l->w_count;
        memcpy(packed, span + l->b_off, l->b_count * sizeof(float));
        packed += l->b_count;
    }
}

// packed: (g->n_params); span: (g->param_span), padding left as it is (zero)
static void unpack_params(const ct_graph *g, const float *packed, float *span)
{
    for (int i = 0; i < g->n_layers; i++) {
        const ct_layer *l = &g->layers[i];
        memcpy(span + l->w_off, packed, l->w_count * sizeof(float));
        packed += l->w_count;
        memcpy(span + l->b_off, packed, l->b_count * sizeof(float));
        packed += l->b_count;
    }
}

/* A flat parameter-shaped tensor t (params, m or v: (g->param_span) fp32) packed into a new host
 * buffer of g->n_params values. */
static ct_status download_packed(ct_device *dev, const ct_graph *g, const ct_tensor *t, float **packed,
                                 ct_err *err)
{
    float *span = NULL;
    *packed = NULL;
    ct_status st = download_floats(dev, &span, t, err);
    if (st == CT_OK && !(*packed = malloc((g->n_params ? g->n_params : 1) * sizeof(float))))
        st = ct_fail(err, CT_ERR_NOMEM, "out of memory saving %zu values", g->n_params);
    if (st == CT_OK)
        pack_params(g, span, *packed);
    free(span);
    return st;
}

/* packed (g->n_params values) into t ((g->param_span) fp32), its padding zero. */
static ct_status upload_packed(ct_device *dev, const ct_graph *g, ct_tensor *t, const float *packed, ct_err *err)
{
    float *span = calloc(t->count ? t->count : 1, sizeof(float));
    if (!span)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory loading %zu values", t->count);
    unpack_params(g, packed, span);
    ct_status st = dev->ops->upload(dev, t->data, span, ct_tensor_bytes(t), err);
    free(span);
    return st;
}

/* The training set's identity into ck: its file index hash and class names (copies). */
static ct_status snapshot_dataset(const ct_dataset *train, ct_checkpoint *ck, ct_err *err)
{
    ck->index_hash = train->index_hash;
    if (!train->class_names || train->classes <= 0)
        return CT_OK;
    ck->class_names = calloc((size_t)train->classes, sizeof *ck->class_names);
    if (!ck->class_names)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory saving a checkpoint");
    ck->n_classes = (uint32_t)train->classes;
    for (int i = 0; i < train->classes; i++)
        if (!(ck->class_names[i] = strdup(train->class_names[i] ? train->class_names[i] : "")))
            return ct_fail(err, CT_ERR_NOMEM, "out of memory saving a checkpoint");
    return CT_OK;
}

ct_status ct_run_snapshot(ct_run *run, double test_accuracy, ct_checkpoint *ck, ct_err *err)
{
    const ct_graph *g = &run->graph;
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
    ck->optimizer = (uint32_t)run->cfg.train.optimizer;
    ck->n_params = g->n_params;
    ck->n_state = g->n_state;
    ck->epoch = run->epoch;
    ck->step = run->step;
    ck->seed = run->cfg.train.seed;
    ck->loss_scale = 1.0f;
    ck->test_accuracy = test_accuracy;
    /* replicas hold the same state: the first one's is saved */
    const ct_graph *bound = &run->replicas[0].graph;
    ct_device *dev = run->replicas[0].dev;
    ck->precision = (uint32_t)run->cfg.train.precision;
    ck->has_master = run->cfg.train.precision != CT_PREC_FP32;
    ct_status st = snapshot_dataset(&run->train, ck, err);
    if (st == CT_OK && run->cfg.train.precision == CT_PREC_FP16) {
        ct_scaler s;
        st = run->replicas[0].be->ops->scaler_get(run->replicas[0].be, &s, err);
        ck->has_scaler = 1;
        ck->loss_scale = s.loss_scale;
        ck->clean_steps = s.clean_steps;
        ck->growth_steps = s.growth_steps;
        ck->applied_steps = s.applied_steps;
        ck->skipped_steps = s.skipped_steps;
    }
    if (st == CT_OK)
        st = download_packed(dev, bound, &bound->params, &ck->params, err);
    if (st == CT_OK && bound->opt_m.data)
        st = download_packed(dev, bound, &bound->opt_m, &ck->m, err);
    if (st == CT_OK && bound->opt_v.data)
        st = download_packed(dev, bound, &bound->opt_v, &ck->v, err);
    if (st == CT_OK)
        st = download_floats(dev, &ck->state, &bound->state, err);
    return st;
}

ct_status ct_run_check_dataset(const ct_run *run, const ct_checkpoint *ck, const char *source, ct_err *err)
{
    const ct_dataset *train = &run->train;
    const char *folder = run->cfg.data.train ? run->cfg.data.train : "the training set";
    if (ck->index_hash != 0 && ck->index_hash != train->index_hash) {
        if (train->index_hash == 0)
            return ct_fail(err, CT_ERR_DATA, "%s: saved from a training folder whose index hash was %016llx; %s has "
                           "no file index (format %s); train from scratch or train on that folder", source,
                           (unsigned long long)ck->index_hash, folder, ct_data_format_name(run->cfg.data.format));
        return ct_fail(err, CT_ERR_DATA, "%s: saved from a training folder whose index hash was %016llx; %s now "
                       "hashes to %016llx (files added, removed, renamed or resized); train from scratch or restore "
                       "the folder", source, (unsigned long long)ck->index_hash, folder,
                       (unsigned long long)train->index_hash);
    }
    if (ck->n_classes == 0)
        return CT_OK;
    int have = train->class_names ? train->classes : 0;
    if ((int)ck->n_classes != have)
        return ct_fail(err, CT_ERR_DATA, "%s: saved from a training set of %u named classes; %s now has %d; train "
                       "from scratch or restore the folder", source, (unsigned)ck->n_classes, folder, have);
    for (int i = 0; i < have; i++)
        if (strcmp(ck->class_names[i], train->class_names[i] ? train->class_names[i] : "") != 0)
            return ct_fail(err, CT_ERR_DATA, "%s: saved from a training set whose class %d was '%s'; in %s it is "
                           "now '%s'; train from scratch or restore the folder", source, i, ck->class_names[i],
                           folder, train->class_names[i] ? train->class_names[i] : "");
    return CT_OK;
}

ct_status ct_checkpoint_check_layers(const ct_graph *g, const ct_checkpoint *ck, const char *source, ct_err *err)
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

/* packed parameters into the bound network's params (and its half copy). */
static ct_status upload_params(ct_graph *g, const float *packed, ct_err *err)
{
    float *span = calloc(g->param_span + 1, sizeof *span);
    if (!span)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory loading %zu parameters", g->n_params);
    unpack_params(g, packed, span);
    ct_status st = ct_graph_set_params(g, span, err);
    free(span);
    return st;
}

ct_status ct_run_restore(ct_run *run, const ct_checkpoint *ck, const char *source, ct_err *err)
{
    ct_graph *g = &run->graph;
    ct_status st = ct_checkpoint_check_layers(g, ck, source, err);
    if (st != CT_OK)
        return st;
    int same_optimizer = ck->optimizer == (uint32_t)run->cfg.train.optimizer;
    for (int i = 0; i < run->n_replicas && st == CT_OK; i++) {
        ct_graph *bound = &run->replicas[i].graph;
        ct_device *dev = run->replicas[i].dev;
        st = upload_params(bound, ck->params, err);
        if (st == CT_OK && bound->state.count)
            st = dev->ops->upload(dev, bound->state.data, ck->state, ct_tensor_bytes(&bound->state), err);
        /* moments only carry over to the same optimizer; another one starts its own from zero */
        if (st == CT_OK && same_optimizer && bound->opt_m.data && ck->m)
            st = upload_packed(dev, bound, &bound->opt_m, ck->m, err);
        if (st == CT_OK && same_optimizer && bound->opt_v.data && ck->v)
            st = upload_packed(dev, bound, &bound->opt_v, ck->v, err);
        /* the scaler continues where it was (exact resume); a checkpoint without one (fp32, bf16)
         * leaves the config's starting scaler. The growth interval is the config's. */
        if (st == CT_OK && run->cfg.train.precision == CT_PREC_FP16 && ck->has_scaler) {
            ct_scaler s = ct_train_scaler_start(&run->cfg.train);
            s.loss_scale = ck->loss_scale;
            s.clean_steps = ck->clean_steps;
            s.applied_steps = ck->applied_steps;
            s.skipped_steps = ck->skipped_steps;
            if (s.growth_steps == 0 && run->cfg.train.loss_scale > 0)
                s.loss_scale = run->cfg.train.loss_scale;   /* a fixed scale is the config's */
            st = run->replicas[i].be->ops->scaler_set(run->replicas[i].be, &s, err);
        }
    }
    if (st == CT_OK) {
        run->epoch = ck->epoch;
        run->step = ck->step;
    }
    return st;
}
