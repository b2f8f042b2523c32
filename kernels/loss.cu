// Softmax + cross-entropy with its gradient in one kernel: each row's logits are read from global
// memory by one warp (three short passes that hit the cache after the first), and the loss and
// accuracy are summed on the device so the train step never waits for the host.
// The logits stay fp32 in mixed precision (the output layer is fp32); the loss scaler only
// multiplies the gradient.

#include <climits>
#include <cmath>

#include <cuda_runtime.h>

#include "kernels.h"

namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;  // one warp per row
constexpr int kThreads = kWarp * kRowsPerBlock;
constexpr unsigned kFullMask = 0xffffffffu;

// logits, dlogits: (n, k) fp32; labels: (n); loss_sum, correct: (1) or NULL; scaler: (1) or NULL.
// dlogits may alias logits: each lane reads an element in pass 3 before writing it, and passes
// 1 and 2 of the whole warp are finished by then (the shuffles synchronise the warp).
// kScaled: a scaler is given (a template parameter, so that the unscaled kernel is the one that
// ran before loss scaling existed, instruction for instruction).
template <bool kScaled>
__global__ void __launch_bounds__(kThreads)
softmax_xent_kernel(const float *logits, const int *labels, float *dlogits, float *loss_sum,
                    unsigned *correct, int n, int k, float grad_scale, const ct_scaler *scaler)
{
    __shared__ float s_loss[kRowsPerBlock];
    __shared__ unsigned s_correct[kRowsPerBlock];
    const int warp = threadIdx.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    const long long row = (long long)blockIdx.x * kRowsPerBlock + warp;

    float row_loss = 0.0f;
    unsigned row_correct = 0;
    if (row < n) {  // uniform across the warp, so the full-mask shuffles below are safe
        const float *x = logits + row * k;

        // Pass 1: the maximum (for stability) and the first index holding it (for accuracy).
        // A lane starts from its first element, not -inf, so a row of -inf still has an argmax.
        float best = -INFINITY;
        int best_i = INT_MAX;
        for (int j = lane; j < k; j += kWarp) {
            const float v = x[j];
            if (best_i == INT_MAX || v > best) {
                best = v;
                best_i = j;
            }
        }
        for (int off = kWarp / 2; off > 0; off >>= 1) {
            const float ov = __shfl_xor_sync(kFullMask, best, off);
            const int oi = __shfl_xor_sync(kFullMask, best_i, off);
            if (ov > best || (ov == best && oi < best_i)) {
                best = ov;
                best_i = oi;
            }
        }
        // With a NaN in the row lanes could disagree; lane 0's answer makes them agree.
        best = __shfl_sync(kFullMask, best, 0);
        best_i = __shfl_sync(kFullMask, best_i, 0);

        // Pass 2: the partition function relative to the maximum (every term <= 1, one of them 1).
        float sum = 0.0f;
        for (int j = lane; j < k; j += kWarp)
            sum += expf(x[j] - best);
        for (int off = kWarp / 2; off > 0; off >>= 1)
            sum += __shfl_xor_sync(kFullMask, sum, off);  // same order on every lane: all agree

        const int label = labels[row];
        const bool valid = label >= 0 && label < k;
        if (lane == 0) {
            // -log softmax[label] = log(sum) - (x[label] - max): both terms are small when the
            // prediction is confident, so no large values cancel.
            row_loss = valid ? logf(sum) - (x[label] - best) : NAN;
            row_correct = valid && best_i == label;
        }

        // Pass 3: the gradient, overwriting dlogits. With dlogits == logits, lane 0's read of
        // x[label] above must happen before another lane overwrites it: the warp is not
        // guaranteed to run in step, so wait for all its lanes here.
        __syncwarp();
        if (dlogits) {
            float *d = dlogits + row * k;
            const float inv = 1.0f / sum;
            // The loss scale multiplies after grad_scale, a rounding of its own; none without a
            // scaler, so the unscaled gradient keeps its bits.
            const float loss_scale = kScaled ? scaler->loss_scale : 1.0f;
            for (int j = lane; j < k; j += kWarp) {
                float p = expf(x[j] - best) * inv;
                if (j == label)
                    p -= 1.0f;
                const float gp = p * grad_scale;
                d[j] = kScaled ? __fmul_rn(gp, loss_scale) : gp;
            }
        }
    }

    // One atomic per block rather than per row keeps contention on the two counters low.
    if (lane == 0) {
        s_loss[warp] = row_loss;
        s_correct[warp] = row_correct;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float l = 0.0f;
        unsigned c = 0;
        for (int w = 0; w < kRowsPerBlock; w++) {
            l += s_loss[w];
            c += s_correct[w];
        }
        if (loss_sum && l != 0.0f)  // NaN != 0, so a NaN loss is always added
            atomicAdd(loss_sum, l);
        if (correct && c)
            atomicAdd(correct, c);
    }
}

}  // namespace

// logits: (n, k) fp32; labels: (n) int; dlogits: (n, k) fp32 or NULL; loss_sum, correct: (1) or NULL;
// scaler: (1) device memory or NULL
extern "C" int ct_launch_softmax_xent_scaled(const float *logits, const int *labels, float *dlogits,
                                             float *loss_sum, unsigned *correct, int n, int k, float grad_scale,
                                             const ct_scaler *scaler, void *stream)
{
    if (n < 0 || k <= 0)
        return (int)cudaErrorInvalidValue;
    if (n == 0)
        return (int)cudaSuccess;
    if (!logits || !labels)
        return (int)cudaErrorInvalidValue;
    const unsigned blocks = (unsigned)(((long long)n + kRowsPerBlock - 1) / kRowsPerBlock);
    if (scaler)
        softmax_xent_kernel<true><<<blocks, kThreads, 0, (cudaStream_t)stream>>>(logits, labels, dlogits, loss_sum,
                                                                                correct, n, k, grad_scale, scaler);
    else
        softmax_xent_kernel<false><<<blocks, kThreads, 0, (cudaStream_t)stream>>>(logits, labels, dlogits, loss_sum,
                                                                                 correct, n, k, grad_scale, scaler);
    return (int)cudaGetLastError();
}

// logits: (n, k) fp32; labels: (n) int; dlogits: (n, k) fp32 or NULL; loss_sum, correct: (1) or NULL
extern "C" int ct_launch_softmax_xent(const float *logits, const int *labels, float *dlogits, float *loss_sum,
                                      unsigned *correct, int n, int k, float grad_scale, void *stream)
{
    return ct_launch_softmax_xent_scaled(logits, labels, dlogits, loss_sum, correct, n, k, grad_scale, nullptr,
                                         stream);
}
