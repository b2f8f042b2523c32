/* Checkpoints through the public API, on a network with every layer type: training N epochs in one run equals training k, saving,
 * loading into a fresh handle and training the rest, byte for byte (also from the middle of an
 * epoch); mismatched and damaged checkpoints are refused and nothing is overwritten. */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cutrain.h"
#include "tests/test_util.h"

static const char *NET =
    "[data]\nformat = synthetic\nshape = 8, 8, 1\nclasses = 4\ncount = 400\ntest_count = 100\n"
    "augment = crop:1, flip\n"
    "[train]\nepochs = 2\nbatch = 32\noptimizer = adamw\nlearning_rate = 0.01\nschedule = cosine\n"
    "warmup = 0.5\ndevices = cpu\n"
    "[conv]\ntype = conv2d\nfilters = 6\nsize = 3\npadding = same\n"
    "[bn]\ntype = batchnorm\n"
    "[relu]\ntype = activation\nactivation = relu\n"
    "[c2]\ntype = conv2d\nfilters = 6\nsize = 3\npadding = same\nactivation = tanh\n"
    "[res]\ntype = add\ninputs = relu, c2\n"
    "[pool]\ntype = maxpool\n"
    "[avg]\ntype = avgpool\n"
    "[flat]\ntype = flatten\n"
    "[drop]\ntype = dropout\nrate = 0.2\n"
    "[out]\ntype = dense\nunits = 4\n";

static char dir[64];
static const char *precision = "fp32";   /* of the networks open_net opens */

/* name in the test folder, prefixed by the precision under test */
static char *path_in(const char *name)
{
    static char buf[4][256];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 256, "%s/%s-%s", dir, precision, name);
    return p;
}

static int same_file(const char *a, const char *b)
{
    long la = 0, lb = 0;
    unsigned char *pa = ct_slurp(a, &la), *pb = ct_slurp(b, &lb);
    int same = pa && pb && la == lb && memcmp(pa, pb, (size_t)la) == 0;
    free(pa);
    free(pb);
    return same;
}

static ct_net *open_net(const char *epochs)
{
    ct_net *net = NULL;
    CHECK(ct_open_string(NET, "resume.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.epochs", epochs) == CT_OK);
    CHECK(ct_set(net, "train.precision", precision) == CT_OK);
    /* fp16: a small growth interval, so the scale doubles (and its clean-step count matters) within
     * the run and climbs until steps overflow and are skipped */
    if (strcmp(precision, "fp16") == 0)
        CHECK(ct_set(net, "train.loss_scale_growth_steps", "5") == CT_OK &&
              ct_set(net, "train.loss_scale_init", "65536") == CT_OK);
    return net;
}

static int stop_at_step(ct_net *net, long steps_done, void *user)
{
    (void)net;
    return steps_done == *(long *)user;
}

static int stop_after_epoch(const ct_epoch_stats *s, void *user)
{
    (void)s; (void)user;
    return 1;
}

static void test_exact_resume(void)
{
    /* reference: 2 epochs straight */
    ct_net *a = open_net("2");
    CHECK(ct_fit(a, NULL) == CT_OK);
    CHECK(ct_save(a, path_in("a.ckpt")) == CT_OK);
    ct_close(a);

    /* stopped after epoch 1 (the schedule still spans 2), saved; a new handle trains the second */
    ct_net *b = open_net("2");
    ct_callbacks after_one = {.on_epoch = stop_after_epoch};
    CHECK(ct_fit(b, &after_one) == CT_ERR_STOPPED);
    CHECK(ct_save(b, path_in("b1.ckpt")) == CT_OK);
    ct_close(b);
    ct_net *c = open_net("2");
    CHECK(ct_load(c, path_in("b1.ckpt")) == CT_OK);
    CHECK(ct_epochs_done(c) == 1 && ct_steps_done(c) == 13);
    CHECK(ct_fit(c, NULL) == CT_OK);
    CHECK(ct_save(c, path_in("c.ckpt")) == CT_OK);
    ct_close(c);
    CHECK_MSG(same_file(path_in("a.ckpt"), path_in("c.ckpt")), "resumed after epoch 1 differs from a straight run");

    /* stopped in the middle of epoch 2 (step 20 of 26), resumed from there */
    ct_net *d = open_net("2");
    long stop = 20;
    ct_callbacks cb = {.after_step = stop_at_step, .user = &stop};
    CHECK(ct_fit(d, &cb) == CT_ERR_STOPPED);
    CHECK(ct_steps_done(d) == 20);
    CHECK(ct_save(d, path_in("d20.ckpt")) == CT_OK);
    ct_close(d);
    ct_net *e = open_net("2");
    CHECK(ct_load(e, path_in("d20.ckpt")) == CT_OK);
    CHECK(ct_fit(e, NULL) == CT_OK);
    CHECK(ct_steps_done(e) == 26);
    CHECK(ct_save(e, path_in("e.ckpt")) == CT_OK);
    ct_close(e);
    CHECK_MSG(same_file(path_in("a.ckpt"), path_in("e.ckpt")), "resumed mid-epoch differs from a straight run");

    int epoch = 0;
    long step = 0;
    double acc = 0;
    ct_net *f = open_net("2");
    CHECK(ct_checkpoint_info(f, path_in("a.ckpt"), &epoch, &step, &acc) == CT_OK);
    CHECK_MSG(epoch == 2 && step == 26 && acc > 0.4, "epoch %d step %ld accuracy %g", epoch, step, acc);
    ct_close(f);
}

