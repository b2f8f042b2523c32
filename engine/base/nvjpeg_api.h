/* nvJPEG, loaded at run time with dlopen (nvjpeg_load.c) so that cutrain neither builds nor links
 * against it: the few types and calls the CUDA backend's image decoder uses, declared here from
 * nvJPEG's documented C API. tools/check_nvjpeg_api.sh compiles tests/nvjpeg/check_nvjpeg_api.c
 * against the real nvjpeg.h (PyPI's nvidia-nvjpeg wheel) and fails on any difference, in CI.
 *
 * How the declarations are written, so that the check can be exact:
 *   - nvJPEG's enums travel as their compatible integer type, unsigned int for those without a
 *     negative value (nvjpegStatus_t, nvjpegOutputFormat_t, nvjpegBackend_t, CUDA's
 *     libraryPropertyType) and int for nvjpegChromaSubsampling_t (which has -1): what GCC and
 *     Clang make them, and what the check compares the prototypes with;
 *   - cudaStream_t is `struct CUstream_st *`, its definition in CUDA's driver_types.h;
 *   - the image descriptor's layout is struct ct_nvj_image_layout, and the allocators nvjpegCreateEx
 *     takes (cutrain passes NULL: nvJPEG's own cudaMalloc and cudaHostAlloc) struct
 *     ct_nvj_dev_allocator_layout and ct_nvj_pinned_allocator_layout; the check compares them
 *     field by field with nvjpegImage_t, nvjpegDevAllocator_t and nvjpegPinnedAllocator_t, then
 *     checks the prototypes with the real structs standing in (CT_NVJ_CHECK_REAL_IMAGE, defined by
 *     the check only).
 * Nothing here needs a CUDA header. */
#ifndef CT_NVJPEG_API_H
#define CT_NVJPEG_API_H

#include <stddef.h>

#define CT_NVJ_MAX_COMPONENT 4

typedef unsigned ct_nvj_status;            /* nvjpegStatus_t */
enum {
    CT_NVJ_SUCCESS = 0,
    CT_NVJ_NOT_INITIALIZED = 1,
    CT_NVJ_INVALID_PARAMETER = 2,
    CT_NVJ_BAD_JPEG = 3,
    CT_NVJ_JPEG_NOT_SUPPORTED = 4,
    CT_NVJ_ALLOCATOR_FAILURE = 5,
    CT_NVJ_EXECUTION_FAILED = 6,
    CT_NVJ_ARCH_MISMATCH = 7,
    CT_NVJ_INTERNAL_ERROR = 8,
    CT_NVJ_IMPLEMENTATION_NOT_SUPPORTED = 9,
    CT_NVJ_INCOMPLETE_BITSTREAM = 10,
};
typedef unsigned ct_nvj_output_format;     /* nvjpegOutputFormat_t */
enum { CT_NVJ_OUTPUT_Y = 2, CT_NVJ_OUTPUT_RGBI = 5 };
typedef int ct_nvj_subsampling;            /* nvjpegChromaSubsampling_t */
enum { CT_NVJ_CSS_GRAY = 6, CT_NVJ_CSS_UNKNOWN = -1 };
typedef unsigned ct_nvj_property;          /* libraryPropertyType */
enum { CT_NVJ_MAJOR_VERSION = 0, CT_NVJ_MINOR_VERSION = 1, CT_NVJ_PATCH_LEVEL = 2 };
typedef unsigned ct_nvj_backend;           /* nvjpegBackend_t */
enum { CT_NVJ_BACKEND_HARDWARE = 3 };      /* the JPEG engine of A100/H100-class GPUs, batched only */
enum { CT_NVJ_FLAGS_DEFAULT = 0 };         /* nvjpegCreateEx's flags */

typedef struct nvjpegHandle *ct_nvj_handle;       /* nvjpegHandle_t */
typedef struct nvjpegJpegState *ct_nvj_state;     /* nvjpegJpegState_t */
typedef struct CUstream_st *ct_nvj_stream;        /* cudaStream_t */
typedef struct nvjpegJpegStream *ct_nvj_jpeg_stream;     /* nvjpegJpegStream_t: a parsed header */
typedef struct nvjpegDecodeParams *ct_nvj_decode_params; /* nvjpegDecodeParams_t: format, region */

