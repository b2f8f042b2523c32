/* The device augmentation kernel (kernels/augment.cu) against the CPU batcher, bit for bit: on
 * real Fashion-MNIST and on synthetic 3- and 4-channel sets, for crops 0, 2 and 4 (and one wider
 * than the image), with and without flip, augmenting and not, several seeds and batch sizes 1, 7
 * and 256. Each batch's uint8 images are gathered on the host in the order of a shuffled index
 * list (ct_make_batch_u8), augmented on the device, downloaded, and compared with memcmp against
 * ct_make_batch's floats for the same indices and seed. Also: a launch captured in a CUDA graph
 * and replayed, and bad arguments (cudaErrorInvalidValue). Exits 77 (skipped) without a GPU or
 * without the CUDA backend. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifdef CUTRAIN_HAVE_CUDA

#include <cuda_runtime.h>

#include "data/dataset.h"
#include "tests/gpu_test.h"
#include "kernels/kernels.h"


enum { MAX_BATCH = 256, MAX_SAMPLE = 32 * 32 * 3 };


/* Host and device buffers for one batch of up to MAX_BATCH samples of MAX_SAMPLE elements. */
typedef struct bufs {
    cudaStream_t stream;
    long *order;          /* (count) the shuffled sample indices */
    uint8_t *u8;          /* (n, h, w, c) gathered on the host */
    float *want, *got;    /* (n, h, w, c) ct_make_batch's and the kernel's */
    int32_t *labels;      /* (n) */
    uint8_t *d_u8;        /* device copies */
    float *d_x;
} bufs;

/* batch.c's fold_normalise: ((p / 255) - mean) / std as p * norm_scale + norm_bias, in float. */
static void fold(const ct_augment *aug, float *norm_scale, float *norm_bias)
{
    for (int c = 0; c < CT_MAX_CHANNELS; c++) {
        norm_scale[c] = 1.0f / (255.0f * aug->std[c]);
        norm_bias[c] = -aug->mean[c] / aug->std[c];
    }
}

static void set_norm(ct_augment *aug, const float *mean, const float *std)
{
    for (int c = 0; c < CT_MAX_CHANNELS; c++) {
        aug->mean[c] = mean[c];
        aug->std[c] = std[c];
    }
}

/* Compares the kernel's batch with ct_make_batch's (one CHECK); prints the count of differing
 * floats and the first one when they differ. */
static void compare(const char *what, const ct_dataset *ds, int n, const ct_augment *aug, int augmenting,
                    uint64_t seed, const float *got, const float *want, int rc)
{
    size_t sample_size = ct_shape_size(ds->shape), total = (size_t)n * sample_size;
    size_t bad = 0, first = 0;
    if (rc != 0 || memcmp(got, want, total * sizeof(float)) != 0)
        for (size_t i = 0; i < total; i++)
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
                if (bad == 0)
                    first = i;
                bad++;
            }
    uint32_t got_bits = 0, want_bits = 0;
    memcpy(&got_bits, &got[first], sizeof got_bits);
    memcpy(&want_bits, &want[first], sizeof want_bits);
    CHECK_MSG(rc == 0 && bad == 0,
              "%s %dx%dx%d, n %d, crop %d, flip %d, augmenting %d, seed %llu: rc %d, %zu of %zu floats differ; "
              "first [%zu] (sample %zu, element %zu): got %.9g (0x%08x), want %.9g (0x%08x)",
              what, ds->shape.h, ds->shape.w, ds->shape.c, n, aug->crop_pad, aug->flip, augmenting,
              (unsigned long long)seed, rc, bad, total, first, first / sample_size, first % sample_size,
              (double)got[first], (unsigned)got_bits, (double)want[first], (unsigned)want_bits);
}

