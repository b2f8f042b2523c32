/* The process world: several processes started by a launcher (mpirun, srun), one replica each,
 * agreeing over MPI. A process's rank and the world's size come from the launcher's environment
 * (readable before MPI starts, and in a build without MPI, which must refuse such a run rather
 * than train P independent copies that overwrite each other's files).
 *
 * MPI has no timeout of its own: every exchange here is nonblocking point-to-point polled against
 * a deadline of comm_timeout seconds, so a peer that died, was stopped or never joined ends the
 * wait with an error naming it. After such an error the world is broken: every later exchange
 * fails at once, and the process should end (ct_world_abort_process), which makes the launcher
 * stop the others. */
#ifndef CT_WORLD_H
#define CT_WORLD_H

#include <stddef.h>

#include "base/status.h"

typedef struct ct_world ct_world;

/* What the launcher's environment says: this process's rank, the world's size and the rank on
 * this machine (0, 1, 0 without a launcher). Open MPI's OMPI_COMM_WORLD_*, PMI's PMI_* and
 * Slurm's step variables (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID). */
void ct_world_launcher(int *rank, int *size, int *local_rank);

/* Starts MPI if the program has not (MPI_Init_thread; then finalised at exit), takes a
 * communicator of its own over every process, and checks that it has the launcher's size. A build
 * without MPI fails, saying how to build one. MPI_Init waits for every process to reach it, so
 * this comes before anything slow (loading data). */
ct_status ct_world_open(ct_world **out, double timeout_s, ct_err *err);
/* The first exchange: every rank says it is here, with `agreed`, lines of "key = value" that
 * must be the same on every rank (ct_run_agreement: the config, the data, the checkpoint resumed
 * from). Ends with an error naming the ranks that did not join in time, or (CT_ERR_CONFIG) the
 * first key on which a rank differs from rank 0, both values and both ranks. */
ct_status ct_world_join(ct_world *w, const char *agreed, ct_err *err);
int ct_world_rank(const ct_world *w);
int ct_world_size(const ct_world *w);

/* Every rank passes `bytes` of its own in mine; all receives every rank's, rank r's at
 * all + r * bytes. `what` names the exchange in errors ("the gradient all-reduce of step 12"). */
ct_status ct_world_all_gather(ct_world *w, const void *mine, void *all, size_t bytes, const char *what,
                              ct_err *err);
/* buf (bytes) on every rank becomes root's: NCCL's unique id, a tensor. */
ct_status ct_world_broadcast(ct_world *w, void *buf, size_t bytes, int root, const char *what, ct_err *err);
/* 1 after an exchange failed: buffers it was given may still be written, so they are not freed. */
int ct_world_broken(const ct_world *w);
/* Frees the communicator (MPI itself stays up until exit). NULL is fine. */
void ct_world_close(ct_world *w);
/* Ends every process of the launch (MPI_Abort) when MPI is running in this one; nothing
 * otherwise, or in a build without MPI (ct_process_abort). */
void ct_world_abort_process(int code);

#endif
