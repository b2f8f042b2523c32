/* The cuDNN handle of the CUDA backend, bound to the compute stream, and what its two cuDNN layer
 * types (conv2d.c, batchnorm.c) share: the 32-bit size check and the per-shape descriptor cache
 * (descriptors are host work, made once per shape). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"

ct_status ct_cuda_dnn_init(ct_cuda *cu, ct_err *err)
{
    CT_CUDNN_CHECK(cudnnCreate(&cu->dnn), err);
    /* every cuDNN call then enqueues on the compute stream, in order with our kernels */
    CT_CUDNN_CHECK(cudnnSetStream(cu->dnn, cu->compute), err);
    return CT_OK;
}

/* Every entry, by its type's release. */
static void cache_free(ct_dnn_cache *c)
{
    for (int i = 0; i < c->count; i++)
        c->type->release((char *)c->items + (size_t)i * c->type->entry_size);
    free(c->items);
    *c = (ct_dnn_cache){NULL, 0, 0, NULL};
}

/* The descriptors first, then the handle they were used with; nothing useful to do with a
 * failure while releasing. */
void ct_cuda_dnn_free(ct_cuda *cu)
{
    cache_free(&cu->conv);
    cache_free(&cu->bn);
    if (cu->dnn) {
        cudnnDestroy(cu->dnn);
        cu->dnn = NULL;
    }
}

/* Checked a step at a time, so that the product itself cannot overflow. */
int ct_cuda_dnn_fits_int(size_t a, size_t b, size_t c, size_t d)
{
    size_t dims[4] = {a, b, c, d}, total = 1;
    for (int i = 0; i < 4; i++) {
        if (dims[i] != 0 && total > (size_t)INT_MAX / dims[i])
            return 0;
        total *= dims[i];
    }
    return 1;
}

/* Room for one more entry. */
static ct_status grow(ct_dnn_cache *c, size_t size, ct_err *err)
{
    if (c->count < c->cap)
        return CT_OK;
    int want = c->cap ? 2 * c->cap : 8;
    void *p = realloc(c->items, (size_t)want * size);
    if (!p)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory growing the cuDNN caches");
    c->items = p;
    c->cap = want;
    return CT_OK;
}

ct_status ct_cuda_dnn_cache_get(ct_cuda *cu, ct_dnn_cache *c, const ct_dnn_entry_type *t, const void *key,
                                const void *how, void **out, ct_err *err)
{
    char *items = c->items;
    for (int i = 0; i < c->count; i++) {
        if (memcmp(items + (size_t)i * t->entry_size, key, t->key_size) == 0) {
            *out = items + (size_t)i * t->entry_size;
            return CT_OK;
        }
    }
    c->type = t;
    ct_status st = grow(c, t->entry_size, err);
    if (st != CT_OK)
        return st;
    char *e = (char *)c->items + (size_t)c->count * t->entry_size;
    memset(e, 0, t->entry_size);
    memcpy(e, key, t->key_size);
    st = t->make(cu, how, e, err);
    if (st != CT_OK) {
        t->release(e);
        return st;
    }
    c->count++;
    *out = e;
    return CT_OK;
}