/* An fp16-trained checkpoint evaluates in fp32 and bf16, and an fp32 one in fp16: the masters
 * carry over, the half copy is rounded from them at load. */
static void test_cross_precision(void)
{
    static const char *const from[] = {"fp16", "fp32"}, *const into[] = {"fp32", "bf16", "fp16"};
    for (int i = 0; i < 2; i++) {
        char ckpt[256];
        precision = from[i];
        snprintf(ckpt, sizeof ckpt, "%s", path_in("a.ckpt"));
        ct_eval_result same, other;
        ct_net *a = open_net("2");
        CHECK(ct_load(a, ckpt) == CT_OK);
        CHECK(ct_evaluate(a, &same) == CT_OK);
        ct_close(a);
        for (int j = 0; j < 3; j++) {
            precision = into[j];
            ct_net *b = open_net("2");
            ct_status st = ct_load(b, ckpt);
            CHECK_MSG(st == CT_OK, "%s checkpoint into %s: %s", from[i], into[j], ct_errmsg(b));
            CHECK(st == CT_OK && ct_evaluate(b, &other) == CT_OK);
            int epoch = 0;
            long step = 0;
            CHECK(st == CT_OK && ct_epochs_done(b) == 2 && ct_steps_done(b) == 26);
            (void)epoch; (void)step;
            /* rounding activations to half moves a few borderline predictions at most */
            CHECK_MSG(st == CT_OK && fabs(other.accuracy - same.accuracy) <= 0.03,
                      "%s checkpoint: accuracy %g in %s, %g in %s", from[i], same.accuracy, from[i], other.accuracy,
                      into[j]);
            printf("%s checkpoint: test accuracy %.4f in %s, %.4f in %s\n", from[i], same.accuracy, from[i],
                   other.accuracy, into[j]);
            ct_close(b);
        }
    }
    precision = "fp32";
}

static void test_refusals(void)
{
    /* a config whose conv has more filters: the layer is named with both shapes */
    ct_net *net = NULL;
    CHECK(ct_open_string(NET, "other.ini", &net) == CT_OK);
    CHECK(ct_set(net, "conv.filters", "8") == CT_OK && ct_set(net, "c2.filters", "8") == CT_OK);
    CHECK(ct_load(net, path_in("a.ckpt")) == CT_ERR_DATA);
    CHECK_MSG(ct_contains(ct_errmsg(net), "[conv]") && ct_contains(ct_errmsg(net), "8x8x8") &&
              ct_contains(ct_errmsg(net), "8x8x6"), "got: %s", ct_errmsg(net));
    ct_close(net);

    /* a truncated copy and a corrupted copy */
    long len = 0;
    unsigned char *bytes = ct_slurp(path_in("a.ckpt"), &len);
    CHECK(bytes != NULL && len > 100);
    FILE *f = fopen(path_in("short.ckpt"), "wb");
    fwrite(bytes, 1, (size_t)len / 2, f);
    fclose(f);
    bytes[len / 3] ^= 0x40;
    f = fopen(path_in("bad.ckpt"), "wb");
    fwrite(bytes, 1, (size_t)len, f);
    fclose(f);
    free(bytes);
    net = open_net("2");
    CHECK(ct_load(net, path_in("short.ckpt")) == CT_ERR_DATA);
    CHECK_MSG(ct_contains(ct_errmsg(net), "short.ckpt") && ct_contains(ct_errmsg(net), "truncated"), "got: %s",
              ct_errmsg(net));
    CHECK(ct_load(net, path_in("bad.ckpt")) == CT_ERR_DATA);
    CHECK_MSG(ct_contains(ct_errmsg(net), "bad.ckpt") && ct_contains(ct_errmsg(net), "CRC"), "got: %s", ct_errmsg(net));
    CHECK(ct_load(net, path_in("missing.ckpt")) == CT_ERR_IO);
    /* saving into a folder that does not exist fails and creates nothing */
    CHECK(ct_save(net, "/nonexistent-folder/x.ckpt") == CT_ERR_IO);
    ct_close(net);
}

static void test_predict(void)
{
    ct_net *net = open_net("2");
    CHECK(ct_load(net, path_in("a.ckpt")) == CT_OK);
    int h, w, c, k;
    CHECK(ct_input_shape(net, &h, &w, &c, &k) == CT_OK && h == 8 && w == 8 && c == 1 && k == 4);
    unsigned char images[3 * 64];
    for (int i = 0; i < 3 * 64; i++)
        images[i] = (unsigned char)(i * 37 % 256);
    int classes[3];
    float probs[3];
    CHECK(ct_predict(net, images, 3, classes, probs) == CT_OK);
    for (int i = 0; i < 3; i++)
        CHECK(classes[i] >= 0 && classes[i] < 4 && probs[i] >= 0.25f && probs[i] <= 1.0f);
    ct_close(net);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ct_resume_XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    /* exact in every precision: fp16's loss scaler (scale, clean steps, Adam's step count) resumes too */
    static const char *const precisions[] = {"fp16", "bf16", "fp32"};
    for (int i = 0; i < 3; i++) {
        precision = precisions[i];
        printf("precision %s\n", precision);
        test_exact_resume();
    }
    test_cross_precision();
    test_refusals();
    test_predict();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return ct_test_done();
}
