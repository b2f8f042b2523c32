/* base/nvjpeg_api.h against the real nvjpeg.h: compiled (never run) by tools/check_nvjpeg_api.sh,
 * which CI runs. Any difference in a prototype, an enum value or the image descriptor's layout is
 * a compile error naming it. */
#include <stddef.h>

#include <nvjpeg.h>

#define CT_NVJ_CHECK_REAL_IMAGE 1
#include "base/nvjpeg_api.h"

#define SAME_FN(real, ours) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&real), ours), #real " differs from " #ours)
#define SAME_VALUE(real, ours) _Static_assert((long)(real) == (long)(ours), #real " != " #ours)
#define SAME_TYPE(real, ours) _Static_assert(__builtin_types_compatible_p(real, ours), #real " is not " #ours)

/* the enums' integer types, as the prototypes below carry them */
SAME_TYPE(nvjpegStatus_t, ct_nvj_status);
SAME_TYPE(nvjpegOutputFormat_t, ct_nvj_output_format);
SAME_TYPE(nvjpegChromaSubsampling_t, ct_nvj_subsampling);
SAME_TYPE(libraryPropertyType, ct_nvj_property);
SAME_TYPE(nvjpegHandle_t, ct_nvj_handle);
SAME_TYPE(nvjpegJpegState_t, ct_nvj_state);
SAME_TYPE(cudaStream_t, ct_nvj_stream);
SAME_TYPE(nvjpegBackend_t, ct_nvj_backend);
SAME_TYPE(nvjpegJpegStream_t, ct_nvj_jpeg_stream);
SAME_TYPE(nvjpegDecodeParams_t, ct_nvj_decode_params);

SAME_VALUE(NVJPEG_MAX_COMPONENT, CT_NVJ_MAX_COMPONENT);
SAME_VALUE(NVJPEG_STATUS_SUCCESS, CT_NVJ_SUCCESS);
SAME_VALUE(NVJPEG_STATUS_NOT_INITIALIZED, CT_NVJ_NOT_INITIALIZED);
SAME_VALUE(NVJPEG_STATUS_INVALID_PARAMETER, CT_NVJ_INVALID_PARAMETER);
SAME_VALUE(NVJPEG_STATUS_BAD_JPEG, CT_NVJ_BAD_JPEG);
SAME_VALUE(NVJPEG_STATUS_JPEG_NOT_SUPPORTED, CT_NVJ_JPEG_NOT_SUPPORTED);
SAME_VALUE(NVJPEG_STATUS_ALLOCATOR_FAILURE, CT_NVJ_ALLOCATOR_FAILURE);
SAME_VALUE(NVJPEG_STATUS_EXECUTION_FAILED, CT_NVJ_EXECUTION_FAILED);
SAME_VALUE(NVJPEG_STATUS_ARCH_MISMATCH, CT_NVJ_ARCH_MISMATCH);
SAME_VALUE(NVJPEG_STATUS_INTERNAL_ERROR, CT_NVJ_INTERNAL_ERROR);
SAME_VALUE(NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED, CT_NVJ_IMPLEMENTATION_NOT_SUPPORTED);
SAME_VALUE(NVJPEG_STATUS_INCOMPLETE_BITSTREAM, CT_NVJ_INCOMPLETE_BITSTREAM);
SAME_VALUE(NVJPEG_OUTPUT_Y, CT_NVJ_OUTPUT_Y);
SAME_VALUE(NVJPEG_OUTPUT_RGBI, CT_NVJ_OUTPUT_RGBI);
SAME_VALUE(NVJPEG_CSS_GRAY, CT_NVJ_CSS_GRAY);
SAME_VALUE(NVJPEG_CSS_UNKNOWN, CT_NVJ_CSS_UNKNOWN);
SAME_VALUE(MAJOR_VERSION, CT_NVJ_MAJOR_VERSION);
SAME_VALUE(MINOR_VERSION, CT_NVJ_MINOR_VERSION);
SAME_VALUE(PATCH_LEVEL, CT_NVJ_PATCH_LEVEL);
SAME_VALUE(NVJPEG_BACKEND_HARDWARE, CT_NVJ_BACKEND_HARDWARE);
SAME_VALUE(NVJPEG_FLAGS_DEFAULT, CT_NVJ_FLAGS_DEFAULT);

/* the image descriptor, field by field */
_Static_assert(sizeof(struct ct_nvj_image_layout) == sizeof(nvjpegImage_t), "nvjpegImage_t's size");
_Static_assert(offsetof(struct ct_nvj_image_layout, channel) == offsetof(nvjpegImage_t, channel), "channel");
_Static_assert(offsetof(struct ct_nvj_image_layout, pitch) == offsetof(nvjpegImage_t, pitch), "pitch");
_Static_assert(sizeof(((struct ct_nvj_image_layout *)0)->channel) == sizeof(((nvjpegImage_t *)0)->channel), "channel[]");
_Static_assert(sizeof(((struct ct_nvj_image_layout *)0)->pitch) == sizeof(((nvjpegImage_t *)0)->pitch), "pitch[]");
SAME_TYPE(__typeof__(((nvjpegImage_t *)0)->channel[0]), __typeof__(((struct ct_nvj_image_layout *)0)->channel[0]));
SAME_TYPE(__typeof__(((nvjpegImage_t *)0)->pitch[0]), __typeof__(((struct ct_nvj_image_layout *)0)->pitch[0]));

