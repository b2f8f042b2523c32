/* devices = cpu:N on Fashion-MNIST subsets: N replicas at global batch B train like one replica at
 * B (parameters within 1e-4 relative, test accuracy within 0.002) and stay bit-identical to each
 * other; a batch-norm network trains with per-replica statistics, and with sync_bn = on like one
 * replica (the same bounds); checkpoints move between replica
 * counts; bad values are config errors naming their line; the shared-memory communicator sums in
 * rank order and ends a wait for a missing replica with a timeout naming it. */
#define _DEFAULT_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/handle.h"
#include "train/comms.h"
#include "tests/fmnist_form.h"
#include "tests/test_util.h"

/* No batch norm, no dropout, no augmentation: one replica's step is the others' mean. 2010
 * samples at batch 100 end with a batch of 10, which 4 replicas split 3, 3, 2, 2 (the weighted
 * mean). */
static const char *MLP =
    "[data]\nformat = idx\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
    "test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n"
    "normalize = 0.2860, 0.3530\ntrain_limit = 2010\ntest_limit = 2000\n"
    "[train]\nepochs = 1\nbatch = 100\noptimizer = adam\nlearning_rate = 0.002\ndevices = cpu\n"
    "[flat]\ntype = flatten\n"
    "[fc1]\ntype = dense\nunits = 64\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 10\n";

/* The same with dropout: each replica draws the masks of its samples' places in the global batch. */
static const char *MLP_DROPOUT =
    "[data]\nformat = idx\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
    "test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n"
    "normalize = 0.2860, 0.3530\ntrain_limit = 2010\ntest_limit = 2000\n"
    "[train]\nepochs = 1\nbatch = 100\noptimizer = adam\nlearning_rate = 0.002\ndevices = cpu\n"
    "[flat]\ntype = flatten\n"
    "[fc1]\ntype = dense\nunits = 64\nactivation = relu\n"
    "[drop]\ntype = dropout\nrate = 0.3\n"
    "[out]\ntype = dense\nunits = 10\n";

static const char *BN_NET =
    "[data]\nformat = idx\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
    "test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n"
    "normalize = 0.2860, 0.3530\ntrain_limit = 3000\ntest_limit = 1000\n"
    "[train]\nepochs = 1\nbatch = 64\noptimizer = adam\nlearning_rate = 0.003\ndevices = cpu\n"
    "[conv]\ntype = conv2d\nfilters = 8\nsize = 3\nstride = 2\n"
    "[bn]\ntype = batchnorm\n"
    "[relu]\ntype = activation\nactivation = relu\n"
    "[pool]\ntype = maxpool\n"
    "[flat]\ntype = flatten\n"
    "[out]\ntype = dense\nunits = 10\n";

/* The same with sync_bn = on: every replica normalises with the global batch's statistics, so N
 * replicas train like one. 2946 samples at batch 64 end with a batch of 2, which leaves two of
 * four replicas without samples: they still take part in batch norm's collectives. The
 * convolution has no bias: batch norm takes its mean away, so its gradient would be rounding
 * noise, which Adam scales up to full-size steps of either sign. */
static const char *BN_SYNC_NET =
    "[data]\nformat = idx\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
    "test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n"
    "normalize = 0.2860, 0.3530\ntrain_limit = 2946\ntest_limit = 1000\n"
    "[train]\nepochs = 1\nbatch = 64\noptimizer = adam\nlearning_rate = 0.003\ndevices = cpu\nsync_bn = on\n"
    "[conv]\ntype = conv2d\nfilters = 8\nsize = 3\nstride = 2\nbias = off\n"
    "[bn]\ntype = batchnorm\n"
    "[relu]\ntype = activation\nactivation = relu\n"
    "[pool]\ntype = maxpool\n"
    "[flat]\ntype = flatten\n"
    "[out]\ntype = dense\nunits = 10\n";

static char dir[64];

static ct_net *open_net(const char *form, const char *devices, const char *epochs)
{
    ct_net *net = NULL;
    CHECK(ct_open_fmnist_form(form, "replicas.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.devices", devices) == CT_OK);
    if (epochs)
        CHECK(ct_set(net, "train.epochs", epochs) == CT_OK);
    return net;
}

static const float *params_of(ct_net *net, int rank, size_t *count)
{
    *count = net->run.replicas[rank].graph.params.count;
    return ct_f32(&net->run.replicas[rank].graph.params);
}

/* ||a - b|| / ||b|| over count values */
static double relative_difference(const float *a, const float *b, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        norm += (double)b[i] * b[i];
    }
    return sqrt(diff) / sqrt(norm);
}

