/* Tensors: a buffer that knows its element type, its shape and its element count. Every
 * activation, gradient, parameter and optimizer buffer above the kernels is one of these; only a
 * backend turns one into a typed pointer (ct_f32), at the call of a kernel. */
#ifndef CT_TENSOR_H
#define CT_TENSOR_H

#include <stddef.h>

#include "base/types.h"

/* Element types. Values are stable: checkpoints may record them. */
typedef enum ct_dtype {
    CT_DTYPE_F32 = 0,
    CT_DTYPE_F16,
    CT_DTYPE_BF16,
    CT_DTYPE_I32,
    CT_DTYPE_U8,
    CT_DTYPE_COUNT
} ct_dtype;

/* Bytes of one element: the one place sizes come from. */
size_t ct_dtype_size(ct_dtype t);
const char *ct_dtype_name(ct_dtype t);

/* Every parameter, gradient and optimizer-moment tensor and every activation gradient starts at a
 * multiple of this many bytes, as every allocation of a device does: cudaMalloc's alignment, the
 * one cuBLASLt's heuristic assumes unless told less, and more than any vector load or cuDNN kernel
 * asks for (cuDNN's descriptor API takes no alignment hint, so the pointers must simply be it). */
#define CT_TENSOR_ALIGN 256

/* count elements of dtype rounded up to a whole number of CT_TENSOR_ALIGN-byte blocks: where the
 * next tensor of a flat buffer starts. */
static inline size_t ct_align_count(size_t count, ct_dtype dtype)
{
    size_t per = CT_TENSOR_ALIGN / ct_dtype_size(dtype);
    return (count + per - 1) / per * per;
}

/* A 4-d (n, h, w, c) buffer in its backend's memory, NHWC. Activations have n = the batch they
 * were bound for; parameters are (rows, 1, 1, cols) or flat (1, 1, 1, count). */
typedef struct ct_tensor {
    void *data;          /* backend memory, NULL until bound */
    ct_dtype dtype;
    int n;
    ct_shape shape;      /* per row: h, w, c */
    size_t count;        /* n * h * w * c */
} ct_tensor;

static inline ct_tensor ct_tensor_make(void *data, ct_dtype dtype, int n, ct_shape shape)
{
    return (ct_tensor){data, dtype, n, shape, (size_t)n * ct_shape_size(shape)};
}

/* A flat tensor of `count` elements. */
static inline ct_tensor ct_tensor_flat(void *data, ct_dtype dtype, size_t count)
{
    return (ct_tensor){data, dtype, 1, (ct_shape){1, 1, (int)count}, count};
}

static inline size_t ct_tensor_bytes(const ct_tensor *t) { return t->count * ct_dtype_size(t->dtype); }

/* Bytes of the first n rows (n samples of an activation bound for a larger batch). */
static inline size_t ct_tensor_rows_bytes(const ct_tensor *t, int n)
{
    return (size_t)n * ct_shape_size(t->shape) * ct_dtype_size(t->dtype);
}

/* The data of an fp32 tensor for a kernel, NULL for a NULL tensor (an absent bias, the data
 * input's gradient). Backends check dtypes once, when they bind a network. */
static inline float *ct_f32(const ct_tensor *t) { return t ? (float *)t->data : NULL; }
static inline int *ct_i32(const ct_tensor *t) { return t ? (int *)t->data : NULL; }

#endif
