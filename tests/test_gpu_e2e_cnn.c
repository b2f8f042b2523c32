/* fmnist_cnn.ini trained on the first GPU (graph-captured steps, the model file's settings)
 * reaches at least 0.916 test accuracy on the full Fashion-MNIST. Exits 77 without a GPU. */
#include "tests/e2e_common.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"

int main(void)
{
    int absent = ct_gpu_test_absent();
    return absent ? absent : e2e_run_on("fmnist_cnn.ini", 0.916, "0");
}
#else
int main(void)
{
    printf("skipped: built without the CUDA backend\n");
    return 77;
}
#endif
