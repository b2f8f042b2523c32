/* Input staging: three device staging buffers and the events that order them. A batch's
 * host-to-device copy (from the caller's pinned memory) runs on the copy stream while the compute
 * stream still works on the previous step; the compute stream then waits for it and moves it into
 * the network's fixed input tensors (a device-to-device copy, cheap next to a step, or the
 * augmentation kernel), which is where a captured step reads its inputs.
 *
 * decode = gpu: the image decoder (jpeg.c) writes the samples it decodes into the same staging
 * slot on its own stream, while the copy stream brings the samples the workers decoded; the
 * compute stream waits for both. */
#include <stdlib.h>

#include "cuda/cuda_internal.h"

enum { INPUT_SLOTS = 3 };  /* the host may run up to this many batches ahead of the device */

struct ct_input_ring {
    size_t x_cap, y_cap;
    void *dev_x[INPUT_SLOTS];          /* fp32 samples, or uint8 ones for device augmentation */
    int32_t *dev_y[INPUT_SLOTS];
    cudaEvent_t copied[INPUT_SLOTS];   /* the slot's host-to-device copy has run */
    cudaEvent_t consumed[INPUT_SLOTS]; /* the compute stream has taken the slot's device copy */
    cudaEvent_t decoded[INPUT_SLOTS];  /* the image decoder has written the slot (decode = gpu) */
    int decoding[INPUT_SLOTS];         /* the slot's latest batch went through the decoder */
    int next;                          /* the slot the next batch goes through */
    long tickets;                      /* copies so far; a ticket encodes its slot */
};

/* Teardown: nothing useful to do with a failure while releasing. */
void ct_cuda_input_free(ct_cuda *cu)
{
    ct_input_ring *r = cu->input;
    if (!r)
        return;
    for (int i = 0; i < INPUT_SLOTS; i++) {
        cu->dev->ops->free(cu->dev, r->dev_x[i]);
        cu->dev->ops->free(cu->dev, r->dev_y[i]);
        if (r->copied[i])
            cudaEventDestroy(r->copied[i]);
        if (r->consumed[i])
            cudaEventDestroy(r->consumed[i]);
        if (r->decoded[i])
            cudaEventDestroy(r->decoded[i]);
    }
    free(r);
    cu->input = NULL;
}

size_t ct_cuda_input_bytes(size_t x_bytes, size_t y_bytes)
{
    return INPUT_SLOTS * (ct_devmem_block_bytes(x_bytes ? x_bytes : 1) + ct_devmem_block_bytes(y_bytes ? y_bytes : 1));
}

ct_status ct_cuda_input_reserve(ct_cuda *cu, size_t x_bytes, size_t y_bytes, ct_err *err)
{
    ct_cuda_input_free(cu);
    ct_input_ring *r = calloc(1, sizeof *r);
    if (!r)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for input staging");
    cu->input = r;
    r->x_cap = x_bytes ? x_bytes : 1;
    r->y_cap = y_bytes ? y_bytes : 1;
    for (int i = 0; i < INPUT_SLOTS; i++) {
        r->dev_x[i] = cu->dev->ops->alloc(cu->dev, r->x_cap);
        r->dev_y[i] = cu->dev->ops->alloc(cu->dev, r->y_cap);
        if (!r->dev_x[i] || !r->dev_y[i])
            return ct_fail(err, CT_ERR_NOMEM, "out of device memory for input staging (%d x %zu bytes)", INPUT_SLOTS,
                           r->x_cap + r->y_cap);
        CT_CUDA_CHECK(cudaEventCreateWithFlags(&r->copied[i], cudaEventDisableTiming), err);
        CT_CUDA_CHECK(cudaEventCreateWithFlags(&r->consumed[i], cudaEventDisableTiming), err);
        CT_CUDA_CHECK(cudaEventCreateWithFlags(&r->decoded[i], cudaEventDisableTiming), err);
    }
    return CT_OK;
}

/* The batch fits the tensors it goes into, and its sample shape is theirs. */
static int batch_fits(const ct_input_batch *b, const ct_tensor *x, const ct_tensor *labels)
{
    return b->n >= 0 && b->n <= x->n && (size_t)b->n <= labels->count && x->dtype == CT_DTYPE_F32 &&
           labels->dtype == CT_DTYPE_I32 && ct_shape_size(b->shape) == ct_shape_size(x->shape) &&
           (b->x || (b->x_u8 && b->aug)) &&
           (!b->encoded || (b->x_u8 && b->first_sample >= 0 && b->first_sample + b->n <= b->encoded->n));
}

/* decode = gpu: the samples the workers decoded, copied in runs of neighbours (those the device
 * decodes are skipped; the decoder writes them). src: (n, h, w, c) uint8, host; dst: device. */
