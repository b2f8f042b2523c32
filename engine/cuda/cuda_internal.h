/* The CUDA device's and backend's private state, shared by their files:
 *   device.c      the device: ordinal, compute and copy streams, memory, timing marks
 *   backend.c     the backend's ops: the layer table, workspace and scratch, step scalars,
 *                 optimizer
 *   loss.c        the loss and its metric accumulators
 *   <type>.c      one layer type's forward and backward each (CT_LAYER_TYPES), with what they
 *                 share in layer_common.h
 *   matmul.c      cuBLASLt products with cached plans (dense.c)
 *   dnn.c         the cuDNN handle and what conv2d.c and batchnorm.c share
 *   capture.c     step capture and replay
 *   input.c       input staging
 *   jpeg.c        the image decoder of decode = gpu (nvJPEG through dlopen), one image at a time
 *   jpeg_hw.c     its batched path on the hardware JPEG engine (jpeg_internal.h between them)
 * C11 host code; kernels are reached only through kernels/kernels.h. */
#ifndef CT_CUDA_INTERNAL_H
#define CT_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "kernels/kernels.h"
#include "backend.h"
#include "cuda/cuda_check.h"
#include "cuda/cuda_device.h"
#include "graph/layer.h"

/* cuDNN's algorithm search may use this much workspace per convolution; cuBLASLt this much per
 * matrix product. Both live in the one shared workspace, layers run one at a time. */
#define CT_CUDNN_WORKSPACE_LIMIT ((size_t)256 << 20)
#define CT_CUBLASLT_WORKSPACE ((size_t)32 << 20)

/* ---- device.c ---- */

typedef struct ct_cuda_dev {
    cudaStream_t compute;        /* every layer, the loss, the optimizer, the device's memory ops */
    cudaStream_t copy;           /* host-to-device input copies, ordered by events */
    cudaEvent_t marks[CT_DEVICE_MARKS];
    ct_devmem *devmem;            /* every device and pinned host allocation (base/devmem.h) */
    int ordinal;
} ct_cuda_dev;

/* The CUDA part of d; NULL when d is not a CUDA device. */
ct_cuda_dev *ct_cuda_dev_of(ct_device *d);

/* ---- dnn.c: a cache of per-shape cuDNN descriptors, entries that begin with their key ---- */

typedef struct ct_dnn_cache {
    void *items;
    int count, cap;
    const struct ct_dnn_entry_type *type;   /* of its entries, from the first get: what frees them */
} ct_dnn_cache;

/* ---- backend.c ---- */

typedef struct ct_lt_plans ct_lt_plans;         /* matmul.c: per-shape matmul plans */
typedef struct ct_capture_cache ct_capture_cache;   /* capture.c: captured steps by step key */
typedef struct ct_input_ring ct_input_ring;     /* input.c: device staging buffers */
typedef struct ct_cuda_jpeg ct_cuda_jpeg;       /* jpeg.c: nvJPEG, its state and stream */

typedef struct ct_cuda {
    ct_device *dev;              /* not owned */
    cudaStream_t compute, copy;  /* the device's */
    int allow_tf32;
    int deterministic;           /* cuDNN: deterministic algorithms where one fits */
    int nondeterministic_noted;  /* the note saying one did not fit is written once */
    cublasLtHandle_t lt;
    cudnnHandle_t dnn;

    /* reserve: shared by the layers (one runs at a time), and the gradient before a fused
     * activation */
    void *workspace;
    size_t workspace_size;
    float *scratch;
    size_t scratch_size;

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

    unsigned *nonfinite;         /* device counter for all_finite */

    /* fp16 loss scaling (scaler_set): the state in device memory, read and written only by the
     * step's kernels (loss, unscale, optimizer, ct_launch_scaler_update) in stream order; the host
     * copies it in and out through the pinned scaler_host outside steps. */
    ct_scaler *scaler;
    ct_scaler *scaler_host;
    int loss_scaling;            /* 1: the loss scales dlogits and unscale divides the gradients */

    ct_lt_plans *plans;
    ct_dnn_cache conv;           /* conv2d.c: descriptors and measured algorithms per shape */
    ct_dnn_cache bn;             /* batchnorm.c: descriptors per shape */
    ct_capture_cache *captures;
    ct_input_ring *input;
    ct_cuda_jpeg *jpeg;          /* NULL until image_decoder */
} ct_cuda;