/* One batch: samples order[offset .. offset + n) of ds, augmented on the device and on the CPU. */
static void check_batch(const char *what, const ct_dataset *ds, bufs *b, long offset, int n, const ct_augment *aug,
                        int augmenting, uint64_t seed)
{
    ct_shape s = ds->shape;
    size_t total = (size_t)n * ct_shape_size(s);
    const long *idx = b->order + offset;
    ct_make_batch_u8(ds, idx, n, b->u8, b->labels);
    ct_make_batch(ds, idx, n, aug, augmenting, seed, b->want, b->labels);

    float norm_scale[CT_MAX_CHANNELS], norm_bias[CT_MAX_CHANNELS];
    fold(aug, norm_scale, norm_bias);
    GPU_OK(cudaMemcpyAsync(b->d_u8, b->u8, total, cudaMemcpyHostToDevice, b->stream));
    GPU_OK(cudaMemsetAsync(b->d_x, 0xff, total * sizeof(float), b->stream));  /* NaN: every float must be written */
    int rc = ct_launch_augment_u8(b->d_u8, b->d_x, n, s.h, s.w, s.c, aug->crop_pad, aug->flip, augmenting, norm_scale,
                                  norm_bias, (unsigned long long)seed, 0, b->stream);
    memset(norm_scale, 0, sizeof norm_scale);  /* the launch copied them: changing them now must not matter */
    memset(norm_bias, 0, sizeof norm_bias);
    GPU_OK(cudaMemcpyAsync(b->got, b->d_x, total * sizeof(float), cudaMemcpyDeviceToHost, b->stream));
    GPU_OK(cudaStreamSynchronize(b->stream));
    compare(what, ds, n, aug, augmenting, seed, b->got, b->want, rc);
}

/* The full grid of settings on one dataset; returns the number of batches compared. */
static int sweep(const char *what, const ct_dataset *ds, bufs *b, const float *mean, const float *std)
{
    static const int crops[] = {0, 2, 4};
    static const int sizes[] = {1, 7, MAX_BATCH};
    static const uint64_t seeds[] = {0, 42, 0x9e3779b97f4a7c15ULL};
    int batches = 0;
    ct_augment aug;
    memset(&aug, 0, sizeof aug);
    set_norm(&aug, mean, std);
    for (int si = 0; si < 3; si++) {
        ct_shuffle_indices(b->order, ds->count, seeds[si], si);
        for (int ci = 0; ci < 3; ci++)
            for (int flip = 0; flip < 2; flip++)
                for (int augmenting = 0; augmenting < 2; augmenting++)
                    for (int ni = 0; ni < 3; ni++) {
                        int n = sizes[ni];
                        if (n > ds->count)
                            continue;
                        /* batches at different places of the epoch's order */
                        long offset = ((long)batches * 263) % (ds->count - n + 1);
                        aug.crop_pad = crops[ci];
                        aug.flip = flip;
                        check_batch(what, ds, b, offset, n, &aug, augmenting, seeds[si] + (uint64_t)batches);
                        batches++;
                    }
    }
    return batches;
}

/* A whole augmented batch (crop 4, flip) of n shuffled samples: the CPU's in b->want, the raw bytes
 * on the device, the device's output poisoned with NaN; norm_scale and norm_bias (CT_MAX_CHANNELS) folded. */
static void stage_augmented(const ct_dataset *ds, bufs *b, const float *mean, const float *std, int n, uint64_t seed,
                            uint64_t shuffle_seed, ct_augment *aug, float *norm_scale, float *norm_bias)
{
    memset(aug, 0, sizeof *aug);
    set_norm(aug, mean, std);
    aug->crop_pad = 4;
    aug->flip = 1;
    size_t total = (size_t)n * ct_shape_size(ds->shape);
    ct_shuffle_indices(b->order, ds->count, shuffle_seed, 1);
    ct_make_batch_u8(ds, b->order, n, b->u8, b->labels);
    ct_make_batch(ds, b->order, n, aug, 1, seed, b->want, b->labels);
    fold(aug, norm_scale, norm_bias);
    GPU_OK(cudaMemcpyAsync(b->d_u8, b->u8, total, cudaMemcpyHostToDevice, b->stream));
    GPU_OK(cudaMemsetAsync(b->d_x, 0xff, total * sizeof(float), b->stream));
    GPU_OK(cudaStreamSynchronize(b->stream));
}

/* A launch captured in a CUDA graph and replayed gives the same batch as ct_make_batch. */
static void check_captured(const ct_dataset *ds, bufs *b, const float *mean, const float *std)
{
    const int n = 64;
    const uint64_t seed = 77;
    ct_augment aug;
    float norm_scale[CT_MAX_CHANNELS], norm_bias[CT_MAX_CHANNELS];
    stage_augmented(ds, b, mean, std, n, seed, 5, &aug, norm_scale, norm_bias);
    ct_shape s = ds->shape;
    size_t total = (size_t)n * ct_shape_size(s);

    cudaGraph_t recorded = NULL;
    cudaGraphExec_t exec = NULL;
    GPU_OK(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal));
    int rc = ct_launch_augment_u8(b->d_u8, b->d_x, n, s.h, s.w, s.c, aug.crop_pad, aug.flip, 1, norm_scale, norm_bias,
                                  seed, 0, b->stream);
    GPU_OK(cudaStreamEndCapture(b->stream, &recorded));
    CHECK(rc == 0);
    GPU_OK(cudaGraphInstantiate(&exec, recorded, 0));
    GPU_OK(cudaGraphLaunch(exec, b->stream));
    GPU_OK(cudaMemcpyAsync(b->got, b->d_x, total * sizeof(float), cudaMemcpyDeviceToHost, b->stream));
    GPU_OK(cudaStreamSynchronize(b->stream));
    compare("graph replay", ds, n, &aug, 1, seed, b->got, b->want, rc);
    GPU_OK(cudaGraphExecDestroy(exec));
    GPU_OK(cudaGraphDestroy(recorded));
}

