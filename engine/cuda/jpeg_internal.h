/* What the CUDA backend's image decoder's two files share: jpeg.c (nvJPEG's handle, the per-image
 * path, the measurement) and jpeg_hw.c (the batched path on the hardware JPEG engine). */
#ifndef CT_CUDA_JPEG_INTERNAL_H
#define CT_CUDA_JPEG_INTERNAL_H

#include "base/nvjpeg_api.h"
#include "cuda/cuda_internal.h"

/* The hardware engine's batched path. Every buffer is sized for the largest batch so far and grown
 * only when a larger one comes: no allocation per image in steady state. */
typedef struct ct_jpeg_hw {
    ct_nvj_handle handle;            /* on NVJPEG_BACKEND_HARDWARE; NULL: no engine (why says so) */
    ct_nvj_state state;
    ct_nvj_jpeg_stream parsed;       /* the header under the support check, one image at a time */
    unsigned engines, cores;         /* nvjpegGetHardwareDecoderInfo's answer */
    char why[192];                   /* why the engine is not used, when it is not */
    /* per image of the batch being decoded, capacity cap */
    int cap, count;
    ct_nvj_decode_params *params;    /* its output format and region (made once per place) */
    const unsigned char **data;
    size_t *lengths;
    ct_nvj_image *dest;
    int *place;                      /* its place in the slice */
    size_t *offset;                  /* its region's offset in `roi` */
    /* device: the batch's decoded regions back to back, (h, w, c) uint8 each */
    unsigned char *roi;
    size_t roi_cap;
    int init_count;                  /* what nvjpegDecodeBatchedInitialize was last given; 0: again */
    ct_nvj_output_format init_format;
    int unusable;                    /* the batched call said the engine cannot serve: close it */
} ct_jpeg_hw;

struct ct_cuda_jpeg {
    ct_nvjpeg_lib lib;
    ct_nvj_handle handle;            /* nvJPEG's default backend: the per-image path */
    ct_nvj_state state;
    cudaStream_t stream;             /* the decoder's own */
    unsigned char *image;            /* device: one whole decoded image, (H, W, c) uint8 */
    size_t image_cap;
    ct_jpeg_hw hw;
    long engine_images, single_images;   /* decoded so far by each path */
};

/* A device buffer of the decoder (*buf, *cap bytes) made to hold at least `bytes`: grown by a
 * quarter more, rarely (only past the largest so far), after waiting for the decoder's stream,
 * which may still read the old one. `what` names it in the message when memory runs out. */
ct_status ct_jpeg_room(ct_cuda *cu, unsigned char **buf, size_t *cap, size_t bytes, const char *what, ct_err *err);
/* Opens cu->jpeg's hardware path where nvJPEG's hardware backend starts, reports engines and sets
 * up its state; otherwise leaves hw->handle NULL with the reason in hw->why (every status checked,
 * none an error: the per-image path serves). */
void ct_jpeg_hw_open(ct_cuda *cu);
void ct_jpeg_hw_free(ct_cuda *cu, ct_jpeg_hw *hw);
/* Starts the batch of a slice: nothing taken yet. */
static inline void ct_jpeg_hw_begin(ct_jpeg_hw *hw) { hw->count = 0; }
/* Takes the slice's image at `place` into the batch when the engine decodes it at its region with
 * this output format (nvjpegDecodeBatchedSupportedEx); *taken 0: the per-image path's. */
ct_status ct_jpeg_hw_take(ct_cuda_jpeg *j, const unsigned char *data, const ct_encoded_image *e, int place,
                          ct_nvj_output_format format, int *taken, ct_err *err);
/* Decodes the images taken, each at its region, in one batched call on j->stream, and queues the
 * resize of each into dst + place * sample: (out_h, out_w, c) uint8 per place. *failed (with CT_OK):
 * the batched call refused the batch, nothing of it was queued, and the caller decodes those images
 * one by one (ct_jpeg_hw_place gives them); when the refusal means the engine cannot serve at all,
 * hw->unusable is set, hw->why says why, and the caller closes the path (ct_jpeg_hw_free) once it
 * has read the places. */
// slice: the slice's images, slice[place]; dst: (places, out_h, out_w, c) uint8, device
ct_status ct_jpeg_hw_decode(ct_cuda *cu, const ct_encoded_image *slice, int c, ct_nvj_output_format format,
                            unsigned char *dst, int out_w, int out_h, int *failed, ct_err *err);
static inline int ct_jpeg_hw_place(const ct_jpeg_hw *hw, int k) { return hw->place[k]; }

#endif
