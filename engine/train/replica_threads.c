/* The replicas' host threads: a job number under a mutex, a condition for new jobs and one for
 * their completion. */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

#include "train/replica_threads.h"

typedef struct rank_thread {
    struct ct_replica_threads *threads;
    int rank;
    pthread_t thread;
    int started;
} rank_thread;

struct ct_replica_threads {
    int n, omp_threads;
    ct_comm *comm;
    pthread_mutex_t mu;
    pthread_cond_t job_cv, done_cv;
    unsigned long job;        /* jobs handed out */
    int quit;
    int running;              /* ranks still on the current job */
    ct_rank_fn fn;
    void *ctx;
    ct_status status;         /* the first failure of the current job */
    ct_err first;             /* its message */
    rank_thread *ranks;       /* (n) */
};

static void *rank_main(void *p)
{
    rank_thread *self = p;
    ct_replica_threads *t = self->threads;
    /* OpenMP's thread count is per thread: every job of this rank runs on its share */
    omp_set_num_threads(t->omp_threads);
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        while (t->job == seen && !t->quit)
            pthread_cond_wait(&t->job_cv, &t->mu);
        if (t->quit) {
            pthread_mutex_unlock(&t->mu);
            return NULL;
        }
        seen = t->job;
        ct_rank_fn fn = t->fn;
        void *ctx = t->ctx;
        pthread_mutex_unlock(&t->mu);

        ct_err err;
        ct_err_clear(&err);
        ct_status st = fn(ctx, self->rank, &err);
        if (st != CT_OK && t->comm && t->comm->ops->abort)
            t->comm->ops->abort(t->comm, self->rank);

        pthread_mutex_lock(&t->mu);
        if (st != CT_OK && t->status == CT_OK) {
            t->status = st;
            t->first = err;
        }
        if (--t->running == 0)
            pthread_cond_signal(&t->done_cv);
        pthread_mutex_unlock(&t->mu);
    }
}

ct_status ct_replica_threads_start(ct_replica_threads **out, int n, int omp_threads, ct_comm *comm, ct_err *err)
{
    *out = NULL;
    ct_replica_threads *t = calloc(1, sizeof *t);
    rank_thread *ranks = calloc((size_t)n, sizeof *ranks);
    if (!t || !ranks) {
        free(t);
        free(ranks);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for %d replica threads", n);
    }
    *t = (ct_replica_threads){.n = n, .omp_threads = omp_threads > 0 ? omp_threads : 1, .comm = comm,
                              .ranks = ranks};
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->job_cv, NULL);
    pthread_cond_init(&t->done_cv, NULL);
    for (int i = 0; i < n; i++) {
        ranks[i] = (rank_thread){.threads = t, .rank = i};
        if (pthread_create(&ranks[i].thread, NULL, rank_main, &ranks[i]) != 0) {
            ct_replica_threads_stop(t);
            return ct_fail(err, CT_ERR_BACKEND, "cannot start the thread of replica %d", i);
        }
        ranks[i].started = 1;
    }
    *out = t;
    return CT_OK;
}

ct_status ct_replica_threads_run(ct_replica_threads *t, ct_rank_fn fn, void *ctx, ct_err *err)
{
    pthread_mutex_lock(&t->mu);
    t->fn = fn;
    t->ctx = ctx;
    t->status = CT_OK;
    t->running = t->n;
    t->job++;
    pthread_cond_broadcast(&t->job_cv);
    while (t->running > 0)
        pthread_cond_wait(&t->done_cv, &t->mu);
    ct_status st = t->status;
    if (st != CT_OK)
        *err = t->first;
    pthread_mutex_unlock(&t->mu);
    return st;
}

void ct_replica_threads_stop(ct_replica_threads *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->quit = 1;
    pthread_cond_broadcast(&t->job_cv);
    pthread_mutex_unlock(&t->mu);
    for (int i = 0; i < t->n; i++)
        if (t->ranks[i].started)
            pthread_join(t->ranks[i].thread, NULL);
    pthread_cond_destroy(&t->job_cv);
    pthread_cond_destroy(&t->done_cv);
    pthread_mutex_destroy(&t->mu);
    free(t->ranks);
    free(t);
}
