/* The image decoder's batched path on the hardware JPEG engine that A100/H100-class GPUs carry
 * ([data] decode = gpu, docs/gpu.md "GPU decode"): the images of a slice the engine accepts at their
 * region (nvjpegDecodeBatchedSupportedEx on the parsed header, with the region and output format
 * as decode parameters) are decoded in one nvjpegDecodeBatchedEx call, each only at its region,
 * into one device buffer; a kernel per image then resizes and mirrors it into its place of the
 * staging slot (kernels/image_resize.cu). All of it on the decoder's own stream, outside any
 * captured step. The images the engine refuses go through the per-image path (jpeg.c).
 *
 * Memory: the regions' buffer comes from the device allocator (base/devmem.h), so the figures of
 * `memory` and its limit count it, but the memory plan does not (its size follows the crops
 * drawn); it holds the largest batch of regions so far, grown by a quarter more when a batch
 * needs more. nvJPEG's own buffers (its handle, state and the engine's) are allocated by nvJPEG with
 * cudaMalloc and cudaHostAlloc, outside both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/devmem.h"
#include "cuda/jpeg_internal.h"

void ct_jpeg_hw_free(ct_cuda *cu, ct_jpeg_hw *hw)
{
    ct_nvjpeg_lib *lib = &cu->jpeg->lib;
    for (int k = 0; k < hw->cap; k++)
        if (hw->params && hw->params[k])
            lib->decode_params_destroy(hw->params[k]);
    if (hw->parsed)
        lib->jpeg_stream_destroy(hw->parsed);
    if (hw->state)
        lib->state_destroy(hw->state);
    if (hw->handle)
        lib->destroy(hw->handle);
    if (hw->roi)
        cu->dev->ops->free(cu->dev, hw->roi);
    free(hw->params);
    free(hw->data);
    free(hw->lengths);
    free(hw->dest);
    free(hw->place);
    free(hw->offset);
    char why[sizeof hw->why];
    snprintf(why, sizeof why, "%s", hw->why);
    memset(hw, 0, sizeof *hw);
    snprintf(hw->why, sizeof hw->why, "%s", why);
}

void ct_jpeg_hw_open(ct_cuda *cu)
{
    ct_cuda_jpeg *j = cu->jpeg;
    ct_jpeg_hw *hw = &j->hw;
    ct_nvj_status rc = j->lib.create_ex(CT_NVJ_BACKEND_HARDWARE, NULL, NULL, CT_NVJ_FLAGS_DEFAULT, &hw->handle);
    if (rc != CT_NVJ_SUCCESS) {
        /* the usual answer of a GPU without the engine (architecture mismatch, not supported) */
        hw->handle = NULL;
        snprintf(hw->why, sizeof hw->why, "no hardware decoder (nvjpegCreateEx: %s)", ct_nvjpeg_status_name(rc));
        return;
    }
    rc = j->lib.hw_decoder_info(hw->handle, &hw->engines, &hw->cores);
    if (rc != CT_NVJ_SUCCESS || hw->engines == 0) {
        snprintf(hw->why, sizeof hw->why, "no hardware decoder (nvjpegGetHardwareDecoderInfo: %s, %u engines)",
                 ct_nvjpeg_status_name(rc), rc == CT_NVJ_SUCCESS ? hw->engines : 0u);
        j->lib.destroy(hw->handle);
        hw->handle = NULL;
        return;
    }
    const char *call = "nvjpegJpegStateCreate";
    rc = j->lib.state_create(hw->handle, &hw->state);
    if (rc == CT_NVJ_SUCCESS) {
        call = "nvjpegJpegStreamCreate";
        rc = j->lib.jpeg_stream_create(hw->handle, &hw->parsed);
    }
    if (rc != CT_NVJ_SUCCESS) {
        snprintf(hw->why, sizeof hw->why, "hardware decoder not set up (%s: %s)", call, ct_nvjpeg_status_name(rc));
        ct_jpeg_hw_free(cu, hw);
    }
}

/* Room for `count` images in the host arrays; decode parameters are made for the new places
 * only. */
static ct_status places_room(ct_cuda_jpeg *j, int count, ct_err *err)
{
    ct_jpeg_hw *hw = &j->hw;
    if (count <= hw->cap)
        return CT_OK;
    int want = count < 2 * hw->cap ? 2 * hw->cap : count;
#define GROW(field)                                                                        \
    do {                                                                                   \
        void *g_ = realloc((void *)hw->field, (size_t)want * sizeof *hw->field);           \
        if (!g_)                                                                           \
            return ct_fail(err, CT_ERR_NOMEM, "out of memory for %d images' decode", want); \
        hw->field = g_;                                                                    \
    } while (0)
    GROW(params);
    GROW(data);
    GROW(lengths);
    GROW(dest);
    GROW(place);
    GROW(offset);
#undef GROW
    for (int k = hw->cap; k < want; k++)
        hw->params[k] = NULL;
    for (int k = hw->cap; k < want; k++) {
        CT_NVJPEG_CHECK(j->lib.decode_params_create(hw->handle, &hw->params[k]), err);
        hw->cap = k + 1;   /* the made ones are freed with the rest, whatever fails next */
    }
    return CT_OK;
}

