/* End-to-end training of a model of the zoo on the full Fashion-MNIST, through the public API:
 * prints each epoch and asserts the final test accuracy reaches the target. */
#ifndef CT_E2E_COMMON_H
#define CT_E2E_COMMON_H

#include <time.h>

#include "cutrain.h"
#include "tests/fmnist_form.h"
#include "tests/test_util.h"

/* What the epochs reported: the precision they trained in ("" before the first). */
typedef struct e2e_seen {
    char precision[8];
} e2e_seen;

static int e2e_on_epoch(const ct_epoch_stats *s, void *user)
{
    e2e_seen *seen = user;
    printf("epoch %d/%d: loss %.4f train_acc %.4f test_acc %.4f %.0f img/s %.1f s", s->epoch, s->epochs,
           s->loss, s->train_accuracy, s->test_accuracy, s->images_per_s, s->seconds);
    if (s->precision && strcmp(s->precision, "fp32") != 0)
        printf(" %s", s->precision);
    if (s->loss_scale > 0)
        printf(" loss_scale %g skipped %ld", s->loss_scale, s->skipped_steps);
    printf("\n");
    fflush(stdout);
    if (seen)
        snprintf(seen->precision, sizeof seen->precision, "%s", s->precision ? s->precision : "?");
    return 0;
}

/* Opens models/`model` with the data from CT_FMNIST_DIR, `devices`, and the overrides in `sets`
 * (NULL-terminated key, value pairs, or NULL). *net is set even on failure (ct_close it). */
static inline ct_status e2e_open(const char *model, const char *devices, const char *const *sets, ct_net **net)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s", CT_SOURCE_DIR, model);
    *net = NULL;
    ct_status st = ct_open_file(path, net);
    /* the data may live elsewhere than the package's folder (CT_FMNIST_DIR) */
    if (st == CT_OK)
        st = ct_set_fmnist_data(*net);
    if (st == CT_OK)
        st = ct_set(*net, "train.devices", devices);
    for (const char *const *kv = sets; st == CT_OK && kv && kv[0]; kv += 2)
        st = ct_set(*net, kv[0], kv[1]);
    return st;
}

/* Trains on `devices` ("cpu", or "0" for the first GPU, which must then train: no fallback to the
 * CPU, and graph-captured steps throughout, no fallback to direct launches), with the overrides in
 * `sets` (NULL-terminated key, value pairs, or NULL); a train.precision among them must be the one
 * the epochs report. */
static inline int e2e_run_on_with(const char *model, double target, const char *devices, const char *const *sets)
{
    ct_net *net = NULL;
    ct_status st = e2e_open(model, devices, sets, &net);
    const char *precision = "fp32";
    for (const char *const *kv = sets; kv && kv[0]; kv += 2)
        if (strcmp(kv[0], "train.precision") == 0)
            precision = kv[1];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    e2e_seen seen = {0};
    ct_callbacks cb = {.on_epoch = e2e_on_epoch, .user = &seen};
    if (st == CT_OK)
        st = ct_fit(net, &cb);
    if (st == CT_OK)
        CHECK_MSG(strcmp(seen.precision, precision) == 0, "trained in '%s', not %s", seen.precision, precision);
    ct_eval_result r = {0};
    if (st == CT_OK)
        st = ct_evaluate(net, &r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    printf("backend %s (%s)\n", ct_backend_name(net), ct_backend_reason(net));
    if (ct_backend_note(net)[0])
        printf("note: %s\n", ct_backend_note(net));
    if (strcmp(devices, "cpu") != 0) {
        CHECK_MSG(strcmp(ct_backend_name(net), "cuda") == 0, "devices = %s trained on %s", devices,
                  ct_backend_name(net));
        /* a GPU run trains the captured step: graphs on from the start, and no note, which the
         * backend leaves when capture failed and it fell back to direct launches (or when it ran
         * otherwise than the config asked) */
        CHECK_MSG(strstr(ct_backend_reason(net), "graph on") != NULL, "the GPU trained without graphs: %s",
                  ct_backend_reason(net));
        CHECK_MSG(ct_backend_note(net)[0] == '\0', "the GPU run left a note: %s", ct_backend_note(net));
    }
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%s: test accuracy %.4f (target %.3f), test loss %.4f, %ld test images, %.1f s wall clock\n",
           model, r.accuracy, target, r.loss, r.images, seconds);
    CHECK(r.images == 10000);
    CHECK_MSG(r.accuracy >= target, "%s reached %.4f, below the target %.3f", model, r.accuracy, target);
    ct_close(net);
    return ct_test_done();
}

static inline int e2e_run_on(const char *model, double target, const char *devices)
{
    return e2e_run_on_with(model, target, devices, NULL);
}

/* Trains `model` on the CPU with the data from CT_FMNIST_DIR and the overrides in `sets`
 * (NULL-terminated key, value pairs); *r gets the final test figures. CT_OK or the failure. */
static inline ct_status e2e_train_with(const char *model, const char *const *sets, ct_eval_result *r, double *seconds)
{
    ct_net *net = NULL;
    ct_status st = e2e_open(model, "cpu", sets, &net);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ct_callbacks cb = {.on_epoch = e2e_on_epoch};
    if (st == CT_OK)
        st = ct_fit(net, &cb);
    if (st == CT_OK)
        st = ct_evaluate(net, r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    ct_close(net);
    return st;
}

/* Two runs of `model` on the CPU on the first 12,000 training images for 3 epochs on 2 threads (the
 * CI-sized comparison), once with `key` = a and once with `key` = b; prints each and fills *ra, *rb,
 * which must both cover the 10,000 test images. */
static inline void e2e_train_pair(const char *model, const char *key, const char *a, const char *b, ct_eval_result *ra,
                                  ct_eval_result *rb)
{
    const char *values[2] = {a, b};
    ct_eval_result *out[2] = {ra, rb};
    for (int i = 0; i < 2; i++) {
        const char *const sets[] = {"data.train_limit", "12000", "train.epochs", "3", "train.threads", "2",
                                    key, values[i], NULL};
        double seconds = 0;
        *out[i] = (ct_eval_result){0};
        if (e2e_train_with(model, sets, out[i], &seconds) == CT_OK)
            printf("%s = %s: test accuracy %.4f, loss %.6f, %.1f s\n", key, values[i], out[i]->accuracy,
                   out[i]->loss, seconds);
    }
    CHECK(ra->images == 10000 && rb->images == 10000);
}

static inline int e2e_run(const char *model, double target)
{
    return e2e_run_on(model, target, "cpu");
}

#endif
