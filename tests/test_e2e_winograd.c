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
    ct_eval_result a, b;
    e2e_train_pair("fmnist_cnn.ini", "train.winograd", "on", "off", &a, &b);
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
