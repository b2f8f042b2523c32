/* The whole program of a GPU test in a build without the CUDA backend: it skips (ctest's 77).
 * Included once, in the #else branch of the test's #ifdef CUTRAIN_HAVE_CUDA. */
#ifndef CT_NO_CUDA_MAIN_H
#define CT_NO_CUDA_MAIN_H

#include <stdio.h>

int main(void)
{
    printf("skipped: built without the CUDA backend\n");
    return 77;
}

#endif
