/* Training through the input pipeline on real Fashion-MNIST images: the trained network is the
 * same, byte for byte in its checkpoint, whatever the number of workers, the prefetch depth, the
 * naive sync mode, or workers = auto's batches made on the trainer's thread; drop_last changes the step count and only that; each epoch reports its
 * input wait share and the workers that ran. */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "cutrain.h"
#include "tests/test_util.h"

static char dir[64];

static const char *NET_FMT =
    "[data]\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
    "train_limit = 1000\nnormalize = 0.2860, 0.3530\naugment = crop:2, flip\n"
    "[train]\nepochs = 2\nbatch = 48\noptimizer = adam\nlearning_rate = 0.002\ndevices = cpu\nthreads = 1\n"
    "[conv]\ntype = conv2d\nfilters = 4\nsize = 3\nactivation = relu\n"
    "[pool]\ntype = maxpool\n"
    "[flat]\ntype = flatten\n"
    "[out]\ntype = dense\nunits = 10\n";

typedef struct run_log {
    int epochs_seen;
    long last_step;
    double share;
    int workers, prefetch;
} run_log;

static int on_epoch(const ct_epoch_stats *s, void *user)
{
    run_log *log = user;
    log->epochs_seen++;
    log->last_step = s->step;
    log->share = s->input_wait_share;
    log->workers = s->input_workers;
    log->prefetch = s->input_prefetch;
    return 0;
}

/* Trains with the given [data] overrides and saves to dir/name; returns the log. */
static run_log train(const char *name, const char *const *sets, int n_sets)
{
    char text[2048], path[256];
    snprintf(text, sizeof text, NET_FMT, ct_fmnist_dir(), ct_fmnist_dir());
    run_log log = {0};
    ct_net *net = NULL;
    ct_status st = ct_open_string(text, name, &net);
    for (int i = 0; st == CT_OK && i < n_sets; i += 2)
        st = ct_set(net, sets[i], sets[i + 1]);
    ct_callbacks cb = {.on_epoch = on_epoch, .user = &log};
    if (st == CT_OK)
        st = ct_fit(net, &cb);
    snprintf(path, sizeof path, "%s/%s.ckpt", dir, name);
    if (st == CT_OK)
        st = ct_save(net, path);
    CHECK_MSG(st == CT_OK, "%s: %s", name, ct_errmsg(net));
    ct_close(net);
    return log;
}

static int same_file(const char *a, const char *b)
{
    char pa[256], pb[256];
    snprintf(pa, sizeof pa, "%s/%s.ckpt", dir, a);
    snprintf(pb, sizeof pb, "%s/%s.ckpt", dir, b);
    long la = 0, lb = 0;
    unsigned char *x = ct_slurp(pa, &la), *y = ct_slurp(pb, &lb);
    int same = x && y && la == lb && memcmp(x, y, (size_t)la) == 0;
    free(x);
    free(y);
    return same;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ct_trainpipe_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    static const char *const one[] = {"data.workers", "1", "data.prefetch", "2"};
    static const char *const three[] = {"data.workers", "3", "data.prefetch", "5"};
    static const char *const autos[] = {"data.workers", "auto", "data.prefetch", "auto"};
    static const char *const shallow[] = {"data.workers", "2", "data.prefetch", "1"};
    static const char *const sync[] = {"data.pipeline", "sync"};
    static const char *const dropping[] = {"data.drop_last", "on"};
    run_log a = train("one", one, 4);
    run_log b = train("three", three, 4);
    run_log c = train("auto", autos, 4);
    run_log d = train("shallow", shallow, 4);
    run_log e = train("sync", sync, 2);
    run_log f = train("drop", dropping, 2);

    CHECK(a.epochs_seen == 2 && b.epochs_seen == 2 && c.epochs_seen == 2 && d.epochs_seen == 2 && e.epochs_seen == 2);
    CHECK_MSG(same_file("one", "three"), "1 worker and 3 workers trained different networks");
    CHECK_MSG(same_file("one", "auto"), "workers = auto trained a different network");
    CHECK_MSG(same_file("one", "shallow"), "prefetch 1 trained a different network");
    CHECK_MSG(same_file("one", "sync"), "pipeline = sync trained a different network");
    /* 1000 samples at batch 48: 21 steps an epoch, 20 when the partial batch is dropped */
    CHECK_MSG(a.last_step == 42 && f.last_step == 40, "steps %ld and %ld", a.last_step, f.last_step);
    CHECK(!same_file("one", "drop"));
    CHECK(a.workers == 1 && a.prefetch == 2 && b.workers == 3 && b.prefetch == 5);
    CHECK_MSG(e.workers == 0 && e.prefetch == 1, "sync reported %d workers, prefetch %d", e.workers, e.prefetch);
    /* on the CPU, with the set in memory, auto makes each batch on the trainer's thread (pipeline.h's
     * on-caller mode): no worker takes a core from the step; the pipeline's own auto sizing is
     * test_pipeline's */
    CHECK_MSG(c.workers == 0 && c.prefetch == 1, "auto on the CPU ran %d workers, prefetch %d", c.workers,
              c.prefetch);
    run_log all[] = {a, b, c, d, e, f};
    for (int i = 0; i < 6; i++)
        CHECK_MSG(all[i].share >= 0.0 && all[i].share <= 1.0, "input wait share %g", all[i].share);
    printf("input wait share: 1 worker %.4f, 3 workers %.4f, auto (%d workers) %.4f, sync %.4f\n", a.share,
           b.share, c.workers, c.share, e.share);

    const char *names[] = {"one", "three", "auto", "shallow", "sync", "drop"};
    for (int i = 0; i < 6; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s.ckpt", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return ct_test_done();
}
