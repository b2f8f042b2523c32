/* The train loop's time split and the monitor's figures in the epoch stats, on the CPU with real
 * Fashion-MNIST images: the four shares add up to the loop's wall time within 5%, the input wait
 * share is the one the pipeline reports, the verdict follows the shares, and the GPU figures are
 * unknown (no GPU trains) while the CPU's are known. The verdict's wording on fixed shares. */
#include <stdlib.h>

#include "cutrain.h"
#include "train/time_split.h"
#include "tests/test_util.h"

static const char *NET_FMT =
    "[data]\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
    "train_limit = 4096\nnormalize = 0.2860, 0.3530\naugment = crop:2, flip\n"
    "[train]\nepochs = 2\nbatch = 64\noptimizer = adam\nlearning_rate = 0.002\ndevices = cpu\nthreads = 1\n"
    "[conv]\ntype = conv2d\nfilters = 4\nsize = 3\nactivation = relu\n"
    "[pool]\ntype = maxpool\n"
    "[flat]\ntype = flatten\n"
    "[out]\ntype = dense\nunits = 10\n";

typedef struct seen {
    int epochs;
    ct_epoch_stats last;
    int sums_ok, unknown_gpu, known_cpu, verdict_ok;
} seen;

static int on_epoch(const ct_epoch_stats *s, void *user)
{
    seen *v = user;
    const ct_time_split *t = &s->time_split;
    double sum = t->input_wait + t->copy + t->compute + t->comm;
    v->epochs++;
    v->last = *s;
    fprintf(stderr, "epoch %d: input_wait %.4f copy %.4f compute %.4f comm %.4f (sum %.4f); %s; cpu %.3f cores, "
            "machine %.1f%%\n", s->epoch, t->input_wait, t->copy, t->compute, t->comm, sum, s->time_verdict,
            s->cpu_util, s->cpu_util_machine);
    v->sums_ok += fabs(sum - 1.0) <= 0.05 && t->input_wait >= 0 && t->copy >= 0 && t->compute > 0 && t->comm >= 0 &&
                  fabs(t->input_wait - s->input_wait_share) < 1e-9;
    v->unknown_gpu += s->gpu_util < 0 && t->device_busy < 0 && s->gpu_mem_mib < 0 && s->power_w < 0 && s->sm_clock_mhz < 0 &&
                      s->monitor_note[0] == '\0';
    /* a window under 0.1 s is too short for the process's CPU time (100 ticks a second) */
    v->known_cpu += (s->cpu_util >= 0 || s->images_per_s * 0.1 > 4096) && s->cpu_util_machine >= 0 &&
                    s->cpu_util_machine <= 100.0;
    /* the verdict names the largest bounding part */
    const char *want = t->input_wait >= 0.2 ? "input-bound: " : t->copy >= 0.2 ? "copy-bound: "
                       : t->comm >= 0.2 ? "communication-bound: " : "compute-bound: ";
    v->verdict_ok += strncmp(s->time_verdict, want, strlen(want)) == 0;
    return 0;
}

static seen train(const char *pipeline)
{
    char text[2048];
    snprintf(text, sizeof text, NET_FMT, ct_fmnist_dir(), ct_fmnist_dir());
    seen v = {0};
    ct_net *net = NULL;
    ct_status st = ct_open_string(text, pipeline, &net);
    if (st == CT_OK)
        st = ct_set(net, "data.pipeline", pipeline);
    /* whatever NVML the machine has, a CPU run watches no GPU */
    ct_callbacks cb = {.on_epoch = on_epoch, .user = &v};
    if (st == CT_OK)
        st = ct_fit(net, &cb);
    CHECK_MSG(st == CT_OK, "%s: %s", pipeline, ct_errmsg(net));
    ct_close(net);
    CHECK(v.epochs == 2);
    CHECK_MSG(v.sums_ok == 2, "%s: the shares do not add up to the wall time", pipeline);
    CHECK(v.unknown_gpu == 2);
    CHECK(v.known_cpu == 2);
    CHECK_MSG(v.verdict_ok == 2, "%s: verdict \"%s\"", pipeline, v.last.time_verdict);
    return v;
}