/* the allocators, field by field (cutrain passes NULL, but the prototype names them) */
#define SAME_FIELD(real, ours, f)                                                                       \
    _Static_assert(offsetof(ours, f) == offsetof(real, f), #real "." #f);                              \
    SAME_TYPE(__typeof__(((real *)0)->f), __typeof__(((ours *)0)->f))
_Static_assert(sizeof(struct ct_nvj_dev_allocator_layout) == sizeof(nvjpegDevAllocator_t), "nvjpegDevAllocator_t");
SAME_FIELD(nvjpegDevAllocator_t, struct ct_nvj_dev_allocator_layout, dev_malloc);
SAME_FIELD(nvjpegDevAllocator_t, struct ct_nvj_dev_allocator_layout, dev_free);
_Static_assert(sizeof(struct ct_nvj_pinned_allocator_layout) == sizeof(nvjpegPinnedAllocator_t),
               "nvjpegPinnedAllocator_t");
SAME_FIELD(nvjpegPinnedAllocator_t, struct ct_nvj_pinned_allocator_layout, pinned_malloc);
SAME_FIELD(nvjpegPinnedAllocator_t, struct ct_nvj_pinned_allocator_layout, pinned_free);

/* every entry point the loader resolves */
SAME_FN(nvjpegGetProperty, ct_nvj_get_property_fn);
SAME_FN(nvjpegCreateSimple, ct_nvj_create_simple_fn);
SAME_FN(nvjpegDestroy, ct_nvj_destroy_fn);
SAME_FN(nvjpegGetHardwareDecoderInfo, ct_nvj_hw_decoder_info_fn);
SAME_FN(nvjpegJpegStateCreate, ct_nvj_state_create_fn);
SAME_FN(nvjpegJpegStateDestroy, ct_nvj_state_destroy_fn);
SAME_FN(nvjpegGetImageInfo, ct_nvj_get_image_info_fn);
SAME_FN(nvjpegDecode, ct_nvj_decode_fn);
SAME_FN(nvjpegCreateEx, ct_nvj_create_ex_fn);
SAME_FN(nvjpegJpegStreamCreate, ct_nvj_jpeg_stream_create_fn);
SAME_FN(nvjpegJpegStreamDestroy, ct_nvj_jpeg_stream_destroy_fn);
SAME_FN(nvjpegJpegStreamParseHeader, ct_nvj_jpeg_stream_parse_header_fn);
SAME_FN(nvjpegDecodeParamsCreate, ct_nvj_decode_params_create_fn);
SAME_FN(nvjpegDecodeParamsDestroy, ct_nvj_decode_params_destroy_fn);
SAME_FN(nvjpegDecodeParamsSetOutputFormat, ct_nvj_decode_params_set_output_format_fn);
SAME_FN(nvjpegDecodeParamsSetROI, ct_nvj_decode_params_set_roi_fn);
SAME_FN(nvjpegDecodeBatchedSupportedEx, ct_nvj_decode_batched_supported_ex_fn);
SAME_FN(nvjpegDecodeBatchedInitialize, ct_nvj_decode_batched_initialize_fn);
SAME_FN(nvjpegDecodeBatchedEx, ct_nvj_decode_batched_ex_fn);

/* and the loader's names are the real ones: a symbol missing from the header fails here */
static void *const ct_nvj_names_[] = {
    (void *)&nvjpegGetProperty, (void *)&nvjpegCreateSimple, (void *)&nvjpegDestroy,
    (void *)&nvjpegGetHardwareDecoderInfo, (void *)&nvjpegJpegStateCreate, (void *)&nvjpegJpegStateDestroy,
    (void *)&nvjpegGetImageInfo, (void *)&nvjpegDecode, (void *)&nvjpegCreateEx, (void *)&nvjpegJpegStreamCreate,
    (void *)&nvjpegJpegStreamDestroy, (void *)&nvjpegJpegStreamParseHeader, (void *)&nvjpegDecodeParamsCreate,
    (void *)&nvjpegDecodeParamsDestroy, (void *)&nvjpegDecodeParamsSetOutputFormat, (void *)&nvjpegDecodeParamsSetROI,
    (void *)&nvjpegDecodeBatchedSupportedEx, (void *)&nvjpegDecodeBatchedInitialize, (void *)&nvjpegDecodeBatchedEx,
};
void *ct_nvj_check_names(int i) { return ct_nvj_names_[i]; }
