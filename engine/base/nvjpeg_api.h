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
 *   - the image descriptor's layout is struct ct_nvj_image_layout; the check compares it field by
 *     field with nvjpegImage_t, then checks the prototypes with the real struct standing in
 *     (CT_NVJ_CHECK_REAL_IMAGE, defined by the check only).
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

typedef struct nvjpegHandle *ct_nvj_handle;       /* nvjpegHandle_t */
typedef struct nvjpegJpegState *ct_nvj_state;     /* nvjpegJpegState_t */
typedef struct CUstream_st *ct_nvj_stream;        /* cudaStream_t */

/* nvjpegImage_t: per plane, its device pointer and row pitch in bytes; interleaved output (RGBI)
 * and luma (Y) use plane 0 alone. */
struct ct_nvj_image_layout {
    unsigned char *channel[CT_NVJ_MAX_COMPONENT];
    size_t pitch[CT_NVJ_MAX_COMPONENT];
};
#ifdef CT_NVJ_CHECK_REAL_IMAGE
typedef nvjpegImage_t ct_nvj_image;
#else
typedef struct ct_nvj_image_layout ct_nvj_image;
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