static ct_status copy_cpu_samples(const ct_input_batch *b, unsigned char *dst, cudaStream_t s, ct_err *err)
{
    const size_t sample = ct_shape_size(b->shape);
    for (int i = 0; i < b->n;) {
        if (b->encoded->images[b->first_sample + i].size > 0) {
            i++;
            continue;
        }
        int k = i;
        while (k < b->n && b->encoded->images[b->first_sample + k].size == 0)
            k++;
        CT_CUDA_CHECK(cudaMemcpyAsync(dst + (size_t)i * sample, b->x_u8 + (size_t)i * sample, (size_t)(k - i) * sample,
                                      cudaMemcpyHostToDevice, s), err);
        i = k;
    }
    return CT_OK;
}

// b->x: (n, h, w, c) fp32 or b->x_u8: uint8, b->y: (n) int32, host; x: (>= n, h, w, c) fp32,
// labels: (>= n) int32, device
ct_status ct_cuda_input_submit(ct_backend *be, const ct_input_batch *b, ct_tensor *x, ct_tensor *labels,
                               long *ticket, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    ct_input_ring *r = cu->input;
    if (!r)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: input_submit before reserve");
    size_t samples = (size_t)b->n * ct_shape_size(b->shape);
    size_t x_bytes = samples * (b->x ? sizeof(float) : 1), y_bytes = (size_t)b->n * sizeof(int32_t);
    if (!batch_fits(b, x, labels) || x_bytes > r->x_cap || y_bytes > r->y_cap)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: a bad %d-sample batch for input_submit", b->n);
    int slot = r->next;
    r->next = (slot + 1) % INPUT_SLOTS;
    const void *src = b->x ? (const void *)b->x : (const void *)b->x_u8;
    /* the device staging slot is free once the compute stream has copied it out */
    CT_CUDA_CHECK(cudaStreamWaitEvent(cu->copy, r->consumed[slot], 0), err);
    r->decoding[slot] = 0;
    if (b->encoded) {
        ct_status st = copy_cpu_samples(b, r->dev_x[slot], cu->copy, err);
        if (st == CT_OK)
            st = ct_cuda_jpeg_decode(cu, b, r->dev_x[slot], r->consumed[slot], r->decoded[slot], err);
        if (st != CT_OK)
            return st;
        r->decoding[slot] = 1;
    } else {
        CT_CUDA_CHECK(cudaMemcpyAsync(r->dev_x[slot], src, x_bytes, cudaMemcpyHostToDevice, cu->copy), err);
    }
    CT_CUDA_CHECK(cudaMemcpyAsync(r->dev_y[slot], b->y, y_bytes, cudaMemcpyHostToDevice, cu->copy), err);
    CT_CUDA_CHECK(cudaEventRecord(r->copied[slot], cu->copy), err);
    CT_CUDA_CHECK(cudaStreamWaitEvent(cu->compute, r->copied[slot], 0), err);
    if (r->decoding[slot])
        CT_CUDA_CHECK(cudaStreamWaitEvent(cu->compute, r->decoded[slot], 0), err);
    if (b->x) {
        CT_CUDA_CHECK(cudaMemcpyAsync(x->data, r->dev_x[slot], x_bytes, cudaMemcpyDeviceToDevice, cu->compute), err);
    } else {
        /* a quarter of the bytes crossed the bus; crops, flips and normalisation happen here */
        const ct_augment_params *a = b->aug;
        CT_CUDA_CHECK(ct_launch_augment_u8((const unsigned char *)r->dev_x[slot], ct_f32(x), b->n, b->shape.h,
                                           b->shape.w, b->shape.c, a->crop_pad, a->flip, b->augment, a->norm_scale,
                                           a->norm_bias, (unsigned long long)b->augment_seed, b->first_sample,
                                           cu->compute), err);
    }
    CT_CUDA_CHECK(cudaMemcpyAsync(labels->data, r->dev_y[slot], y_bytes, cudaMemcpyDeviceToDevice, cu->compute), err);
    CT_CUDA_CHECK(cudaEventRecord(r->consumed[slot], cu->compute), err);
    *ticket = ++r->tickets * INPUT_SLOTS + slot;
    return CT_OK;
}

/* Copies run in order on the copy stream, so waiting for the slot's latest copy covers an older
 * ticket of the same slot too (a later batch may have used the slot since). */
ct_status ct_cuda_input_wait(ct_backend *be, long ticket, ct_err *err)
{
    ct_input_ring *r = ct_cuda_of(be)->input;
    if (!r || ticket <= 0)
        return CT_OK;
    CT_CUDA_CHECK(cudaEventSynchronize(r->copied[ticket % INPUT_SLOTS]), err);
    /* the decoder reads the batch's compressed bytes on the host until its work is queued, and
     * the device until it ran */
    if (r->decoding[ticket % INPUT_SLOTS])
        CT_CUDA_CHECK(cudaEventSynchronize(r->decoded[ticket % INPUT_SLOTS]), err);
    return CT_OK;
}
