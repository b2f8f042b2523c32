/* CPU replicas in several processes, one each: collectives over the process world (world.h).
 * The all-reduce gathers every rank's tensor on every rank and sums it there in rank order with
 * the arithmetic of CPU replicas in one process (ct_comm_mean_in_rank_order), so `mpirun -np 2`
 * and `devices = cpu:2` train to the same bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/comms.h"
#include "train/world.h"

typedef struct mpi_comm {
    ct_world *world;          /* not owned */
    unsigned char *gathered;  /* (size) blocks: a rank's tensor, then its sample count */
    size_t cap;               /* bytes */
    const float **in;         /* (size) each rank's tensor in gathered */
    int *samples;             /* (size) */
} mpi_comm;

static ct_status mpi_all_reduce_mean(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int samples, ct_err *err)
{
    (void)rank;
    (void)be;
    mpi_comm *m = c->impl;
    if (t->dtype != CT_DTYPE_F32)
        return ct_fail(err, CT_ERR_INTERNAL, "the MPI all-reduce takes fp32 tensors");
    size_t block = t->count * sizeof(float) + sizeof(int), bytes = block * (size_t)c->size;
    if (bytes > m->cap) {
        /* a failed exchange may still write into the old buffer: it is kept, not freed */
        unsigned char *grown = ct_world_broken(m->world) ? NULL : realloc(m->gathered, bytes);
        if (!grown)
            return ct_fail(err, CT_ERR_NOMEM, "out of memory for the processes' all-reduce (%zu bytes)", bytes);
        m->gathered = grown;
        m->cap = bytes;
    }
    unsigned char *mine = malloc(block);
    if (!mine)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the processes' all-reduce (%zu bytes)", block);
    memcpy(mine, t->data, t->count * sizeof(float));
    memcpy(mine + t->count * sizeof(float), &samples, sizeof samples);
    char what[96];
    snprintf(what, sizeof what, "the gradient all-reduce of step %ld", c->step);
    ct_status st = ct_world_all_gather(m->world, mine, m->gathered, block, what, err);
    free(mine);
    if (st != CT_OK)
        return st;
    for (int r = 0; r < c->size; r++) {
        m->in[r] = (const float *)(m->gathered + (size_t)r * block);
        memcpy(&m->samples[r], m->gathered + (size_t)r * block + t->count * sizeof(float), sizeof(int));
    }
    ct_comm_mean_in_rank_order(m->in, m->samples, c->size, t->data, 0, t->count);
    return CT_OK;
}

static ct_status mpi_broadcast(ct_comm *c, int rank, ct_backend *be, ct_tensor *t, int root, ct_err *err)
{
    (void)rank;
    (void)be;
    mpi_comm *m = c->impl;
    char what[96];
    if (c->step > 0)
        snprintf(what, sizeof what, "the broadcast of rank %d's batch-norm statistics after step %ld", root, c->step);
    else
        snprintf(what, sizeof what, "the broadcast of rank %d's initial state", root);
    return ct_world_broadcast(m->world, t->data, ct_tensor_bytes(t), root, what, err);
}

static ct_status mpi_agree(ct_comm *c, int rank, ct_backend *be, int ok, int *first_not_ok, ct_err *err)
{
    (void)rank;
    (void)be;
    mpi_comm *m = c->impl;
    int *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the processes' agreement");
    char what[96];
    snprintf(what, sizeof what, "the processes' agreement at step %ld", c->step);
    ct_status st = ct_world_all_gather(m->world, &ok, all, sizeof ok, what, err);
    *first_not_ok = -1;
    for (int r = 0; st == CT_OK && r < c->size && *first_not_ok < 0; r++)
        if (!all[r])
            *first_not_ok = r;
    if (!ct_world_broken(m->world))   /* a failed exchange may still write into it */
        free(all);
    return st;
}

static void mpi_destroy(ct_comm *c)
{
    mpi_comm *m = c->impl;
    if (m) {
        if (!ct_world_broken(m->world))
            free(m->gathered);
        free(m->in);
        free(m->samples);
        free(m);
    }
    free(c);
}

static const ct_comm_ops mpi_ops = {
    .name = "mpi",
    .all_reduce_mean = mpi_all_reduce_mean,
    .broadcast = mpi_broadcast,
    .agree = mpi_agree,
    /* a failed process ends the world (ct_process_abort); the others' waits are bounded anyway */
    .abort = NULL,
    .destroy = mpi_destroy,
};

ct_status ct_comm_mpi_create(ct_comm **out, ct_world *world, ct_err *err)
{
    *out = NULL;
    int size = ct_world_size(world);
    ct_comm *c = calloc(1, sizeof *c);
    mpi_comm *m = calloc(1, sizeof *m);
    if (m) {
        m->world = world;
        m->in = calloc((size_t)size, sizeof *m->in);
        m->samples = calloc((size_t)size, sizeof *m->samples);
    }
    if (!c || !m || !m->in || !m->samples) {
        if (m) {
            free(m->in);
            free(m->samples);
        }
        free(m);
        free(c);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating a communicator for %d processes", size);
    }
    *c = (ct_comm){.ops = &mpi_ops, .size = size, .impl = m};
    *out = c;
    return CT_OK;
}
