/* fmnist_cnn.ini with [train] winograd on and off, on the same 12,000 training images for 3 epochs,
 * on the CPU: its conv2 (3x3, 32 -> 64 channels) runs oneDNN's Winograd in the first run and the
 * direct kernels in the second. Winograd's test accuracy (10,000 test images) is within 0.01 of
 * the direct run's. Where oneDNN has the Winograd kernels (x86-64 with AVX-512, in a build with
 * oneDNN) the two runs' test losses must differ, the sign that the first run did take them; elsewhere
 * both run the direct kernels and agree bit for bit. */
#include <math.h>

#include "tests/e2e_common.h"

int main(void)
{
    static const char *const on[] = {"data.train_limit", "12000", "train.epochs", "3", "train.threads", "2",
                                     "train.winograd", "on", NULL};
    static const char *const off[] = {"data.train_limit", "12000", "train.epochs", "3", "train.threads", "2",
                                      "train.winograd", "off", NULL};
    ct_eval_result a = {0}, b = {0};
    double sa = 0, sb = 0;
    if (e2e_train_with("fmnist_cnn.ini", on, &a, &sa) == CT_OK)
        printf("winograd on: test accuracy %.4f, loss %.6f, %.1f s\n", a.accuracy, a.loss, sa);
    if (e2e_train_with("fmnist_cnn.ini", off, &b, &sb) == CT_OK)
        printf("winograd off: test accuracy %.4f, loss %.6f, %.1f s\n", b.accuracy, b.loss, sb);
    CHECK(a.images == 10000 && b.images == 10000);
    CHECK_MSG(b.accuracy > 0.8, "the direct run reached only %.4f", b.accuracy);
    CHECK_MSG(fabs(a.accuracy - b.accuracy) <= 0.01, "winograd %.4f against direct %.4f: more than 0.01 apart",
              a.accuracy, b.accuracy);
    if (ct_test_winograd_runs())
        CHECK_MSG(a.loss != b.loss, "winograd on and off gave the same test loss %.9g: Winograd did not run",
                  a.loss);
    else
        CHECK_MSG(a.loss == b.loss, "no Winograd here, yet the runs differ: %.9g against %.9g", a.loss, b.loss);
    return ct_test_done();
}
