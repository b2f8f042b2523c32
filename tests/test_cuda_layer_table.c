/* The CUDA backend's layer table, checked without a GPU (a unit test of the CUDA build): every
 * layer type of CT_LAYER_TYPES has ops with a forward and a backward, and declares that its ops
 * take fp32, fp16 and bf16 tensors (ct_cuda_layer_supports, from each type's
 * ct_cuda_<type>_dtypes), while a dtype no layer computes in (int32, uint8) is declared by none.
 * A type added without CUDA ops or without its dtype declaration fails here (or at link time). */
#include <stdio.h>

#include "backend.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "cuda/cuda_device.h"
#include "cuda/cuda_internal.h"

/* [train] precision against the GPU's compute capability: fp16 from 7.0, bf16 from 8.0. */
static void test_precision_needs(void)
{
    CHECK(ct_cuda_precision_needs(CT_PREC_FP32, 5, 2) == NULL);
    CHECK(ct_cuda_precision_needs(CT_PREC_FP16, 6, 1) != NULL);
    CHECK(ct_cuda_precision_needs(CT_PREC_FP16, 7, 0) == NULL);
    CHECK(ct_cuda_precision_needs(CT_PREC_BF16, 7, 5) != NULL);
    CHECK(ct_cuda_precision_needs(CT_PREC_BF16, 8, 0) == NULL);
    CHECK(ct_cuda_precision_needs(CT_PREC_BF16, 9, 0) == NULL);
}

static void test_table(void)
{
    const ct_layer_ops *const *table = ct_cuda_layer_table();
    CHECK(table != NULL);
    if (!table)
        return;
    const ct_dtype floats[] = {CT_DTYPE_F32, CT_DTYPE_F16, CT_DTYPE_BF16};
    for (int t = 0; t < CT_LAYER_TYPE_COUNT; t++) {
        const char *name = ct_layer_type_name((ct_layer_type)t);
        const ct_layer_ops *ops = table[t];
        CHECK_MSG(ops != NULL, "layer type %s has no CUDA ops", name);
        if (!ops)
            continue;
        CHECK_MSG(ops->forward != NULL, "layer type %s has no CUDA forward", name);
        CHECK_MSG(ops->backward != NULL, "layer type %s has no CUDA backward", name);
        for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
            CHECK_MSG(ct_cuda_layer_supports((ct_layer_type)t, floats[i]),
                      "layer type %s does not declare %s on the CUDA backend", name, ct_dtype_name(floats[i]));
        CHECK_MSG(!ct_cuda_layer_supports((ct_layer_type)t, CT_DTYPE_I32) &&
                      !ct_cuda_layer_supports((ct_layer_type)t, CT_DTYPE_U8),
                  "layer type %s declares an integer activation dtype", name);
    }
    /* out of range asks nothing of the tables */
    CHECK(!ct_cuda_layer_supports(CT_LAYER_TYPE_COUNT, CT_DTYPE_F32));
    CHECK(!ct_cuda_layer_supports((ct_layer_type)-1, CT_DTYPE_F32));
}
#endif

int main(void)
{
#ifdef CUTRAIN_HAVE_CUDA
    test_table();
    test_precision_needs();
    return ct_test_done();
#else
    printf("built without the CUDA backend: nothing to check\n");
    return 77;
#endif
}
