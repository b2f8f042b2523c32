/* The CUDA device: one ordinal, its compute stream (every layer, the loss, the optimizer, and the
 * memory operations here) and its copy stream (the input staging's host-to-device copies), pinned
 * host memory, and the events behind the timing marks. What runs on it is the backend (backend.c). */
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_device.h"

#include "cuda/cuda_internal.h"
#include "cuda/step_timer.h"

static ct_cuda_dev *dev_of(ct_device *d) { return (ct_cuda_dev *)d->impl; }

static ct_status cuda_activate(ct_device *d, ct_err *err)
{
    CT_CUDA_CHECK(cudaSetDevice(d->ordinal), err);
    return CT_OK;
}

/* ---- the allocator's raw allocator (base/devmem.h) ---- */

static void *raw_alloc(void *ctx, size_t bytes)
{
    ct_cuda_dev *cd = ctx;
    void *p = NULL;
    if (cudaSetDevice(cd->ordinal) != cudaSuccess || cudaMalloc(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError();  /* an allocation failure is reported by the caller, not by the next launch */
        return NULL;
    }
    return p;
}

static void raw_free(void *ctx, void *p)
{
    ct_cuda_dev *cd = ctx;
    cudaSetDevice(cd->ordinal);
    cudaFree(p); /* nothing useful to do with a failure while releasing */
}

/* The clear goes on the compute stream, in order before every later use. cudaMemset would run on
 * the legacy default stream, asynchronously to the host and unordered with the non-blocking
 * compute stream: an upload or copy into the buffer could land before the zeros. A block the allocator
 * hands out again may still be read by queued work: that work is on the compute stream too, ahead
 * of the clear (input staging, the one user of the copy stream, is freed only after both streams
 * are synchronised: cuda_reserve). */
static int raw_clear(void *ctx, void *p, size_t bytes)
{
    ct_cuda_dev *cd = ctx;
    if (cudaSetDevice(cd->ordinal) != cudaSuccess || cudaMemsetAsync(p, 0, bytes, cd->compute) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return 0;
}

/* Callable from the pipeline's worker threads: selects the device first (a thread's current
 * device starts at 0), and asks for portable memory, pinned for every context. */
static void *raw_host_alloc(void *ctx, size_t bytes)
{
    ct_cuda_dev *cd = ctx;
    void *p = NULL;
    if (cudaSetDevice(cd->ordinal) != cudaSuccess || cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();  /* reported by the caller as out of memory, not by the next launch */
        return NULL;
    }
    return p;
}

static void raw_host_free(void *ctx, void *p)
{
    (void)ctx;
    cudaFreeHost(p);
}

/* ---- the device's memory ops ---- */

static void *cuda_alloc(ct_device *d, size_t bytes)
{
    if (ct_alloc_fault_hit(&d->fault))
        return NULL;
    return ct_devmem_alloc(dev_of(d)->devmem, bytes);
}

static void cuda_free(ct_device *d, void *ptr)
{
    ct_devmem_free(dev_of(d)->devmem, ptr);
}

static void *cuda_host_alloc(ct_device *d, size_t bytes)
{
    if (ct_alloc_fault_hit(&d->fault))
        return NULL;
    return ct_devmem_host_alloc(dev_of(d)->devmem, bytes);
}

static void cuda_host_free(ct_device *d, void *ptr)
{
    ct_devmem_host_free(dev_of(d)->devmem, ptr);
}

/* What preallocate leaves to the CUDA libraries' own allocations, outside the allocator: the cuDNN
 * and cuBLAS handles, cuDNN's algorithm search (which allocates for itself whatever our workspace
 * limit), lazily loaded kernel modules, and instantiated CUDA graphs. 1 GiB plus 5% of the GPU:
 * generous next to the hundreds of MiB those take, because running out later fails a cuDNN call
 * in the middle of a run instead of an allocation we can explain. */
static size_t preallocate_slack(size_t total)
{
    return ((size_t)1 << 30) + total / 20;
}

static ct_status cuda_set_memory(ct_device *d, ct_devmem_policy policy, size_t limit, ct_err *err)
{
    size_t bytes = limit;
    if (policy == CT_DEVMEM_PREALLOCATE) {
        size_t avail = 0, total = 0;
        CT_CUDA_CHECK(cudaSetDevice(d->ordinal), err);
        CT_CUDA_CHECK(cudaMemGetInfo(&avail, &total), err);
        size_t slack = preallocate_slack(total);
        if (avail <= slack)
            return ct_fail(err, CT_ERR_NOMEM, "memory = preallocate: %s has %.0f MiB free, less than the %.0f MiB "
                           "left to the CUDA libraries; use memory = grow", d->label,
                           (double)avail / (1024.0 * 1024.0), (double)slack / (1024.0 * 1024.0));
        bytes = avail - slack;
    }
    ct_status st = ct_devmem_set_policy(dev_of(d)->devmem, policy, bytes, err);
    if (st == CT_ERR_NOMEM)
        return ct_fail(err, CT_ERR_NOMEM, "memory = preallocate: %s refused %.0f MiB of its free memory; use "
                       "memory = grow", d->label, (double)bytes / (1024.0 * 1024.0));
    return st;
}

static void cuda_memory_usage(ct_device *d, ct_devmem_usage *out)
{
    ct_devmem_usage_get(dev_of(d)->devmem, out);
}

static ct_status cuda_upload(ct_device *d, void *dst, const void *src, size_t bytes, ct_err *err)
{
    cudaStream_t s = dev_of(d)->compute;
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s), err);
    /* From pageable memory the async copy "might be synchronous" (CUDA's API synchronization
     * notes), no more: callers free src on return (parameter initialisation, checkpoint restore),
     * and uploads are setup work, so wait until the copy has read it. */
    CT_CUDA_CHECK(cudaStreamSynchronize(s), err);
    return CT_OK;
}

