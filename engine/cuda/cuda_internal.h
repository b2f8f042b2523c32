/* The CUDA backend's private state, shared by its files: backend_cuda.c (the vtable, memory,
 * streams, elementwise layers, loss, optimizer), cuda_blas.c (dense layers through cuBLASLt),
 * cuda_dnn.c (convolution and batch norm through cuDNN), cuda_graph.c (step capture and replay)
 * and cuda_input.c (input staging). C11 host code; kernels are reached only through
 * kernels/kernels.h. */
#ifndef CT_CUDA_INTERNAL_H
#define CT_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "kernels/kernels.h"
#include "backend.h"
#include "cuda/cuda_check.h"

/* cuDNN's algorithm search may use this much workspace per convolution; cuBLASLt this much per
 * matrix product. Both live in the one shared workspace (be->workspace), layers run one at a time. */
#define CT_CUDNN_WORKSPACE_LIMIT ((size_t)256 << 20)
#define CT_CUBLASLT_WORKSPACE ((size_t)32 << 20)

typedef struct ct_conv_algos ct_conv_algos;     /* cuda_dnn.c: per-shape algorithm cache */
typedef struct ct_lt_plans ct_lt_plans;         /* cuda_blas.c: per-shape matmul plans */
typedef struct ct_graph_cache ct_graph_cache;   /* cuda_graph.c: captured steps by key */
typedef struct ct_input_ring ct_input_ring;     /* cuda_input.c: pinned staging buffers */

typedef struct ct_cuda {
    int device;
    int graphs;                  /* run_step captures */
    int allow_tf32;
    cudaStream_t compute;        /* every layer, the loss, the optimizer */
    cudaStream_t copy;           /* host-to-device input copies, ordered by events */
    cublasLtHandle_t lt;
    cudnnHandle_t dnn;

    float *loss_sum;             /* device metric accumulators */
    unsigned *correct;
    ct_device_step *step;        /* device copy of this step's scalars */
    ct_device_step *step_host;   /* pinned ring the scalars are copied from */
    cudaEvent_t *step_done;      /* per ring slot: its copy has run */
    int step_slots, step_next;

    /* peek_metrics: a pinned snapshot of the accumulators and the event that completes it */
    float *snap_loss;
    unsigned *snap_correct;
    cudaEvent_t snap_event;
    long snap_tag, snap_tag_done;
    double last_loss;
    long last_correct;

    cudaEvent_t marks[CT_BACKEND_MARKS];
    unsigned *nonfinite;         /* device counter for all_finite */

    ct_conv_algos *conv;
    ct_lt_plans *plans;
    ct_graph_cache *graph;
    ct_input_ring *input;
} ct_cuda;

static inline ct_cuda *ct_cuda_of(ct_backend *be) { return (ct_cuda *)be->impl; }

/* ---- cuda_blas.c: dense layers, (n, in) x (out, in)^T, through cuBLASLt ---- */
ct_status ct_cuda_blas_init(ct_cuda *cu, ct_err *err);
void ct_cuda_blas_free(ct_cuda *cu);
/* l->x[0]: (n, in); l->w: (out, in); l->b: (out) or NULL. Writes y = act(x w^T + b) with l->z the
 * pre-activation where the layer keeps one (the bias, and relu, fused as cuBLASLt epilogues). */
ct_status ct_cuda_dense_forward(ct_backend *be, ct_layer *l, int n, ct_err *err);
/* dz: (n, out) the gradient at the pre-activation. dx (n, in) += dz w; dw (out, in) += dz^T x;
 * db (out) += column sums of dz. */
ct_status ct_cuda_dense_backward(ct_backend *be, ct_layer *l, const float *dz, int n, ct_err *err);

/* ---- cuda_dnn.c: convolution and batch norm through cuDNN, NHWC fp32 ---- */
ct_status ct_cuda_dnn_init(ct_cuda *cu, ct_err *err);
void ct_cuda_dnn_free(ct_cuda *cu);
/* Workspace a convolution needs at batch n: its pad copies plus cuDNN's algorithm allowance. */
size_t ct_cuda_conv_workspace(const ct_layer *l, int n);
/* y (n, oh, ow, f) = conv(x (n, h, w, c), w (f, kh, kw, c)) + b, into l->z (the caller applies
 * the activation). The algorithm for this shape is searched once (cudnnFind, outside any capture:
 * the first run of a step is never captured) and cached. */
ct_status ct_cuda_conv_forward(ct_backend *be, ct_layer *l, int n, ct_err *err);
/* dz: (n, oh, ow, f). dx += , dw += , db += (dx may be NULL: the network's input). */
ct_status ct_cuda_conv_backward(ct_backend *be, ct_layer *l, const float *dz, int n, ct_err *err);
/* x, y: (n, h, w, c); per-channel statistics; aux keeps (mean, invstd) of the batch for backward;
 * l->state holds (running mean, running variance), updated in training as PyTorch does. */
ct_status ct_cuda_batchnorm_forward(ct_backend *be, ct_layer *l, int n, int training, ct_err *err);
ct_status ct_cuda_batchnorm_backward(ct_backend *be, ct_layer *l, int n, ct_err *err);

/* ---- cuda_graph.c ---- */
ct_status ct_cuda_graph_init(ct_cuda *cu, ct_err *err);
void ct_cuda_graph_free(ct_cuda *cu);
ct_status ct_cuda_run_step(ct_backend *be, int key, ct_step_fn fn, void *ctx, ct_err *err);

/* ---- cuda_input.c ---- */
void ct_cuda_input_free(ct_cuda *cu);
ct_status ct_cuda_input_reserve(ct_backend *be, size_t x_bytes, size_t y_bytes, ct_err *err);
ct_status ct_cuda_input_host(ct_backend *be, float **host_x, int32_t **host_y, ct_err *err);
ct_status ct_cuda_input_commit(ct_backend *be, float *dst_x, int32_t *dst_y, size_t x_bytes, size_t y_bytes,
                               ct_err *err);
void *ct_cuda_host_alloc(ct_backend *be, size_t bytes);
void ct_cuda_host_free(ct_backend *be, void *ptr);
ct_status ct_cuda_input_submit(ct_backend *be, const ct_input_batch *b, float *dst_x, int32_t *dst_y, long *ticket,
                               ct_err *err);
ct_status ct_cuda_input_wait(ct_backend *be, long ticket, ct_err *err);

#endif
