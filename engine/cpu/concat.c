/* concat on the CPU: each position's channels are the inputs' channels one after another, so
 * forward copies each input's row into its column block and backward hands the block back,
 * written or added to what another consumer wrote (l->dx_accumulate). */
#include <string.h>

#include "cpu/cpu_backend.h"

// x[k]: (n, h, w, c_k) fp32 -> y: (n, h, w, sum c_k)
static ct_status concat_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err)
{
    (void)be; (void)training; (void)err;
    const size_t rows = (size_t)n * l->out.h * l->out.w, width = (size_t)l->out.c;
    float *y = ct_f32(l->y);
    size_t offset = 0;
    for (int k = 0; k < l->n_in; k++) {
        const size_t c = (size_t)l->in_shapes[k].c;
        const float *x = ct_f32(l->x[k]);
#pragma omp parallel for schedule(static) if (rows * c > CT_CPU_PAR_MIN)
        for (size_t r = 0; r < rows; r++)
            memcpy(y + r * width + offset, x + r * c, c * sizeof *x);
        offset += c;
    }
    return CT_OK;
}

// dy: (n, h, w, sum c_k) fp32 -> dx[k]: (n, h, w, c_k) = (accumulate ? dx[k] : 0) + dy's block k;
// the data input has no dx
static ct_status concat_backward(ct_backend *be, ct_layer *l, int n, ct_err *err)
{
    (void)be; (void)err;
    const size_t rows = (size_t)n * l->out.h * l->out.w, width = (size_t)l->out.c;
    const float *dy = ct_f32(l->dy);
    size_t offset = 0;
    for (int k = 0; k < l->n_in; k++) {
        const size_t c = (size_t)l->in_shapes[k].c;
        if (l->dx[k]) {
            float *dx = ct_f32(l->dx[k]);
            const int accumulate = l->dx_accumulate[k];
#pragma omp parallel for schedule(static) if (rows * c > CT_CPU_PAR_MIN)
            for (size_t r = 0; r < rows; r++)
                for (size_t j = 0; j < c; j++)
                    dx[r * c + j] = (accumulate ? dx[r * c + j] : 0.0f) + dy[r * width + offset + j];
        }
        offset += c;
    }
    return CT_OK;
}

const ct_layer_ops ct_cpu_concat_ops = {
    .forward = concat_forward,
    .backward = concat_backward,
    .workspace_bytes = NULL,
};
