/* fmnist_convnet.ini with [train] sparse_backward on and off, on the same 12,000 training images for
 * 3 epochs, on the CPU: its convolutions feed relu and a max pool, so their output gradients are
 * mostly zeros (conv2's about 2%) and the first run takes the sparse backward (cpu/conv_sparse.c)
 * where the second runs the dense kernels. The test accuracies (10,000 test images) must be within
 * 0.01, and the test losses must differ: the sign that the sparse path ran, since it sums in another
 * order. */
#include <math.h>

#include "tests/e2e_common.h"

int main(void)
{
    ct_eval_result a, b;
    e2e_train_pair("fmnist_convnet.ini", "train.sparse_backward", "on", "off", &a, &b);
    CHECK_MSG(b.accuracy > 0.85, "the dense run reached only %.4f", b.accuracy);
    CHECK_MSG(fabs(a.accuracy - b.accuracy) <= 0.01, "sparse %.4f against dense %.4f: more than 0.01 apart",
              a.accuracy, b.accuracy);
    CHECK_MSG(a.loss != b.loss, "sparse_backward on and off gave the same test loss %.9g: the sparse path did not run",
              a.loss);
    return ct_test_done();
}
