/* A batch whose JPEGs stay compressed for a device decoder ([data] decode = gpu): what the input
 * workers hand over instead of decoded pixels for the images the device takes. Each sample keeps
 * the source region and mirror the CPU decoder would have used (drawn the same way, from the batch's
 * augment seed, its place and the image's size), so the order, labels and crops are the CPU's; only
 * the pixels of the decode and resize differ (docs/gpu.md, "GPU decode").
 *
 * Samples the device decoder does not take (progressive or CMYK JPEG, PNG, a file over max_pixels)
 * are decoded by the worker as usual, straight into the batch's uint8 slot; their entry has size 0.
 * So are the samples at the places the CPU share gives the workers ([data] gpu_decode_cpu_share,
 * ct_encoded_place_on_cpu): which places those are depends on the share alone, never on timing,
 * and the order and crops are the same either way. */
#ifndef CT_DATA_ENCODED_H
#define CT_DATA_ENCODED_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct ct_encoded_image {
    size_t offset, size;    /* its bytes within the batch's `bytes`; size 0: already decoded (CPU) */
    int x, y, w, h;         /* the source region, in the image's pixels */
    int width, height;      /* the whole image's size, from its header */
    int flip;               /* mirror the output left to right */
    const char *name;       /* the file, for messages (owned by the dataset) */
} ct_encoded_image;

typedef struct ct_encoded_batch {
    int n;                  /* samples, in batch order (the pipeline's batch, not a replica's slice) */
    int on_device;          /* how many of them have size > 0 */
    double cpu_share;       /* the share of places the workers decode whatever the file (0..1) */
    ct_encoded_image *images;
    uint8_t *bytes;         /* the compressed files back to back, in plain host memory */
    size_t used, cap;
    int images_cap;
} ct_encoded_batch;

/* Empties b for a batch of n samples (every entry zeroed: decoded on the CPU until set), whose
 * places ct_encoded_place_on_cpu(i, cpu_share) go to the workers. */
ct_status ct_encoded_batch_reset(ct_encoded_batch *b, int n, double cpu_share, ct_err *err);
/* Whether the batch's place i (0-based) is the workers' under a CPU share: the places where
 * floor((i + 1) * share) passes an integer, with the share in thousandths, so that the workers'
 * places are spread evenly through the batch, round(share * 1000) of every 1000, and the same for
 * every batch. Share 0: none; 1: all. */
int ct_encoded_place_on_cpu(int i, double cpu_share);
/* The share that keeps both busy: per batch the workers spend s * cpu_s + (1 - s) * handover_s per
 * image over `workers` threads, the device (1 - s) * device_s per image; equal when
 * s = (workers * device_s - handover_s) / (cpu_s - handover_s + workers * device_s), clamped to
 * 0..1 (0 when a figure is missing). cpu_s: one image read and decoded by a worker; handover_s: read
 * and left compressed; device_s: decoded by the device; all seconds per image. */
double ct_encoded_balanced_share(double cpu_s, double handover_s, double device_s, int workers);
/* Copies `size` bytes in as sample i's file; the caller then sets its region. Grows the buffer,
 * never shrinks it. */
ct_status ct_encoded_batch_add(ct_encoded_batch *b, int i, const uint8_t *bytes, size_t size, ct_err *err);
/* Frees what b holds (b itself is the caller's). */
void ct_encoded_batch_free(ct_encoded_batch *b);

#endif
