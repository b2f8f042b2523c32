/* The accounting allocator (devmem.h). Raw blocks ("segments") are split into blocks kept in one
 * array sorted by address, so that a block's neighbours in the array are its neighbours in memory
 * when they share its segment: freeing coalesces with them, and a segment whose one block is free
 * is wholly cached. Allocations are setup work (binding a network, reserving a workspace), a few
 * hundred per run, so linear scans are fine. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/devmem.h"
#include "base/tensor.h"

typedef struct devmem_block {
    char *ptr;
    size_t size;
    char *seg;               /* the base of the raw block it is carved from */
    size_t seg_size;
    int used;
} devmem_block;

typedef struct host_block {
    void *ptr;
    size_t size;
} host_block;

struct ct_devmem {
    ct_devmem_raw raw;
    pthread_mutex_t mu;
    ct_devmem_policy policy;
    size_t cap;
    devmem_block *blocks;
    int n_blocks, blocks_cap;
    host_block *host;
    int n_host, host_cap;
    size_t in_use, peak, reserved, host_in_use, host_peak;
    long raw_allocs;
};

size_t ct_devmem_block_bytes(size_t bytes)
{
    size_t rounded = (bytes + CT_TENSOR_ALIGN - 1) / CT_TENSOR_ALIGN * CT_TENSOR_ALIGN;
    return rounded ? rounded : CT_TENSOR_ALIGN;
}

ct_status ct_devmem_create(ct_devmem **out, const ct_devmem_raw *raw, ct_err *err)
{
    *out = NULL;
    if (!raw || !raw->alloc || !raw->free || !raw->clear)
        return ct_fail(err, CT_ERR_USAGE, "ct_devmem_create: alloc, free and clear are required");
    ct_devmem *p = calloc(1, sizeof *p);
    if (!p)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the device allocator");
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return ct_fail(err, CT_ERR_INTERNAL, "cannot create the device allocator's mutex");
    }
    p->raw = *raw;
    p->policy = CT_DEVMEM_GROW;
    *out = p;
    return CT_OK;
}

/* Room for `more` blocks; 0 when the host is out of memory. */
static int reserve_blocks(ct_devmem *p, int more)
{
    if (p->n_blocks + more <= p->blocks_cap)
        return 1;
    int cap = p->blocks_cap ? 2 * p->blocks_cap : 64;
    while (cap < p->n_blocks + more)
        cap *= 2;
    devmem_block *grown = realloc(p->blocks, (size_t)cap * sizeof *grown);
    if (!grown)
        return 0;
    p->blocks = grown;
    p->blocks_cap = cap;
    return 1;
}

static void insert_block(ct_devmem *p, int at, devmem_block b)
{
    memmove(&p->blocks[at + 1], &p->blocks[at], (size_t)(p->n_blocks - at) * sizeof *p->blocks);
    p->blocks[at] = b;
    p->n_blocks++;
}

static void remove_block(ct_devmem *p, int at)
{
    memmove(&p->blocks[at], &p->blocks[at + 1], (size_t)(p->n_blocks - at - 1) * sizeof *p->blocks);
    p->n_blocks--;
}

