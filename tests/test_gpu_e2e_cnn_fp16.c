/* fmnist_cnn.ini trained on the first GPU in fp16 (train.precision = fp16: half activations, fp32
 * master weights, dynamic loss scaling on the device; graph-captured steps, the model file's other
 * settings) reaches at least 0.910 test accuracy on the full Fashion-MNIST, the fp32 tests' target
 * (tests/test_e2e_cnn.c, tests/test_gpu_e2e_cnn.c): mixed precision trains the model to the same
 * bar. It fails too when the backend left a note (graph capture fell back to direct launches). Exits
 * 77 without a GPU. */
#include "tests/e2e_common.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    static const char *const sets[] = {"train.precision", "fp16", NULL};
    return e2e_run_on_with("fmnist_cnn.ini", 0.910, "0", sets);
}
#else
#include "tests/no_cuda_main.h"
#endif
