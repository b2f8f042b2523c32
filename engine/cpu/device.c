/* The CPU as a device: its memory is host memory (through the accounting allocator, base/devmem.h, as a
 * GPU's), copies are memcpy, work is done by the time a call returns, and timing marks read the
 * monotonic clock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/devmem.h"
#include "base/tensor.h"
#include "device.h"

typedef struct cpu_device {
    double marks[CT_DEVICE_MARKS];   /* milliseconds */
    ct_devmem *devmem;
} cpu_device;

static ct_devmem *devmem_of(ct_device *d) { return ((cpu_device *)d->impl)->devmem; }

/* activate and synchronize: there is no current device to set, and every op has finished by the
 * time it returns. */
static ct_status cpu_nothing_to_do(ct_device *d, ct_err *err)
{
    (void)d; (void)err;
    return CT_OK;
}

/* The allocator's raw allocator. CT_TENSOR_ALIGN, as a GPU's allocations: the tensors carved out of
 * one allocation are aligned relative to its start (graph.c), and so absolutely on every device.
 * The allocator asks for multiples of it, as aligned_alloc requires. */
static void *raw_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return aligned_alloc(CT_TENSOR_ALIGN, bytes);
}

static void raw_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static int raw_clear(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    memset(p, 0, bytes);
    return 0;
}

static void *cpu_alloc(ct_device *d, size_t bytes)
{
    if (ct_alloc_fault_hit(&d->fault))
        return NULL;
    return ct_devmem_alloc(devmem_of(d), bytes);
}

static void cpu_free(ct_device *d, void *ptr)
{
    ct_devmem_free(devmem_of(d), ptr);
}

/* Host memory for the input ring: aligned, counted apart from device memory, never capped. */
static void *cpu_host_alloc(ct_device *d, size_t bytes)
{
    if (ct_alloc_fault_hit(&d->fault))
        return NULL;
    return ct_devmem_host_alloc(devmem_of(d), bytes);
}

static void cpu_host_free(ct_device *d, void *ptr)
{
    ct_devmem_host_free(devmem_of(d), ptr);
}

/* preallocate acts as grow here: reserving the free host memory would take it from every other
 * process on the machine, and host memory grows cheaply. */
static ct_status cpu_set_memory(ct_device *d, ct_devmem_policy policy, size_t limit, ct_err *err)
{
    if (policy == CT_DEVMEM_PREALLOCATE)
        policy = CT_DEVMEM_GROW;
    return ct_devmem_set_policy(devmem_of(d), policy, limit, err);
}

static void cpu_memory_usage(ct_device *d, ct_devmem_usage *out)
{
    ct_devmem_usage_get(devmem_of(d), out);
}

/* upload, download and copy alike: all memory is host memory */
static ct_status cpu_copy(ct_device *d, void *dst, const void *src, size_t bytes, ct_err *err)
{
    (void)d; (void)err;
    memcpy(dst, src, bytes);
    return CT_OK;
}

static ct_status cpu_zero(ct_device *d, void *ptr, size_t bytes, ct_err *err)
{
    (void)d; (void)err;
    memset(ptr, 0, bytes);
    return CT_OK;
}

static ct_status cpu_memory(ct_device *d, size_t *free_bytes, size_t *total_bytes, ct_err *err)
{
    (void)d;
    long page = sysconf(_SC_PAGESIZE), avail = sysconf(_SC_AVPHYS_PAGES), total = sysconf(_SC_PHYS_PAGES);
    if (page <= 0 || avail < 0 || total <= 0)
        return ct_fail(err, CT_ERR_INTERNAL, "cpu device: the system does not report its memory");
    *free_bytes = (size_t)avail * (size_t)page;
    *total_bytes = (size_t)total * (size_t)page;
    return CT_OK;
}

static ct_status cpu_mark(ct_device *d, int slot, ct_err *err)
{
    if (slot < 0 || slot >= CT_DEVICE_MARKS)
        return ct_fail(err, CT_ERR_USAGE, "timing mark %d out of range", slot);
    ((cpu_device *)d->impl)->marks[slot] = 1e3 * ct_clock_seconds();
    return CT_OK;
}

static ct_status cpu_elapsed(ct_device *d, int a, int b, double *ms, ct_err *err)
{
    if (a < 0 || a >= CT_DEVICE_MARKS || b < 0 || b >= CT_DEVICE_MARKS)
        return ct_fail(err, CT_ERR_USAGE, "timing marks %d, %d out of range", a, b);
    const cpu_device *cd = d->impl;
    *ms = cd->marks[b] - cd->marks[a];
    return CT_OK;
}

static void cpu_destroy(ct_device *d)
{
    if (!d)
        return;
    cpu_device *cd = d->impl;
    if (cd)
        ct_devmem_destroy(cd->devmem);
    free(cd);
    free(d);
}

/* NVML watches no CPU. */
static int cpu_pci_bus_id(const ct_device *d, char *buf, int n)
{
    (void)d;
    if (n > 0)
        buf[0] = '\0';
    return 0;
}

/* The CPU's steps run on the calling thread: the host's clock around them is their busy time. */
static ct_status cpu_step_timer_create(ct_device *d, ct_step_timer **out, ct_err *err)
{
    (void)d;
    (void)err;
    *out = NULL;
    return CT_OK;
}

static const ct_device_ops cpu_device_ops = {
    .name = "cpu",
    .activate = cpu_nothing_to_do,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .set_memory = cpu_set_memory,
    .memory_usage = cpu_memory_usage,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .memory = cpu_memory,
    .synchronize = cpu_nothing_to_do,
    .mark = cpu_mark,
    .elapsed = cpu_elapsed,
    .pci_bus_id = cpu_pci_bus_id,
    .step_timer_create = cpu_step_timer_create,   /* none: the other step_timer ops are never called */
    .destroy = cpu_destroy,
};

ct_status ct_cpu_device_create(ct_device **out, ct_err *err)
{
    ct_device *d = calloc(1, sizeof *d);
    cpu_device *cd = calloc(1, sizeof *cd);
    if (!d || !cd) {
        free(d);
        free(cd);
        return ct_fail(err, CT_ERR_NOMEM, "out of memory creating the CPU device");
    }
    d->ops = &cpu_device_ops;
    d->ordinal = 0;
    d->host_memory = 1;
    d->impl = cd;
    snprintf(d->label, sizeof d->label, "the CPU");
    const ct_devmem_raw raw = {.alloc = raw_alloc, .free = raw_free, .clear = raw_clear,
                             .host_alloc = raw_alloc, .host_free = raw_free};
    ct_status st = ct_devmem_create(&cd->devmem, &raw, err);
    if (st != CT_OK) {
        cpu_destroy(d);
        return st;
    }
    *out = d;
    return CT_OK;
}