static inline ct_cuda *ct_cuda_of(ct_backend *be) { return (ct_cuda *)be->impl; }

/* ---- loss.c: the loss and its device-side metric accumulators ---- */
ct_status ct_cuda_loss(ct_backend *be, const ct_tensor *logits, const ct_tensor *labels, ct_tensor *dlogits, int n,
                       ct_err *err);
ct_status ct_cuda_read_metrics(ct_backend *be, double *loss_sum, long *correct, int reset, ct_err *err);
ct_status ct_cuda_peek_metrics(ct_backend *be, long tag, double *loss_sum, long *correct, long *tag_out,
                               ct_err *err);

/* The per-type ops of the layer table, and the dtypes each type's ops take (bits 1u << ct_dtype,
 * ct_cuda_<type>_dtypes next to the ops; layer_common.h), ct_cuda_<type>_ops in engine/cuda/<type>.c. */
#define CT_CUDA_DECLARE_OPS(upper, lower) extern const ct_layer_ops ct_cuda_##lower##_ops; \
    extern const unsigned ct_cuda_##lower##_dtypes;
CT_LAYER_TYPES(CT_CUDA_DECLARE_OPS)
#undef CT_CUDA_DECLARE_OPS

/* backend.c: the layer table the backend's ops point at (indexed by ct_layer_type), and whether a
 * type's ops take tensors of dtype (its ct_cuda_<type>_dtypes); pure lookups, no GPU needed. */
const ct_layer_ops *const *ct_cuda_layer_table(void);
int ct_cuda_layer_supports(ct_layer_type type, ct_dtype dtype);

/* ---- matmul.c: column-major products through cuBLASLt, fp32 ---- */
ct_status ct_cuda_matmul_init(ct_cuda *cu, ct_err *err);
void ct_cuda_matmul_free(ct_cuda *cu);
/* D (m x n, ld ldd) = op(A) op(B) [+ D when beta_one], column-major, with `epilogue` (bias:
 * length m, for the bias epilogues, else NULL). *done = 0 when no algorithm runs this epilogue
 * (the caller then does the epilogue's work itself); a plain product without one is an error. */
ct_status ct_cuda_matmul(ct_cuda *cu, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                         const float *A, int lda, const float *B, int ldb, float *D, int ldd,
                         cublasLtEpilogue_t epilogue, const float *bias, int beta_one, int *done, ct_err *err);
/* The same over other dtypes: A and B of ab_type (fp32, fp16 or bf16), D (C) and the bias of d_type,
 * which is fp32 or ab_type; CUBLAS_COMPUTE_32F with an fp32 scale whatever the types. */
ct_status ct_cuda_matmul_dt(ct_cuda *cu, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            const void *A, int lda, const void *B, int ldb, void *D, int ldd, ct_dtype ab_type,
                            ct_dtype d_type, cublasLtEpilogue_t epilogue, const void *bias, int beta_one, int *done,
                            ct_err *err);

/* ---- dnn.c: the cuDNN handle, and what conv2d.c and batchnorm.c share ---- */
ct_status ct_cuda_dnn_init(ct_cuda *cu, ct_err *err);
/* The caches' descriptors (cu->conv, cu->bn), then the handle. */
void ct_cuda_dnn_free(ct_cuda *cu);
/* cuDNN's legacy descriptors index with int: 1 when a * b * c * d <= INT_MAX. */
int ct_cuda_dnn_fits_int(size_t a, size_t b, size_t c, size_t d);

/* An entry of entry_size bytes whose first key_size bytes are its key (plain ints: compared as
 * bytes). make fills a zeroed entry holding the key, from what its type passes as `how`; release
 * frees what a (partly) made one holds. */
