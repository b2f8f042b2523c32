/* batch = max | auto on the CPU under a memory = limit: cap, on real Fashion-MNIST subsets: max
 * picks the largest multiple of 8 whose plan fits the cap less the margin and trains; an injected
 * allocation failure backs off by a tenth; auto picks the smallest batch within 5% of the best it
 * measured (checked against the table it logs); a run after a search is bit-identical to one
 * configured with the batch found; lr_scaling; eval and predict refuse a search; auto never picks a
 * batch that leaves fewer than min_steps_per_epoch steps an epoch, and says when that bound decided;
 * lr_scaling = none above base_batch warns in the first --log record. */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cutrain.h"
#include "tests/cli_util.h"

enum { CAP_MIB = 8, LIMIT = 1024 };

/* A small MLP with dropout (so that a search which left its steps counted would show) on the first
 * LIMIT training images; `train` is the [train] section's extra lines. */
static void config_text(char *buf, size_t size, const char *train)
{
    const char *d = ct_fmnist_dir();
    snprintf(buf, size,
             "[data]\n"
             "format = idx\n"
             "train = %s/train-images-idx3-ubyte.gz\n"
             "train_labels = %s/train-labels-idx1-ubyte.gz\n"
             "test = %s/t10k-images-idx3-ubyte.gz\n"
             "test_labels = %s/t10k-labels-idx1-ubyte.gz\n"
             "normalize = 0.2860, 0.3530\n"
             "train_limit = %d\n"
             "test_limit = 256\n"
             "[train]\n"
             "epochs = 1\n"
             "optimizer = adam\n"
             "learning_rate = 0.001\n"
             "devices = cpu\n"
             "threads = 2\n"
             "memory = limit:%d\n"
             "%s"
             "[flat]\ntype = flatten\n"
             "[fc1]\ntype = dense\nunits = 128\nactivation = relu\n"
             "[drop]\ntype = dropout\nrate = 0.2\n"
             "[out]\ntype = dense\nunits = 10\n",
             d, d, d, d, LIMIT, CAP_MIB, train);
}

static ct_net *open_net(const char *train)
{
    char text[4096];
    config_text(text, sizeof text, train);
    ct_net *net = NULL;
    ct_status st = ct_open_string(text, "net.ini", &net);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    return net;
}

static long long plan_at(ct_net *net, int batch)
{
    ct_memory_info info;
    ct_status st = ct_memory_info_get(net, batch, &info);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    return st == CT_OK ? info.total : -1;
}

static const ct_batch_trial *chosen(const ct_batch_search *s)
{
    for (int i = 0; i < s->n_trials; i++)
        if (strcmp(s->trials[i].note, "chosen") == 0)
            return &s->trials[i];
    return NULL;
}

