/* nvJPEG through dlopen (base/nvjpeg_api.h): the library is found by name at run time, so a build
 * needs no nvJPEG and a machine without it says why instead of failing to start. */
#include "base/nvjpeg_api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int load_one(ct_nvjpeg_lib *lib, const char *name, char *why, size_t n)
{
    void *dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *e = dlerror();
        snprintf(why, n, "%s", e ? e : "not found");
        return -1;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&lib->get_property, "nvjpegGetProperty"},
        {(void **)&lib->create_simple, "nvjpegCreateSimple"},
        {(void **)&lib->destroy, "nvjpegDestroy"},
        {(void **)&lib->hw_decoder_info, "nvjpegGetHardwareDecoderInfo"},
        {(void **)&lib->state_create, "nvjpegJpegStateCreate"},
        {(void **)&lib->state_destroy, "nvjpegJpegStateDestroy"},
        {(void **)&lib->get_image_info, "nvjpegGetImageInfo"},
        {(void **)&lib->decode, "nvjpegDecode"},
        {(void **)&lib->create_ex, "nvjpegCreateEx"},
        {(void **)&lib->jpeg_stream_create, "nvjpegJpegStreamCreate"},
        {(void **)&lib->jpeg_stream_destroy, "nvjpegJpegStreamDestroy"},
        {(void **)&lib->jpeg_stream_parse_header, "nvjpegJpegStreamParseHeader"},
        {(void **)&lib->decode_params_create, "nvjpegDecodeParamsCreate"},
        {(void **)&lib->decode_params_destroy, "nvjpegDecodeParamsDestroy"},
        {(void **)&lib->decode_params_set_output_format, "nvjpegDecodeParamsSetOutputFormat"},
        {(void **)&lib->decode_params_set_roi, "nvjpegDecodeParamsSetROI"},
        {(void **)&lib->decode_batched_supported_ex, "nvjpegDecodeBatchedSupportedEx"},
        {(void **)&lib->decode_batched_initialize, "nvjpegDecodeBatchedInitialize"},
        {(void **)&lib->decode_batched_ex, "nvjpegDecodeBatchedEx"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(dl, syms[i].name);
        if (!*syms[i].fn) {
            snprintf(why, n, "%s has no %s", name, syms[i].name);
            dlclose(dl);
            memset(lib, 0, sizeof *lib);
            return -1;
        }
    }
    lib->dl = dl;
    snprintf(lib->path, sizeof lib->path, "%s", name);
    static const ct_nvj_property props[3] = {CT_NVJ_MAJOR_VERSION, CT_NVJ_MINOR_VERSION, CT_NVJ_PATCH_LEVEL};
    for (int i = 0; i < 3; i++)
        if (lib->get_property(props[i], &lib->version[i]) != CT_NVJ_SUCCESS)
            lib->version[i] = 0;
    return 0;
}

int ct_nvjpeg_load(ct_nvjpeg_lib *lib, const char *library, char *why, size_t n)
{
    char ignored[8];
    if (!why || n == 0) {
        why = ignored;
        n = sizeof ignored;
    }
    why[0] = 0;
    if (!library) {
        const char *env = getenv("CT_NVJPEG_LIBRARY");
        if (env && env[0])
            library = env;
    }
    static const char *const names[] = {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"};
    const char *const *try = library ? &library : names;
    size_t count = library ? 1 : sizeof names / sizeof names[0];
    char last[512] = "";
    for (size_t i = 0; i < count; i++)
        if (load_one(lib, try[i], last, sizeof last) == 0)
            return 0;
    if (library)
        snprintf(why, n, "nvJPEG (%s) not loaded: %s", library, last);
    else
        snprintf(why, n,
                 "nvJPEG not loaded: none of libnvjpeg.so.13, .so.12, .so was found by the loader (the last: "
                 "%s); install the CUDA toolkit's nvJPEG or PyPI's nvidia-nvjpeg and add its lib folder to "
                 "LD_LIBRARY_PATH",
                 last);
    return -1;
}

void ct_nvjpeg_unload(ct_nvjpeg_lib *lib)
{
    if (lib && lib->dl) {
        dlclose(lib->dl);
        memset(lib, 0, sizeof *lib);
    }
}

const char *ct_nvjpeg_status_name(ct_nvj_status st)
{
    static const char *const names[] = {
        "success", "not initialized", "invalid parameter", "bad JPEG", "JPEG not supported", "allocator failure",
        "execution failed", "architecture mismatch", "internal error", "implementation not supported",
        "incomplete bitstream"};
    return st < sizeof names / sizeof names[0] ? names[st] : "unknown nvJPEG status";
}
