/* The library through its public header only: open, override, prepare, fit with callbacks,
 * evaluate, layer queries, error messages, and two handles training independently. */
#include <pthread.h>

#include "cutrain.h"
#include "tests/test_util.h"

static const char *SYNTHETIC_NET =
    "[data]\n"
    "format = synthetic\n"
    "shape = 8, 8, 1\n"
    "classes = 4\n"
    "count = 512\n"
    "test_count = 256\n"
    "[train]\n"
    "epochs = 3\n"
    "batch = 32\n"
    "optimizer = adam\n"
    "learning_rate = 0.01\n"
    "devices = cpu\n"
    "[conv]\n"
    "type = conv2d\n"
    "filters = 4\n"
    "size = 3\n"
    "padding = same\n"
    "activation = relu\n"
    "[pool]\n"
    "type = maxpool\n"
    "[flat]\n"
    "type = flatten\n"
    "[out]\n"
    "type = dense\n"
    "units = 4\n";

typedef struct seen {
    int epochs, steps;
    double last_test_accuracy;
    int stop_after;
} seen;

static int on_epoch(const ct_epoch_stats *s, void *user)
{
    seen *sn = user;
    sn->epochs++;
    sn->last_test_accuracy = s->test_accuracy;
    CHECK(s->epoch == sn->epochs);
    CHECK(s->images_per_s > 0 && s->seconds > 0);
    CHECK(s->loss > 0 && s->train_accuracy >= 0 && s->train_accuracy <= 1);
    return sn->stop_after && sn->epochs >= sn->stop_after;
}

static int on_step(const ct_progress *p, void *user)
{
    seen *sn = user;
    sn->steps++;
    CHECK(p->step_in_epoch >= 1 && p->step_in_epoch <= p->steps_per_epoch);
    return 0;
}

static void test_fit_and_evaluate(void)
{
    ct_net *net = NULL;
    CHECK(ct_open_string(SYNTHETIC_NET, "synthetic.ini", &net) == CT_OK);
    CHECK(ct_layer_count(net) == 4);
    ct_layer_info li;
    CHECK(ct_layer_info_get(net, 0, &li) == CT_OK);
    CHECK(strcmp(li.name, "conv") == 0 && strcmp(li.type, "conv2d") == 0);
    CHECK(li.h == 8 && li.w == 8 && li.c == 4 && li.params == 4 * 9 + 4);
    CHECK(ct_layer_info_get(net, 3, &li) == CT_OK && li.params == 4 * 4 * 4 * 4 + 4);
    CHECK(ct_layer_info_get(net, 9, &li) == CT_ERR_USAGE && ct_contains(ct_errmsg(net), "out of range"));

    ct_eval_result before, after;
    CHECK(ct_evaluate(net, &before) == CT_OK);
    CHECK(before.images == 256);
    CHECK(strcmp(ct_backend_name(net), "cpu") == 0);
    CHECK(ct_contains(ct_backend_reason(net), "devices = cpu"));

    seen sn = {0};
    ct_callbacks cb = {.on_epoch = on_epoch, .on_step = on_step, .step_every = 4, .user = &sn};
    CHECK(ct_fit(net, &cb) == CT_OK);
    CHECK(sn.epochs == 3);
    CHECK(sn.steps == 3 * 4); /* 16 steps per epoch, every 4th */
    CHECK(ct_evaluate(net, &after) == CT_OK);
    CHECK_MSG(after.accuracy > 0.6 && after.accuracy > before.accuracy + 0.3,
              "synthetic accuracy %.3f before, %.3f after", before.accuracy, after.accuracy);
    CHECK_NEAR(after.accuracy, sn.last_test_accuracy, 1e-12);
    CHECK(ct_set(net, "train.epochs", "5") == CT_ERR_USAGE); /* too late once prepared */
    ct_close(net);
}

typedef struct fit_job {
    ct_net *net;
    seen sn;
    ct_status status;
} fit_job;

static void *fit_thread(void *arg)
{
    fit_job *job = arg;
    ct_callbacks cb = {.on_epoch = on_epoch, .user = &job->sn};
    job->status = ct_fit(job->net, &cb);
    return NULL;
}

/* Two handles train at the same time on two threads; a third, alone, with the first one's
 * settings, reproduces the first one's result: handles share no state. */