/* (a) the largest multiple of 8 that fits the cap less 10%, and the next one does not; it trains */
static int test_max(void)
{
    ct_net *net = open_net("batch = max\n");
    ct_batch_search s;
    ct_status st = ct_batch_search_get(net, &s);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return 0;
    }
    int b = ct_batch_size(net);
    long long budget = (long long)((double)(CAP_MIB << 20) * 0.9);
    CHECK(strcmp(s.mode, "max") == 0 && s.batch == b && s.budget == budget);
    CHECK_MSG(b >= 64 && b < LIMIT && b % 8 == 0, "batch %d", b);
    CHECK_MSG(plan_at(net, b) <= budget, "plan(%d) = %lld over %lld", b, plan_at(net, b), budget);
    CHECK_MSG(plan_at(net, b + 8) > budget, "plan(%d) = %lld within %lld", b + 8, plan_at(net, b + 8), budget);
    /* the table: B + 8 refused by its plan, then B confirmed by measured steps */
    const ct_batch_trial *win = chosen(&s);
    CHECK(s.n_trials == 2 && win == &s.trials[1]);
    CHECK(s.trials[0].batch == b + 8 && !s.trials[0].fits && s.trials[0].images_per_s < 0);
    CHECK(win && win->batch == b && win->fits && win->images_per_s > 0 && win->plan_bytes == plan_at(net, b));
    CHECK_MSG(ct_contains(s.reason, "largest multiple of 8"), "%s", s.reason);
    /* ct_memory_info's budget fields say the same */
    ct_memory_info info;
    CHECK(ct_memory_info_get(net, 0, &info) == CT_OK);
    CHECK(info.batch == b && info.max_batch == b && info.budget == budget && !info.exceeds_cap);
    CHECK(ct_memory_info_get(net, LIMIT, &info) == CT_OK && info.exceeds_cap);
    ct_eval_result r;
    st = ct_fit(net, NULL);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    CHECK(ct_steps_done(net) == (LIMIT + b - 1) / b);
    CHECK(ct_evaluate(net, &r) == CT_OK && r.accuracy > 0.3);
    ct_close(net);

    /* before preparing, summary's figures come from the same budget */
    net = open_net("batch = max\n");
    CHECK(ct_memory_info_get(net, 0, &info) == CT_OK);
    CHECK_MSG(info.max_batch == b && info.batch == b && info.budget == budget, "max_batch %d", info.max_batch);
    ct_close(net);
    return b;
}

/* (b) an allocation failure at the first batch tried: a tenth off, rounded down to 8, and it trains */
static void test_backoff(int b)
{
    ct_net *net = open_net("batch = max\n");
    CHECK(ct_inject_alloc_failures(net, 0, 1) == CT_OK);
    ct_batch_search s;
    ct_status st = ct_batch_search_get(net, &s);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    int expect = (b - b / 10) / 8 * 8;
    CHECK_MSG(ct_batch_size(net) == expect, "batch %d, expected %d", ct_batch_size(net), expect);
    CHECK(s.n_trials == 3 && !s.trials[1].fits && s.trials[1].batch == b &&
          strcmp(s.trials[1].note, "allocation failed") == 0 && chosen(&s) == &s.trials[2]);
    CHECK_MSG(ct_contains(s.reason, "less a tenth 1 time"), "%s", s.reason);
    st = ct_fit(net, NULL);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    ct_close(net);

    /* several failures in a row: each retry smaller, never below 8, and the run completes */
    net = open_net("batch = max\n");
    CHECK(ct_inject_alloc_failures(net, 0, 12) == CT_OK);
    st = ct_batch_search_get(net, &s);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st == CT_OK) {
        CHECK(ct_batch_size(net) < expect && ct_batch_size(net) >= 8);
        for (int i = 2; i < s.n_trials; i++) {
            int prev = s.trials[i - 1].batch, want = (prev - prev / 10) / 8 * 8;
            CHECK_MSG(s.trials[i].batch == (want < prev ? want : prev - 8), "row %d: %d after %d", i,
                      s.trials[i].batch, prev);
        }
        CHECK(ct_fit(net, NULL) == CT_OK);
    }
    ct_close(net);

    /* a fixed batch over the cap: out of memory, naming the device, the batch and its plan, and
     * pointing at batch = max */
    net = open_net("batch = 1024\n");
    CHECK(ct_prepare(net) == CT_ERR_NOMEM);
    CHECK_MSG(ct_contains(ct_errmsg(net), "batch 1024 needs ") && ct_contains(ct_errmsg(net), "on the CPU") &&
                  ct_contains(ct_errmsg(net), "use batch = max"), "%s", ct_errmsg(net));
    ct_close(net);

    /* a cap too small for batch 8 though the parameters fit (a convolution with few weights and
     * 64x64x32 outputs): a config error at the batch line, with the minimum */
    ct_net *tiny = NULL;
    static const char *const conv =
        "[data]\nformat = synthetic\nshape = 64, 64, 3\nclasses = 10\ncount = 64\ntest_count = 0\n"
        "[train]\nbatch = max\ndevices = cpu\nmemory = limit:4\n"
        "[c]\ntype = conv2d\nfilters = 32\nsize = 3\npadding = same\nactivation = relu\n"
        "[p]\ntype = avgpool\nsize = 64\n[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 10\n";
    CHECK(ct_open_string(conv, "net.ini", &tiny) == CT_OK);
    CHECK(ct_prepare(tiny) == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(ct_errmsg(tiny), "net.ini:8: [train] batch = max: batch 8 needs") &&
                  ct_contains(ct_errmsg(tiny), "raise the limit to at least limit:"), "%s", ct_errmsg(tiny));
    ct_close(tiny);

    /* a cap below the parameters alone (784 x 600 weights with Adam: 7.3 MiB): a config error at
     * the memory line, whatever the batch, giving the least limit that trains */
    static const char *const wide =
        "[data]\nformat = synthetic\nshape = 28, 28, 1\nclasses = 10\ncount = 64\ntest_count = 0\n"
        "[train]\nbatch = 32\ndevices = cpu\noptimizer = adam\nmemory = limit:2\n"
        "[flat]\ntype = flatten\n[fc]\ntype = dense\nunits = 600\n[out]\ntype = dense\nunits = 10\n";
    CHECK(ct_open_string(wide, "wide.ini", &tiny) == CT_OK);
    CHECK(ct_prepare(tiny) == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(ct_errmsg(tiny), "wide.ini:11: [train] memory = limit:2 MiB is below what the network "
                                           "needs before any batch: 7.3 MiB") &&
                  ct_contains(ct_errmsg(tiny), "batch 8 trains from limit:"), "%s", ct_errmsg(tiny));
    ct_close(tiny);
}

