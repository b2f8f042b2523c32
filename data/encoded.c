/* The compressed side of a batch for a device decoder (data/encoded.h). */
#include "data/encoded.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ct_encoded_place_on_cpu(int i, double cpu_share)
{
    if (!(cpu_share > 0) || i < 0)
        return 0;
    long q = cpu_share >= 1 ? 1000 : lround(cpu_share * 1000.0);
    return ((long)i + 1) * q / 1000 != (long)i * q / 1000;
}

double ct_encoded_balanced_share(double cpu_s, double handover_s, double device_s, int workers)
{
    if (!(cpu_s > 0) || !(device_s > 0) || workers < 1 || !(handover_s >= 0))
        return 0;
    double gpu = (double)workers * device_s, den = cpu_s - handover_s + gpu;
    double s = den > 0 ? (gpu - handover_s) / den : 0;
    return s < 0 ? 0 : s > 1 ? 1 : s;
}

ct_status ct_encoded_batch_reset(ct_encoded_batch *b, int n, double cpu_share, ct_err *err)
{
    if (n < 0)
        return ct_fail(err, CT_ERR_USAGE, "an encoded batch of %d samples", n);
    if (n > b->images_cap) {
        ct_encoded_image *g = realloc(b->images, (size_t)n * sizeof *g);
        if (!g)
            return ct_fail(err, CT_ERR_NOMEM, "out of memory for %d encoded samples", n);
        b->images = g;
        b->images_cap = n;
    }
    if (n)
        memset(b->images, 0, (size_t)n * sizeof *b->images);
    b->n = n;
    b->on_device = 0;
    b->used = 0;
    b->cpu_share = cpu_share;
    return CT_OK;
}

ct_status ct_encoded_batch_add(ct_encoded_batch *b, int i, const uint8_t *bytes, size_t size, ct_err *err)
{
    if (i < 0 || i >= b->n || size == 0)
        return ct_fail(err, CT_ERR_USAGE, "encoded sample %d of %d (%zu bytes)", i, b->n, size);
    if (size > b->cap - b->used) {
        size_t want = b->cap ? b->cap : (size_t)1 << 20;
        while (want - b->used < size)
            want *= 2;
        uint8_t *g = realloc(b->bytes, want);
        if (!g)
            return ct_fail(err, CT_ERR_NOMEM, "out of memory for %zu bytes of compressed images", want);
        b->bytes = g;
        b->cap = want;
    }
    memcpy(b->bytes + b->used, bytes, size);
    if (b->images[i].size == 0)
        b->on_device++;
    b->images[i].offset = b->used;
    b->images[i].size = size;
    b->used += size;
    return CT_OK;
}

void ct_encoded_batch_free(ct_encoded_batch *b)
{
    if (!b)
        return;
    free(b->images);
    free(b->bytes);
    memset(b, 0, sizeof *b);
}
