/* The one allocator behind every device allocation: a device-agnostic accounting allocator over raw
 * allocate / free / clear callbacks (cudaMalloc, cudaFree and cudaMemsetAsync on a GPU;
 * aligned_alloc, free and memset on the CPU), implementing [train] memory:
 *
 *   grow         allocate from the raw allocator as needed; a freed block is kept and handed out
 *                again (best fit, split to the size asked) instead of going back to the driver,
 *                TensorFlow's memory growth and PyTorch's caching allocator;
 *   preallocate  one arena reserved up front, sub-allocated first fit, coalesced on free; an
 *                allocation the arena cannot hold fails;
 *   limit        grow with a hard cap on the bytes in use: an allocation that would pass it fails
 *                without reaching the raw allocator.
 *
 * Every size is rounded up to CT_TENSOR_ALIGN (a zero-byte request takes one block), and that
 * rounded size is what is counted in use: the memory plan counts the same. Every block handed out
 * is cleared first. Pinned host memory (the input ring) goes through the allocator's host callbacks and
 * is counted apart, never under the cap. All functions are thread-safe (host memory is allocated
 * from the input pipeline's threads). */
#ifndef CT_DEVMEM_H
#define CT_DEVMEM_H

#include <stddef.h>

#include "base/status.h"

typedef struct ct_devmem ct_devmem;

/* The raw allocator. alloc returns CT_TENSOR_ALIGN-aligned memory or NULL; clear zeroes bytes at
 * p, ordered before any later work on the device, and returns 0 on success. host_alloc and
 * host_free may be NULL when the device has no host memory of its own (then host allocations
 * fail). */
typedef struct ct_devmem_raw {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    int (*clear)(void *ctx, void *p, size_t bytes);
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *p);
    void *ctx;
} ct_devmem_raw;

typedef enum ct_devmem_policy {
    CT_DEVMEM_GROW,
    CT_DEVMEM_PREALLOCATE,
    CT_DEVMEM_LIMIT,
} ct_devmem_policy;

/* Bytes, as the allocator counts them (each block rounded to CT_TENSOR_ALIGN). */
typedef struct ct_devmem_usage {
    size_t in_use;           /* handed out and not yet freed */
    size_t peak;             /* the most in use at once since the allocator was made */
    size_t reserved;         /* held from the raw allocator: in use, cached, and the arena's rest */
    size_t cap;              /* limit's cap on in_use; 0 = none */
    size_t host_in_use, host_peak;  /* host memory, counted apart */
    ct_devmem_policy policy;
    long raw_allocs;         /* calls that reached the raw allocator (tests) */
} ct_devmem_usage;

ct_status ct_devmem_create(ct_devmem **out, const ct_devmem_raw *raw, ct_err *err);
/* Frees every raw block with nothing in use in it; a block still in use is left allocated, so
 * that on the CPU LeakSanitizer names the leak instead of the allocator hiding it. */
void ct_devmem_destroy(ct_devmem *p);

/* Sets the policy, only while nothing is in use (a cache is released first). grow: `bytes` is
 * ignored; limit: `bytes` is the cap (> 0); preallocate: `bytes` is the arena, reserved now
 * (CT_ERR_NOMEM when the raw allocator refuses it). */
ct_status ct_devmem_set_policy(ct_devmem *p, ct_devmem_policy policy, size_t bytes, ct_err *err);

/* A cleared block of at least `bytes` (CT_TENSOR_ALIGN-aligned), or NULL: over the cap, past the
 * arena, or refused by the raw allocator even after the cache was released. */
void *ct_devmem_alloc(ct_devmem *p, size_t bytes);
/* NULL is ignored; so is a pointer the allocator did not hand out. */
void ct_devmem_free(ct_devmem *p, void *ptr);
/* Returns to the raw allocator every raw block with nothing in use in it (grow and limit). */
void ct_devmem_release_cache(ct_devmem *p);

void *ct_devmem_host_alloc(ct_devmem *p, size_t bytes);
void ct_devmem_host_free(ct_devmem *p, void *ptr);

void ct_devmem_usage_get(ct_devmem *p, ct_devmem_usage *out);

/* CT_TENSOR_ALIGN-rounded size of one allocation of `bytes`, as the allocator counts it. */
size_t ct_devmem_block_bytes(size_t bytes);

#endif
