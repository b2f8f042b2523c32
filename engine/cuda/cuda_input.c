/* Input staging: three pinned host buffers the trainer assembles batches into, three device staging
 * buffers, and events that order them. A batch's host-to-device copy runs on the copy stream while
 * the compute stream still works on the previous step; the compute stream then waits for it and
 * moves it into the network's fixed input buffers (a device-to-device copy, cheap next to a step),
 * which is where a captured step reads its inputs. */
#include <stdlib.h>

#include "cuda/cuda_internal.h"

enum { INPUT_SLOTS = 3 };  /* the host may run up to this many batches ahead of the device */

struct ct_input_ring {
    size_t x_cap, y_cap;
    float *host_x[INPUT_SLOTS];       /* pinned */
    int32_t *host_y[INPUT_SLOTS];
    float *dev_x[INPUT_SLOTS];
    int32_t *dev_y[INPUT_SLOTS];
    cudaEvent_t copied[INPUT_SLOTS];   /* the slot's host-to-device copy has run */
    cudaEvent_t consumed[INPUT_SLOTS]; /* the compute stream has taken the slot's device copy */
    int next;                          /* the slot input_host hands out next */
    int current;                       /* the slot handed out and not yet committed, or -1 */
    long tickets;                      /* input_submit's copies so far; a ticket encodes its slot */
};

void ct_cuda_input_free(ct_cuda *cu)
{
    ct_input_ring *r = cu->input;
    if (!r)
        return;
    for (int i = 0; i < INPUT_SLOTS; i++) {
        cudaFreeHost(r->host_x[i]);
        cudaFreeHost(r->host_y[i]);
        cudaFree(r->dev_x[i]);
        cudaFree(r->dev_y[i]);
        if (r->copied[i])
            cudaEventDestroy(r->copied[i]);
        if (r->consumed[i])
            cudaEventDestroy(r->consumed[i]);
    }
    free(r);
    cu->input = NULL;
}

ct_status ct_cuda_input_reserve(ct_backend *be, size_t x_bytes, size_t y_bytes, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    ct_cuda_input_free(cu);
    ct_input_ring *r = calloc(1, sizeof *r);
    if (!r)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for input staging");
    cu->input = r;
    r->x_cap = x_bytes ? x_bytes : 1;
    r->y_cap = y_bytes ? y_bytes : 1;
    r->current = -1;
    for (int i = 0; i < INPUT_SLOTS; i++) {
        CT_CUDA_CHECK(cudaHostAlloc((void **)&r->host_x[i], r->x_cap, cudaHostAllocDefault), err);
        CT_CUDA_CHECK(cudaHostAlloc((void **)&r->host_y[i], r->y_cap, cudaHostAllocDefault), err);
        CT_CUDA_CHECK(cudaMalloc((void **)&r->dev_x[i], r->x_cap), err);
        CT_CUDA_CHECK(cudaMalloc((void **)&r->dev_y[i], r->y_cap), err);
        CT_CUDA_CHECK(cudaEventCreateWithFlags(&r->copied[i], cudaEventDisableTiming), err);
        CT_CUDA_CHECK(cudaEventCreateWithFlags(&r->consumed[i], cudaEventDisableTiming), err);
    }
    return CT_OK;
}

ct_status ct_cuda_input_host(ct_backend *be, float **host_x, int32_t **host_y, ct_err *err)
{
    ct_input_ring *r = ct_cuda_of(be)->input;
    if (!r)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: input_host before input_reserve");
    int slot = r->next;
    /* the copy that last read this host buffer was enqueued INPUT_SLOTS batches ago: long done */
    CT_CUDA_CHECK(cudaEventSynchronize(r->copied[slot]), err);
    r->current = slot;
    *host_x = r->host_x[slot];
    *host_y = r->host_y[slot];
    return CT_OK;
}

