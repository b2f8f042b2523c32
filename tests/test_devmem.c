/* The device allocator (base/devmem.h) on counting CPU callbacks: the cap refuses without reaching
 * the raw allocator, grow reuses a freed block (cleared), preallocate sub-allocates and coalesces,
 * in-use and peak are counted as the plan counts them, and the CPU device's injected failures and
 * host memory go through it. */
#include <stdint.h>

#include "base/devmem.h"
#include "base/tensor.h"
#include "device.h"
#include "test_util.h"

typedef struct raw_log {
    long allocs, frees, clears, host_allocs;
    int refuse;              /* the raw allocator fails (a driver out of memory) */
} raw_log;

static void *raw_alloc(void *ctx, size_t bytes)
{
    raw_log *log = ctx;
    log->allocs++;
    if (log->refuse)
        return NULL;
    void *p = aligned_alloc(CT_TENSOR_ALIGN, bytes);
    if (p)
        memset(p, 0xAB, bytes);   /* garbage, so that a missing clear shows */
    return p;
}

static void raw_free(void *ctx, void *p)
{
    ((raw_log *)ctx)->frees++;
    free(p);
}

static int raw_clear(void *ctx, void *p, size_t bytes)
{
    ((raw_log *)ctx)->clears++;
    memset(p, 0, bytes);
    return 0;
}

static void *raw_host_alloc(void *ctx, size_t bytes)
{
    ((raw_log *)ctx)->host_allocs++;
    return aligned_alloc(CT_TENSOR_ALIGN, bytes);
}

static void raw_host_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static ct_devmem *make_devmem(raw_log *log)
{
    ct_devmem_raw raw = {.alloc = raw_alloc, .free = raw_free, .clear = raw_clear, .host_alloc = raw_host_alloc,
                       .host_free = raw_host_free, .ctx = log};
    ct_devmem *p = NULL;
    ct_err err;
    if (ct_devmem_create(&p, &raw, &err) != CT_OK) {
        fprintf(stderr, "ct_devmem_create: %s\n", err.msg);
        exit(1);
    }
    return p;
}

static int all_zero(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < bytes; i++)
        if (b[i])
            return 0;
    return 1;
}

static ct_devmem_usage usage(ct_devmem *p)
{
    ct_devmem_usage u;
    ct_devmem_usage_get(p, &u);
    return u;
}

static void test_rounding_and_peak(void)
{
    raw_log log = {0};
    ct_devmem *p = make_devmem(&log);
    CHECK(ct_devmem_block_bytes(0) == CT_TENSOR_ALIGN && ct_devmem_block_bytes(1) == CT_TENSOR_ALIGN &&
          ct_devmem_block_bytes(256) == 256 && ct_devmem_block_bytes(257) == 512);
    char *a = ct_devmem_alloc(p, 100), *b = ct_devmem_alloc(p, 1000), *c = ct_devmem_alloc(p, 0);
    CHECK(a && b && c && a != b && b != c && a != c);
    CHECK((uintptr_t)a % CT_TENSOR_ALIGN == 0 && (uintptr_t)b % CT_TENSOR_ALIGN == 0);
    CHECK(all_zero(a, 256) && all_zero(b, 1024) && all_zero(c, 256));
    ct_devmem_usage u = usage(p);
    CHECK_MSG(u.in_use == 256 + 1024 + 256 && u.peak == u.in_use && u.reserved == u.in_use,
              "in use %zu, peak %zu, reserved %zu", u.in_use, u.peak, u.reserved);
    ct_devmem_free(p, b);
    u = usage(p);
    CHECK(u.in_use == 512 && u.peak == 1536 && u.reserved == 1536);  /* grow keeps b cached */
    ct_devmem_free(p, NULL);
    ct_devmem_free(p, b);   /* twice: ignored */
    ct_devmem_free(p, (char *)a + 256 * 1000);  /* never handed out: ignored */
    CHECK(usage(p).in_use == 512);
    ct_devmem_free(p, a);
    ct_devmem_free(p, c);
    u = usage(p);
    CHECK(u.in_use == 0 && u.peak == 1536);
    ct_devmem_release_cache(p);
    u = usage(p);
    CHECK_MSG(u.reserved == 0 && log.frees == log.allocs, "reserved %zu after releasing, %ld frees of %ld", u.reserved,
              log.frees, log.allocs);
    ct_devmem_destroy(p);
}

