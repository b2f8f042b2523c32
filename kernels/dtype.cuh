// Storage types of the kernels/*.cu files (private to them; kernels.h is the public door).
//
// Mixed precision stores activations and their gradients in fp16 or bf16 and computes in fp32.
// Each kernel body is a template over its storage types: `widen` reads a stored value into fp32
// (exact for all three types), the body computes in fp32 with the fp32 kernel's operations in its
// order, and `narrow<T>` rounds the result to T on store, to nearest even (__float2half_rn,
// __float2bfloat16_rn, as engine/base/half.h on the host). For T = float both are the identity,
// so the fp32 instantiation is the fp32 kernel, operation for operation.
#ifndef CT_DTYPE_CUH
#define CT_DTYPE_CUH

#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "base/tensor.h"

// The launchers take a dtype as a plain int (kernels.h); these pin the values they rely on.
static_assert(CT_DTYPE_F32 == 0 && CT_DTYPE_F16 == 1 && CT_DTYPE_BF16 == 2,
              "kernels.h documents these ct_dtype values");

namespace ct_half {

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

// A struct rather than specialised function templates: its members are inline in every .cu file.
template <typename T> struct Narrow;
template <> struct Narrow<float> {
    static __device__ __forceinline__ float to(float v) { return v; }
};
template <> struct Narrow<__half> {
    static __device__ __forceinline__ __half to(float v) { return __float2half_rn(v); }
};
template <> struct Narrow<__nv_bfloat16> {
    static __device__ __forceinline__ __nv_bfloat16 to(float v) { return __float2bfloat16_rn(v); }
};

// v rounded to T, to nearest even.
template <typename T> __device__ __forceinline__ T narrow(float v) { return Narrow<T>::to(v); }

// A type carried as a value, so that a generic lambda can receive it.
template <typename T> struct Tag {
    using type = T;
};

inline bool valid(int dtype) { return dtype == CT_DTYPE_F32 || dtype == CT_DTYPE_F16 || dtype == CT_DTYPE_BF16; }

inline size_t bytes(int dtype) { return dtype == CT_DTYPE_F32 ? 4 : 2; }

// f(Tag<T>{}) with T the storage type of dtype; cudaErrorInvalidValue for any other dtype (the
// integer dtypes have no kernel here).
template <typename F> int with(int dtype, F &&f)
{
    switch (dtype) {
    case CT_DTYPE_F32:
        return f(Tag<float>{});
    case CT_DTYPE_F16:
        return f(Tag<__half>{});
    case CT_DTYPE_BF16:
        return f(Tag<__nv_bfloat16>{});
    default:
        return (int)cudaErrorInvalidValue;
    }
}

// The same for two dtypes at once: f(Tag<A>{}, Tag<B>{}).
template <typename F> int with2(int a, int b, F &&f)
{
    return with(a, [&](auto ta) { return with(b, [&](auto tb) { return f(ta, tb); }); });
}

}  // namespace ct_half

// The storage type a Tag carries, inside a generic lambda.
#define CT_TYPE_OF(tag) typename decltype(tag)::type

#endif
