/* fmnist_cnn.ini on the full Fashion-MNIST reaches at least 0.910 test accuracy on the CPU. */
#include "tests/e2e_common.h"

int main(void)
{
    return e2e_run("fmnist_cnn.ini", 0.910);
}
