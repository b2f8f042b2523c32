/* fmnist_cnn.ini trained on the first GPU (graph-captured steps, the model file's settings)
 * reaches at least 0.910 test accuracy on the full Fashion-MNIST, the CPU test's target
 * (tests/test_e2e_cnn.c): the two backends train the same model to the same bar. It fails too when
 * the backend left a note (graph capture fell back to direct launches). Exits 77 without a GPU. */
#include "tests/e2e_common.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"

int main(void)
{
    int absent = ct_gpu_test_absent();
    return absent ? absent : e2e_run_on("fmnist_cnn.ini", 0.910, "0");
}
#else
#include "tests/no_cuda_main.h"
#endif