static void test_verdicts(void)
{
    char buf[192];
    ct_time_split s = {.input_wait = 0.61, .copy = 0.02, .compute = 0.37};
    ct_time_split_verdict(&s, CT_INPUT_WORKERS, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "input-bound: 61% waiting for input; raise workers or use augment_on = gpu") == 0, "%s", buf);
    ct_time_split_verdict(&s, CT_INPUT_SYNC, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "input-bound: 61% waiting for input; use pipeline = parallel") == 0, "%s", buf);
    ct_time_split_verdict(&s, CT_INPUT_ON_CALLER, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "input-bound: 61% waiting for input; set workers = N to make batches ahead on their own "
                          "threads") == 0, "%s", buf);
    s = (ct_time_split){.input_wait = 0.19, .copy = 0.01, .compute = 0.80};
    ct_time_split_verdict(&s, CT_INPUT_WORKERS, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "compute-bound: 80% computing, 19% waiting for input (moderately input-bound)") == 0, "%s",
              buf);
    s = (ct_time_split){.input_wait = 0.01, .copy = 0.30, .compute = 0.69};
    ct_time_split_verdict(&s, CT_INPUT_WORKERS, buf, sizeof buf);
    CHECK_MSG(ct_contains(buf, "copy-bound: 30% copying"), "%s", buf);
    s = (ct_time_split){.input_wait = 0.0, .copy = 0.0, .compute = 0.55, .comm = 0.45};
    ct_time_split_verdict(&s, CT_INPUT_WORKERS, buf, sizeof buf);
    CHECK_MSG(ct_contains(buf, "communication-bound: 45%"), "%s", buf);
    s = (ct_time_split){.input_wait = 0.04, .compute = 0.96};
    ct_time_split_verdict(&s, CT_INPUT_WORKERS, buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "compute-bound: 96% computing") == 0, "%s", buf);

    /* shares of the wall time, clamped */
    ct_epoch_stats es = {.input_workers = 2};
    ct_time_acc acc = {.input_wait = 1.0, .copy = 0.5, .compute = 2.5, .comm = 0.0, .device_busy = -1.0};
    ct_time_split_fill(&acc, 4.0, &es);
    CHECK(es.time_split.device_busy < 0);
    CHECK_NEAR(es.time_split.input_wait, 0.25, 1e-12);
    CHECK_NEAR(es.time_split.copy, 0.125, 1e-12);
    CHECK_NEAR(es.time_split.compute, 0.625, 1e-12);
    CHECK(ct_contains(es.time_verdict, "input-bound: 25% waiting for input; raise workers"));
    es = (ct_epoch_stats){.input_on_caller = 1};   /* the advice follows the pipeline the stats name */
    ct_time_split_fill(&acc, 4.0, &es);
    CHECK_MSG(ct_contains(es.time_verdict, "input-bound: 25% waiting for input; set workers = N"), "%s",
              es.time_verdict);
    es = (ct_epoch_stats){0};
    ct_time_split_fill(&acc, 4.0, &es);
    CHECK_MSG(ct_contains(es.time_verdict, "input-bound: 25% waiting for input; use pipeline = parallel"), "%s",
              es.time_verdict);
    acc.device_busy = 3.0;
    ct_time_split_fill(&acc, 4.0, &es);
    CHECK_NEAR(es.time_split.device_busy, 0.75, 1e-12);
    acc.compute = -0.1; /* clock noise where compute is tiny */
    ct_time_split_fill(&acc, 0.0, &es);
    CHECK(es.time_split.compute == 0.0 && es.time_split.input_wait == 0.0);
}

int main(void)
{
    test_verdicts();
    train("parallel");
    train("sync");
    return ct_test_done();
}