/* The first JSON record of a log: batch and batch_search rows. */
static int parse_log(const char *path, int *batch, int *rows_batch, double *rows_ips, int *rows_fits, int max_rows)
{
    long len = 0;
    char *text = (char *)ct_slurp(path, &len);
    if (!text)
        return -1;
    text[len] = '\0';
    char *end = strchr(text, '\n');
    if (end)
        *end = '\0';
    const char *b = strstr(text, "\"batch\": ");
    const char *rows = strstr(text, "\"batch_search\": [");
    int n = 0;
    if (b && rows && b < rows && sscanf(b, "\"batch\": %d", batch) == 1) {
        const char *p = rows;
        while (n < max_rows && (p = strstr(p + 1, "{\"batch\": ")) != NULL) {
            char ips[32] = "", fits[8] = "";
            if (sscanf(p, "{\"batch\": %d, \"images_per_s\": %31[^,], \"fits\": %7[a-z]}", &rows_batch[n], ips,
                       fits) != 3)
                break;
            rows_ips[n] = strcmp(ips, "null") == 0 ? -1.0 : atof(ips);
            rows_fits[n] = strcmp(fits, "true") == 0;
            n++;
        }
    }
    free(text);
    return n;
}

/* (c) auto through the command: the logged batch is the smallest within 5% of the best logged */
static void test_auto_logged(void)
{
    char text[4096];
    /* min_steps_per_epoch = 1: memory and images/s alone decide here; (g) tests the bound */
    config_text(text, sizeof text, "batch = auto\nbatch_search_seconds = 120\nmin_steps_per_epoch = 1\n");
    write_file("auto.ini", text);
    int rc = run("train --config auto.ini --set train.epochs=2 --log auto.jsonl");
    CHECK_MSG(rc == 0, "%s", out);
    CHECK_MSG(ct_contains(out, "batch = auto, memory budget 7.2 MiB; tried:") &&
                  ct_contains(out, "the smallest batch within 5% of the best measured") &&
                  ct_contains(out, "lr_scaling = none: learning_rate 0.001 is used as is at batch"), "%s", out);
    char path[256];
    snprintf(path, sizeof path, "%s/auto.jsonl", dir);
    int batch = 0, rb[CT_BATCH_TRIALS], rf[CT_BATCH_TRIALS];
    double ri[CT_BATCH_TRIALS];
    int n = parse_log(path, &batch, rb, ri, rf, CT_BATCH_TRIALS);
    CHECK_MSG(n >= 3, "%d rows in %s", n, path);
    double best = 0.0;
    int measured = 0, stale = 0, stopped_at = -1;
    for (int i = 0; i < n; i++) {
        if (!rf[i])
            continue;
        CHECK(ri[i] > 0);
        CHECK_MSG(stopped_at < 0, "row %d measured after the search should have stopped (row %d)", i, stopped_at);
        stale = ri[i] > best * 1.05 ? 0 : stale + 1;
        best = ri[i] > best ? ri[i] : best;
        if (stale >= 2)
            stopped_at = i;
        measured++;
    }
    CHECK(measured >= 3);
    int smallest = 0;
    for (int i = 0; i < n; i++)
        if (rf[i] && ri[i] >= 0.95 * best && (!smallest || rb[i] < smallest))
            smallest = rb[i];
    CHECK_MSG(batch == smallest && batch > 0, "logged batch %d, the rule gives %d", batch, smallest);
    /* candidates double from 32 */
    CHECK(rb[0] == 32 && (n < 2 || rb[1] == 64));
    /* every record carries the batch, only the first the search */
    long len = 0;
    char *log = (char *)ct_slurp(path, &len);
    if (log) {
        log[len] = '\0';
        char *second = strchr(log, '\n');
        second = second ? second + 1 : NULL;
        char want[32];
        snprintf(want, sizeof want, "\"batch\": %d, \"gpu_util\"", batch);
        CHECK_MSG(second && ct_contains(second, "\"epoch\": 2") && ct_contains(second, want) &&
                      !ct_contains(second, "batch_search"), "%s", log);
        CHECK(ct_contains(log, "\"batch_mode\": \"auto\""));
        free(log);
    }
    /* the API's table is the same rule */
    ct_net *net = open_net("batch = auto\nbatch_candidates = 16, 48, 96, 4096\nmin_steps_per_epoch = 1\n");
    ct_batch_search s;
    ct_status st = ct_batch_search_get(net, &s);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st == CT_OK) {
        CHECK(s.n_trials >= 3 && s.trials[0].batch == 16 && s.trials[1].batch == 48);
        /* 4096 is over batch_max (the 1024 images), and listed as not fitting, unmeasured */
        const ct_batch_trial *last = &s.trials[s.n_trials - 1];
        CHECK(last->batch != 4096 || (!last->fits && last->images_per_s < 0));
        double top = 0;
        for (int i = 0; i < s.n_trials; i++)
            top = s.trials[i].fits && s.trials[i].images_per_s > top ? s.trials[i].images_per_s : top;
        const ct_batch_trial *win = chosen(&s);
        CHECK(win && win->images_per_s >= 0.95 * top);
        for (int i = 0; i < s.n_trials && win; i++)
            if (s.trials[i].fits && s.trials[i].images_per_s >= 0.95 * top)
                CHECK(s.trials[i].batch >= win->batch);
        CHECK(ct_fit(net, NULL) == CT_OK);
    }
    ct_close(net);
}

