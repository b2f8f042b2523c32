/* Replicas that reduce together agree on every capture of their step (ct_capture_agree): NCCL
 * launches a captured collective only with the graphs of one capture on all of its ranks, so a
 * capture that fails on one replica must stop every replica instead of one falling back to
 * direct launches while the others replay.
 *
 * The CPU backend never captures, so a stand-in run_step plays the CUDA backend's part at a
 * capture: it passes its replica's result to the hook the trainer set and returns what the hook
 * says. With devices = cpu:4 and replica 2's capture failing, the step fails on every replica,
 * each naming replica 2 (replica 2 with its own reason); with every capture succeeding it goes on.
 * Every replica's step key names the global batch, also when a batch splits unevenly, so that
 * the replicas capture and replay at the same steps. One replica gets no hook (its failed capture
 * may fall back). The shared-memory communicator's agree names the lowest failing rank on all. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/handle.h"
#include "train/comms.h"
#include "tests/fmnist_form.h"
#include "tests/test_util.h"

static const char *MLP =
    "[data]\nformat = idx\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
    "test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n"
    "normalize = 0.2860, 0.3530\ntrain_limit = 512\ntest_limit = 256\n"
    "[train]\nepochs = 1\nbatch = 64\noptimizer = sgd\nlearning_rate = 0.01\ndevices = cpu\ncomm_timeout = 5\n"
    "[flat]\ntype = flatten\n"
    "[out]\ntype = dense\nunits = 10\n";

enum { RANKS = 4 };

/* What the stand-in saw on each replica's thread (each writes its own row; read after the step's
 * threads have joined). */
static struct {
    ct_net *net;
    int fail_rank;           /* the replica whose capture fails, -1 for none */
    int calls[RANKS];
    int hooked[RANKS];       /* the trainer had set the hook */
    int key_n[RANKS];
    ct_status st[RANKS];
    char msg[RANKS][1024];
} seen;

static int rank_of(const ct_backend *be)
{
    for (int i = 0; i < seen.net->run.n_replicas; i++)
        if (seen.net->run.replicas[i].be == be)
            return i;
    return -1;
}

/* A capture on every call: the replica's result goes to the trainer's hook. */
static ct_status stand_in_run_step(ct_backend *be, const ct_step_key *key, void *ctx, ct_err *err)
{
    (void)ctx;
    int rank = rank_of(be);
    if (rank < 0)
        return ct_fail(err, CT_ERR_INTERNAL, "the stand-in does not know this backend");
    seen.calls[rank]++;
    seen.key_n[rank] = key->n;
    seen.hooked[rank] = be->capture_agree.agree != NULL;
    ct_status st = CT_OK;
    if (be->capture_agree.agree) {
        int captured = rank != seen.fail_rank;
        st = be->capture_agree.agree(be->capture_agree.ctx, captured, captured ? NULL : "stand-in capture refused",
                                     err);
    }
    seen.st[rank] = st;
    snprintf(seen.msg[rank], sizeof seen.msg[rank], "%s", st == CT_OK ? "" : err->msg);
    return st;
}

static ct_backend_ops stand_in_ops;

static ct_net *open_with_stand_in(const char *devices)
{
    ct_net *net = NULL;
    CHECK(ct_open_fmnist_form(MLP, "capture_agree.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.devices", devices) == CT_OK);
    CHECK_MSG(ct_prepare(net) == CT_OK, "%s", ct_errmsg(net));
    stand_in_ops = *net->run.replicas[0].be->ops;
    stand_in_ops.run_step = stand_in_run_step;
    for (int i = 0; i < net->run.n_replicas; i++)
        net->run.replicas[i].be->ops = &stand_in_ops;
    memset(&seen, 0, sizeof seen);
    seen.net = net;
    seen.fail_rank = -1;
    return net;
}