static ct_status cuda_download(ct_device *d, void *dst, const void *src, size_t bytes, ct_err *err)
{
    cudaStream_t s = dev_of(d)->compute;
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), err);
    CT_CUDA_CHECK(cudaStreamSynchronize(s), err);
    return CT_OK;
}

/* cudaMemcpyDefault: the source may be another GPU's memory (GPU replicas' benchmark batches),
 * which unified addressing turns into a peer copy. */
static ct_status cuda_copy(ct_device *d, void *dst, const void *src, size_t bytes, ct_err *err)
{
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, dev_of(d)->compute), err);
    return CT_OK;
}

static ct_status cuda_zero(ct_device *d, void *ptr, size_t bytes, ct_err *err)
{
    CT_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, dev_of(d)->compute), err);
    return CT_OK;
}

/* cudaMemGetInfo reports on the calling thread's current device: select this one first. */
static ct_status cuda_memory(ct_device *d, size_t *free_bytes, size_t *total_bytes, ct_err *err)
{
    size_t avail = 0, total = 0;
    CT_CUDA_CHECK(cudaSetDevice(d->ordinal), err);
    CT_CUDA_CHECK(cudaMemGetInfo(&avail, &total), err);
    if (free_bytes)
        *free_bytes = avail;
    if (total_bytes)
        *total_bytes = total;
    return CT_OK;
}

static ct_status cuda_synchronize(ct_device *d, ct_err *err)
{
    CT_CUDA_CHECK(cudaStreamSynchronize(dev_of(d)->compute), err);
    return CT_OK;
}

static ct_status cuda_mark(ct_device *d, int slot, ct_err *err)
{
    if (slot < 0 || slot >= CT_DEVICE_MARKS)
        return ct_fail(err, CT_ERR_USAGE, "timing mark %d out of range", slot);
    ct_cuda_dev *cd = dev_of(d);
    CT_CUDA_CHECK(cudaEventRecord(cd->marks[slot], cd->compute), err);
    return CT_OK;
}

static ct_status cuda_elapsed(ct_device *d, int a, int b, double *ms, ct_err *err)
{
    if (a < 0 || a >= CT_DEVICE_MARKS || b < 0 || b >= CT_DEVICE_MARKS)
        return ct_fail(err, CT_ERR_USAGE, "timing marks %d, %d out of range", a, b);
    ct_cuda_dev *cd = dev_of(d);
    float elapsed = 0.0f;
    CT_CUDA_CHECK(cudaEventSynchronize(cd->marks[b]), err);
    CT_CUDA_CHECK(cudaEventElapsedTime(&elapsed, cd->marks[a], cd->marks[b]), err);
    *ms = elapsed;
    return CT_OK;
}

