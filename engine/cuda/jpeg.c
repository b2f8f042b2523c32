/* The CUDA backend's image decoder ([data] decode = gpu): nvJPEG, loaded with dlopen
 * (base/nvjpeg_api.h), decodes each JPEG the input workers left compressed into a device buffer
 * holding the whole image, and a kernel (kernels/image_resize.cu) crops the region the worker drew,
 * resizes it and mirrors it into the sample's place in the input staging slot. All of it runs on
 * the decoder's own stream, ordered against the staging slot by events (input.c), outside any
 * captured step. nvJPEG's Huffman decoding runs on the calling thread (its default backend), the
 * rest on the GPU.
 *
 * Not done yet (docs/gpu.md, "GPU decode"): batched decoding on the hardware engine
 * (nvjpegDecodeBatched with NVJPEG_BACKEND_HARDWARE, a region per image), and the CPU share sized by
 * measurement; the hardware engines nvjpegGetHardwareDecoderInfo finds are reported only. */
#include <stdio.h>
#include <stdlib.h>

#include "base/nvjpeg_api.h"
#include "cuda/cuda_internal.h"

struct ct_cuda_jpeg {
    ct_nvjpeg_lib lib;
    ct_nvj_handle handle;
    ct_nvj_state state;
    cudaStream_t stream;       /* the decoder's own */
    unsigned char *image;      /* device: the whole decoded image, (H, W, c) uint8 */
    size_t image_cap;
    unsigned hw_engines, hw_cores;
    int hw_known;              /* nvjpegGetHardwareDecoderInfo answered */
};

void ct_cuda_jpeg_free(ct_cuda *cu)
{
    ct_cuda_jpeg *j = cu->jpeg;
    if (!j)
        return;
    if (j->stream)
        cudaStreamSynchronize(j->stream);
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
    if (ct_nvjpeg_load(&j->lib, NULL, why, sizeof why) != 0) {
        ct_cuda_jpeg_free(cu);
        return ct_fail(err, CT_ERR_BACKEND, "%s", why);
    }
    CT_NVJPEG_CHECK(j->lib.create_simple(&j->handle), err);
    CT_NVJPEG_CHECK(j->lib.state_create(j->handle, &j->state), err);
    CT_CUDA_CHECK(cudaStreamCreateWithFlags(&j->stream, cudaStreamNonBlocking), err);
    /* for the log: whether the GPU has the hardware engine the batched path would use */
    j->hw_known = j->lib.hw_decoder_info(j->handle, &j->hw_engines, &j->hw_cores) == CT_NVJ_SUCCESS;
    return CT_OK;
}

ct_status ct_cuda_image_decoder(ct_backend *be, char *info, size_t n, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    if (!cu->jpeg) {
        /* nvJPEG's handle and the stream belong to the current device: this backend's, for the
         * call; the caller's is restored after */
        int prev = 0;
        CT_CUDA_CHECK(cudaGetDevice(&prev), err);
        CT_CUDA_CHECK(cudaSetDevice(be->dev->ordinal), err);
        ct_status st = jpeg_open(cu, err);
        if (st != CT_OK) {
            ct_cuda_jpeg_free(cu);
            (void)cudaSetDevice(prev);   /* the failure above is the one to report */
            return st;
        }
        CT_CUDA_CHECK(cudaSetDevice(prev), err);
    }
    ct_cuda_jpeg *j = cu->jpeg;
    char hw[96];
    if (j->hw_known)
        snprintf(hw, sizeof hw, "hardware decoder: %u engine%s (not used yet)", j->hw_engines,
                 j->hw_engines == 1 ? "" : "s");
    else
        snprintf(hw, sizeof hw, "no hardware decoder reported");
    if (info && n)
        snprintf(info, n, "nvJPEG %d.%d.%d (%s), one image at a time on its own stream; %s", j->lib.version[0],
                 j->lib.version[1], j->lib.version[2], j->lib.path, hw);
    return CT_OK;
}

/* The decode buffer holds at least `bytes`; growing waits for the decoder's stream, which may
 * still read the old one (rare: only a larger image than any before). */
static ct_status image_room(ct_cuda *cu, size_t bytes, ct_err *err)
{
    ct_cuda_jpeg *j = cu->jpeg;
    if (bytes <= j->image_cap)
        return CT_OK;
    CT_CUDA_CHECK(cudaStreamSynchronize(j->stream), err);
    if (j->image)
        cu->dev->ops->free(cu->dev, j->image);
    size_t want = bytes + bytes / 4;
    j->image = cu->dev->ops->alloc(cu->dev, want);
    j->image_cap = j->image ? want : 0;
    if (!j->image)
        return ct_fail(err, CT_ERR_NOMEM, "out of device memory for a decoded image of %zu bytes", want);
    return CT_OK;
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
    const int c = b->shape.c, out_h = b->shape.h, out_w = b->shape.w;
    if (c != 1 && c != 3)
        return ct_fail(err, CT_ERR_INTERNAL, "cuda backend: the image decoder writes 1 or 3 channels, not %d", c);
    const size_t sample = ct_shape_size(b->shape);
    CT_CUDA_CHECK(cudaStreamWaitEvent(j->stream, slot_free, 0), err);
    for (int i = 0; i < b->n; i++) {
        const ct_encoded_image *e = &enc->images[b->first_sample + i];
        if (e->size == 0)
            continue;
        const unsigned char *data = enc->bytes + e->offset;
        int comps = 0, widths[CT_NVJ_MAX_COMPONENT] = {0}, heights[CT_NVJ_MAX_COMPONENT] = {0};
        ct_nvj_subsampling css = CT_NVJ_CSS_UNKNOWN;
        ct_nvj_status rc = j->lib.get_image_info(j->handle, data, e->size, &comps, &css, widths, heights);
        if (rc == CT_NVJ_SUCCESS && (widths[0] != e->width || heights[0] != e->height))
            return ct_fail(err, CT_ERR_DATA, "%s: nvJPEG reads its size as %dx%d, libjpeg as %dx%d", e->name,
                           widths[0], heights[0], e->width, e->height);
        size_t pitch = (size_t)e->width * (size_t)c;
        ct_status st = rc == CT_NVJ_SUCCESS ? image_room(cu, pitch * (size_t)e->height, err) : CT_OK;
        if (st != CT_OK)
            return st;
        ct_nvj_image out = {{j->image}, {pitch}};
        if (rc == CT_NVJ_SUCCESS)
            rc = j->lib.decode(j->handle, j->state, data, e->size, c == 3 ? CT_NVJ_OUTPUT_RGBI : CT_NVJ_OUTPUT_Y, &out,
                               j->stream);
        if (rc != CT_NVJ_SUCCESS)
            return ct_fail(err, rc == CT_NVJ_ALLOCATOR_FAILURE ? CT_ERR_NOMEM : CT_ERR_DATA,
                           "%s: nvJPEG cannot decode it: %s (status %u)", e->name, ct_nvjpeg_status_name(rc), rc);
        CT_CUDA_CHECK(ct_launch_resize_region_u8(j->image, e->width, e->height, pitch, c, e->x, e->y, e->w, e->h,
                                                 e->flip, dst + (size_t)i * sample, out_w, out_h, j->stream), err);
    }
    CT_CUDA_CHECK(cudaEventRecord(done, j->stream), err);
    return CT_OK;
}
