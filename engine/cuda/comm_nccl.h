/* NCCL's communicator (comm_nccl.c; built with CUDA, working with NCCL: built without it, every
 * entry point fails saying so). Above the backends it is opened through the registry
 * (registry.h, the CUDA row in cuda/registry.c).
 *
 * Each rank reduces on a communication stream of its own: all_reduce_mean forks it from the
 * compute stream by an event (so a bucket's reduction overlaps the rest of backward), join makes
 * the compute stream wait for it, broadcast runs there too; all of it is capturable (agree, which
 * waits on the host, is not). The communicators are non-blocking: every NCCL call and every
 * collective is bounded by timeout_s, after which the communicator is aborted (ncclCommAbort) and
 * the others fail naming the rank that did not come, never a hang. */
#ifndef CT_COMM_NCCL_H
#define CT_COMM_NCCL_H

#include "comm.h"

enum { CT_NCCL_ID_BYTES = 128 };  /* sizeof (ncclUniqueId) */

/* One process, n local GPUs: rank i runs on bes[i] (a CUDA backend, its device current on the
 * rank's thread when the rank calls). n = 1 is valid (NCCL's path with one rank). */
ct_status ct_comm_nccl_create(ct_comm **out, ct_backend *const *bes, int n, double timeout_s, ct_err *err);

/* Several processes: rank 0 makes the id and sends it to the others (over MPI), then each process
 * creates its rank of an nranks communicator on be. */
ct_status ct_comm_nccl_unique_id(unsigned char id[CT_NCCL_ID_BYTES], ct_err *err);
ct_status ct_comm_nccl_create_rank(ct_comm **out, int nranks, int rank, const unsigned char id[CT_NCCL_ID_BYTES],
                                   ct_backend *be, double timeout_s, ct_err *err);

#endif
