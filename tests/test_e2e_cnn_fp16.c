/* fmnist_cnn.ini in fp16 and in fp32 on the same 12,000 training images for 3 epochs, on the CPU:
 * fp16's test accuracy (10,000 test images) is within 0.005 of fp32's. Cheap enough for CI; the
 * full 15-epoch fp16 run is measured for the note, not here. */
#include <math.h>

#include "tests/e2e_common.h"

int main(void)
{
    static const char *const fp32[] = {"data.train_limit", "12000", "train.epochs", "3", "train.threads", "2",
                                       "train.precision", "fp32", NULL};
    static const char *const fp16[] = {"data.train_limit", "12000", "train.epochs", "3", "train.threads", "2",
                                       "train.precision", "fp16", NULL};
    ct_eval_result a = {0}, b = {0};
    double sa = 0, sb = 0;
    if (e2e_train_with("fmnist_cnn.ini", fp32, &a, &sa) == CT_OK)
        printf("fp32: test accuracy %.4f, %.1f s\n", a.accuracy, sa);
    if (e2e_train_with("fmnist_cnn.ini", fp16, &b, &sb) == CT_OK)
        printf("fp16: test accuracy %.4f, %.1f s\n", b.accuracy, sb);
    CHECK(a.images == 10000 && b.images == 10000);
    CHECK_MSG(a.accuracy > 0.8, "fp32 reached only %.4f", a.accuracy);
    CHECK_MSG(fabs(b.accuracy - a.accuracy) <= 0.005, "fp16 %.4f against fp32 %.4f: more than 0.005 apart",
              b.accuracy, a.accuracy);
    return ct_test_done();
}
