/* fmnist_mlp.ini in fp16 (half activations, fp32 masters and output layer, dynamic loss scaling)
 * on the full Fashion-MNIST on the CPU reaches the fp32 target, 0.883 test accuracy. */
#include "tests/e2e_common.h"

int main(void)
{
    static const char *const sets[] = {"train.precision", "fp16", "train.threads", "2", NULL};
    ct_eval_result r = {0};
    double seconds = 0;
    if (e2e_train_with("fmnist_mlp.ini", sets, &r, &seconds) == CT_OK)
        printf("fmnist_mlp fp16: test accuracy %.4f (target 0.883), %.1f s\n", r.accuracy, seconds);
    CHECK(r.images == 10000);
    CHECK_MSG(r.accuracy >= 0.883, "fmnist_mlp in fp16 reached %.4f, below 0.883", r.accuracy);
    return ct_test_done();
}