/* Every replica's parameters, batch-norm statistics and optimizer moments equal replica 0's, bit
 * for bit. */
static int replicas_identical(ct_net *net)
{
    for (int i = 1; i < net->run.n_replicas; i++) {
        const ct_graph *a = &net->run.replicas[0].graph, *b = &net->run.replicas[i].graph;
        if (memcmp(a->params.data, b->params.data, ct_tensor_bytes(&a->params)) != 0 ||
            memcmp(a->grads.data, b->grads.data, ct_tensor_bytes(&a->grads)) != 0 ||
            (a->opt_m.data && memcmp(a->opt_m.data, b->opt_m.data, ct_tensor_bytes(&a->opt_m)) != 0) ||
            (a->opt_v.data && memcmp(a->opt_v.data, b->opt_v.data, ct_tensor_bytes(&a->opt_v)) != 0) ||
            (a->state.count && memcmp(a->state.data, b->state.data, ct_tensor_bytes(&a->state)) != 0)) {
            fprintf(stderr, "replica %d differs from replica 0\n", i);
            return 0;
        }
    }
    return 1;
}

static double test_accuracy(ct_net *net)
{
    ct_eval_result r;
    CHECK(ct_evaluate(net, &r) == CT_OK);
    return r.accuracy;
}

/* N replicas at the config's global batch against one. */
static void test_n_against_one(const char *form, const char *label)
{
    ct_net *one = open_net(form, "cpu", NULL);
    CHECK_MSG(ct_fit(one, NULL) == CT_OK, "%s", ct_errmsg(one));
    double acc1 = test_accuracy(one);
    CHECK_MSG(acc1 > 0.70, "%s: one replica reached %.4f", label, acc1);
    size_t count1 = 0;
    const float *p1 = params_of(one, 0, &count1);
    const char *devices[] = {"cpu:2", "cpu:4"};
    for (int k = 0; k < 2; k++) {
        ct_net *many = open_net(form, devices[k], NULL);
        CHECK_MSG(ct_fit(many, NULL) == CT_OK, "%s", ct_errmsg(many));
        CHECK(many->run.n_replicas == 2 * (k + 1));
        CHECK(ct_batch_size(many) == ct_batch_size(one));
        CHECK(ct_steps_done(many) == ct_steps_done(one));
        CHECK(replicas_identical(many));
        size_t count = 0;
        const float *p = params_of(many, 0, &count);
        CHECK(count == count1);
        double rel = relative_difference(p, p1, count1 < count ? count1 : count);
        double acc = test_accuracy(many);
        printf("%s, devices = %s: parameters %.3g relative to one replica's; test accuracy %.4f (one: %.4f)\n",
               label, devices[k], rel, acc, acc1);
        CHECK_MSG(rel <= 1e-4, "%s, %s: relative difference %.3g", label, devices[k], rel);
        CHECK_MSG(fabs(acc - acc1) <= 0.002, "%s, %s: accuracy %.4f against %.4f", label, devices[k], acc, acc1);
        ct_close(many);
    }
    ct_close(one);
}

/* Batch norm normalises each replica's slice with its own statistics; replica 0's running
 * statistics are everyone's after every step. */
static void test_batchnorm(void)
{
    ct_net *one = open_net(BN_NET, "cpu", NULL);
    CHECK_MSG(ct_fit(one, NULL) == CT_OK, "%s", ct_errmsg(one));
    double acc1 = test_accuracy(one);
    ct_close(one);
    ct_net *net = open_net(BN_NET, "cpu:2", NULL);
    CHECK_MSG(ct_fit(net, NULL) == CT_OK, "%s", ct_errmsg(net));
    CHECK(net->run.n_replicas == 2 && net->run.replicas[0].graph.state.count > 0);
    CHECK(replicas_identical(net));
    double acc = test_accuracy(net);
    printf("batch norm, devices = cpu:2: test accuracy %.4f (one replica: %.4f)\n", acc, acc1);
    /* statistics over 32 samples instead of 64 train a little differently, not worse by much */
    CHECK_MSG(acc >= 0.65 && acc >= acc1 - 0.03, "batch-norm network on 2 replicas reached %.4f (one: %.4f)", acc,
              acc1);
    ct_close(net);
}

/* fp16: every replica decides skip or apply, and the scale, from the same averaged gradients. A
 * growth interval of 3 doubles the scale until steps overflow and are skipped. */