/* grow: the freed block comes back for a request it fits, cleared, without the raw allocator */
static void test_grow_reuse(void)
{
    raw_log log = {0};
    ct_devmem *p = make_devmem(&log);
    char *a = ct_devmem_alloc(p, 4096), *small = ct_devmem_alloc(p, 512);
    memset(a, 7, 4096);
    ct_devmem_free(p, a);
    long raw_before = log.allocs, clears_before = log.clears;
    char *again = ct_devmem_alloc(p, 4000);
    CHECK_MSG(again == a, "the cached block was not reused");
    CHECK(log.allocs == raw_before && log.clears == clears_before + 1);
    CHECK(all_zero(again, 4096));
    /* best fit: of a 4096 and a 512 block cached, a 300-byte request takes the 512 one */
    ct_devmem_free(p, again);
    ct_devmem_free(p, small);
    char *fit = ct_devmem_alloc(p, 300);
    CHECK(fit == small && log.allocs == raw_before);
    /* a cached block bigger than asked is split: the rest serves the next request */
    char *first = ct_devmem_alloc(p, 1024), *second = ct_devmem_alloc(p, 1024);
    CHECK_MSG(first == a && second == a + 1024 && log.allocs == raw_before, "split: %p %p from %p",
              (void *)first, (void *)second, (void *)a);
    CHECK(usage(p).in_use == 256 * 2 + 2048 && usage(p).reserved == 4096 + 512);
    ct_devmem_free(p, first);
    ct_devmem_free(p, second);
    ct_devmem_free(p, fit);
    /* coalesced again: the whole 4096 block is one free block, released whole */
    ct_devmem_release_cache(p);
    CHECK(usage(p).reserved == 0 && log.frees == log.allocs);
    ct_devmem_destroy(p);
}

/* limit: a request over the cap fails before the raw allocator is called; the cache goes back
 * before what is held would pass the cap; a refusing driver is retried after releasing the cache */
static void test_limit(void)
{
    raw_log log = {0};
    ct_devmem *p = make_devmem(&log);
    ct_err err;
    CHECK(ct_devmem_set_policy(p, CT_DEVMEM_LIMIT, 0, &err) == CT_ERR_USAGE);
    CHECK(ct_devmem_set_policy(p, CT_DEVMEM_LIMIT, 4096, &err) == CT_OK);
    CHECK(usage(p).cap == 4096 && usage(p).policy == CT_DEVMEM_LIMIT);
    char *a = ct_devmem_alloc(p, 3000);   /* 3072 */
    CHECK(a != NULL);
    long raw_before = log.allocs;
    CHECK(ct_devmem_alloc(p, 1100) == NULL);   /* 1280 more would pass 4096 */
    CHECK_MSG(log.allocs == raw_before, "the cap reached the raw allocator");
    CHECK(ct_devmem_alloc(p, (size_t)1 << 40) == NULL && log.allocs == raw_before);
    char *b = ct_devmem_alloc(p, 1024);   /* exactly at the cap */
    CHECK(b != NULL && usage(p).in_use == 4096);
    CHECK(ct_devmem_alloc(p, 1) == NULL && log.allocs == raw_before + 1);
    /* changing the policy while blocks are in use is refused */
    CHECK(ct_devmem_set_policy(p, CT_DEVMEM_GROW, 0, &err) == CT_ERR_USAGE && ct_contains(err.msg, "4096 bytes"));
    /* a 3072 block cached, 1024 in use: a 2048 request cannot reuse it whole without splitting,
     * best fit splits it; a 3328 one needs a new raw block, and the cache goes first */
    ct_devmem_free(p, a);
    char *c = ct_devmem_alloc(p, 3072);
    CHECK(c == a);
    ct_devmem_free(p, c);
    ct_devmem_free(p, b);
    char *d = ct_devmem_alloc(p, 4096);   /* neither cached block holds it: released, then raw */
    CHECK_MSG(d != NULL && usage(p).reserved == 4096, "reserved %zu: the cache was not released under the cap",
              usage(p).reserved);
    ct_devmem_free(p, d);
    /* the driver refuses: the cache is released and the allocation retried once */
    ct_devmem_release_cache(p);
    CHECK(ct_devmem_set_policy(p, CT_DEVMEM_GROW, 0, &err) == CT_OK && usage(p).cap == 0);
    char *e = ct_devmem_alloc(p, 2048);
    ct_devmem_free(p, e);
    log.refuse = 1;
    long frees = log.frees;
    CHECK(ct_devmem_alloc(p, 4096) == NULL);
    CHECK_MSG(log.frees == frees + 1 && usage(p).reserved == 0, "the cache was not released when the driver refused");
    log.refuse = 0;
    ct_devmem_destroy(p);
    CHECK(log.frees == log.allocs - 2);  /* two refused raw calls allocated nothing */
}

