/* fmnist_convnet.ini on the full Fashion-MNIST reaches at least 0.916 test accuracy on the CPU
 * (8 epochs, about 20 minutes on 2 cores: built with -DCUTRAIN_FULL_E2E=ON, label "full"; CI runs
 * test_e2e_convnet, the same network on a subset). */
#include "tests/e2e_common.h"

int main(void)
{
    return e2e_run("fmnist_convnet.ini", 0.916);
}
