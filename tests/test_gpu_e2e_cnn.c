/* fmnist_cnn.ini trained on the first GPU (graph-captured steps, the model file's settings)
 * reaches at least 0.916 test accuracy on the full Fashion-MNIST. Exits 77 without a GPU. */
#include "tests/e2e_common.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "engine/cuda/cuda_device.h"

int main(void)
{
    int count = 0;
    char why[256] = "";
    if (ct_cuda_devices(&count, why, sizeof why) != CT_OK || count == 0) {
        printf("skipped: %s\n", why);
        return 77;
    }
    return e2e_run_on("fmnist_cnn.ini", 0.916, "0");
}
#else
int main(void)
{
    printf("skipped: built without the CUDA backend\n");
    return 77;
}
#endif