/* A row of the table by its batch, or NULL. */
static const ct_batch_trial *row_of(const ct_batch_search *s, int batch)
{
    for (int i = 0; i < s->n_trials; i++)
        if (s->trials[i].batch == batch)
            return &s->trials[i];
    return NULL;
}

/* Searches under `train` with memory = grow (the bound, not the 8 MiB cap, is what limits here). */
static ct_net *search_grow(const char *train, ct_batch_search *s)
{
    ct_net *net = open_net(train);
    ct_status st = ct_set(net, "train.memory", "grow");
    if (st == CT_OK)
        st = ct_batch_search_get(net, s);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st != CT_OK)
        memset(s, 0, sizeof *s);
    return net;
}

/* (g) min_steps_per_epoch: on LIMIT = 1024 images auto never picks a batch with fewer steps an epoch
 * (in whole batches); candidates over the bound are listed unmeasured, and the reason names the key
 * when the bound ended the search; batch = max ignores it. */
static void test_steps_bound(int max_b)
{
    ct_batch_search s;
    /* doubling from 32: 1024 / 16 steps = 64, so 32 and 64 are measured and 128 is kept out */
    ct_net *net = search_grow("batch = auto\nmin_steps_per_epoch = 16\n", &s);
    CHECK_MSG(s.steps_bound == 64 && s.bounded, "bound %d, bounded %d", s.steps_bound, s.bounded);
    CHECK_MSG(s.batch == 32 || s.batch == 64, "batch %d", s.batch);
    CHECK(ct_batch_size(net) == s.batch && LIMIT / s.batch >= 16);
    CHECK(s.n_trials == 3 && s.trials[0].batch == 32 && s.trials[1].batch == 64);
    for (int i = 0; i < s.n_trials; i++)
        CHECK_MSG(s.trials[i].fits == (s.trials[i].batch <= 64) &&
                      (s.trials[i].images_per_s > 0) == (s.trials[i].batch <= 64),
                  "row %d: batch %d fits %d %.0f images/s", i, s.trials[i].batch, s.trials[i].fits,
                  s.trials[i].images_per_s);
    const ct_batch_trial *out = row_of(&s, 128);
    CHECK_MSG(out && ct_contains(out->note, "8 steps an epoch, under min_steps_per_epoch"), "%s",
              out ? out->note : "no row 128");
    CHECK_MSG(ct_contains(s.reason, "min_steps_per_epoch = 16 kept the batch at most 64 (1024 training images)"),
              "%s", s.reason);
    CHECK(ct_fit(net, NULL) == CT_OK && ct_steps_done(net) == (LIMIT + s.batch - 1) / s.batch);
    ct_close(net);

    /* a bound that is not a multiple of 8 rounds down to one: 1024 / 10 = 102 -> 96 */
    net = search_grow("batch = auto\nmin_steps_per_epoch = 10\nbatch_candidates = 32, 100, 200\n", &s);
    CHECK_MSG(s.steps_bound == 96 && s.bounded && s.batch == 32, "bound %d, bounded %d, batch %d", s.steps_bound,
              s.bounded, s.batch);
    out = row_of(&s, 100);
    CHECK(out && !out->fits && out->images_per_s < 0 && ct_contains(out->note, "10 steps an epoch"));
    CHECK(row_of(&s, 200) && !row_of(&s, 200)->fits);
    ct_close(net);

    /* every listed candidate over the bound: the bound itself is measured and chosen */
    net = search_grow("batch = auto\nmin_steps_per_epoch = 16\nbatch_candidates = 256, 512\n", &s);
    CHECK_MSG(s.batch == 64 && s.bounded && s.n_trials == 3 && s.trials[0].batch == 64 && s.trials[0].fits,
              "batch %d, %d rows", s.batch, s.n_trials);
    CHECK_MSG(ct_contains(s.reason, "min_steps_per_epoch = 16"), "%s", s.reason);
    ct_close(net);

    /* a bound above what images/s saturates at decides nothing, and the reason does not name it;
     * a bound at or over the training set (min_steps_per_epoch = 1) keeps every candidate */
    net = search_grow("batch = auto\nmin_steps_per_epoch = 1\nbatch_candidates = 32, 64\n", &s);
    CHECK(s.steps_bound == LIMIT && !s.bounded && !ct_contains(s.reason, "min_steps_per_epoch"));
    CHECK(s.n_trials == 2 && s.trials[0].fits && s.trials[1].fits);
    ct_close(net);

    /* fewer images than steps: batch 1, the most steps there are */
    net = search_grow("batch = auto\nmin_steps_per_epoch = 2000\nbatch_candidates = 8\n", &s);
    CHECK_MSG(s.steps_bound == 1 && s.batch == 1, "bound %d, batch %d", s.steps_bound, s.batch);
    ct_close(net);

    /* batch = max is asked for explicitly: the bound does not apply */
    net = open_net("batch = max\nmin_steps_per_epoch = 1000\n");
    CHECK(ct_batch_search_get(net, &s) == CT_OK);
    CHECK_MSG(s.batch == max_b && s.steps_bound == 0 && !s.bounded, "max picked %d, not %d", s.batch, max_b);
    ct_close(net);
}

