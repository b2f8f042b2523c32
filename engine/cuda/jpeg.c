/* The CUDA backend's image decoder ([data] decode = gpu): nvJPEG, loaded with dlopen
 * (base/nvjpeg_api.h), decodes the JPEGs the input workers left compressed, and a kernel
 * (kernels/image_resize.cu) crops the region the worker drew, resizes it and mirrors it into the
 * sample's place in the input staging slot. All of it runs on the decoder's own stream, ordered
 * against the staging slot by events (input.c), outside any captured step.
 *
 * Two paths: where the GPU has the hardware JPEG engine, the images it accepts at their region go
 * to it in one batched call per slice (jpeg_hw.c); the others, and every image on a GPU without
 * the engine, are decoded one at a time here with nvJPEG's default backend (Huffman decoding on
 * the calling thread, the rest on the GPU), whole, into a buffer from which the kernel takes the
 * region. Both buffers come from the device allocator, outside the memory plan (jpeg_hw.c says
 * why). */
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "cuda/jpeg_internal.h"

void ct_cuda_jpeg_free(ct_cuda *cu)
{
    ct_cuda_jpeg *j = cu->jpeg;
    if (!j)
        return;
    if (j->stream)
        cudaStreamSynchronize(j->stream);
    ct_jpeg_hw_free(cu, &j->hw);
    if (j->state)
        j->lib.state_destroy(j->state);
    if (j->handle)
        j->lib.destroy(j->handle);
    if (j->stream)
        cudaStreamDestroy(j->stream);
    if (j->image)
        cu->dev->ops->free(cu->dev, j->image);
    ct_nvjpeg_unload(&j->lib);
    free(j);
    cu->jpeg = NULL;
}

static ct_status jpeg_open(ct_cuda *cu, ct_err *err)
{
    ct_cuda_jpeg *j = calloc(1, sizeof *j);
    if (!j)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for the image decoder");
    cu->jpeg = j;
    char why[768];
    if (ct_nvjpeg_load(&j->lib, NULL, why, sizeof why) != 0)
        return ct_fail(err, CT_ERR_BACKEND, "%s", why);
    CT_NVJPEG_CHECK(j->lib.create_simple(&j->handle), err);
    CT_NVJPEG_CHECK(j->lib.state_create(j->handle, &j->state), err);
    CT_CUDA_CHECK(cudaStreamCreateWithFlags(&j->stream, cudaStreamNonBlocking), err);
    ct_jpeg_hw_open(cu);
    return CT_OK;
}

/* Runs fn(cu, arg) with the backend's device current (nvJPEG's handles and the stream belong to
 * it), restoring the caller's after. */
static ct_status on_device(ct_backend *be, ct_status (*fn)(ct_cuda *, void *, ct_err *), void *arg, ct_err *err)
{
    int prev = 0;
    CT_CUDA_CHECK(cudaGetDevice(&prev), err);
    CT_CUDA_CHECK(cudaSetDevice(be->dev->ordinal), err);
    ct_status st = fn(ct_cuda_of(be), arg, err);
    cudaError_t back = cudaSetDevice(prev);
    if (st != CT_OK)
        return st;   /* the failure above is the one to report */
    CT_CUDA_CHECK(back, err);
    return CT_OK;
}

static ct_status open_once(ct_cuda *cu, void *arg, ct_err *err)
{
    (void)arg;
    if (cu->jpeg)
        return CT_OK;
    ct_status st = jpeg_open(cu, err);
    if (st != CT_OK)
        ct_cuda_jpeg_free(cu);
    return st;
}

ct_status ct_cuda_image_decoder(ct_backend *be, char *info, size_t n, ct_err *err)
{
    ct_status st = on_device(be, open_once, NULL, err);
    if (st != CT_OK)
        return st;
    ct_cuda_jpeg *j = ct_cuda_of(be)->jpeg;
    char hw[256];
    if (j->hw.handle)
        snprintf(hw, sizeof hw, "batched on the hardware decoder (%u engine%s) at each crop's region, the images it "
                 "refuses one at a time", j->hw.engines, j->hw.engines == 1 ? "" : "s");
    else
        snprintf(hw, sizeof hw, "one image at a time (%s)", j->hw.why);
    if (info && n)
        snprintf(info, n, "nvJPEG %d.%d.%d (%s) on its own stream, %s", j->lib.version[0], j->lib.version[1],
                 j->lib.version[2], j->lib.path, hw);
    return CT_OK;
}

