/* A program outside the project, built against an installed cutrain (cutrain.h and libcutrain.a
 * only): it trains a small network on synthetic data for one epoch and evaluates it. It exits 0
 * only when training returned CT_OK with a finite loss and evaluation saw images, so a link list
 * that misses a library fails at link time and a broken library fails here. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cutrain.h>

static const char *NET =
    "[data]\n"
    "format = synthetic\n"
    "shape = 8, 8, 1\n"
    "classes = 4\n"
    "count = 256\n"
    "test_count = 64\n"
    "[train]\n"
    "epochs = 1\n"
    "batch = 32\n"
    "learning_rate = 0.01\n"
    "[conv]\n"
    "type = conv2d\n"
    "filters = 4\n"
    "size = 3\n"
    "activation = relu\n"
    "[flat]\n"
    "type = flatten\n"
    "[out]\n"
    "type = dense\n"
    "units = 4\n";

static int on_epoch(const ct_epoch_stats *stats, void *user)
{
    *(double *)user = stats->loss;
    return 0;
}

static int fail(const char *what, ct_net *net, ct_status st)
{
    fprintf(stderr, "consumer: %s: %s: %s\n", what, ct_status_name(st), ct_errmsg(net));
    ct_close(net);
    return 1;
}

int main(void)
{
    printf("consumer: cutrain %s (header %s)\n", ct_version(), CT_VERSION_STRING);
    ct_net *net = NULL;
    ct_status st = ct_open_string(NET, "consumer.ini", &net);
    if (st != CT_OK)
        return fail("open", net, st);
    double loss = NAN;
    ct_callbacks cb = {.on_epoch = on_epoch, .user = &loss};
    if ((st = ct_fit(net, &cb)) != CT_OK)
        return fail("fit", net, st);
    /* devices = all: the GPU when there is one, else the CPU, which is where CI runs */
    printf("consumer: backend %s (%s)\n", ct_backend_name(net), ct_backend_reason(net));
    if (!isfinite(loss)) {
        fprintf(stderr, "consumer: training loss is %g\n", loss);
        ct_close(net);
        return 1;
    }
    ct_eval_result r;
    if ((st = ct_evaluate(net, &r)) != CT_OK)
        return fail("evaluate", net, st);
    if (r.images <= 0 || !isfinite(r.loss)) {
        fprintf(stderr, "consumer: evaluation saw %ld images, loss %g\n", r.images, r.loss);
        ct_close(net);
        return 1;
    }
    /* The handle-free calls: a missing file's message names it. */
    ct_images images;
    char msg[256];
    if (ct_read_idx_images("no-such-images.idx", &images, msg, sizeof msg) != CT_ERR_IO ||
        !strstr(msg, "no-such-images.idx")) {
        fprintf(stderr, "consumer: reading a missing IDX file: \"%s\"\n", msg);
        ct_close(net);
        return 1;
    }
    /* The doctor reaches the parts training does not (NCCL in a CUDA build): linking it checks
     * the link list covers the whole library. Without a GPU it reports why and returns CT_OK. */
    static ct_doctor_report report;
    if ((st = ct_doctor(&report)) != CT_OK)
        return fail("doctor", net, st);
    printf("consumer: doctor: %s\n", report.n_gpus ? (report.pass ? "pass" : "fail") : report.no_gpu_reason);
    char shape[32];
    ct_format_shape(8, 8, 1, shape, sizeof shape);
    printf("consumer: input %s, loss %.4f, test loss %.4f, accuracy %.3f on %ld images\n", shape, loss,
           r.loss, r.accuracy, r.images);
    ct_close(net);
    return 0;
}