static void test_fp16(void)
{
    ct_net *net = open_net(MLP, "cpu:2", NULL);
    CHECK(ct_set(net, "train.precision", "fp16") == CT_OK);
    CHECK(ct_set(net, "train.loss_scale_growth_steps", "3") == CT_OK);
    CHECK_MSG(ct_fit(net, NULL) == CT_OK, "%s", ct_errmsg(net));
    CHECK(replicas_identical(net));
    ct_scaler s0, s1;
    ct_err err;
    CHECK(net->run.replicas[0].be->ops->scaler_get(net->run.replicas[0].be, &s0, &err) == CT_OK);
    CHECK(net->run.replicas[1].be->ops->scaler_get(net->run.replicas[1].be, &s1, &err) == CT_OK);
    CHECK(s0.skipped_steps > 0 && s0.applied_steps > 0);
    CHECK(s0.loss_scale == s1.loss_scale && s0.skipped_steps == s1.skipped_steps &&
          s0.applied_steps == s1.applied_steps && s0.clean_steps == s1.clean_steps);
    const ct_graph *a = &net->run.replicas[0].graph, *b = &net->run.replicas[1].graph;
    CHECK(a->params_half.data &&
          memcmp(a->params_half.data, b->params_half.data, ct_tensor_bytes(&a->params_half)) == 0);
    ct_close(net);
}

/* A checkpoint saved on 4 replicas holds no replica count: it loads on 1, which saves the same
 * bytes, and trains on; one saved on 1 loads on 4 alike. */
static void test_checkpoints(void)
{
    char four_path[128], one_path[128];
    snprintf(four_path, sizeof four_path, "%s/four.ckpt", dir);
    snprintf(one_path, sizeof one_path, "%s/one.ckpt", dir);
    ct_net *four = open_net(MLP, "cpu:4", "1");
    CHECK_MSG(ct_fit(four, NULL) == CT_OK, "%s", ct_errmsg(four));
    CHECK_MSG(ct_save(four, four_path) == CT_OK, "%s", ct_errmsg(four));

    ct_net *one = open_net(MLP, "cpu", "2");
    CHECK_MSG(ct_load(one, four_path) == CT_OK, "%s", ct_errmsg(one));
    size_t c4 = 0, c1 = 0;
    const float *p4 = params_of(four, 0, &c4), *p1 = params_of(one, 0, &c1);
    CHECK(c4 == c1 && memcmp(p4, p1, c1 * sizeof *p1) == 0);
    CHECK_MSG(ct_save(one, one_path) == CT_OK, "%s", ct_errmsg(one));
    long la = 0, lb = 0;
    unsigned char *a = ct_slurp(four_path, &la), *b = ct_slurp(one_path, &lb);
    CHECK(a && b && la == lb && memcmp(a, b, (size_t)la) == 0);
    free(a);
    free(b);
    CHECK(ct_epochs_done(one) == 1);
    CHECK_MSG(ct_fit(one, NULL) == CT_OK, "%s", ct_errmsg(one));
    CHECK(ct_epochs_done(one) == 2 && ct_steps_done(one) == 2 * ct_steps_done(four));
    double acc = test_accuracy(one);
    CHECK_MSG(acc > test_accuracy(four), "resumed on one replica: %.4f after epoch 2", acc);

    /* and back: one replica's checkpoint on 4, every replica loaded */
    ct_net *again = open_net(MLP, "cpu:4", "3");
    CHECK_MSG(ct_load(again, one_path) == CT_OK, "%s", ct_errmsg(again));
    CHECK(again->run.n_replicas == 4 && replicas_identical(again));
    CHECK_MSG(ct_fit(again, NULL) == CT_OK, "%s", ct_errmsg(again));
    CHECK(ct_epochs_done(again) == 3 && replicas_identical(again));
    ct_close(again);
    ct_close(one);
    ct_close(four);
}

static void expect_config_error(const char *devices, const char *batch, const char *where, const char *what)
{
    const char *d = ct_fmnist_dir();
    char text[4096];
    snprintf(text, sizeof text, MLP, d, d, d, d);
    char *line = strstr(text, "devices = cpu\n");
    char replaced[4096];
    snprintf(replaced, sizeof replaced, "%.*sdevices = %s\n%s", (int)(line - text), text, devices,
             line + strlen("devices = cpu\n"));
    ct_net *net = NULL;
    CHECK(ct_open_string(replaced, "replicas.ini", &net) == CT_OK);
    if (batch)
        CHECK(ct_set(net, "train.batch", batch) == CT_OK);
    CHECK(ct_prepare(net) == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(ct_errmsg(net), where) && ct_contains(ct_errmsg(net), what), "devices = %s: %s", devices,
              ct_errmsg(net));
    ct_close(net);
}

