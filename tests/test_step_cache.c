/* The bookkeeping of captured steps (engine/step_cache.c), which the CUDA backend's run_step and
 * forget use, tested on the CPU with tokens standing for captures: a key is run directly, then
 * captured, then replayed; another step function, another network or another batch size is
 * another key; forgetting a network drops its captures (and only its) so that its next step runs
 * directly again; eviction and a failed capture. Then the network's side: ct_graph_bind and
 * ct_graph_free tell the backend to forget the network (a spy on the CPU backend's forget). */
#include "api/handle.h"
#include "step_cache.h"
#include "tests/test_util.h"

static ct_status step_a(void *ctx, ct_err *err) { (void)ctx; (void)err; return CT_OK; }
static ct_status step_b(void *ctx, ct_err *err) { (void)ctx; (void)err; return CT_OK; }

/* Captures are tokens; release counts what comes back and which. */
static int released;
static void *last_released;
static void release(void *exec)
{
    released++;
    last_released = exec;
}

static char net1, net2;                       /* two networks: only their addresses matter */
static char tokens[CT_STEP_CACHE_ENTRIES + 4];

/* Runs key through the cache as run_step would: a capture is made on CT_STEP_CAPTURE (token t,
 * or none when the capture fails: t < 0). */
static ct_step_action step(ct_step_cache *c, ct_step_fn fn, const void *net, int n, int t)
{
    ct_step_key key = {fn, net, n};
    ct_step_entry *e = NULL;
    ct_step_action a = ct_step_cache_next(c, &key, &e, release);
    CHECK(e != NULL && ct_step_key_equal(&e->key, &key));
    if (a == CT_STEP_CAPTURE && e)
        e->exec = t >= 0 ? &tokens[t] : NULL;
    return a;
}

static void test_sequence(void)
{
    ct_step_cache c = {0};
    CHECK(step(&c, step_a, &net1, 32, 0) == CT_STEP_DIRECT);
    CHECK(step(&c, step_a, &net1, 32, 0) == CT_STEP_CAPTURE);
    CHECK(step(&c, step_a, &net1, 32, 0) == CT_STEP_REPLAY);
    CHECK(step(&c, step_a, &net1, 32, 0) == CT_STEP_REPLAY);
    /* the same batch size with another step function (evaluation after training at one n), on
     * another network, or at another n: none may replay the first capture */
    CHECK(step(&c, step_b, &net1, 32, 1) == CT_STEP_DIRECT);
    CHECK(step(&c, step_a, &net2, 32, 2) == CT_STEP_DIRECT);
    CHECK(step(&c, step_a, &net1, 27, 3) == CT_STEP_DIRECT);
    CHECK(c.count == 4);
    CHECK(step(&c, step_b, &net1, 32, 1) == CT_STEP_CAPTURE);
    CHECK(step(&c, step_a, &net2, 32, 2) == CT_STEP_CAPTURE);
    CHECK(step(&c, step_a, &net2, 32, 2) == CT_STEP_REPLAY);
    CHECK(released == 0);

    /* net1 freed or rebound: its two captures go, net2's stays; net1's next step runs directly,
     * so that its setup work happens outside a capture again */
    ct_step_cache_forget(&c, &net1, release);
    CHECK_MSG(released == 2, "forgetting net1 released %d captures, not 2", released);
    CHECK(c.count == 1 && c.entries[0].key.net == &net2);
    CHECK(step(&c, step_a, &net2, 32, 2) == CT_STEP_REPLAY);
    CHECK(step(&c, step_a, &net1, 32, 4) == CT_STEP_DIRECT);
    CHECK(step(&c, step_a, &net1, 32, 4) == CT_STEP_CAPTURE);
    CHECK(step(&c, step_b, &net1, 32, 5) == CT_STEP_DIRECT);  /* uncaptured: nothing to release */

    /* forgetting every network (the backend's buffers replaced): every capture goes */
    released = 0;
    ct_step_cache_forget(&c, NULL, release);
    CHECK(released == 2 && c.count == 0);
    CHECK(step(&c, step_a, &net2, 32, 2) == CT_STEP_DIRECT);
    ct_step_cache_forget(&c, &net1, release);  /* nothing of net1's: nothing happens */
    CHECK(released == 2 && c.count == 1);
}

