/* Checkpoint compatibility: tests/fixtures/compat_every_layer_v1.ckpt was written by cutrain
 * 0331922, the build before the restructure (tensors with dtypes, the backend split, layer
 * records), after one epoch of compat_every_layer.ini (every layer type) on 2048 Fashion-MNIST
 * images. This build must still load it and evaluate the first 2000 test images as that build did:
 * the same number of correct images, and the loss to 1e-5 relative (not bit for bit: another
 * machine's OpenBLAS may pick other kernels; on this one the kernels move it by about 1e-9).
 * A fresh network from the same config must not get there, so the load is what made the figures.
 * Exits 77 (skipped) when the Fashion-MNIST files are missing. */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <unistd.h>

#include "cutrain.h"
#include "tests/fmnist_form.h"
#include "tests/test_util.h"

#define FIXTURE_DIR CT_SOURCE_DIR "/tests/fixtures"
#define FIXTURE_INI FIXTURE_DIR "/compat_every_layer.ini"
#define FIXTURE_CKPT FIXTURE_DIR "/compat_every_layer_v1.ckpt"
#define FIXTURE_VERSION 1u

/* Recorded with the old build (ct_evaluate through libcutrain.a, threads = 2, printed with %.17g);
 * the accuracy is also the test accuracy the checkpoint was saved with. */
#define OLD_IMAGES 2000L
#define OLD_CORRECT 1077L
#define OLD_LOSS 1.536500696654687
#define OLD_EPOCH 1
#define OLD_STEP 32L

static int have_data(void)
{
    char path[1024];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", ct_fmnist_dir(), CT_FMNIST_KEYS[i][1]);
        if (access(path, R_OK) != 0) {
            printf("skipped: %s is missing (set CT_FMNIST_DIR)\n", path);
            return 0;
        }
    }
    return 1;
}

/* The fixture config with its placeholder data paths pointed at CT_FMNIST_DIR; NULL on failure. */
static ct_net *open_fixture(void)
{
    ct_net *net = NULL;
    ct_status st = ct_open_file(FIXTURE_INI, &net);
    if (st == CT_OK)
        st = ct_set_fmnist_data(net);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return NULL;
    }
    return net;
}

/* Correct images as a count: accuracy is correct / images, so rounding recovers it exactly. */
static long correct_of(const ct_eval_result *r)
{
    return (long)(r->accuracy * (double)r->images + 0.5);
}

/* The file really is the old format: a regenerated fixture would no longer test anything. */
static void test_fixture_version(void)
{
    long len = 0;
    unsigned char *bytes = ct_slurp(FIXTURE_CKPT, &len);
    CHECK_MSG(bytes != NULL, "cannot read %s", FIXTURE_CKPT);
    if (!bytes)
        return;
    CHECK(len > 12 && memcmp(bytes, "CUTRAIN\x1a", 8) == 0);
    uint32_t version = len > 12 ? (uint32_t)bytes[8] | (uint32_t)bytes[9] << 8 | (uint32_t)bytes[10] << 16 |
                                      (uint32_t)bytes[11] << 24 : 0;
    CHECK_MSG(version == FIXTURE_VERSION, "the fixture has format version %u, expected %u", (unsigned)version,
              FIXTURE_VERSION);
    free(bytes);
}

static void test_loads_and_evaluates(void)
{
    ct_net *net = open_fixture();
    if (!net)
        return;
    int epoch = -1;
    long step = -1;
    double saved_accuracy = -1;
    CHECK_MSG(ct_checkpoint_info(net, FIXTURE_CKPT, &epoch, &step, &saved_accuracy) == CT_OK, "%s", ct_errmsg(net));
    CHECK_MSG(epoch == OLD_EPOCH && step == OLD_STEP, "epoch %d step %ld", epoch, step);
    /* stored as a double in the file: exact, whatever the kernels */
    CHECK_MSG(saved_accuracy == (double)OLD_CORRECT / (double)OLD_IMAGES, "saved with test accuracy %.17g",
              saved_accuracy);

    ct_status st = ct_load(net, FIXTURE_CKPT);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    CHECK(ct_epochs_done(net) == OLD_EPOCH && ct_steps_done(net) == OLD_STEP);
    ct_eval_result r = {0};
    if (st == CT_OK)
        st = ct_evaluate(net, &r);
    CHECK_MSG(st == CT_OK, "%s", ct_errmsg(net));
    printf("fixture: loss %.17g accuracy %.17g (%ld of %ld images); old build: loss %.17g, %ld correct\n", r.loss,
           r.accuracy, correct_of(&r), r.images, OLD_LOSS, OLD_CORRECT);
    CHECK(r.images == OLD_IMAGES);
    CHECK_MSG(correct_of(&r) == OLD_CORRECT, "%ld correct, the old build %ld", correct_of(&r), OLD_CORRECT);
    CHECK_NEAR(r.loss, OLD_LOSS, 1e-5 * OLD_LOSS);
    ct_close(net);
}

/* Without the checkpoint the same config evaluates far from the recorded figures. */
static void test_fresh_network_differs(void)
{
    ct_net *net = open_fixture();
    if (!net)
        return;
    ct_eval_result r = {0};
    CHECK_MSG(ct_evaluate(net, &r) == CT_OK, "%s", ct_errmsg(net));
    printf("fresh network: loss %.6f accuracy %.4f\n", r.loss, r.accuracy);
    CHECK_MSG(correct_of(&r) < OLD_CORRECT - 200, "an untrained network got %ld correct", correct_of(&r));
    CHECK_MSG(fabs(r.loss - OLD_LOSS) > 0.1, "an untrained network has loss %.6f", r.loss);
    ct_close(net);
}

int main(void)
{
    if (!have_data())
        return 77;
    test_fixture_version();
    test_loads_and_evaluates();
    test_fresh_network_differs();
    return ct_test_done();
}
