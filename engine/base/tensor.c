#include "base/tensor.h"

size_t ct_dtype_size(ct_dtype t)
{
    static const size_t sizes[CT_DTYPE_COUNT] = {
        [CT_DTYPE_F32] = 4, [CT_DTYPE_F16] = 2, [CT_DTYPE_BF16] = 2, [CT_DTYPE_I32] = 4, [CT_DTYPE_U8] = 1,
    };
    return (unsigned)t < CT_DTYPE_COUNT ? sizes[t] : 0;
}

const char *ct_dtype_name(ct_dtype t)
{
    static const char *const names[CT_DTYPE_COUNT] = {
        [CT_DTYPE_F32] = "fp32", [CT_DTYPE_F16] = "fp16", [CT_DTYPE_BF16] = "bf16", [CT_DTYPE_I32] = "int32",
        [CT_DTYPE_U8] = "uint8",
    };
    return (unsigned)t < CT_DTYPE_COUNT ? names[t] : "?";
}