/* (h) through the command: the first --log record says why (the bound) and warns that lr_scaling =
 * none keeps the rate above base_batch; the second record carries neither */
static void test_bound_logged(void)
{
    char text[4096];
    config_text(text, sizeof text,
                "batch = auto\nmin_steps_per_epoch = 16\nbatch_candidates = 64, 128\nbase_batch = 32\n");
    write_file("bound.ini", text);
    int rc = run("train --config bound.ini --set train.epochs=2 --set train.memory=grow --log bound.jsonl");
    CHECK_MSG(rc == 0, "%s", out);
    const char *warning = "batch 64 is above base_batch 32 with lr_scaling = none: learning_rate 0.001, tuned for "
                          "batch 32, takes 2x fewer steps an epoch and may converge worse; set lr_scaling = linear "
                          "or sqrt, or batch_max = 32";
    char want[512];
    snprintf(want, sizeof want, "cutrain: warning: %s\n", warning);
    CHECK_MSG(ct_contains(out, want), "%s", out);
    CHECK_MSG(ct_contains(out, "cutrain: batch 64: ") &&
                  ct_contains(out, "min_steps_per_epoch = 16 kept the batch at most 64 (1024 training images)"),
              "%s", out);
    long len = 0;
    char path[256];
    snprintf(path, sizeof path, "%s/bound.jsonl", dir);
    char *log = (char *)ct_slurp(path, &len);
    CHECK(log != NULL);
    if (!log)
        return;
    log[len] = '\0';
    char *second = strchr(log, '\n');
    if (second)
        *second++ = '\0';
    snprintf(want, sizeof want, "\"batch_warning\": \"%s\"", warning);
    CHECK_MSG(ct_contains(log, want), "%s", log);
    CHECK_MSG(ct_contains(log, "\"batch_reason\": \"batch 64: ") &&
                  ct_contains(log, "min_steps_per_epoch = 16 kept the batch at most 64"), "%s", log);
    CHECK_MSG(ct_contains(log, "{\"batch\": 128, \"images_per_s\": null, \"fits\": false}"), "%s", log);
    CHECK_MSG(second && ct_contains(second, "\"epoch\": 2") && !ct_contains(second, "batch_warning") &&
                  !ct_contains(second, "batch_reason"), "%s", second ? second : "one record");
    free(log);

    /* at or below base_batch: no warning */
    config_text(text, sizeof text, "batch = 32\nbase_batch = 32\n");
    write_file("base.ini", text);
    rc = run("train --config base.ini --log base.jsonl");
    CHECK_MSG(rc == 0 && !ct_contains(out, "warning"), "%s", out);
    CHECK(read_scratch("base.jsonl", text, sizeof text) > 0 && !ct_contains(text, "batch_warning"));
}