void ct_cuda_jpeg_counts(const ct_cuda *cu, long *engine, long *single)
{
    *engine = cu->jpeg ? cu->jpeg->engine_images : 0;
    *single = cu->jpeg ? cu->jpeg->single_images : 0;
}

void ct_cuda_jpeg_engine_off(ct_cuda *cu)
{
    if (!cu->jpeg || !cu->jpeg->hw.handle)
        return;
    (void)cudaStreamSynchronize(cu->jpeg->stream);   /* nothing of the engine's may still run */
    snprintf(cu->jpeg->hw.why, sizeof cu->jpeg->hw.why, "hardware decoder turned off");
    ct_jpeg_hw_free(cu, &cu->jpeg->hw);
}

ct_status ct_jpeg_room(ct_cuda *cu, unsigned char **buf, size_t *cap, size_t bytes, const char *what, ct_err *err)
{
    if (bytes <= *cap)
        return CT_OK;
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->jpeg->stream), err);
    if (*buf)
        cu->dev->ops->free(cu->dev, *buf);
    size_t want = bytes + bytes / 4;
    *buf = cu->dev->ops->alloc(cu->dev, want);
    *cap = *buf ? want : 0;
    if (!*buf)
        return ct_fail(err, CT_ERR_NOMEM, "out of device memory for %zu bytes of %s", want, what);
    return CT_OK;
}

/* The per-image path: e's whole image decoded, then its region resized into out.
 * out: (out_h, out_w, c) uint8, device */
static ct_status decode_one(ct_cuda *cu, const unsigned char *data, const ct_encoded_image *e, int c,
                            unsigned char *out, int out_w, int out_h, ct_err *err)
{
    ct_cuda_jpeg *j = cu->jpeg;
    int comps = 0, widths[CT_NVJ_MAX_COMPONENT] = {0}, heights[CT_NVJ_MAX_COMPONENT] = {0};
    ct_nvj_subsampling css = CT_NVJ_CSS_UNKNOWN;
    ct_nvj_status rc = j->lib.get_image_info(j->handle, data, e->size, &comps, &css, widths, heights);
    if (rc == CT_NVJ_SUCCESS && (widths[0] != e->width || heights[0] != e->height))
        return ct_fail(err, CT_ERR_DATA, "%s: nvJPEG reads its size as %dx%d, libjpeg as %dx%d", e->name, widths[0],
                       heights[0], e->width, e->height);
    size_t pitch = (size_t)e->width * (size_t)c;
    ct_status st = rc == CT_NVJ_SUCCESS
                       ? ct_jpeg_room(cu, &j->image, &j->image_cap, pitch * (size_t)e->height, "a decoded image", err)
                       : CT_OK;
    if (st != CT_OK)
        return st;
    ct_nvj_image whole = {{j->image}, {pitch}};
    if (rc == CT_NVJ_SUCCESS)
        rc = j->lib.decode(j->handle, j->state, data, e->size, c == 3 ? CT_NVJ_OUTPUT_RGBI : CT_NVJ_OUTPUT_Y, &whole,
                           j->stream);
    if (rc != CT_NVJ_SUCCESS)
        return ct_fail(err, rc == CT_NVJ_ALLOCATOR_FAILURE ? CT_ERR_NOMEM : CT_ERR_DATA,
                       "%s: nvJPEG cannot decode it: %s (status %u)", e->name, ct_nvjpeg_status_name(rc), rc);
    CT_CUDA_CHECK(ct_launch_resize_region_u8(j->image, e->width, e->height, pitch, c, e->x, e->y, e->w, e->h, e->flip,
                                             out, out_w, out_h, j->stream),
                  err);
    j->single_images++;
    return CT_OK;
}

/* The slice's compressed images: those the engine takes in one batch, the others one by one.
 * dst: (n, out_h, out_w, c) uint8, device, the slice's staging */