/* Replicas augment their slices of the pipeline's batch: three uneven slices, each launched with
 * its place in the batch, give the whole batch ct_make_batch makes. */
static void check_slices(const ct_dataset *ds, bufs *b, const float *mean, const float *std)
{
    const int n = 50, starts[] = {0, 17, 34, 50};
    const uint64_t seed = 1234;
    ct_augment aug;
    float norm_scale[CT_MAX_CHANNELS], norm_bias[CT_MAX_CHANNELS];
    stage_augmented(ds, b, mean, std, n, seed, 9, &aug, norm_scale, norm_bias);
    ct_shape s = ds->shape;
    size_t sample = ct_shape_size(s), total = (size_t)n * sample;
    int rc = 0;
    for (int k = 0; k < 3 && rc == 0; k++) {
        size_t at = (size_t)starts[k] * sample;
        rc = ct_launch_augment_u8(b->d_u8 + at, b->d_x + at, starts[k + 1] - starts[k], s.h, s.w, s.c, aug.crop_pad,
                                  aug.flip, 1, norm_scale, norm_bias, seed, starts[k], b->stream);
    }
    GPU_OK(cudaMemcpyAsync(b->got, b->d_x, total * sizeof(float), cudaMemcpyDeviceToHost, b->stream));
    GPU_OK(cudaStreamSynchronize(b->stream));
    compare("three slices by their place in the batch", ds, n, &aug, 1, seed, b->got, b->want, rc);
}