/* (d) fp32: training after batch = max resolved to B is bit-identical to batch = B */
static void test_identity(int b)
{
    char fixed[64];
    snprintf(fixed, sizeof fixed, "batch = %d\n", b);
    const char *trains[2] = {"batch = max\n", fixed};
    unsigned char *ckpt[2] = {NULL, NULL};
    long len[2] = {0, 0};
    ct_eval_result r[2];
    for (int k = 0; k < 2; k++) {
        ct_net *net = open_net(trains[k]);
        ct_status st = ct_fit(net, NULL);
        CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
        CHECK(ct_batch_size(net) == b);
        char path[256];
        snprintf(path, sizeof path, "%s/run%d.ckpt", dir, k);
        CHECK(ct_save(net, path) == CT_OK);
        CHECK(ct_evaluate(net, &r[k]) == CT_OK);
        ckpt[k] = ct_slurp(path, &len[k]);
        ct_close(net);
    }
    CHECK(ckpt[0] && ckpt[1] && len[0] == len[1] && len[0] > 0 && memcmp(ckpt[0], ckpt[1], (size_t)len[0]) == 0);
    CHECK(r[0].loss == r[1].loss && r[0].accuracy == r[1].accuracy);
    free(ckpt[0]);
    free(ckpt[1]);
}

