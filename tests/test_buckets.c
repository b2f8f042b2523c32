/* Gradient buckets on CPU replicas (Fashion-MNIST subset): the buckets tile the gradients, last
 * layers first; bucketing changes no arithmetic (small buckets train bit for bit like one
 * bucket); and a step's trace shows the first bucket's all-reduce starting before the first
 * layer's backward has ended, on every replica. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "tests/json_check.h"
#include "tests/fmnist_form.h"
#include "tests/test_util.h"
#include "train/buckets.h"

static const char *MLP =
    "[data]\nformat = idx\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
    "test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n"
    "normalize = 0.2860, 0.3530\ntrain_limit = 1000\ntest_limit = 500\n"
    "[train]\nepochs = 1\nbatch = 100\noptimizer = adam\nlearning_rate = 0.002\ndevices = cpu:2\n"
    "[flat]\ntype = flatten\n"
    "[fc1]\ntype = dense\nunits = 128\nactivation = relu\n"
    "[fc2]\ntype = dense\nunits = 64\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 10\n";

static ct_net *open_net(const char *bucket_mib)
{
    ct_net *net = NULL;
    CHECK(ct_open_fmnist_form(MLP, "buckets.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.bucket_mib", bucket_mib) == CT_OK);
    return net;
}

/* 0.02 MiB (5242-element) buckets over fc1 (100480 weights and biases), fc2 (8256) and out (650):
 * out alone is too small, fc2 closes the first bucket, fc1 the second. One 25 MiB bucket holds
 * everything. */
static void test_plan(void)
{
    ct_net *net = open_net("0.02");
    CHECK_MSG(ct_prepare(net) == CT_OK, "%s", ct_errmsg(net));
    const ct_graph *g = &net->run.replicas[0].graph;
    size_t starts[8];
    int n = ct_bucket_starts(g, 0.02, starts, 8);
    CHECK(n == 2);
    size_t per = (size_t)(0.02 * 1024 * 1024 / 4), end = g->param_span;
    for (int k = 0; k < n; k++) {
        CHECK(starts[k] < end);
        CHECK_MSG(k == n - 1 || end - starts[k] >= per, "bucket %d holds %zu elements", k, end - starts[k]);
        end = starts[k];
    }
    CHECK(end == 0);  /* together they cover every gradient */
    CHECK(ct_bucket_starts(g, 25.0, starts, 8) == 1 && starts[0] == 0);
    ct_close(net);
}

/* An epoch (ten steps) with 0.001 MiB buckets, one per layer, against one bucket. */
static void test_same_result(void)
{
    ct_net *small = open_net("0.001"), *one = open_net("25");
    CHECK_MSG(ct_fit(small, NULL) == CT_OK, "%s", ct_errmsg(small));
    CHECK_MSG(ct_fit(one, NULL) == CT_OK, "%s", ct_errmsg(one));
    size_t starts[64];
    CHECK(ct_bucket_starts(&small->run.replicas[0].graph, 0.001, starts, 64) == 3);
    const ct_tensor *a = &small->run.replicas[0].graph.params, *b = &one->run.replicas[0].graph.params;
    CHECK(a->count == b->count);
    CHECK_MSG(memcmp(a->data, b->data, ct_tensor_bytes(a)) == 0, "small buckets changed the parameters");
    ct_close(small);
    ct_close(one);
}

typedef struct event {
    char name[64];
    int tid;
    double ts, dur;
} event;

/* The events of the trace's lines, one per line as ct_trace_write puts them. */
static int read_events(const char *text, event *ev, int max)
{
    int n = 0;
    for (const char *line = text; line && *line && n < max; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        event e = {0};
        if (sscanf(line, "{\"name\": \"%63[^\"]\", \"cat\": \"%*[a-z]\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, "
                         "\"ts\": %lf, \"dur\": %lf", e.name, &e.tid, &e.ts, &e.dur) == 4)
            ev[n++] = e;
    }
    return n;
}

static const event *find(const event *ev, int n, int tid, const char *name)
{
    for (int i = 0; i < n; i++)
        if (ev[i].tid == tid && strcmp(ev[i].name, name) == 0)
            return &ev[i];
    return NULL;
}

/* The trace goes beside the test's binary, in its build folder, wherever the test is run from;
 * a bare program name (found through PATH) leaves it in the working directory. */
static void trace_path(const char *argv0, char *path, size_t cap)
{
    const char *slash = strrchr(argv0, '/');
    int dir_len = slash ? (int)(slash - argv0 + 1) : 0;
    snprintf(path, cap, "%.*stest_buckets_trace.json", dir_len, argv0);
}

static void test_trace_overlap(const char *argv0)
{
    ct_net *net = open_net("0.02");
    char path[4096];
    trace_path(argv0, path, sizeof path);
    remove(path);
    CHECK_MSG(ct_trace_step(net, path) == CT_OK, "%s", ct_errmsg(net));
    long len = 0;
    char *text = (char *)ct_slurp(path, &len);
    CHECK(text != NULL);
    if (!text)
        return;
    text[len] = '\0';
    CHECK(json_valid(text));
    event ev[64];
    int n = read_events(text, ev, 64);
    /* two replicas: four layers' forward and backward, the loss, two buckets, the update */
    CHECK(n == 2 * (4 + 4 + 1 + 2 + 1));
    for (int tid = 0; tid < 2; tid++) {
        const event *first = find(ev, n, tid, "all-reduce bucket 0"), *second = find(ev, n, tid, "all-reduce bucket 1");
        /* fc1 is the first layer with parameters: the last backward that produces gradients */
        const event *fc1 = find(ev, n, tid, "backward fc1"), *out = find(ev, n, tid, "backward out");
        CHECK(first && second && fc1 && out);
        if (!first || !second || !fc1 || !out)
            break;
        printf("replica %d: bucket 0 all-reduce at %.1f us (%.1f us), backward fc1 %.1f to %.1f us\n", tid, first->ts,
               first->dur, fc1->ts, fc1->ts + fc1->dur);
        CHECK_MSG(first->ts < fc1->ts + fc1->dur, "replica %d: the first bucket waited for all of backward", tid);
        CHECK(out->ts <= first->ts && first->ts < second->ts);
        /* the rest of the step in order: forward, the loss, backward, the update */
        const event *fwd = find(ev, n, tid, "forward fc1"), *loss = find(ev, n, tid, "loss"),
                    *update = find(ev, n, tid, "update");
        CHECK(fwd && loss && update);
        if (fwd && loss && update)
            CHECK(fwd->ts + fwd->dur <= loss->ts + loss->dur && loss->ts <= out->ts &&
                  second->ts + second->dur <= update->ts);
    }
    free(text);
    ct_close(net);
}

int main(int argc, char **argv)
{
    test_plan();
    test_same_result();
    test_trace_overlap(argc > 0 ? argv[0] : "");
    return ct_test_done();
}
