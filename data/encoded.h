/* A batch whose JPEGs stay compressed for a device decoder ([data] decode = gpu): what the input
 * workers hand over instead of decoded pixels for the images the device takes. Each sample keeps
 * the source region and mirror the CPU decoder would have used (drawn the same way, from the batch's
 * augment seed, its place and the image's size), so the order, labels and crops are the CPU's; only
 * the pixels of the decode and resize differ (docs/gpu.md, "GPU decode").
 *
 * Samples the device decoder does not take (progressive or CMYK JPEG, PNG, a file over max_pixels)
 * are decoded by the worker as usual, straight into the batch's uint8 slot; their entry has size 0. */
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
    ct_encoded_image *images;
    uint8_t *bytes;         /* the compressed files back to back, in plain host memory */
    size_t used, cap;
    int images_cap;
} ct_encoded_batch;

/* Empties b for a batch of n samples (every entry zeroed: decoded on the CPU until set). */
ct_status ct_encoded_batch_reset(ct_encoded_batch *b, int n, ct_err *err);
/* Copies `size` bytes in as sample i's file; the caller then sets its region. Grows the buffer,
 * never shrinks it. */
ct_status ct_encoded_batch_add(ct_encoded_batch *b, int i, const uint8_t *bytes, size_t size, ct_err *err);
/* Frees what b holds (b itself is the caller's). */
void ct_encoded_batch_free(ct_encoded_batch *b);

#endif