static double epoch_lr;

static int record_lr(const ct_epoch_stats *s, void *user)
{
    (void)user;
    epoch_lr = s->learning_rate;
    return 0;
}

/* (e) lr_scaling: linear and sqrt from base_batch, none as given */
static void test_lr_scaling(int b)
{
    static const struct {
        const char *train;
        double factor;
    } cases[] = {
        {"batch = 64\nlr_scaling = linear\nbase_batch = 32\n", 2.0},
        {"batch = 64\nlr_scaling = sqrt\nbase_batch = 32\n", 1.4142135623730951},
        {"batch = 64\nlr_scaling = none\nbase_batch = 32\n", 1.0},
        {"batch = max\nlr_scaling = linear\nbase_batch = 64\n", -1.0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ct_net *net = open_net(cases[k].train);
        ct_callbacks cb = {.on_epoch = record_lr};
        epoch_lr = 0;
        ct_status st = ct_fit(net, &cb);
        CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
        double factor = cases[k].factor > 0 ? cases[k].factor : (double)b / 64.0;
        ct_lr_scaling_info lr;
        CHECK(ct_lr_scaling_get(net, &lr) == CT_OK);
        CHECK_NEAR(lr.factor, factor, 1e-12);
        CHECK_NEAR(lr.linear_factor, (double)ct_batch_size(net) / lr.base_batch, 1e-12);
        CHECK(lr.batch == ct_batch_size(net) && lr.learning_rate == 0.001f);
        /* the constant schedule's rate is the scaled one, as a float */
        CHECK_MSG(epoch_lr == (double)(float)(0.001f * factor), "lr %.9g, expected %.9g", epoch_lr,
                  (double)(float)(0.001f * factor));
        ct_close(net);
    }
}

/* (f) eval and predict have no batch to search for */
static void test_inference_refused(void)
{
    ct_net *net = open_net("batch = max\n");
    ct_eval_result r;
    CHECK(ct_evaluate(net, &r) == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(ct_errmsg(net), "net.ini:17: [train] batch = max: it finds a training batch") &&
                  ct_contains(ct_errmsg(net), "evaluation and prediction"), "%s", ct_errmsg(net));
    ct_close(net);
    net = open_net("batch = auto\n");
    unsigned char image[28 * 28] = {0};
    int cls;
    CHECK(ct_predict(net, image, 1, &cls, NULL) == CT_ERR_CONFIG);
    CHECK_MSG(ct_contains(ct_errmsg(net), "batch = auto"), "%s", ct_errmsg(net));
    ct_close(net);
    /* the command says so and exits 2 */
    char text[4096];
    config_text(text, sizeof text, "batch = 32\n");
    write_file("fixed.ini", text);
    int rc = run("eval --config fixed.ini --batch max");
    CHECK_MSG(rc == 2 && ct_contains(out, "batch = max: it finds a training batch"), "%d: %s", rc, out);
}

int main(void)
{
    if (!make_scratch("ct_batch_search")) {
        perror("mkdtemp");
        return 1;
    }
    int b = test_max();
    if (b > 0) {
        test_backoff(b);
        test_identity(b);
        test_lr_scaling(b);
        test_steps_bound(b);
    }
    test_auto_logged();
    test_bound_logged();
    test_inference_refused();
    remove_scratch();
    return ct_test_done();
}
