/* fmnist_convnet.ini (5x5 convolutions, dense 1024, dropout) on the CPU, on the first 12,000
 * training images for 3 epochs, reaches at least 0.865 test accuracy on the 10,000 test images
 * (measured 2026-12-01: 0.8751, 5.4 minutes on a loaded 2-core machine). Cheap enough for CI; the
 * full 8-epoch run to 0.916 is test_full_convnet (-DCUTRAIN_FULL_E2E=ON). */
#include "tests/e2e_common.h"

int main(void)
{
    static const char *const subset[] = {"data.train_limit", "12000", "train.epochs", "3", "train.threads", "2", NULL};
    return e2e_run_on_with("fmnist_convnet.ini", 0.865, "cpu", subset);
}