static ct_status decode_slice(ct_cuda *cu, const ct_input_batch *b, unsigned char *dst, ct_err *err)
{
    ct_cuda_jpeg *j = cu->jpeg;
    const ct_encoded_batch *enc = b->encoded;
    const ct_encoded_image *slice = enc->images + b->first_sample;
    const int c = b->shape.c, out_h = b->shape.h, out_w = b->shape.w;
    const size_t sample = ct_shape_size(b->shape);
    const ct_nvj_output_format format = c == 3 ? CT_NVJ_OUTPUT_RGBI : CT_NVJ_OUTPUT_Y;
    ct_jpeg_hw_begin(&j->hw);
    for (int i = 0; i < b->n; i++) {
        const ct_encoded_image *e = &slice[i];
        if (e->size == 0)
            continue;
        int taken = 0;
        ct_status st = ct_jpeg_hw_take(j, enc->bytes + e->offset, e, i, format, &taken, err);
        if (st == CT_OK && !taken)
            st = decode_one(cu, enc->bytes + e->offset, e, c, dst + (size_t)i * sample, out_w, out_h, err);
        if (st != CT_OK)
            return st;
    }
    int failed = 0;
    ct_status st = ct_jpeg_hw_decode(cu, slice, c, format, dst, out_w, out_h, &failed, err);
    for (int k = 0; st == CT_OK && failed && k < j->hw.count; k++) {
        int i = ct_jpeg_hw_place(&j->hw, k);
        st = decode_one(cu, enc->bytes + slice[i].offset, &slice[i], c, dst + (size_t)i * sample, out_w, out_h, err);
    }
    if (j->hw.unusable)
        ct_jpeg_hw_free(cu, &j->hw);
    return st;
}

// b->encoded's samples first_sample .. + n - 1 with a size into dst: (n, h, w, c) uint8, device,
// the slice's staging; the decoder's stream waits for slot_free first and records done last.
ct_status ct_cuda_jpeg_decode(ct_cuda *cu, const ct_input_batch *b, unsigned char *dst, cudaEvent_t slot_free,
                              cudaEvent_t done, ct_err *err)
{
    ct_cuda_jpeg *j = cu->jpeg;
    const ct_encoded_batch *enc = b->encoded;
    if (!j)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: compressed images before image_decoder");
    if (b->first_sample < 0 || b->first_sample + b->n > enc->n)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: samples %ld..%ld of a %d-image encoded batch",
                       b->first_sample, b->first_sample + b->n - 1, enc->n);
    if (b->shape.c != 1 && b->shape.c != 3)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: the image decoder writes 1 or 3 channels, not %d",
                       b->shape.c);
    if (slot_free)
        CT_CUDA_CHECK(cudaStreamWaitEvent(j->stream, slot_free, 0), err);
    ct_status st = decode_slice(cu, b, dst, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(cudaEventRecord(done, j->stream), err);
    return CT_OK;
}

typedef struct timing {
    const ct_encoded_batch *enc;
    ct_shape shape;
    double seconds;
    unsigned char *scratch;
    cudaEvent_t done;
} timing;

static ct_status time_decode(ct_cuda *cu, timing *t, ct_err *err)
{
    ct_status st = open_once(cu, NULL, err);
    if (st != CT_OK)
        return st;
    size_t bytes = (size_t)t->enc->n * ct_shape_size(t->shape);
    t->scratch = cu->dev->ops->alloc(cu->dev, bytes ? bytes : 1);
    if (!t->scratch)
        return ct_fail(err, CT_ERR_NOMEM, "out of device memory for %zu bytes of decode measurement", bytes);
    CT_CUDA_CHECK(cudaEventCreateWithFlags(&t->done, cudaEventDisableTiming), err);
    ct_input_batch b = {.n = t->enc->n, .shape = t->shape, .encoded = t->enc};
    double t0 = ct_clock_seconds();
    st = ct_cuda_jpeg_decode(cu, &b, t->scratch, NULL, t->done, err);
    if (st != CT_OK)
        return st;
    CT_CUDA_CHECK(cudaEventSynchronize(t->done), err);
    t->seconds = ct_clock_seconds() - t0;
    return CT_OK;
}

static ct_status time_decode_on(ct_cuda *cu, void *arg, ct_err *err)
{
    timing *t = arg;
    ct_status st = time_decode(cu, t, err);
    if (st != CT_OK && cu->jpeg && cu->jpeg->stream)
        (void)cudaStreamSynchronize(cu->jpeg->stream);   /* before scratch goes: the error is the one to report */
    if (t->done)
        cudaEventDestroy(t->done);
    if (t->scratch)
        cu->dev->ops->free(cu->dev, t->scratch);
    return st;
}

// enc: a whole batch; shape: one sample's (h, w, c) uint8
ct_status ct_cuda_image_decode_time(ct_backend *be, const ct_encoded_batch *enc, ct_shape shape, double *seconds,
                                    ct_err *err)
{
    timing t = {.enc = enc, .shape = shape};
    ct_status st = on_device(be, time_decode_on, &t, err);
    *seconds = t.seconds;
    return st;
}
