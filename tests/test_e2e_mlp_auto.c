/* fmnist_mlp.ini with batch = auto on the CPU, on the full Fashion-MNIST for its configured epochs,
 * still reaches the model table's 0.883: the search measures images/s, which on a CPU may keep
 * climbing up to the training set's size, but min_steps_per_epoch keeps it to a batch that trains
 * enough steps. Checks the batch against the bound, and the reason names the bound when it decided. */
#include "tests/e2e_common.h"

int main(void)
{
    static const char *const sets[] = {"train.batch", "auto", NULL};
    ct_net *net = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ct_status st = e2e_open("fmnist_mlp.ini", "cpu", sets, &net);
    ct_batch_search s = {0};
    if (st == CT_OK)
        st = ct_batch_search_get(net, &s);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return ct_test_done();
    }
    for (int i = 0; i < s.n_trials; i++)
        printf("  batch %6d  %10.0f images/s  %s\n", s.trials[i].batch, s.trials[i].images_per_s, s.trials[i].note);
    printf("%s\n", s.reason);
    long images = ct_train_images(net);
    int batch = ct_batch_size(net);
    CHECK(images == 60000 && batch == s.batch && strcmp(s.mode, "auto") == 0);
    /* the default bound: 60000 images / min_steps_per_epoch, a multiple of 8 */
    CHECK_MSG(s.steps_bound > 0 && s.steps_bound % 8 == 0 && batch <= s.steps_bound, "batch %d, bound %d", batch,
              s.steps_bound);
    for (int i = 0; i < s.n_trials; i++)
        CHECK_MSG(!s.trials[i].fits || s.trials[i].batch <= s.steps_bound, "batch %d measured over the bound %d",
                  s.trials[i].batch, s.steps_bound);
    CHECK_MSG(!s.bounded || ct_contains(s.reason, "min_steps_per_epoch"), "%s", s.reason);
    ct_callbacks cb = {.on_epoch = e2e_on_epoch};
    st = ct_fit(net, &cb);
    ct_eval_result r = {0};
    if (st == CT_OK)
        st = ct_evaluate(net, &r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("fmnist_mlp.ini batch = auto -> %d (%ld steps an epoch): test accuracy %.4f (target 0.883), %.1f s wall "
           "clock with the search\n", batch, (images + batch - 1) / batch, r.accuracy, seconds);
    CHECK(r.images == 10000);
    CHECK_MSG(r.accuracy >= 0.883, "batch = auto (%d) reached %.4f, below the target 0.883", batch, r.accuracy);
    ct_close(net);
    return ct_test_done();
}