static void check_bad_arguments(bufs *b)
{
    const float one[CT_MAX_CHANNELS] = {1.0f, 1.0f, 1.0f, 1.0f};
    const int inval = (int)cudaErrorInvalidValue;
    CHECK(inval == 1);
    CHECK(ct_launch_augment_u8(b->d_u8, b->d_x, -1, 28, 28, 1, 0, 0, 0, one, one, 0, 0, b->stream) == inval);
    CHECK(ct_launch_augment_u8(b->d_u8, b->d_x, 1, -28, 28, 1, 0, 0, 0, one, one, 0, 0, b->stream) == inval);
    CHECK(ct_launch_augment_u8(b->d_u8, b->d_x, 1, 28, -28, 1, 0, 0, 0, one, one, 0, 0, b->stream) == inval);
    CHECK(ct_launch_augment_u8(b->d_u8, b->d_x, 1, 28, 28, -1, 0, 0, 0, one, one, 0, 0, b->stream) == inval);
    CHECK(ct_launch_augment_u8(b->d_u8, b->d_x, 1, 4, 4, 5, 0, 0, 0, one, one, 0, 0, b->stream) == inval);  /* c > 4 */
    CHECK(ct_launch_augment_u8(b->d_u8, b->d_x, 1, 28, 28, 1, -1, 0, 1, one, one, 0, 0, b->stream) == inval);
    CHECK(ct_launch_augment_u8(b->d_u8, b->d_x, 1, 28, 28, 1, 0, 0, 1, one, one, 0, -1, b->stream) == inval);
    CHECK(ct_launch_augment_u8(NULL, b->d_x, 1, 28, 28, 1, 0, 0, 0, one, one, 0, 0, b->stream) == inval);
    CHECK(ct_launch_augment_u8(b->d_u8, NULL, 1, 28, 28, 1, 0, 0, 0, one, one, 0, 0, b->stream) == inval);
    CHECK(ct_launch_augment_u8(b->d_u8, b->d_x, 1, 28, 28, 1, 0, 0, 0, NULL, one, 0, 0, b->stream) == inval);
    CHECK(ct_launch_augment_u8(b->d_u8, b->d_x, 1, 28, 28, 1, 0, 0, 0, one, NULL, 0, 0, b->stream) == inval);
    /* one sample of more than INT_MAX elements (checked before anything is read) */
    CHECK(ct_launch_augment_u8(b->d_u8, b->d_x, 1, 65536, 65536, 1, 0, 0, 0, one, one, 0, 0, b->stream) == inval);
    /* empty work launches nothing, whatever the pointers */
    CHECK(ct_launch_augment_u8(NULL, NULL, 0, 28, 28, 1, 2, 1, 1, NULL, NULL, 0, 0, b->stream) == 0);
    CHECK(ct_launch_augment_u8(NULL, NULL, 5, 0, 28, 1, 2, 1, 1, NULL, NULL, 0, 0, b->stream) == 0);
    GPU_OK(cudaStreamSynchronize(b->stream));
    CHECK(cudaGetLastError() == cudaSuccess);
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;

    bufs b;
    memset(&b, 0, sizeof b);
    GPU_OK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
    const size_t elems = (size_t)MAX_BATCH * MAX_SAMPLE;
    b.u8 = xmalloc(elems);
    b.want = xmalloc(elems * sizeof(float));
    b.got = xmalloc(elems * sizeof(float));
    b.labels = xmalloc(MAX_BATCH * sizeof(int32_t));
    GPU_OK(cudaMalloc((void **)&b.d_u8, elems));
    GPU_OK(cudaMalloc((void **)&b.d_x, elems * sizeof(float)));

    /* Fashion-MNIST: 28x28x1, the usual mean and std */
    static const float fm_mean[CT_MAX_CHANNELS] = {0.2860f, 0.2860f, 0.2860f, 0.2860f};
    static const float fm_std[CT_MAX_CHANNELS] = {0.3530f, 0.3530f, 0.3530f, 0.3530f};
    char images[1024];
    snprintf(images, sizeof images, "%s/%s", ct_fmnist_dir(), "train-images-idx3-ubyte.gz");
    ct_dataset fm;
    ct_err err;
    ct_err_clear(&err);
    ct_status st = ct_idx_load(&fm, images, NULL, 3000, &err);
    CHECK_MSG(st == CT_OK, "%s", err.msg);
    if (st == CT_OK) {
        CHECK(fm.count == 3000 && fm.shape.h == 28 && fm.shape.w == 28 && fm.shape.c == 1);
        b.order = xmalloc((size_t)fm.count * sizeof(long));
        int batches = sweep("fashion-mnist", &fm, &b, fm_mean, fm_std);
        printf("fashion-mnist: %d batches compared\n", batches);
        free(b.order);
        b.order = NULL;
        ct_dataset_free(&fm);
    }

    /* Synthetic 32x32x3 with CIFAR-10's statistics; an odd 13x17x4 shape with 4 channels, one of
     * them identity; a crop wider than the image (windows partly or wholly in the padding). */
    static const float cf_mean[CT_MAX_CHANNELS] = {0.4914f, 0.4822f, 0.4465f, 0.0f};
    static const float cf_std[CT_MAX_CHANNELS] = {0.2470f, 0.2435f, 0.2616f, 1.0f};
    static const float q_mean[CT_MAX_CHANNELS] = {0.5f, 0.0f, 0.25f, 0.125f};
    static const float q_std[CT_MAX_CHANNELS] = {0.5f, 1.0f, 0.3f, 0.07f};
    ct_dataset syn, odd;
    CHECK(ct_synthetic_make(&syn, (ct_shape){32, 32, 3}, 10, 2000, 11) == CT_OK);
    CHECK(ct_synthetic_make(&odd, (ct_shape){13, 17, 4}, 10, 600, 12) == CT_OK);
    b.order = xmalloc(2000 * sizeof(long));
    int batches = sweep("synthetic", &syn, &b, cf_mean, cf_std);
    printf("synthetic 32x32x3: %d batches compared\n", batches);
    batches = sweep("synthetic", &odd, &b, q_mean, q_std);
    printf("synthetic 13x17x4: %d batches compared\n", batches);
    {
        ct_augment wide;
        memset(&wide, 0, sizeof wide);
        set_norm(&wide, q_mean, q_std);
        wide.crop_pad = 20;
        wide.flip = 1;
        ct_shuffle_indices(b.order, odd.count, 3, 0);
        check_batch("wide crop", &odd, &b, 0, 100, &wide, 1, 1234);
    }
    check_captured(&syn, &b, cf_mean, cf_std);
    check_slices(&syn, &b, cf_mean, cf_std);
    check_bad_arguments(&b);
    free(b.order);
    ct_dataset_free(&syn);
    ct_dataset_free(&odd);

    GPU_OK(cudaFree(b.d_u8));
    GPU_OK(cudaFree(b.d_x));
    GPU_OK(cudaStreamDestroy(b.stream));
    free(b.u8);
    free(b.want);
    free(b.got);
    free(b.labels);
    return ct_test_done();
}

#else

#include "tests/no_cuda_main.h"

#endif
