/* fmnist_mlp.ini on the full Fashion-MNIST reaches at least 0.883 test accuracy on the CPU. */
#include "tests/e2e_common.h"

int main(void)
{
    return e2e_run("fmnist_mlp.ini", 0.883);
}