// dst_x: (n, input) fp32, dst_y: (n) int32, device; x_bytes, y_bytes: the batch's part of them
ct_status ct_cuda_input_commit(ct_backend *be, float *dst_x, int32_t *dst_y, size_t x_bytes, size_t y_bytes,
                               ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    ct_input_ring *r = cu->input;
    if (!r || r->current < 0)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: input_commit without input_host");
    if (x_bytes > r->x_cap || y_bytes > r->y_cap)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: a %zu-byte batch exceeds the %zu-byte staging",
                       x_bytes, r->x_cap);
    int slot = r->current;
    r->current = -1;
    r->next = (slot + 1) % INPUT_SLOTS;
    /* the device staging slot is free once the compute stream has copied it out */
    CT_CUDA_CHECK(cudaStreamWaitEvent(cu->copy, r->consumed[slot], 0), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(r->dev_x[slot], r->host_x[slot], x_bytes, cudaMemcpyHostToDevice, cu->copy), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(r->dev_y[slot], r->host_y[slot], y_bytes, cudaMemcpyHostToDevice, cu->copy), err);
    CT_CUDA_CHECK(cudaEventRecord(r->copied[slot], cu->copy), err);
    CT_CUDA_CHECK(cudaStreamWaitEvent(cu->compute, r->copied[slot], 0), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(dst_x, r->dev_x[slot], x_bytes, cudaMemcpyDeviceToDevice, cu->compute), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(dst_y, r->dev_y[slot], y_bytes, cudaMemcpyDeviceToDevice, cu->compute), err);
    CT_CUDA_CHECK(cudaEventRecord(r->consumed[slot], cu->compute), err);
    return CT_OK;
}

/* Callable from the pipeline's worker threads: selects the device first (a thread's current
 * device starts at 0), and asks for portable memory, pinned for every context. */
void *ct_cuda_host_alloc(ct_backend *be, size_t bytes)
{
    void *p = NULL;
    if (cudaSetDevice(ct_cuda_of(be)->device) != cudaSuccess ||
        cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();  /* reported by the caller as out of memory, not by the next launch */
        return NULL;
    }
    return p;
}

void ct_cuda_host_free(ct_backend *be, void *ptr)
{
    (void)be;
    if (ptr)
        cudaFreeHost(ptr);
}

// b->x: (n, h, w, c) fp32 or b->x_u8: uint8, b->y: (n) int32, host; dst_x, dst_y: device
ct_status ct_cuda_input_submit(ct_backend *be, const ct_input_batch *b, float *dst_x, int32_t *dst_y, long *ticket,
                               ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    ct_input_ring *r = cu->input;
    if (!r)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: input_submit before input_reserve");
    size_t samples = (size_t)b->n * ct_shape_size(b->shape);
    size_t x_bytes = samples * (b->x ? sizeof(float) : 1), y_bytes = (size_t)b->n * sizeof(int32_t);
    if (x_bytes > r->x_cap || y_bytes > r->y_cap || (!b->x && (!b->x_u8 || !b->aug)))
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: a bad %d-sample batch for input_submit", b->n);
    int slot = r->next;
    r->next = (slot + 1) % INPUT_SLOTS;
    const void *src = b->x ? (const void *)b->x : (const void *)b->x_u8;
    CT_CUDA_CHECK(cudaStreamWaitEvent(cu->copy, r->consumed[slot], 0), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(r->dev_x[slot], src, x_bytes, cudaMemcpyHostToDevice, cu->copy), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(r->dev_y[slot], b->y, y_bytes, cudaMemcpyHostToDevice, cu->copy), err);
    CT_CUDA_CHECK(cudaEventRecord(r->copied[slot], cu->copy), err);
    CT_CUDA_CHECK(cudaStreamWaitEvent(cu->compute, r->copied[slot], 0), err);
    if (b->x) {
        CT_CUDA_CHECK(cudaMemcpyAsync(dst_x, r->dev_x[slot], x_bytes, cudaMemcpyDeviceToDevice, cu->compute), err);
    } else {
        /* a quarter of the bytes crossed the bus; crops, flips and normalisation happen here */
        const ct_augment_params *a = b->aug;
        CT_CUDA_CHECK(ct_launch_augment_u8((const unsigned char *)r->dev_x[slot], dst_x, b->n, b->shape.h,
                                           b->shape.w, b->shape.c, a->crop_pad, a->flip, b->augment, a->scale,
                                           a->bias, (unsigned long long)b->augment_seed, cu->compute), err);
    }
    CT_CUDA_CHECK(cudaMemcpyAsync(dst_y, r->dev_y[slot], y_bytes, cudaMemcpyDeviceToDevice, cu->compute), err);
    CT_CUDA_CHECK(cudaEventRecord(r->consumed[slot], cu->compute), err);
    *ticket = ++r->tickets * INPUT_SLOTS + slot;
    return CT_OK;
}

/* Copies run in order on the copy stream, so waiting for the slot's latest copy covers an older
 * ticket of the same slot too (input_commit may have used the slot since). */
ct_status ct_cuda_input_wait(ct_backend *be, long ticket, ct_err *err)
{
    ct_input_ring *r = ct_cuda_of(be)->input;
    if (!r || ticket <= 0)
        return CT_OK;
    CT_CUDA_CHECK(cudaEventSynchronize(r->copied[ticket % INPUT_SLOTS]), err);
    return CT_OK;
}
