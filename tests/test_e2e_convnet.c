/* fmnist_convnet.ini on the full Fashion-MNIST reaches at least 0.916 test accuracy on the CPU. */
#include "tests/e2e_common.h"

int main(void)
{
    return e2e_run("fmnist_convnet.ini", 0.916);
}