/* nvjpegImage_t: per plane, its device pointer and row pitch in bytes; interleaved output (RGBI)
 * and luma (Y) use plane 0 alone. */
struct ct_nvj_image_layout {
    unsigned char *channel[CT_NVJ_MAX_COMPONENT];
    size_t pitch[CT_NVJ_MAX_COMPONENT];
};
/* nvjpegDevAllocator_t, nvjpegPinnedAllocator_t: cutrain passes NULL for both */
struct ct_nvj_dev_allocator_layout {
    int (*dev_malloc)(void **, size_t);
    int (*dev_free)(void *);
};
struct ct_nvj_pinned_allocator_layout {
    int (*pinned_malloc)(void **, size_t, unsigned int);
    int (*pinned_free)(void *);
};
#ifdef CT_NVJ_CHECK_REAL_IMAGE
typedef nvjpegImage_t ct_nvj_image;
typedef nvjpegDevAllocator_t ct_nvj_dev_allocator;
typedef nvjpegPinnedAllocator_t ct_nvj_pinned_allocator;
#else
typedef struct ct_nvj_image_layout ct_nvj_image;
typedef struct ct_nvj_dev_allocator_layout ct_nvj_dev_allocator;
typedef struct ct_nvj_pinned_allocator_layout ct_nvj_pinned_allocator;
#endif

typedef ct_nvj_status (*ct_nvj_get_property_fn)(ct_nvj_property type, int *value);
typedef ct_nvj_status (*ct_nvj_create_simple_fn)(ct_nvj_handle *handle);
typedef ct_nvj_status (*ct_nvj_destroy_fn)(ct_nvj_handle handle);
typedef ct_nvj_status (*ct_nvj_hw_decoder_info_fn)(ct_nvj_handle handle, unsigned *num_engines,
                                                   unsigned *num_cores_per_engine);
typedef ct_nvj_status (*ct_nvj_state_create_fn)(ct_nvj_handle handle, ct_nvj_state *state);
typedef ct_nvj_status (*ct_nvj_state_destroy_fn)(ct_nvj_state state);
/* widths, heights: CT_NVJ_MAX_COMPONENT each, per component (0 for those absent) */
typedef ct_nvj_status (*ct_nvj_get_image_info_fn)(ct_nvj_handle handle, const unsigned char *data, size_t length,
                                                  int *components, ct_nvj_subsampling *subsampling, int *widths,
                                                  int *heights);
/* Huffman decoding on the calling thread, the rest queued on `stream` */
typedef ct_nvj_status (*ct_nvj_decode_fn)(ct_nvj_handle handle, ct_nvj_state state, const unsigned char *data,
                                          size_t length, ct_nvj_output_format output_format,
                                          ct_nvj_image *destination, ct_nvj_stream stream);

/* The batched hardware path (engine/cuda/jpeg_hw.c): a handle on the hardware backend, a header
 * parsed into a jpeg stream, per-image decode parameters carrying the region, and the batch. */
typedef ct_nvj_status (*ct_nvj_create_ex_fn)(ct_nvj_backend backend, ct_nvj_dev_allocator *dev_allocator,
                                             ct_nvj_pinned_allocator *pinned_allocator, unsigned int flags,
                                             ct_nvj_handle *handle);
typedef ct_nvj_status (*ct_nvj_jpeg_stream_create_fn)(ct_nvj_handle handle, ct_nvj_jpeg_stream *jpeg_stream);
typedef ct_nvj_status (*ct_nvj_jpeg_stream_destroy_fn)(ct_nvj_jpeg_stream jpeg_stream);
typedef ct_nvj_status (*ct_nvj_jpeg_stream_parse_header_fn)(ct_nvj_handle handle, const unsigned char *data,
                                                            size_t length, ct_nvj_jpeg_stream jpeg_stream);