static void test_eviction(void)
{
    ct_step_cache c = {0};
    released = 0;
    /* fill the cache with captured keys n = 1 .. ENTRIES, the first the least recently used */
    for (int n = 1; n <= CT_STEP_CACHE_ENTRIES; n++) {
        step(&c, step_a, &net1, n, n);
        CHECK(step(&c, step_a, &net1, n, n) == CT_STEP_CAPTURE);
    }
    CHECK(step(&c, step_a, &net1, 1, 1) == CT_STEP_REPLAY);  /* n = 1 now the most recent; 2 the least */
    CHECK(step(&c, step_a, &net1, 100, 0) == CT_STEP_DIRECT);
    CHECK_MSG(released == 1 && last_released == &tokens[2], "eviction released %d, the wrong one", released);
    CHECK(step(&c, step_a, &net1, 1, 1) == CT_STEP_REPLAY);
    CHECK(step(&c, step_a, &net1, 2, 2) == CT_STEP_DIRECT);  /* evicted: starts over */
}

/* A capture that failed leaves no exec: the key is asked to capture again, never replayed. */
static void test_failed_capture(void)
{
    ct_step_cache c = {0};
    CHECK(step(&c, step_a, &net1, 8, -1) == CT_STEP_DIRECT);
    CHECK(step(&c, step_a, &net1, 8, -1) == CT_STEP_CAPTURE);
    CHECK(step(&c, step_a, &net1, 8, -1) == CT_STEP_CAPTURE);
}

/* ---- the network tells its backend to forget it ---- */

static int forgets;
static const void *forgot;
static void (*cpu_forget)(ct_backend *, const void *);
static void spy_forget(ct_backend *be, const void *net)
{
    forgets++;
    forgot = net;
    cpu_forget(be, net);
}

static void test_graph_forgets(void)
{
    static const char *const NET =
        "[data]\nformat = synthetic\nshape = 4, 4, 1\nclasses = 3\ncount = 8\ntest_count = 0\n"
        "[train]\nbatch = 4\ndevices = cpu\n"
        "[f]\ntype = flatten\n[d]\ntype = dense\nunits = 3\n";
    ct_net *net = NULL;
    ct_status st = ct_open_string(NET, "forget.ini", &net);
    if (st == CT_OK)
        st = ct_net_build_graph(net);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return;
    }
    ct_device *dev = NULL;
    ct_backend *be = NULL;
    ct_err err = {0};
    if (st == CT_OK)
        st = ct_cpu_device_create(&dev, &err);
    if (st == CT_OK)
        st = ct_cpu_backend_create(&be, dev, NULL, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    if (st != CT_OK) {
        if (dev)
            dev->ops->destroy(dev);
        ct_close(net);
        return;
    }
    ct_backend_ops spy = *be->ops;
    cpu_forget = spy.forget;
    spy.forget = spy_forget;
    const ct_backend_ops *real = be->ops;
    be->ops = &spy;

    ct_graph g;
    st = ct_graph_build(&g, &net->run.cfg, net->run.graph.input, net->run.graph.classes, &err);
    if (st == CT_OK)
        st = ct_graph_bind(&g, be, 4, CT_OPT_SGD, 1, 0, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    CHECK_MSG(forgets == 1 && forgot == &g, "binding made %d forget calls", forgets);
    ct_graph_free(&g);
    CHECK_MSG(forgets == 2 && forgot == &g, "freeing made %d forget calls in all", forgets);

    be->ops = real;
    be->ops->destroy(be);
    dev->ops->destroy(dev);
    ct_close(net);
}

int main(void)
{
    test_sequence();
    test_eviction();
    test_failed_capture();
    test_graph_forgets();
    return ct_test_done();
}