static void test_two_handles(void)
{
    fit_job a = {0}, b = {0}, c = {0};
    CHECK(ct_open_string(SYNTHETIC_NET, "a.ini", &a.net) == CT_OK);
    CHECK(ct_open_string(SYNTHETIC_NET, "b.ini", &b.net) == CT_OK);
    CHECK(ct_open_string(SYNTHETIC_NET, "c.ini", &c.net) == CT_OK);
    CHECK(ct_set(b.net, "train.seed", "7") == CT_OK);
    CHECK(ct_set(b.net, "train.optimizer", "momentum") == CT_OK);
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, fit_thread, &a) == 0);
    CHECK(pthread_create(&tb, NULL, fit_thread, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    fit_thread(&c);
    CHECK(a.status == CT_OK && b.status == CT_OK && c.status == CT_OK);
    CHECK(a.sn.epochs == 3 && b.sn.epochs == 3);
    ct_eval_result ra, rb, rc;
    CHECK(ct_evaluate(a.net, &ra) == CT_OK && ct_evaluate(b.net, &rb) == CT_OK && ct_evaluate(c.net, &rc) == CT_OK);
    CHECK(ra.accuracy > 0.6 && rb.accuracy > 0.6);
    CHECK_NEAR(rc.loss, ra.loss, 1e-5 * ra.loss);
    CHECK_NEAR(rc.accuracy, ra.accuracy, 1e-9);
    CHECK(fabs(rb.loss - ra.loss) > 1e-4);
    ct_close(a.net);
    ct_close(b.net);
    ct_close(c.net);
}

static void test_stop_from_callback(void)
{
    ct_net *net = NULL;
    CHECK(ct_open_string(SYNTHETIC_NET, "stop.ini", &net) == CT_OK);
    seen sn = {.stop_after = 1};
    ct_callbacks cb = {.on_epoch = on_epoch, .user = &sn};
    CHECK(ct_fit(net, &cb) == CT_ERR_STOPPED);
    CHECK(sn.epochs == 1);
    CHECK(ct_contains(ct_errmsg(net), "stopped"));
    ct_close(net);
}

static void test_errors(void)
{
    ct_net *net = NULL;
    CHECK(ct_open_file("/nonexistent/net.ini", &net) == CT_ERR_IO);
    CHECK(ct_contains(ct_errmsg(net), "/nonexistent/net.ini"));
    CHECK(ct_fit(net, NULL) == CT_ERR_IO); /* a failed open stays failed */
    ct_close(net);

    CHECK(ct_open_string("[data]\nformat = synthetic\n[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 3\n",
                         "x.ini", &net) == CT_OK);
    CHECK(ct_prepare(net) == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(ct_errmsg(net), "x.ini:5:") && ct_contains(ct_errmsg(net), "10 classes"),
              "got: %s", ct_errmsg(net));
    ct_close(net);

    /* concat joins channels: its inputs' heights and widths must agree (the inputs line is named) */
    CHECK(ct_open_string("[data]\nformat = synthetic\nshape = 8, 8, 1\n"
                         "[a]\ntype = conv2d\nfilters = 2\nsize = 3\n[b]\ntype = conv2d\nfilters = 2\nsize = 3\n"
                         "[cat]\ntype = concat\ninputs = a, b\n[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 10\n",
                         "c.ini", &net) == CT_OK);
    CHECK(ct_prepare(net) == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(ct_errmsg(net), "c.ini:14: [cat] cannot concatenate 6x6x2 ('a') and 4x4x2 ('b'): heights and "
                                          "widths differ"),
              "got: %s", ct_errmsg(net));
    ct_close(net);

    CHECK(ct_open_string(SYNTHETIC_NET, "y.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.batch", "zero") == CT_OK); /* checked at prepare */
    CHECK(ct_prepare(net) == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(ct_errmsg(net), "--set train.batch"), "got: %s", ct_errmsg(net));
    ct_close(net);

    CHECK(ct_open_string(SYNTHETIC_NET, "z.ini", &net) == CT_OK);
    CHECK(ct_set(net, "nosuchlayer.units", "3") == CT_ERR_CONFIG);
    CHECK(ct_contains(ct_errmsg(net), "nosuchlayer"));
    ct_close(net);

    /* a memory limit too small for the batch says how much it needs, before allocating */
    CHECK(ct_open_string(SYNTHETIC_NET, "m.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.batch", "4096") == CT_OK && ct_set(net, "train.memory", "limit:1") == CT_OK);
    CHECK(ct_prepare(net) == CT_ERR_NOMEM);
    CHECK_MSG(ct_contains(ct_errmsg(net), "limit:1 MiB is too small") && ct_contains(ct_errmsg(net), "batch 4096 needs"),
              "got: %s", ct_errmsg(net));
    ct_close(net);
    CHECK(ct_open_string(SYNTHETIC_NET, "m2.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.memory", "limit:lots") == CT_OK);
    CHECK(ct_prepare(net) == CT_ERR_CONFIG && ct_contains(ct_errmsg(net), "limit:MiB"));
    ct_close(net);
    CHECK(ct_open_string(SYNTHETIC_NET, "m3.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.memory", "limit:64") == CT_OK);
    CHECK(ct_prepare(net) == CT_OK);
    ct_close(net);

    CHECK(ct_errmsg(NULL) != NULL);
    ct_close(NULL);
}

int main(void)
{
    test_fit_and_evaluate();
    test_two_handles();
    test_stop_from_callback();
    test_errors();
    return ct_test_done();
}