typedef ct_nvj_status (*ct_nvj_decode_params_create_fn)(ct_nvj_handle handle, ct_nvj_decode_params *decode_params);
typedef ct_nvj_status (*ct_nvj_decode_params_destroy_fn)(ct_nvj_decode_params decode_params);
typedef ct_nvj_status (*ct_nvj_decode_params_set_output_format_fn)(ct_nvj_decode_params decode_params,
                                                                   ct_nvj_output_format output_format);
/* roi_width, roi_height -1: the whole image */
typedef ct_nvj_status (*ct_nvj_decode_params_set_roi_fn)(ct_nvj_decode_params decode_params, int offset_x,
                                                         int offset_y, int roi_width, int roi_height);
/* *is_supported = 0 when the handle's backend decodes the stream with these parameters */
typedef ct_nvj_status (*ct_nvj_decode_batched_supported_ex_fn)(ct_nvj_handle handle, ct_nvj_jpeg_stream jpeg_stream,
                                                               ct_nvj_decode_params decode_params, int *is_supported);
/* again whenever the batch's size or output format changes; a batched call then decodes exactly
 * batch_size images */
typedef ct_nvj_status (*ct_nvj_decode_batched_initialize_fn)(ct_nvj_handle handle, ct_nvj_state state,
                                                             int batch_size, int max_cpu_threads,
                                                             ct_nvj_output_format output_format);
typedef ct_nvj_status (*ct_nvj_decode_batched_ex_fn)(ct_nvj_handle handle, ct_nvj_state state,
                                                     const unsigned char *const *data, const size_t *lengths,
                                                     ct_nvj_image *destinations, ct_nvj_decode_params *decode_params,
                                                     ct_nvj_stream stream);

/* The loaded library and its entry points. */
typedef struct ct_nvjpeg_lib {
    void *dl;
    char path[64];                         /* the name it was loaded by */
    int version[3];                        /* major, minor, patch (0s when it did not say) */
    ct_nvj_get_property_fn get_property;
    ct_nvj_create_simple_fn create_simple;
    ct_nvj_destroy_fn destroy;
    ct_nvj_hw_decoder_info_fn hw_decoder_info;
    ct_nvj_state_create_fn state_create;
    ct_nvj_state_destroy_fn state_destroy;
    ct_nvj_get_image_info_fn get_image_info;
    ct_nvj_decode_fn decode;
    ct_nvj_create_ex_fn create_ex;
    ct_nvj_jpeg_stream_create_fn jpeg_stream_create;
    ct_nvj_jpeg_stream_destroy_fn jpeg_stream_destroy;
    ct_nvj_jpeg_stream_parse_header_fn jpeg_stream_parse_header;
    ct_nvj_decode_params_create_fn decode_params_create;
    ct_nvj_decode_params_destroy_fn decode_params_destroy;
    ct_nvj_decode_params_set_output_format_fn decode_params_set_output_format;
    ct_nvj_decode_params_set_roi_fn decode_params_set_roi;
    ct_nvj_decode_batched_supported_ex_fn decode_batched_supported_ex;
    ct_nvj_decode_batched_initialize_fn decode_batched_initialize;
    ct_nvj_decode_batched_ex_fn decode_batched_ex;
} ct_nvjpeg_lib;

/* Loads nvJPEG into lib (zeroed by the caller). `library` NULL: the environment's
 * CT_NVJPEG_LIBRARY when set (tests), else libnvjpeg.so.13, libnvjpeg.so.12, libnvjpeg.so in turn,
 * found by the dynamic loader's search (LD_LIBRARY_PATH, the cache). Returns 0, or -1 with `why`
 * (n bytes, always terminated) naming what was tried and the loader's reason, or the missing
 * entry point. */
int ct_nvjpeg_load(ct_nvjpeg_lib *lib, const char *library, char *why, size_t n);
/* Unloads it; a lib never loaded (or NULL) is fine. */
void ct_nvjpeg_unload(ct_nvjpeg_lib *lib);
/* nvJPEG's status as words ("bad JPEG"), for messages. */
const char *ct_nvjpeg_status_name(ct_nvj_status st);

#endif
