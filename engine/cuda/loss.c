/* The loss and its metric accumulators on the CUDA backend: the loss sum and the correct count
 * stay on the device and are read back by read_metrics (waiting) or peek_metrics (a snapshot
 * into pinned memory that completes in stream order, for displays that must not stall it). */
#include "cuda/cuda_internal.h"

// logits: (n, k) fp32; labels: (n) int32; dlogits: (n, k) fp32 or NULL (evaluation)
ct_status ct_cuda_loss(ct_backend *be, const ct_tensor *logits, const ct_tensor *labels, ct_tensor *dlogits, int n,
                       ct_err *err)
{
    if (logits->dtype != CT_DTYPE_F32 || labels->dtype != CT_DTYPE_I32 || (dlogits && dlogits->dtype != CT_DTYPE_F32))
        return ct_fail(err, CT_ERR_BACKEND, "the CUDA loss takes fp32 logits and int32 labels (got %s and %s)",
                       ct_dtype_name(logits->dtype), ct_dtype_name(labels->dtype));
    ct_cuda *cu = ct_cuda_of(be);
    /* with scaling on, dlogits = ((p - onehot) * (1/n)) * scale, the scale read on the device (a
     * replayed step sees the current one); for the power-of-two scales of dynamic scaling the bits
     * of the CPU's one factor (1/n) * scale */
    if (cu->loss_scaling && dlogits)
        CT_CUDA_CHECK(ct_launch_softmax_xent_scaled(ct_f32(logits), ct_i32(labels), ct_f32(dlogits), cu->loss_sum,
                                                    cu->correct, n, logits->shape.c, 1.0f / (float)n, cu->scaler,
                                                    cu->compute), err);
    else
        CT_CUDA_CHECK(ct_launch_softmax_xent(ct_f32(logits), ct_i32(labels), ct_f32(dlogits), cu->loss_sum,
                                             cu->correct, n, logits->shape.c, 1.0f / (float)n, cu->compute), err);
    return CT_OK;
}

ct_status ct_cuda_read_metrics(ct_backend *be, double *loss_sum, long *correct, int reset, ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    CT_CUDA_CHECK(cudaMemcpyAsync(cu->snap_loss, cu->loss_sum, sizeof *cu->snap_loss, cudaMemcpyDeviceToHost,
                                  cu->compute), err);
    CT_CUDA_CHECK(cudaMemcpyAsync(cu->snap_correct, cu->correct, sizeof *cu->snap_correct, cudaMemcpyDeviceToHost,
                                  cu->compute), err);
    if (reset) {
        CT_CUDA_CHECK(cudaMemsetAsync(cu->loss_sum, 0, sizeof *cu->loss_sum, cu->compute), err);
        CT_CUDA_CHECK(cudaMemsetAsync(cu->correct, 0, sizeof *cu->correct, cu->compute), err);
    }
    CT_CUDA_CHECK(cudaStreamSynchronize(cu->compute), err);
    *loss_sum = *cu->snap_loss;
    *correct = (long)*cu->snap_correct;
    /* a snapshot requested before this read is complete now, and stale after a reset */
    cu->snap_tag = cu->snap_tag_done = -1;
    return CT_OK;
}

ct_status ct_cuda_peek_metrics(ct_backend *be, long tag, double *loss_sum, long *correct, long *tag_out,
                                ct_err *err)
{
    ct_cuda *cu = ct_cuda_of(be);
    if (cu->snap_tag >= 0) {
        int done = 0;
        ct_status st = CT_CUDA_EVENT_DONE(cu->snap_event, &done, err);
        if (st != CT_OK)
            return st;
        if (done) {
            cu->last_loss = *cu->snap_loss;
            cu->last_correct = (long)*cu->snap_correct;
            cu->snap_tag_done = cu->snap_tag;
            cu->snap_tag = -1;
        }
    }
    if (cu->snap_tag < 0) {
        CT_CUDA_CHECK(cudaMemcpyAsync(cu->snap_loss, cu->loss_sum, sizeof *cu->snap_loss, cudaMemcpyDeviceToHost,
                                      cu->compute), err);
        CT_CUDA_CHECK(cudaMemcpyAsync(cu->snap_correct, cu->correct, sizeof *cu->snap_correct,
                                      cudaMemcpyDeviceToHost, cu->compute), err);
        CT_CUDA_CHECK(cudaEventRecord(cu->snap_event, cu->compute), err);
        cu->snap_tag = tag;
    }
    *loss_sum = cu->last_loss;
    *correct = cu->last_correct;
    *tag_out = cu->snap_tag_done;
    return CT_OK;
}
