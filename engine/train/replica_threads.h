/* One host thread per replica: the trainer hands every rank the same job and waits for all of
 * them. A rank's collectives wait for the others, so the ranks of one job must run at once; the
 * threads live as long as the replicas, so each keeps its OpenMP team from step to step. */
#ifndef CT_REPLICA_THREADS_H
#define CT_REPLICA_THREADS_H

#include "comm.h"

typedef struct ct_replica_threads ct_replica_threads;

/* The job of rank `rank`; err is the rank's own. */
typedef ct_status (*ct_rank_fn)(void *ctx, int rank, ct_err *err);

/* Starts n threads, each running its OpenMP work on omp_threads threads. A rank whose job fails
 * aborts comm, so that the others' collectives end instead of waiting for it. */
ct_status ct_replica_threads_start(ct_replica_threads **out, int n, int omp_threads, ct_comm *comm, ct_err *err);
/* Runs fn(ctx, rank) on every rank's thread and waits for all of them. On failure err holds the
 * first rank's error to happen (the cause, not the others' stopping because of it). */
ct_status ct_replica_threads_run(ct_replica_threads *t, ct_rank_fn fn, void *ctx, ct_err *err);
/* Ends and joins the threads (none may be running a job). NULL is fine. */
void ct_replica_threads_stop(ct_replica_threads *t);

#endif