ct_status ct_jpeg_hw_take(ct_cuda_jpeg *j, const unsigned char *data, const ct_encoded_image *e, int place,
                          ct_nvj_output_format format, int *taken, ct_err *err)
{
    ct_jpeg_hw *hw = &j->hw;
    *taken = 0;
    if (!hw->handle)
        return CT_OK;
    /* a header nvJPEG cannot parse goes to the per-image path, whose error names the file */
    if (j->lib.jpeg_stream_parse_header(hw->handle, data, e->size, hw->parsed) != CT_NVJ_SUCCESS)
        return CT_OK;
    ct_status st = places_room(j, hw->count + 1, err);
    if (st != CT_OK)
        return st;
    ct_nvj_decode_params p = hw->params[hw->count];
    CT_NVJPEG_CHECK(j->lib.decode_params_set_output_format(p, format), err);
    CT_NVJPEG_CHECK(j->lib.decode_params_set_roi(p, e->x, e->y, e->w, e->h), err);
    /* the check's own failure is a refusal too: the per-image path serves */
    int unsupported = 1;
    if (j->lib.decode_batched_supported_ex(hw->handle, hw->parsed, p, &unsupported) != CT_NVJ_SUCCESS ||
        unsupported != 0)
        return CT_OK;
    hw->data[hw->count] = data;
    hw->lengths[hw->count] = e->size;
    hw->place[hw->count] = place;
    hw->count++;
    *taken = 1;
    return CT_OK;
}

/* Statuses of the batched call after which the engine is not tried again. */
static int engine_unusable(ct_nvj_status rc)
{
    return rc == CT_NVJ_JPEG_NOT_SUPPORTED || rc == CT_NVJ_IMPLEMENTATION_NOT_SUPPORTED ||
           rc == CT_NVJ_ARCH_MISMATCH || rc == CT_NVJ_NOT_INITIALIZED;
}

// slice: the slice's images, slice[place]; dst: (places, out_h, out_w, c) uint8, device
ct_status ct_jpeg_hw_decode(ct_cuda *cu, const ct_encoded_image *slice, int c, ct_nvj_output_format format,
                            unsigned char *dst, int out_w, int out_h, int *failed, ct_err *err)
{
    ct_cuda_jpeg *j = cu->jpeg;
    ct_jpeg_hw *hw = &j->hw;
    *failed = 0;
    if (hw->count == 0)
        return CT_OK;
    size_t total = 0;
    for (int k = 0; k < hw->count; k++) {
        const ct_encoded_image *e = &slice[hw->place[k]];
        hw->offset[k] = total;
        total += ct_devmem_block_bytes((size_t)e->w * (size_t)e->h * (size_t)c);   /* each region aligned */
    }
    ct_status st = ct_jpeg_room(cu, &hw->roi, &hw->roi_cap, total, "decoded regions", err);
    if (st != CT_OK)
        return st;
    for (int k = 0; k < hw->count; k++) {
        const ct_encoded_image *e = &slice[hw->place[k]];
        memset(&hw->dest[k], 0, sizeof hw->dest[k]);
        hw->dest[k].channel[0] = hw->roi + hw->offset[k];
        hw->dest[k].pitch[0] = (size_t)e->w * (size_t)c;
    }
    ct_nvj_status rc = CT_NVJ_SUCCESS;
    if (hw->init_count != hw->count || hw->init_format != format) {
        rc = j->lib.decode_batched_initialize(hw->handle, hw->state, hw->count, 1, format);
        hw->init_count = rc == CT_NVJ_SUCCESS ? hw->count : 0;
        hw->init_format = format;
    }
    if (rc == CT_NVJ_SUCCESS)
        rc = j->lib.decode_batched_ex(hw->handle, hw->state, hw->data, hw->lengths, hw->dest, hw->params, j->stream);
    if (rc == CT_NVJ_ALLOCATOR_FAILURE)
        return ct_fail(err, CT_ERR_NOMEM, "nvJPEG's hardware decoder: out of memory for a batch of %d images",
                       hw->count);
    if (rc != CT_NVJ_SUCCESS) {
        /* a failed batch resets the state (initialize again); its images go one by one, where a
         * bad file is named */
        *failed = 1;
        hw->init_count = 0;
        if (engine_unusable(rc)) {
            snprintf(hw->why, sizeof hw->why, "hardware decoder given up (nvjpegDecodeBatchedEx: %s)",
                     ct_nvjpeg_status_name(rc));
            hw->unusable = 1;
        }
        return CT_OK;
    }
    const size_t sample = (size_t)out_w * (size_t)out_h * (size_t)c;
    for (int k = 0; k < hw->count; k++) {
        const ct_encoded_image *e = &slice[hw->place[k]];
        CT_CUDA_CHECK(ct_launch_resize_region_u8(hw->dest[k].channel[0], e->w, e->h, hw->dest[k].pitch[0], c, 0, 0,
                                                 e->w, e->h, e->flip, dst + (size_t)hw->place[k] * sample, out_w,
                                                 out_h, j->stream),
                      err);
    }
    j->engine_images += hw->count;
    return CT_OK;
}