typedef struct ct_dnn_entry_type {
    size_t entry_size, key_size;
    ct_status (*make)(ct_cuda *cu, const void *how, void *entry, ct_err *err);
    void (*release)(void *entry);
} ct_dnn_entry_type;
/* The entry of c for key, made on a miss; valid until the next call on c. A cache holds entries
 * of one type, t, which it keeps to release them: ct_cuda_dnn_free frees every cache without
 * knowing its users. */
ct_status ct_cuda_dnn_cache_get(ct_cuda *cu, ct_dnn_cache *c, const ct_dnn_entry_type *t, const void *key,
                                const void *how, void **out, ct_err *err);

/* ---- conv2d.c: the choice among cuDNN's measured convolution algorithms ---- */

/* One measured algorithm, whichever direction: the fields the three cuDNN perf structs share. */
typedef struct ct_conv_algo_perf {
    int algo;                        /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    cudnnStatus_t status;
    float time;                      /* ms */
    size_t memory;                   /* workspace bytes */
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} ct_conv_algo_perf;
/* The index among perf[0..count) of the fastest usable result: one that ran, needs at most
 * `limit` bytes of workspace, and computes in fp32 (TF32 tensor ops only with allow_tf32; math
 * that may convert to fp16, never). With `deterministic`, the fastest deterministic one; where none
 * is usable, the fastest of all and *fell_back = 1 (else 0). -1 when nothing is usable. A pure
 * function, so that its test needs no GPU. */
int ct_cuda_conv_pick(const ct_conv_algo_perf *perf, int count, size_t limit, int allow_tf32, int deterministic,
                      int *fell_back);

/* ---- capture.c ---- */
ct_status ct_cuda_capture_init(ct_cuda *cu, ct_err *err);
void ct_cuda_capture_free(ct_cuda *cu);
/* Drops every captured step (they hold the addresses of the backend's buffers, which reserve
 * replaces). */
void ct_cuda_capture_reset(ct_cuda *cu);
/* The backend's forget: drops the captured steps of network net. */
void ct_cuda_capture_forget(ct_backend *be, const void *net);
ct_status ct_cuda_run_step(ct_backend *be, const ct_step_key *key, void *ctx, ct_err *err);

/* ---- input.c ---- */
void ct_cuda_input_free(ct_cuda *cu);
/* Device staging for batches of up to x_bytes and y_bytes; frees an earlier one. */
ct_status ct_cuda_input_reserve(ct_cuda *cu, size_t x_bytes, size_t y_bytes, ct_err *err);
/* Device bytes input_reserve takes for batches of x_bytes and y_bytes, as the allocator counts them. */
size_t ct_cuda_input_bytes(size_t x_bytes, size_t y_bytes);
ct_status ct_cuda_input_submit(ct_backend *be, const ct_input_batch *b, ct_tensor *x, ct_tensor *labels,
                               long *ticket, ct_err *err);
ct_status ct_cuda_input_wait(ct_backend *be, long ticket, ct_err *err);

/* ---- jpeg.c ---- */
/* The backend's image_decoder: loads nvJPEG and makes its handle, state and stream (once). */
ct_status ct_cuda_image_decoder(ct_backend *be, char *info, size_t n, ct_err *err);
/* Decodes b's compressed samples into dst, the staging of b's first sample, on the decoder's
 * stream: it waits for slot_free, then records done. */
ct_status ct_cuda_jpeg_decode(ct_cuda *cu, const ct_input_batch *b, unsigned char *dst, cudaEvent_t slot_free,
                              cudaEvent_t done, ct_err *err);
void ct_cuda_jpeg_free(ct_cuda *cu);
/* The backend's image_decode_time. */
ct_status ct_cuda_image_decode_time(ct_backend *be, const ct_encoded_batch *enc, ct_shape shape, double *seconds,
                                    ct_err *err);
/* The images decoded so far by the hardware engine's batches and one at a time (tests, logs). */
void ct_cuda_jpeg_counts(const ct_cuda *cu, long *engine, long *single);
/* Closes the hardware engine's path, so that every image goes one at a time (tests: that path on a
 * GPU with the engine). */
void ct_cuda_jpeg_engine_off(ct_cuda *cu);

#endif
