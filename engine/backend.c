/* The backend registry (registry.h): the one file that knows which backends this build has, and
 * the one place above the backends that tests CUTRAIN_HAVE_CUDA. A GPU backend brings its row
 * (cuda/registry.c); naming it here is all the rest of the engine needs. */
#include "registry.h"

const ct_gpu_backend *ct_registry_gpu(void)
{
#ifdef CUTRAIN_HAVE_CUDA
    return &ct_cuda_registry_row;
#else
    return NULL;
#endif
}
