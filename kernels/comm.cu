// The communicator's small kernels around NCCL's all-reduce (engine/cuda/comm_nccl.c): the
// heartbeat the host's watchdog reads, and each rank's share of a weighted mean.

#include <climits>

#include <cuda_runtime.h>

#include "kernels.h"
#include "launch.cuh"

namespace {

using namespace ct_launch;

// One thread: the sample count into total (when given), then the heartbeat counter, which lives
// in mapped host memory, one step further; the fence makes the count visible to the host.
__global__ void mark_kernel(unsigned *counter, int *total, int samples)
{
    if (total)
        *total = samples;
    if (counter) {
        volatile unsigned *c = counter;
        *c = *c + 1u;
        __threadfence_system();
    }
}

// t[i] *= samples / total, the rank's weight in the mean over the global batch (1 / size when no
// rank has samples). With one rank the weight is exactly 1, so the values keep their bits.
template <typename Index>
__global__ void share_kernel(float *t, Index n, const int *total, int samples, int size)
{
    const int all = *total;
    const float w = all > 0 ? __fdiv_rn((float)samples, (float)all) : __fdiv_rn(1.0f, (float)size);
    const Index stride = (Index)gridDim.x * blockDim.x;
    for (Index i = (Index)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        t[i] = __fmul_rn(t[i], w);
}

}  // namespace

extern "C" int ct_launch_comm_mark(unsigned *counter, int *total, int samples, void *stream)
{
    if (!counter && !total)
        return 0;
    mark_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(counter, total, samples);
    return (int)cudaGetLastError();
}

extern "C" int ct_launch_comm_share(float *t, long long n, const int *total, int samples, int size, void *stream)
{
    if (n < 0 || !total || size < 1 || (n > 0 && !t))
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned blocks = blocks_for(n);
    if (n <= INT_MAX)
        share_kernel<unsigned><<<blocks, kThreads, 0, s>>>(t, (unsigned)n, total, samples, size);
    else
        share_kernel<unsigned long long><<<blocks, kThreads, 0, s>>>(t, (unsigned long long)n, total, samples, size);
    return (int)cudaGetLastError();
}
