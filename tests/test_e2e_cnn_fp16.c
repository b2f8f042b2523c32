/* fmnist_cnn.ini in fp16 and in fp32 on the same 12,000 training images for 3 epochs, on the CPU:
 * fp16's test accuracy (10,000 test images) is within 0.005 of fp32's. Cheap enough for CI; the
 * full 15-epoch fp16 run is measured for the note, not here. */
#include <math.h>

#include "tests/e2e_common.h"

int main(void)
{
    ct_eval_result a, b;
    e2e_train_pair("fmnist_cnn.ini", "train.precision", "fp32", "fp16", &a, &b);
    CHECK_MSG(a.accuracy > 0.8, "fp32 reached only %.4f", a.accuracy);
    CHECK_MSG(fabs(b.accuracy - a.accuracy) <= 0.005, "fp16 %.4f against fp32 %.4f: more than 0.005 apart",
              b.accuracy, a.accuracy);
    return ct_test_done();
}