/* preallocate: one arena, first fit, coalescing on free, nothing past it */
static void test_preallocate(void)
{
    raw_log log = {0};
    ct_devmem *p = make_devmem(&log);
    ct_err err;
    CHECK(ct_devmem_set_policy(p, CT_DEVMEM_PREALLOCATE, 8192 + 100, &err) == CT_OK);
    CHECK(log.allocs == 1 && usage(p).reserved == 8192 && usage(p).in_use == 0);
    char *a = ct_devmem_alloc(p, 2048), *b = ct_devmem_alloc(p, 2048), *c = ct_devmem_alloc(p, 2048);
    CHECK(a && b == a + 2048 && c == b + 2048 && log.allocs == 1);
    CHECK(all_zero(a, 6144));
    CHECK(ct_devmem_alloc(p, 4096) == NULL && log.allocs == 1);   /* 2048 left */
    /* freeing a and b coalesces them: 4096 fits at the front (first fit), not past c */
    memset(a, 9, 4096);
    ct_devmem_free(p, a);
    ct_devmem_free(p, b);
    char *d = ct_devmem_alloc(p, 4096);
    CHECK_MSG(d == a && all_zero(d, 4096), "coalesced front block not reused");
    CHECK(usage(p).in_use == 6144 && usage(p).peak == 6144);
    /* freeing in the other order coalesces with the block after too */
    ct_devmem_free(p, c);
    ct_devmem_free(p, d);
    char *whole = ct_devmem_alloc(p, 8192);
    CHECK(whole == a && log.allocs == 1);
    ct_devmem_free(p, whole);
    /* the arena is not a cache: releasing keeps it */
    ct_devmem_release_cache(p);
    CHECK(usage(p).reserved == 8192 && log.frees == 0);
    /* an arena the raw allocator refuses */
    CHECK(ct_devmem_set_policy(p, CT_DEVMEM_GROW, 0, &err) == CT_OK && log.frees == 1);
    log.refuse = 1;
    CHECK(ct_devmem_set_policy(p, CT_DEVMEM_PREALLOCATE, 1 << 20, &err) == CT_ERR_NOMEM);
    CHECK(usage(p).policy == CT_DEVMEM_GROW);
    log.refuse = 0;
    ct_devmem_destroy(p);
}

/* a clear that fails hands nothing out */
static int failing_clear(void *ctx, void *p, size_t bytes)
{
    (void)ctx; (void)p; (void)bytes;
    return 1;
}

static void test_clear_failure_and_host(void)
{
    raw_log log = {0};
    ct_devmem_raw raw = {.alloc = raw_alloc, .free = raw_free, .clear = failing_clear, .host_alloc = raw_host_alloc,
                       .host_free = raw_host_free, .ctx = &log};
    ct_devmem *p = NULL;
    ct_err err;
    CHECK(ct_devmem_create(&p, &raw, &err) == CT_OK);
    CHECK(ct_devmem_alloc(p, 64) == NULL && usage(p).in_use == 0);
    /* host memory: counted apart, never under the cap */
    CHECK(ct_devmem_set_policy(p, CT_DEVMEM_LIMIT, 256, &err) == CT_OK);
    void *h1 = ct_devmem_host_alloc(p, 1000), *h2 = ct_devmem_host_alloc(p, 5000);
    CHECK(h1 && h2 && log.host_allocs == 2);
    ct_devmem_usage u = usage(p);
    CHECK_MSG(u.host_in_use == 1024 + 5120 && u.host_peak == u.host_in_use && u.in_use == 0,
              "host %zu, peak %zu, device %zu", u.host_in_use, u.host_peak, u.in_use);
    ct_devmem_host_free(p, h2);
    ct_devmem_host_free(p, h1);
    u = usage(p);
    CHECK(u.host_in_use == 0 && u.host_peak == 1024 + 5120);
    ct_devmem_destroy(p);
    CHECK(ct_devmem_create(&p, &(ct_devmem_raw){.alloc = raw_alloc}, &err) == CT_ERR_USAGE);
}

/* the CPU device allocates through its allocator: injected failures come first, host memory apart */
static void test_cpu_device(void)
{
    ct_device *d = NULL;
    ct_err err;
    CHECK(ct_cpu_device_create(&d, &err) == CT_OK);
    CHECK(strcmp(d->label, "the CPU") == 0);
    CHECK(d->ops->set_memory(d, CT_DEVMEM_LIMIT, 1 << 20, &err) == CT_OK);
    void *a = d->ops->alloc(d, 1000);
    CHECK(a != NULL && all_zero(a, 1024));
    CHECK(d->ops->alloc(d, 1 << 20) == NULL);   /* past the cap */
    void *h = d->ops->host_alloc(d, 4 << 20);     /* host memory is not capped */
    CHECK(h != NULL);
    d->fault = (ct_alloc_fault){.skip = 1, .count = 1};
    void *b = d->ops->alloc(d, 16);
    CHECK(b != NULL && d->ops->alloc(d, 16) == NULL);   /* the injected one */
    void *c = d->ops->alloc(d, 16);
    CHECK(c != NULL);
    ct_devmem_usage u;
    d->ops->memory_usage(d, &u);
    CHECK_MSG(u.in_use == 1024 + 256 + 256 && u.cap == 1 << 20 && u.host_in_use == 4 << 20,
              "in use %zu, cap %zu, host %zu", u.in_use, u.cap, u.host_in_use);
    d->ops->free(d, a);
    d->ops->free(d, b);
    d->ops->free(d, c);
    d->ops->host_free(d, h);
    /* preallocate acts as grow on the CPU */
    CHECK(d->ops->set_memory(d, CT_DEVMEM_PREALLOCATE, 0, &err) == CT_OK);
    d->ops->memory_usage(d, &u);
    CHECK(u.policy == CT_DEVMEM_GROW && u.reserved == 0 && u.in_use == 0 && u.host_in_use == 0);
    d->ops->destroy(d);
}

int main(void)
{
    test_rounding_and_peak();
    test_grow_reuse();
    test_limit();
    test_preallocate();
    test_clear_failure_and_host();
    test_cpu_device();
    return ct_test_done();
}