/* Teardown: nothing useful to do with a failure while releasing. */
static void cuda_destroy(ct_device *d)
{
    if (!d)
        return;
    ct_cuda_dev *cd = d->impl;
    if (cd) {
        cudaSetDevice(d->ordinal);
        if (cd->compute)
            cudaStreamSynchronize(cd->compute);
        for (int i = 0; i < CT_DEVICE_MARKS; i++)
            if (cd->marks[i])
                cudaEventDestroy(cd->marks[i]);
        if (cd->copy)
            cudaStreamDestroy(cd->copy);
        if (cd->compute)
            cudaStreamDestroy(cd->compute);
        ct_devmem_destroy(cd->devmem);
        free(cd);
    }
    free(d);
}

static int cuda_pci_bus_id(const ct_device *d, char *buf, int n)
{
    ct_err ignored;
    if (ct_cuda_pci_bus_id(d->ordinal, buf, n, &ignored) != CT_OK)
        buf[0] = '\0';
    return 1;
}

static ct_status cuda_step_timer_create(ct_device *d, ct_step_timer **out, ct_err *err)
{
    return ct_step_timer_create(dev_of(d)->compute, out, err);
}

static const ct_device_ops cuda_device_ops = {
    .name = "cuda",
    .activate = cuda_activate,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .set_memory = cuda_set_memory,
    .memory_usage = cuda_memory_usage,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .zero = cuda_zero,
    .memory = cuda_memory,
    .synchronize = cuda_synchronize,
    .mark = cuda_mark,
    .elapsed = cuda_elapsed,
    .pci_bus_id = cuda_pci_bus_id,
    .step_timer_create = cuda_step_timer_create,
    .step_timer_begin = ct_step_timer_begin,
    .step_timer_end = ct_step_timer_end,
    .step_timer_total = ct_step_timer_total,
    .step_timer_destroy = ct_step_timer_destroy,
    .destroy = cuda_destroy,
};

ct_cuda_dev *ct_cuda_dev_of(ct_device *d)
{
    return d && d->ops == &cuda_device_ops ? (ct_cuda_dev *)d->impl : NULL;
}

void *ct_cuda_device_stream(ct_device *d)
{
    ct_cuda_dev *cd = ct_cuda_dev_of(d);
    return cd ? (void *)cd->compute : NULL;
}

static ct_status create_streams(ct_device *d, ct_err *err)
{
    ct_cuda_dev *cd = dev_of(d);
    CT_CUDA_CHECK(cudaSetDevice(d->ordinal), err);
    CT_CUDA_CHECK(cudaStreamCreateWithFlags(&cd->compute, cudaStreamNonBlocking), err);
    CT_CUDA_CHECK(cudaStreamCreateWithFlags(&cd->copy, cudaStreamNonBlocking), err);
    for (int i = 0; i < CT_DEVICE_MARKS; i++)
        CT_CUDA_CHECK(cudaEventCreate(&cd->marks[i]), err);
    return CT_OK;
}

ct_status ct_cuda_device_create(ct_device **out, int ordinal, ct_err *err)
{
    *out = NULL;
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();  /* reported here, not again by the next launch */
        return CT_CUDA_STATUS(rc, err);
    }
    if (ordinal < 0 || ordinal >= count)
        return ct_fail(err, CT_ERR_USAGE, "CUDA device %d does not exist (%d visible)", ordinal, count);
    ct_device *d = calloc(1, sizeof *d);
    ct_cuda_dev *cd = calloc(1, sizeof *cd);
    if (!d || !cd) {
        free(d);
        free(cd);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating the CUDA device");
    }
    *d = (ct_device){.ops = &cuda_device_ops, .ordinal = ordinal, .host_memory = 0, .impl = cd};
    cd->ordinal = ordinal;
    char name[96] = "";
    ct_err ignored;
    if (ct_cuda_device_name(ordinal, name, sizeof name, NULL, &ignored) != CT_OK)
        snprintf(name, sizeof name, "unnamed");
    snprintf(d->label, sizeof d->label, "CUDA device %d (%s)", ordinal, name);
    const ct_devmem_raw raw = {.alloc = raw_alloc, .free = raw_free, .clear = raw_clear,
                             .host_alloc = raw_host_alloc, .host_free = raw_host_free, .ctx = cd};
    ct_status st = ct_devmem_create(&cd->devmem, &raw, err);
    if (st == CT_OK)
        st = create_streams(d, err);
    if (st != CT_OK) {
        cuda_destroy(d);
        return st;
    }
    *out = d;
    return CT_OK;
}
