/* [train] memory against a device: the budget a plan must fit, and the words an allocation
 * failure gets (which device, which batch, its plan against that budget). */
#include <stdio.h>
#include <string.h>

#include "train/memory.h"

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

ct_status ct_memory_budget(const ct_train_config *t, ct_device *dev, size_t *budget, size_t *cap, ct_err *err)
{
    size_t room = 0, total = 0;
    *cap = t->memory == CT_MEMORY_LIMIT ? (size_t)t->memory_limit_mib << 20 : 0;
    if (*cap) {
        room = *cap;
    } else {
        ct_status st = dev->ops->memory(dev, &room, &total, err);
        if (st != CT_OK)
            return st;
    }
    *budget = (size_t)((double)room * (1.0 - (double)t->memory_margin));
    return CT_OK;
}

ct_status ct_oom_explain(ct_run *run, ct_status st)
{
    if (st != CT_ERR_NOMEM || !run->n_replicas || !run->graph_built)
        return st;
    ct_replica *r = &run->replicas[0];
    const ct_train_config *t = &run->cfg.train;
    ct_memory_plan p;
    int batch = run->batch > 0 ? run->batch : t->batch;
    ct_graph_plan(&run->graph, r->be, batch, t->optimizer, &p);
    char extra[400];
    ct_err ignored;
    size_t budget = 0, cap = 0;
    int known = ct_memory_budget(t, r->dev, &budget, &cap, &ignored) == CT_OK;
    int n = snprintf(extra, sizeof extra, " [training on %s at batch %d, plan %.1f MiB", r->dev->label, batch,
                     mib(p.total));
    if (known && n > 0 && (size_t)n < sizeof extra)
        n += snprintf(extra + n, sizeof extra - (size_t)n, ", budget %.1f MiB (%s less memory_margin)", mib(budget),
                      cap ? "the limit: cap" : "free memory");
    if (n > 0 && (size_t)n < sizeof extra)
        snprintf(extra + n, sizeof extra - (size_t)n, "%s]", t->batch_mode == CT_BATCH_FIXED
                                                                 ? "; batch = max finds the largest batch that fits"
                                                                 : "");
    size_t used = strlen(run->err.msg);
    if (used < sizeof run->err.msg - 1)
        snprintf(run->err.msg + used, sizeof run->err.msg - used, "%s", extra);
    return st;
}
