/* The communicators the trainer implements on the host (the interface: comm.h): one replica,
 * CPU replicas in one process, one CPU replica per process of an MPI world. */
#ifndef CT_COMMS_H
#define CT_COMMS_H

#include "comm.h"

/* The mean every CPU communicator computes, elements [lo, hi) of out: each element summed over
 * the ranks' in[r] in rank order, then divided by the rank count, or, when the ranks' samples
 * differ, each weighted by its samples and divided by their total. One function, so that CPU
 * replicas in one process and in several give the same bits. in and out (elements) may not
 * overlap. */
void ct_comm_mean_in_rank_order(const float *const *in, const int *samples, int size, float *out, size_t lo,
                                size_t hi);

/* The communicator of a single replica: nothing to exchange. */
ct_status ct_comm_single_create(ct_comm **out, ct_err *err);

/* `size` CPU replicas in one process, one host thread each, over shared memory. Every element
 * of a mean is summed in rank order, then divided: the result never depends on which thread
 * arrives first. A wait longer than timeout_s seconds fails, naming the ranks that never came. */
ct_status ct_comm_local_create(ct_comm **out, int size, double timeout_s, ct_err *err);

struct ct_world;
/* One CPU replica per process of an MPI world (train/world.h): every rank receives every other's
 * tensor and computes ct_comm_mean_in_rank_order over all, so P processes give the bits of
 * devices = cpu:P in one; every exchange is bounded by the world's comm_timeout. */
ct_status ct_comm_mpi_create(ct_comm **out, struct ct_world *world, ct_err *err);

#endif
