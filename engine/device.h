/* A device: memory on it and on the host, copies, free and total memory, its streams' order and
 * timing marks. What runs on it (layer ops, loss, optimizer) is a backend (backend.h) bound to a
 * device; a replica is one of each. In the manner of ggml's device / buffer / backend split. */
#ifndef CT_DEVICE_H
#define CT_DEVICE_H

#include <stddef.h>

#include "base/devmem.h"
#include "base/status.h"

typedef struct ct_device ct_device;
typedef struct ct_step_timer ct_step_timer;   /* the device's own (step_timer_create) */

enum { CT_DEVICE_MARKS = 4 };

typedef struct ct_device_ops {
    const char *name;                /* "cpu", "cuda" */
    /* Makes the device current for the calling thread (cudaSetDevice): every thread that drives a
     * device calls it first. */
    ct_status (*activate)(ct_device *d, ct_err *err);
    /* Zeroed device memory (ordered before any later work on the device), or NULL. Every device
     * allocation comes through here, from the device's allocator (base/devmem.h), which counts it,
     * rounded to CT_TENSOR_ALIGN, and applies [train] memory. */
    void *(*alloc)(ct_device *d, size_t bytes);
    void (*free)(ct_device *d, void *ptr);
    /* Host memory that copies to the device overlap with (pinned and portable on a GPU, aligned
     * on the CPU); callable from any thread. NULL on failure. Counted apart from device memory,
     * never under a cap. */
    void *(*host_alloc)(ct_device *d, size_t bytes);
    void (*host_free)(ct_device *d, void *ptr);
    /* [train] memory, set before anything is allocated: grow, preallocate (on a GPU the free
     * memory less a slack for the CUDA libraries; on the CPU as grow) or a cap of `limit` bytes. */
    ct_status (*set_memory)(ct_device *d, ct_devmem_policy policy, size_t limit, ct_err *err);
    /* What the allocator counts: device bytes in use, their peak, reserved, the cap; host apart. */
    void (*memory_usage)(ct_device *d, ct_devmem_usage *out);
    /* Host to device and back; both return once src has been read and dst written. */
    ct_status (*upload)(ct_device *d, void *dst, const void *src, size_t bytes, ct_err *err);
    ct_status (*download)(ct_device *d, void *dst, const void *src, size_t bytes, ct_err *err);
    /* Device to device and clearing, in order on the compute stream. */
    ct_status (*copy)(ct_device *d, void *dst, const void *src, size_t bytes, ct_err *err);
    ct_status (*zero)(ct_device *d, void *ptr, size_t bytes, ct_err *err);
    /* Free and total bytes of device memory. */
    ct_status (*memory)(ct_device *d, size_t *free_bytes, size_t *total_bytes, ct_err *err);
    /* Waits for all queued work. */
    ct_status (*synchronize)(ct_device *d, ct_err *err);
    /* Timing in stream order: mark(slot) records a point; elapsed waits for slot b and gives the
     * milliseconds from a to b (CUDA events on the GPU, the clock on the CPU). */
    ct_status (*mark)(ct_device *d, int slot, ct_err *err);
    ct_status (*elapsed)(ct_device *d, int a, int b, double *ms, ct_err *err);
    /* The device's PCI bus id ("0000:3b:00.0"), by which the monitor finds the same GPU in NVML
     * whatever CUDA_VISIBLE_DEVICES says, into buf (n bytes, always terminated; "" when it cannot
     * be read: the monitor then takes the ordinal for NVML's index). Returns 0 for a device NVML
     * does not watch: the CPU answers none. */
    int (*pci_bus_id)(const ct_device *d, char *buf, int n);
    /* The compute stream's busy time over the train steps (the time split's device_busy): a timer
     * into *out, or NULL where the device has none (the CPU answers none: its steps are the host's
     * own time). begin and end go around each step, on the thread that enqueues it; total gives
     * the seconds of every step timed so far, waiting for the last ones (called once the device
     * has finished them). The four after create are called only with a timer create made. */
    ct_status (*step_timer_create)(ct_device *d, ct_step_timer **out, ct_err *err);
    ct_status (*step_timer_begin)(ct_step_timer *t, ct_err *err);
    ct_status (*step_timer_end)(ct_step_timer *t, ct_err *err);
    ct_status (*step_timer_total)(ct_step_timer *t, double *seconds, ct_err *err);
    void (*step_timer_destroy)(ct_step_timer *t);
    void (*destroy)(ct_device *d);
} ct_device_ops;

/* Failures injected into device allocations (ct_inject_alloc_failures), to test what follows an
 * out-of-memory: the allocation after `skip` more successful ones fails, and so do the
 * `count` - 1 after it. Zero count: none. */
typedef struct ct_alloc_fault {
    long skip, count;
} ct_alloc_fault;

/* 1 when this allocation is to fail (and counts it). */
static inline int ct_alloc_fault_hit(ct_alloc_fault *f)
{
    if (f->count <= 0)
        return 0;
    if (f->skip > 0) {
        f->skip--;
        return 0;
    }
    f->count--;
    return 1;
}

struct ct_device {
    const ct_device_ops *ops;
    int ordinal;             /* CUDA ordinal among the visible devices; 0 on the CPU */
    int host_memory;         /* 1 when device memory is host memory (reading back costs nothing) */
    ct_alloc_fault fault;    /* injected allocation failures (tests) */
    char label[128];         /* for messages: "CUDA device 0 (NVIDIA H200)", "the CPU" */
    void *impl;
};

/* The CPU device, which every build has; a GPU's comes from the registry (registry.h). */
ct_status ct_cpu_device_create(ct_device **out, ct_err *err);

#endif
