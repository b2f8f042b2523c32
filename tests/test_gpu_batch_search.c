/* batch = max | auto on the first GPU with fmnist_cnn.ini on the first 16384 training images: max
 * against the GPU's free memory and against a limit: cap (the plan of the batch found within the
 * budget, the next multiple of 8 beyond it), auto's rule against its table, and an epoch at each
 * batch found without running out of memory. Prints the tables (for the device check's note).
 * Exits 77 without a GPU. */
#include "tests/e2e_common.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"

static void print_search(const char *what, const ct_batch_search *s)
{
    gpu_report("%s: batch %d, budget %.1f MiB\n", what, s->batch, (double)s->budget / 1048576.0);
    for (int i = 0; i < s->n_trials; i++)
        gpu_report("  batch %6d  images/s %10.0f  plan %9.1f MiB  %s  %s\n", s->trials[i].batch,
               s->trials[i].images_per_s, (double)s->trials[i].plan_bytes / 1048576.0,
               s->trials[i].fits ? "fits" : "no  ", s->trials[i].note);
    gpu_report("  %s\n", s->reason);
    fflush(stdout);
}

static int on_epoch(const ct_epoch_stats *s, void *user)
{
    (void)user;
    gpu_report("  epoch %d: loss %.4f test_acc %.4f %.0f img/s\n", s->epoch, s->loss, s->test_accuracy, s->images_per_s);
    return 0;
}

/* Searches, checks the table, trains one epoch; returns the batch (0 on failure). */
static int search_and_train(const char *what, const char *const *sets)
{
    ct_net *net = NULL;
    ct_status st = e2e_open("fmnist_cnn.ini", "0", sets, &net);
    ct_batch_search s;
    if (st == CT_OK)
        st = ct_batch_search_get(net, &s);
    CHECK_MSG(st == CT_OK, "%s: %s", what, ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return 0;
    }
    print_search(what, &s);
    CHECK(strcmp(ct_backend_name(net), "cuda") == 0);
    const ct_batch_trial *win = NULL;
    double best = 0;
    for (int i = 0; i < s.n_trials; i++) {
        if (strcmp(s.trials[i].note, "chosen") == 0)
            win = &s.trials[i];
        if (s.trials[i].fits && s.trials[i].images_per_s > best)
            best = s.trials[i].images_per_s;
    }
    CHECK(win && win->batch == ct_batch_size(net) && win->fits && win->plan_bytes <= s.budget);
    if (win && strcmp(s.mode, "max") == 0) {
        for (int i = 0; i < s.n_trials; i++)
            if (s.trials[i].batch == win->batch + 8)
                CHECK(!s.trials[i].fits && s.trials[i].plan_bytes > s.budget);
    }
    if (win && strcmp(s.mode, "auto") == 0) {
        int measured = 0;
        for (int i = 0; i < s.n_trials; i++) {
            measured += s.trials[i].fits;
            if (s.trials[i].fits && s.trials[i].images_per_s >= 0.95 * best)
                CHECK(s.trials[i].batch >= win->batch);
        }
        CHECK(measured >= 3 && win->images_per_s >= 0.95 * best);
    }
    ct_callbacks cb = {.on_epoch = on_epoch};
    st = ct_fit(net, &cb);
    CHECK_MSG(st == CT_OK, "%s: the epoch after the search: %s", what, ct_errmsg(net));
    int batch = ct_batch_size(net);
    ct_close(net);
    return batch;
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    static const char *const free_max[] = {"train.batch", "max", "data.train_limit", "16384", "train.epochs", "1",
                                           NULL};
    static const char *const capped_max[] = {"train.batch", "max", "train.memory", "limit:1024", "data.train_limit",
                                             "16384", "train.epochs", "1", NULL};
    /* no new candidate after 30 s: the three the table needs take a few seconds, and the test stays
     * well inside ctest's timeout however slowly the larger ones bind; min_steps_per_epoch = 1 lets
     * the search climb to what memory allows (test_batch_search checks the bound) */
    static const char *const autos[] = {"train.batch", "auto", "data.train_limit", "16384", "train.epochs", "1",
                                        "train.batch_search_seconds", "30", "train.min_steps_per_epoch", "1",
                                        NULL};
    int b = search_and_train("max against free memory", free_max);
    CHECK(b == 16384);   /* fmnist_cnn at 16384 fits any GPU this runs on: batch_max (the images) caps it */
    b = search_and_train("max under limit:1024", capped_max);
    CHECK(b > 0 && b < 16384 && b % 8 == 0);
    b = search_and_train("auto", autos);
    CHECK(b >= 32);
    return ct_test_done();
}
#else
#include "tests/no_cuda_main.h"
#endif
