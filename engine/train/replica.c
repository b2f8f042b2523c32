/* Replicas: open, close, and evaluation's host staging through the backend's one input path. */
#include <string.h>

#include "train/replica.h"

ct_status ct_replica_open(ct_replica *r, int rank, ct_device *dev, ct_backend *be, const ct_config *cfg,
                          ct_shape input, int classes, int batch, uint64_t seed, size_t limit, ct_err *err)
{
    memset(r, 0, sizeof *r);
    r->rank = rank;
    r->dev = dev;
    r->be = be;
    ct_status st = dev->ops->activate(dev, err);
    return st == CT_OK ? ct_replica_bind(r, cfg, input, classes, batch, seed, limit, err) : st;
}

ct_status ct_replica_bind(ct_replica *r, const ct_config *cfg, ct_shape input, int classes, int batch, uint64_t seed,
                          size_t limit, ct_err *err)
{
    ct_device *dev = r->dev;
    ct_status st = ct_graph_build(&r->graph, cfg, input, classes, err);
    if (st == CT_OK)
        st = ct_graph_bind(&r->graph, r->be, batch, cfg->train.optimizer, seed, limit, err);
    for (int k = 0; k < CT_STAGING_SLOTS && st == CT_OK; k++) {
        r->host_x[k] = dev->ops->host_alloc(dev, ct_tensor_bytes(&r->graph.x));
        r->host_y[k] = dev->ops->host_alloc(dev, ct_tensor_bytes(&r->graph.labels));
        if (!r->host_x[k] || !r->host_y[k])
            st = ct_fail(err, CT_ERR_NOMEM, "out of memory for %d-sample input staging", batch);
    }
    if (st != CT_OK)
        ct_replica_unbind(r);
    return st;
}

void ct_replica_unbind(ct_replica *r)
{
    ct_device *dev = r->dev;
    if (dev) {
        ct_err ignored;
        (void)dev->ops->activate(dev, &ignored);
        (void)dev->ops->synchronize(dev, &ignored);
        for (int k = 0; k < CT_STAGING_SLOTS; k++) {
            if (r->host_x[k])
                dev->ops->host_free(dev, r->host_x[k]);
            if (r->host_y[k])
                dev->ops->host_free(dev, r->host_y[k]);
            r->host_x[k] = NULL;
            r->host_y[k] = NULL;
            r->ticket[k] = 0;
        }
    }
    ct_graph_free(&r->graph);
    r->next_slot = 0;
    r->feed_ticket = r->next_feed_ticket = 0;
}

void ct_replica_close(ct_replica *r)
{
    ct_device *dev = r->dev;
    ct_replica_unbind(r);
    if (r->be)
        r->be->ops->destroy(r->be);
    if (dev)
        dev->ops->destroy(dev);
    memset(r, 0, sizeof *r);
}

ct_status ct_replica_host_slot(ct_replica *r, float **x, int32_t **y, int *slot, ct_err *err)
{
    int k = r->next_slot;
    r->next_slot = (k + 1) % CT_STAGING_SLOTS;
    ct_status st = r->be->ops->input_wait(r->be, r->ticket[k], err);
    r->ticket[k] = 0;
    *x = r->host_x[k];
    *y = r->host_y[k];
    *slot = k;
    return st;
}

ct_status ct_replica_submit_slot(ct_replica *r, int slot, int n, ct_err *err)
{
    ct_graph *g = &r->graph;
    ct_input_batch b = {.n = n, .shape = g->input, .x = r->host_x[slot], .y = r->host_y[slot]};
    return r->be->ops->input_submit(r->be, &b, &g->x, &g->labels, &r->ticket[slot], err);
}
