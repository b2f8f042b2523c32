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

ct_status ct_memory_check_plan(ct_run *run, ct_replica *r, int batch, int replicas)
{
    const ct_train_config *t = &run->cfg.train;
    if (t->memory == CT_MEMORY_LIMIT || (t->memory == CT_MEMORY_PREALLOCATE && !r->dev->host_memory))
        return CT_OK;   /* a cap is the allocator's to keep; a preallocated pool is what the device had */
    size_t budget = 0, cap = 0;
    ct_status st = ct_memory_budget(t, r->dev, &budget, &cap, &run->err);
    if (st != CT_OK)
        return st;
    ct_memory_plan p;
    ct_graph_plan(&run->graph, r->be, batch, t->optimizer, &p);
    double need = (double)p.total * (replicas > 0 ? replicas : 1);
    if (need <= (double)budget)
        return CT_OK;
    char each[64] = "";
    if (replicas > 1)
        snprintf(each, sizeof each, " (%d replicas of %.1f MiB)", replicas, mib(p.total));
    return ct_fail(&run->err, CT_ERR_NOMEM,
                   "the network does not fit in memory: its plan at batch %d takes %.1f MiB%s (parameters and "
                   "gradients %.1f, optimizer %.1f, activations %.1f, activation gradients %.1f, workspace %.1f, "
                   "inputs %.1f) but %s has %.1f MiB free, %.1f MiB less memory_margin %.0f%%; nothing was allocated. "
                   "Use a smaller network or batch (batch = max finds the largest that fits; cutrain summary shows "
                   "the plan)",
                   batch, need / (1024.0 * 1024.0), each, mib(p.params + p.params_half), mib(p.optimizer),
                   mib(p.activations), mib(p.gradients), mib(p.workspace), mib(p.inputs), r->dev->label,
                   mib((size_t)((double)budget / (1.0 - (double)t->memory_margin))), mib(budget),
                   100.0 * t->memory_margin);
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