static void test_bad_values(void)
{
    /* [train]'s devices is line 15 of MLP, batch line 12 */
    expect_config_error("cpu:0", NULL, "replicas.ini:15:", "cpu:N needs N from 1");
    expect_config_error("cpu:x", NULL, "replicas.ini:15:", "bad devices");
    expect_config_error("cpu:3", NULL, "replicas.ini:12:", "does not split evenly over the 3 replicas");
    expect_config_error("cpu:3", "max", "", "batch = max with devices = cpu:3");
    /* more replicas than samples in a batch cannot split evenly either */
    expect_config_error("cpu:8", "4", "--set train.batch", "use 8");
    const char *keys[][2] = {{"train.bucket_mib", "0"}, {"train.comm_timeout", "-1"}};
    for (int i = 0; i < 2; i++) {
        ct_net *net = open_net(MLP, "cpu:2", NULL);
        CHECK(ct_set(net, keys[i][0], keys[i][1]) == CT_OK);
        CHECK(ct_prepare(net) == CT_ERR_CONFIG);
        CHECK_MSG(ct_contains(ct_errmsg(net), keys[i][0] + 6), "%s", ct_errmsg(net));
        ct_close(net);
    }
}

/* ---- the communicator alone ---- */

enum { RANKS = 3, VALUES = 1000 };

typedef struct rank_arg {
    ct_comm *comm;
    int rank, delay_us;
    ct_tensor t;
    ct_status st;
    ct_err err;
} rank_arg;

static void *all_reduce_rank(void *p)
{
    rank_arg *a = p;
    usleep((useconds_t)a->delay_us);
    a->st = a->comm->ops->all_reduce_mean(a->comm, a->rank, NULL, &a->t, 5, &a->err);
    return NULL;
}

/* Values whose float sum depends on the order: the mean is ((x0 + x1) + x2) / 3 whoever comes
 * first; a rank that never comes ends the others' wait after comm_timeout, naming it. */
static void test_local_comm(void)
{
    ct_comm *comm = NULL;
    ct_err err;
    CHECK(ct_comm_local_create(&comm, RANKS, 5.0, &err) == CT_OK);
    static float data[RANKS][VALUES];
    for (int trial = 0; trial < 6; trial++) {
        float expect[VALUES];
        for (int i = 0; i < VALUES; i++) {
            float x0 = 1e8f * (float)(i % 7 + 1), x1 = 1.0f + (float)i * 0.37f, x2 = -x0 + 0.5f;
            data[0][i] = x0;
            data[1][i] = x1;
            data[2][i] = x2;
            expect[i] = ((x0 + x1) + x2) / 3.0f;
        }
        pthread_t th[RANKS];
        rank_arg args[RANKS];
        for (int r = 0; r < RANKS; r++) {
            /* a different arrival order every trial */
            args[r] = (rank_arg){.comm = comm, .rank = r, .delay_us = ((r + trial) % RANKS) * 2000,
                                 .t = ct_tensor_flat(data[r], CT_DTYPE_F32, VALUES)};
            pthread_create(&th[r], NULL, all_reduce_rank, &args[r]);
        }
        for (int r = 0; r < RANKS; r++)
            pthread_join(th[r], NULL);
        for (int r = 0; r < RANKS; r++) {
            CHECK(args[r].st == CT_OK);
            CHECK(memcmp(data[r], expect, sizeof expect) == 0);
        }
    }
    comm->ops->destroy(comm);

    CHECK(ct_comm_local_create(&comm, RANKS, 0.2, &err) == CT_OK);
    pthread_t th[2];
    rank_arg args[2];
    for (int r = 0; r < 2; r++) {
        args[r] = (rank_arg){.comm = comm, .rank = r, .t = ct_tensor_flat(data[r], CT_DTYPE_F32, VALUES)};
        pthread_create(&th[r], NULL, all_reduce_rank, &args[r]);
    }
    for (int r = 0; r < 2; r++) {
        pthread_join(th[r], NULL);
        CHECK(args[r].st == CT_ERR_BACKEND);
        CHECK_MSG(ct_contains(args[r].err.msg, "comm_timeout") && ct_contains(args[r].err.msg, "replica 2"), "%s",
                  args[r].err.msg);
    }
    comm->ops->destroy(comm);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ct_replicas_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_local_comm();
    test_bad_values();
    test_n_against_one(MLP, "mlp");
    test_n_against_one(MLP_DROPOUT, "mlp with dropout");
    test_batchnorm();
    test_n_against_one(BN_SYNC_NET, "batch norm with sync_bn = on");
    test_fp16();
    test_checkpoints();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return ct_test_done();
}