static void test_one_replica(void)
{
    ct_net *net = open_with_stand_in("cpu");
    CHECK(net->run.n_replicas == 1);
    ct_err err;
    ct_err_clear(&err);
    CHECK_MSG(ct_train_step(&net->run, net->run.batch, 0.01f, &err) == CT_OK, "%s", err.msg);
    CHECK(seen.calls[0] == 1 && !seen.hooked[0]);
    ct_close(net);
}

static void test_replicas(void)
{
    ct_net *net = open_with_stand_in("cpu:4");
    CHECK(net->run.n_replicas == RANKS && net->run.comm->size == RANKS);
    ct_err err;
    ct_err_clear(&err);

    /* every capture succeeds, on a batch that splits 16, 16, 16, 15 */
    int n = net->run.batch - 1;
    CHECK_MSG(ct_train_step(&net->run, n, 0.01f, &err) == CT_OK, "%s", err.msg);
    for (int r = 0; r < RANKS; r++) {
        CHECK(seen.calls[r] == 1 && seen.hooked[r]);
        CHECK_MSG(seen.st[r] == CT_OK, "replica %d: %s", r, seen.msg[r]);
        CHECK_MSG(seen.key_n[r] == n, "replica %d's step key says %d samples, the global batch is %d", r,
                  seen.key_n[r], n);
    }

    /* replica 2's capture fails: every replica's step fails, naming it */
    seen.fail_rank = 2;
    ct_err_clear(&err);
    CHECK(ct_train_step(&net->run, net->run.batch, 0.01f, &err) == CT_ERR_BACKEND);
    CHECK_MSG(ct_contains(err.msg, "failed on replica 2 of 4"), "%s", err.msg);
    for (int r = 0; r < RANKS; r++) {
        CHECK(seen.calls[r] == 2);
        CHECK_MSG(seen.st[r] == CT_ERR_BACKEND && ct_contains(seen.msg[r], "failed on replica 2 of 4"), "replica %d: %s",
                  r, seen.msg[r]);
        if (r == seen.fail_rank) {
            CHECK_MSG(ct_contains(seen.msg[r], "stand-in capture refused"), "%s", seen.msg[r]);
        } else {
            char stops[48];
            snprintf(stops, sizeof stops, "so replica %d stops too", r);
            CHECK_MSG(ct_contains(seen.msg[r], stops), "%s", seen.msg[r]);
        }
    }
    ct_close(net);
}

typedef struct vote_arg {
    ct_comm *comm;
    int rank, ok, first_not_ok;
    ct_status st;
    ct_err err;
} vote_arg;

static void *vote(void *p)
{
    vote_arg *a = p;
    a->st = a->comm->ops->agree(a->comm, a->rank, NULL, a->ok, &a->first_not_ok, &a->err);
    return NULL;
}

/* Three rounds on one communicator: ranks 1 and 2 say no, then nobody, then rank 0. */
static void test_local_agree(void)
{
    ct_comm *comm = NULL;
    ct_err err;
    CHECK(ct_comm_local_create(&comm, 3, 5.0, &err) == CT_OK);
    const int oks[3][3] = {{1, 0, 0}, {1, 1, 1}, {0, 1, 1}}, expect[3] = {1, -1, 0};
    for (int round = 0; round < 3; round++) {
        pthread_t th[3];
        vote_arg args[3];
        for (int r = 0; r < 3; r++) {
            args[r] = (vote_arg){.comm = comm, .rank = r, .ok = oks[round][r], .first_not_ok = -2};
            pthread_create(&th[r], NULL, vote, &args[r]);
        }
        for (int r = 0; r < 3; r++) {
            pthread_join(th[r], NULL);
            CHECK_MSG(args[r].st == CT_OK, "%s", args[r].err.msg);
            CHECK_MSG(args[r].first_not_ok == expect[round], "round %d, rank %d: %d, expected %d", round, r,
                      args[r].first_not_ok, expect[round]);
        }
    }
    comm->ops->destroy(comm);
}

int main(void)
{
    test_local_agree();
    test_one_replica();
    test_replicas();
    return ct_test_done();
}