/* Index of the first block at an address >= ptr. */
static int lower_bound(const ct_devmem *p, const char *ptr)
{
    int lo = 0, hi = p->n_blocks;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (p->blocks[mid].ptr < ptr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A new raw block of `size` bytes as one free block; its index, or -1. */
static int add_segment(ct_devmem *p, size_t size)
{
    if (!reserve_blocks(p, 2))   /* the segment's block and the split that follows */
        return -1;
    p->raw_allocs++;
    char *base = p->raw.alloc(p->raw.ctx, size);
    if (!base)
        return -1;
    p->reserved += size;
    int at = lower_bound(p, base);
    insert_block(p, at, (devmem_block){.ptr = base, .size = size, .seg = base, .seg_size = size});
    return at;
}

static int whole_segment(const devmem_block *b) { return !b->used && b->ptr == b->seg && b->size == b->seg_size; }

/* Every raw block with nothing in use goes back to the raw allocator; with `arena_too`, the
 * preallocated arena as well. */
static void release_free_segments(ct_devmem *p, int arena_too)
{
    if (p->policy == CT_DEVMEM_PREALLOCATE && !arena_too)
        return;
    for (int i = p->n_blocks - 1; i >= 0; i--) {
        devmem_block b = p->blocks[i];
        if (!whole_segment(&b))
            continue;
        p->raw.free(p->raw.ctx, b.seg);
        p->reserved -= b.seg_size;
        remove_block(p, i);
    }
}

/* grow and limit: the smallest free block that holds `size` (best fit, which leaves the big ones
 * whole for big requests); preallocate: the first in address order (first fit, which keeps the
 * arena's free space at its end in one piece). -1 when none. */
static int find_fit(const ct_devmem *p, size_t size)
{
    int best = -1;
    for (int i = 0; i < p->n_blocks; i++) {
        const devmem_block *b = &p->blocks[i];
        if (b->used || b->size < size)
            continue;
        if (p->policy == CT_DEVMEM_PREALLOCATE)
            return i;
        if (best < 0 || b->size < p->blocks[best].size)
            best = i;
    }
    return best;
}

/* Marks block i free and merges it with free neighbours of its segment. */
static void free_block(ct_devmem *p, int i)
{
    devmem_block *b = &p->blocks[i];
    b->used = 0;
    p->in_use -= b->size;
    if (i + 1 < p->n_blocks) {
        devmem_block *next = &p->blocks[i + 1];
        if (!next->used && next->seg == b->seg && b->ptr + b->size == next->ptr) {
            b->size += next->size;
            remove_block(p, i + 1);
        }
    }
    if (i > 0) {
        devmem_block *prev = &p->blocks[i - 1];
        if (!prev->used && prev->seg == b->seg && prev->ptr + prev->size == b->ptr) {
            prev->size += b->size;
            remove_block(p, i);
        }
    }
}

static void *alloc_locked(ct_devmem *p, size_t size)
{
    if (p->policy == CT_DEVMEM_LIMIT && (size > p->cap || p->in_use > p->cap - size))
        return NULL;   /* refused before the driver is asked */
    if (!reserve_blocks(p, 1))
        return NULL;
    int i = find_fit(p, size);
    if (i < 0) {
        if (p->policy == CT_DEVMEM_PREALLOCATE)
            return NULL;
        /* under a cap, what is cached goes back before what is held would pass the cap */
        if (p->policy == CT_DEVMEM_LIMIT && p->reserved + size > p->cap)
            release_free_segments(p, 0);
        i = add_segment(p, size);
        if (i < 0) {
            /* the driver may be out only because the cache holds the memory */
            release_free_segments(p, 0);
            i = add_segment(p, size);
        }
        if (i < 0)
            return NULL;
    }
    devmem_block *b = &p->blocks[i];
    if (b->size > size) {   /* the rest stays free, right after it */
        devmem_block rest = {.ptr = b->ptr + size, .size = b->size - size, .seg = b->seg, .seg_size = b->seg_size};
        b->size = size;
        insert_block(p, i + 1, rest);
        b = &p->blocks[i];
    }
    b->used = 1;
    p->in_use += size;
    if (p->in_use > p->peak)
        p->peak = p->in_use;
    /* a fresh block and a reused one alike: the device ops promise zeroed memory */
    if (p->raw.clear(p->raw.ctx, b->ptr, size) != 0) {
        free_block(p, i);
        return NULL;
    }
    return b->ptr;
}

void *ct_devmem_alloc(ct_devmem *p, size_t bytes)
{
    pthread_mutex_lock(&p->mu);
    void *ptr = alloc_locked(p, ct_devmem_block_bytes(bytes));
    pthread_mutex_unlock(&p->mu);
    return ptr;
}

void ct_devmem_free(ct_devmem *p, void *ptr)
{
    if (!ptr)
        return;
    pthread_mutex_lock(&p->mu);
    int i = lower_bound(p, ptr);
    if (i < p->n_blocks && p->blocks[i].ptr == (char *)ptr && p->blocks[i].used)
        free_block(p, i);
    pthread_mutex_unlock(&p->mu);
}

void ct_devmem_release_cache(ct_devmem *p)
{
    pthread_mutex_lock(&p->mu);
    release_free_segments(p, 0);
    pthread_mutex_unlock(&p->mu);
}

ct_status ct_devmem_set_policy(ct_devmem *p, ct_devmem_policy policy, size_t bytes, ct_err *err)
{
    if (policy == CT_DEVMEM_LIMIT && bytes == 0)
        return ct_fail(err, CT_ERR_USAGE, "device allocator: a limit of 0 bytes");
    pthread_mutex_lock(&p->mu);
    if (p->in_use) {
        size_t in_use = p->in_use;
        pthread_mutex_unlock(&p->mu);
        return ct_fail(err, CT_ERR_USAGE, "device allocator: the policy changes only while nothing is allocated "
                                          "(%zu bytes are)", in_use);
    }
    release_free_segments(p, 1);
    p->policy = policy;
    p->cap = policy == CT_DEVMEM_LIMIT ? bytes : 0;
    ct_status st = CT_OK;
    if (policy == CT_DEVMEM_PREALLOCATE) {
        size_t arena = bytes / CT_TENSOR_ALIGN * CT_TENSOR_ALIGN;
        if (arena == 0 || add_segment(p, arena) < 0) {
            p->policy = CT_DEVMEM_GROW;
            st = ct_fail(err, CT_ERR_NOMEM, "memory = preallocate: cannot reserve %.1f MiB",
                         (double)arena / (1024.0 * 1024.0));
        }
    }
    pthread_mutex_unlock(&p->mu);
    return st;
}

void *ct_devmem_host_alloc(ct_devmem *p, size_t bytes)
{
    if (!p->raw.host_alloc)
        return NULL;
    size_t size = ct_devmem_block_bytes(bytes);
    pthread_mutex_lock(&p->mu);
    void *ptr = NULL;
    if (p->n_host == p->host_cap) {
        int cap = p->host_cap ? 2 * p->host_cap : 16;
        host_block *grown = realloc(p->host, (size_t)cap * sizeof *grown);
        if (grown) {
            p->host = grown;
            p->host_cap = cap;
        }
    }
    if (p->n_host < p->host_cap)
        ptr = p->raw.host_alloc(p->raw.ctx, size);
    if (ptr) {
        p->host[p->n_host++] = (host_block){ptr, size};
        p->host_in_use += size;
        if (p->host_in_use > p->host_peak)
            p->host_peak = p->host_in_use;
    }
    pthread_mutex_unlock(&p->mu);
    return ptr;
}

void ct_devmem_host_free(ct_devmem *p, void *ptr)
{
    if (!ptr)
        return;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n_host; i++) {
        if (p->host[i].ptr != ptr)
            continue;
        p->raw.host_free(p->raw.ctx, ptr);
        p->host_in_use -= p->host[i].size;
        p->host[i] = p->host[--p->n_host];
        break;
    }
    pthread_mutex_unlock(&p->mu);
}

void ct_devmem_usage_get(ct_devmem *p, ct_devmem_usage *out)
{
    pthread_mutex_lock(&p->mu);
    *out = (ct_devmem_usage){.in_use = p->in_use, .peak = p->peak, .reserved = p->reserved, .cap = p->cap,
                           .host_in_use = p->host_in_use, .host_peak = p->host_peak, .policy = p->policy,
                           .raw_allocs = p->raw_allocs};
    pthread_mutex_unlock(&p->mu);
}

void ct_devmem_destroy(ct_devmem *p)
{
    if (!p)
        return;
    release_free_segments(p, 1);
    free(p->blocks);
    free(p->host);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
