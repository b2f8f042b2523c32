/* One replica: its gradients are already the mean and its parameters already root's. */
#include <stdlib.h>

#include "train/comms.h"

static ct_status single_all_reduce_mean(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int samples,
                                        ct_err *err)
{
    (void)c; (void)rank; (void)be; (void)t; (void)samples; (void)err;
    return CT_OK;
}

static ct_status single_broadcast(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int root, ct_err *err)
{
    (void)c; (void)rank; (void)be; (void)t; (void)root; (void)err;
    return CT_OK;
}

static void single_destroy(ct_comm *c) { free(c); }

static const ct_comm_ops single_ops = {
    .name = "single",
    .all_reduce_mean = single_all_reduce_mean,
    .broadcast = single_broadcast,
    .abort = NULL,
    .destroy = single_destroy,
};

ct_status ct_comm_single_create(ct_comm **out, ct_err *err)
{
    ct_comm *c = calloc(1, sizeof *c);
    if (!c)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating a communicator");
    c->ops = &single_ops;
    c->size = 1;
    *out = c;
    return CT_OK;
}
