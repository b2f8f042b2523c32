/* decode = gpu on the GPU: the CUDA backend's image decoder (nvJPEG, engine/cuda/jpeg.c) against
 * the CPU decode of the same batches. A folder of Fashion-MNIST mosaics (tests/decode_folder.h:
 * baseline 4:4:4, 4:2:0 and grey JPEGs for the device; progressive and CMYK JPEGs and PNGs for the
 * workers) goes through the pipeline twice, as the CPU decodes it and with the JPEGs left
 * compressed; each encoded batch is submitted to the backend, which decodes, crops, resizes and
 * flips on the device, and the device's input (normalised to x / 255) is read back.
 *   - labels and order: identical;
 *   - the workers' fallbacks (progressive, CMYK, PNG): identical bytes;
 *   - the device's decodes: not bit-identical (nvJPEG's IDCT and chroma upsampling, float
 *     resampling weights); the documented tolerance is a mean absolute difference per image of at
 *     most 4 / 255 (4:4:4 and grey) and 8 / 255 (4:2:0, whose chroma nvJPEG upsamples without
 *     libjpeg-turbo's smoothing), with the largest difference reported;
 *   - a replica's slice (first_sample) decodes what the whole batch does at its place;
 *   - both paths: batched on the hardware JPEG engine at each crop's region where the GPU has one
 *     (A100, H100, H200), then, with the engine turned off, one image at a time; on a GPU without
 *     the engine the batched part is skipped with a message and every image goes one at a time;
 *   - the CPU share: with gpu_decode_cpu_share = 0.5 the places it gives the workers are the CPU
 *     decode's bytes whatever the file, the others within the tolerance;
 *   - channels = 1 (nvJPEG's luma output);
 *   - a short training with decode = gpu through the API (the CPU share measured, and set), and
 *     decode = auto choosing the GPU.
 * Exits 77 without a GPU, without the CUDA backend, or when nvJPEG does not load (the message
 * says what was tried). */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifdef CUTRAIN_HAVE_CUDA

#include "cutrain.h"
#include "data/pipeline.h"
#include "tests/decode_folder.h"
#include "cuda/cuda_internal.h"
#include "tests/gpu_test.h"

enum { PER_CLASS = 12, OUT = 40, BATCH = 8 };

static ct_data_settings settings(const char *train, int channels)
{
    ct_data_settings dc;
    memset(&dc, 0, sizeof dc);
    dc.format = CT_DATA_IMAGEFOLDER;
    dc.train = (char *)train;
    dc.image_h = dc.image_w = OUT;
    dc.channels = channels;
    dc.random_resized_crop = 1;
    dc.flip = 1;
    dc.crop_scale[0] = 0.08f;
    dc.crop_scale[1] = 1.0f;
    dc.crop_ratio[0] = 0.75f;
    dc.crop_ratio[1] = 4.0f / 3.0f;
    dc.augment_on = CT_AUGMENT_ON_GPU;
    dc.decode = CT_DECODE_AT_GPU;
    return dc;
}

typedef struct tally {
    long device[DF_KINDS], fallback;
    double mean_abs[DF_KINDS], worst_mean[DF_KINDS];
    int max_abs[DF_KINDS];
} tally;

/* The device's x (n, OUT, OUT, c) fp32 = u8 / 255 back as bytes. */
static void read_back(const ct_tensor *x, int n, int c, uint8_t *out, float *host)
{
    size_t count = (size_t)n * OUT * OUT * (size_t)c;
    GPU_OK(cudaDeviceSynchronize());
    GPU_OK(cudaMemcpy(host, x->data, count * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++) {
        float v = host[i] * 255.0f + 0.5f;
        out[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

/* Two epochs of both pipelines, the workers keeping cpu_share of each batch; every encoded batch
 * decoded on the device and compared. */
static void compare(ct_backend *be, const char *root, int channels, double cpu_share, tally *t)
{
    ct_data_settings dc = settings(root, channels);
    ct_dataset tr, te;
    ct_err err;
    ct_err_clear(&err);
    CHECK_MSG(ct_data_load(&dc, 1, &tr, &te, &err) == CT_OK, "%s", err.msg);
    const size_t sample = (size_t)OUT * OUT * (size_t)channels;
    CHECK_MSG(be->ops->reserve(be, 0, 0, BATCH * sample * sizeof(float), BATCH * sizeof(int32_t), &err) == CT_OK,
              "%s", err.msg);
    float *d_x = NULL;
    int32_t *d_y = NULL;
    GPU_OK(cudaMalloc((void **)&d_x, BATCH * sample * sizeof(float)));
    GPU_OK(cudaMalloc((void **)&d_y, BATCH * sizeof(int32_t)));
    ct_shape shape = {OUT, OUT, channels};
    ct_tensor x = ct_tensor_make(d_x, CT_DTYPE_F32, BATCH, shape);
    ct_tensor y = ct_tensor_make(d_y, CT_DTYPE_I32, BATCH, (ct_shape){1, 1, 1});
    ct_augment_params aug;
    memset(&aug, 0, sizeof aug);
    aug.channels = channels;
    for (int c = 0; c < CT_MAX_CHANNELS; c++)
        aug.norm_scale[c] = 1.0f / 255.0f;
    uint8_t *got = xmalloc(BATCH * sample), *half = xmalloc(BATCH * sample);
    float *host = xmalloc(BATCH * sample * sizeof(float));
    int32_t labels[BATCH];

    ct_pipeline_config pc_cpu, pc_enc;
    ct_pipeline_config_init(&pc_cpu, &dc, &tr, NULL, BATCH, 42, 1);
    ct_pipeline_config_init(&pc_enc, &dc, &tr, NULL, BATCH, 42, 1);
    pc_cpu.workers = pc_enc.workers = 2;
    pc_enc.encoded = 1;
    pc_enc.cpu_share = cpu_share;
    ct_pipeline *cpu = NULL, *enc = NULL;
    CHECK_MSG(ct_pipeline_create(&cpu, &pc_cpu, &err) == CT_OK, "%s", err.msg);
    CHECK_MSG(ct_pipeline_create(&enc, &pc_enc, &err) == CT_OK, "%s", err.msg);
    for (int e = 0; cpu && enc && e < 2; e++) {
        CHECK(ct_pipeline_start_epoch(cpu, e, 0, &err) == CT_OK && ct_pipeline_start_epoch(enc, e, 0, &err) == CT_OK);
        for (;;) {
            ct_batch_view a, b;
            if (ct_pipeline_next(cpu, &a, NULL, &err) != CT_OK || ct_pipeline_next(enc, &b, NULL, &err) != CT_OK)
                break;
            CHECK(a.n == b.n);
            if (a.n == 0 || b.n == 0)
                break;
            ct_input_batch in = {.n = b.n, .shape = shape, .x_u8 = b.x_u8, .y = b.y, .aug = &aug, .augment = 0,
                                 .augment_seed = b.augment_seed, .encoded = b.encoded};
            long ticket = 0;
            ct_status st = be->ops->input_submit(be, &in, &x, &y, &ticket, &err);
            CHECK_MSG(st == CT_OK, "input_submit: %s", err.msg);
            if (st == CT_OK)
                CHECK_MSG(be->ops->input_wait(be, ticket, &err) == CT_OK, "%s", err.msg);
            read_back(&x, b.n, channels, got, host);
            GPU_OK(cudaMemcpy(labels, d_y, (size_t)b.n * sizeof(int32_t), cudaMemcpyDeviceToHost));
            CHECK(memcmp(labels, a.y, (size_t)a.n * sizeof(int32_t)) == 0);
            /* a replica's slice: the second half alone, at its place */
            int first = b.n / 2;
            ct_input_batch slice = in;
            slice.n = b.n - first;
            slice.x_u8 = b.x_u8 + (size_t)first * sample;
            slice.y = b.y + first;
            slice.first_sample = first;
            st = be->ops->input_submit(be, &slice, &x, &y, &ticket, &err);
            CHECK_MSG(st == CT_OK, "input_submit of a slice: %s", err.msg);
            if (st == CT_OK)
                CHECK(be->ops->input_wait(be, ticket, &err) == CT_OK);
            read_back(&x, slice.n, channels, half, host);
            CHECK(memcmp(half, got + (size_t)first * sample, (size_t)slice.n * sample) == 0);
            for (int i = 0; i < b.n; i++) {
                const ct_encoded_image *im = &b.encoded->images[i];
                const uint8_t *want = a.x_u8 + (size_t)i * sample, *mine = got + (size_t)i * sample;
                CHECK(!ct_encoded_place_on_cpu(i, cpu_share) || im->size == 0);
                if (im->size == 0) {
                    CHECK(memcmp(mine, want, sample) == 0);
                    t->fallback++;
                    continue;
                }
                int kind = df_kind(im->name);
                if (kind < 0 || !df_on_device(kind)) {
                    CHECK_MSG(0, "%s went to the device", im->name);
                    continue;
                }
                long sum = 0;
                int worst = 0;
                for (size_t k = 0; k < sample; k++) {
                    int d = abs((int)mine[k] - (int)want[k]);
                    sum += d;
                    worst = d > worst ? d : worst;
                }
                double mean = (double)sum / (double)sample;
                double limit = kind == DF_BASELINE_420 && channels == 3 ? 8.0 : 4.0;
                CHECK_MSG(mean <= limit, "%s (%s, channels %d): mean |GPU - CPU| = %.2f > %.0f", im->name,
                          kind == DF_GREY ? "grey" : kind == DF_BASELINE_420 ? "4:2:0" : "4:4:4", channels, mean, limit);
                t->device[kind]++;
                t->mean_abs[kind] += mean;
                t->worst_mean[kind] = mean > t->worst_mean[kind] ? mean : t->worst_mean[kind];
                t->max_abs[kind] = worst > t->max_abs[kind] ? worst : t->max_abs[kind];
            }
            ct_pipeline_release(cpu, a.slot);
            ct_pipeline_release(enc, b.slot);
        }
    }
    ct_pipeline_destroy(cpu);
    ct_pipeline_destroy(enc);
    GPU_OK(cudaFree(d_x));
    GPU_OK(cudaFree(d_y));
    free(got);
    free(half);
    free(host);
    ct_dataset_free(&tr);
    ct_dataset_free(&te);
}

static void report(const char *what, const tally *t)
{
    static const char *const names[3] = {"4:4:4", "4:2:0", "grey"};
    for (int k = 0; k <= DF_GREY; k++)
        gpu_report("nvjpeg %s %s: %ld images, mean |GPU - CPU| %.2f (worst image %.2f), largest %d\n", what,
                   names[k], t->device[k], t->device[k] ? t->mean_abs[k] / (double)t->device[k] : 0.0,
                   t->worst_mean[k], t->max_abs[k]);
    gpu_report("nvjpeg %s: %ld images decoded by the workers (progressive, CMYK, PNG), identical\n", what,
               t->fallback);
}

/* A short training; `keys` more [data] lines, `said` what the backend line must hold. */
static void train(const char *root, const char *decode, const char *keys, const char *said)
{
    char ini[2048];
    snprintf(ini, sizeof ini,
             "[data]\nformat = imagefolder\ntrain = %s\nimage_size = %d\nchannels = 3\n"
             "augment = random_resized_crop, flip\naugment_on = gpu\ndecode = %s\nworkers = 2\n%s\n"
             "[train]\nepochs = 2\nbatch = 8\nseed = 3\ndevices = 0\n"
             "[flat]\ntype = flatten\n[fc]\ntype = dense\nunits = 32\nactivation = relu\n[out]\ntype = dense\nunits = 3\n",
             root, OUT, decode, keys);
    ct_net *net = NULL;
    ct_status st = ct_open_string(ini, "nvjpeg.ini", &net);
    if (st == CT_OK)
        st = ct_prepare(net);
    CHECK_MSG(st == CT_OK, "decode = %s: %s", decode, ct_errmsg(net));
    char want[64];
    snprintf(want, sizeof want, "decode = %s: nvJPEG", decode);
    CHECK_MSG(ct_contains(ct_backend_reason(net), want), "%s", ct_backend_reason(net));
    CHECK_MSG(ct_contains(ct_backend_reason(net), said), "'%s' not in: %s", said, ct_backend_reason(net));
    if (st == CT_OK)
        CHECK_MSG(ct_fit(net, NULL) == CT_OK, "training with decode = %s: %s", decode, ct_errmsg(net));
    gpu_report("nvjpeg training, decode = %s: %s\n", decode, ct_backend_reason(net));
    ct_close(net);
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    ct_backend *be = NULL;
    ct_err err;
    ct_err_clear(&err);
    ct_backend_options opt = {.capture = 1};
    if (ct_gpu_test_open(&be, &opt, &err) != CT_OK) {
        fprintf(stderr, "cannot open the CUDA backend: %s\n", err.msg);
        return 1;
    }
    char info[256] = "";
    CHECK(be->ops->image_decoder != NULL);
    if (be->ops->image_decoder(be, info, sizeof info, &err) != CT_OK) {
        printf("skipped: %s\n", err.msg);
        ct_gpu_test_close(be);
        return 77;
    }
    gpu_report("nvjpeg: %s\n", info);
    CHECK(ct_contains(info, "nvJPEG"));
    uint8_t *images = enc_fmnist(3 * PER_CLASS * 6);
    CHECK(images != NULL);
    char root[] = "/tmp/ct_gpu_nvjpeg_XXXXXX";
    char set[300];
    if (images && mkdtemp(root)) {
        snprintf(set, sizeof set, "%s/set", root);
        CHECK(df_make(set, images, PER_CLASS) == 3 * PER_CLASS);
        tally rgb, luma, one, shared;
        memset(&rgb, 0, sizeof rgb);
        memset(&luma, 0, sizeof luma);
        memset(&one, 0, sizeof one);
        memset(&shared, 0, sizeof shared);
        ct_cuda *cu = ct_cuda_of(be);
        int engine = ct_contains(info, "batched on the hardware decoder");
        compare(be, set, 3, 0.0, &rgb);
        compare(be, set, 1, 0.0, &luma);
        /* every device kind was decoded there, twice per file (two epochs) */
        for (int k = 0; k <= DF_GREY; k++)
            CHECK(rgb.device[k] == 2 * 3 * (PER_CLASS / DF_KINDS) && luma.device[k] == rgb.device[k]);
        CHECK(rgb.fallback == 3 * 2 * 3 * (PER_CLASS / DF_KINDS));
        long by_engine = 0, by_one = 0;
        ct_cuda_jpeg_counts(cu, &by_engine, &by_one);
        gpu_report("nvjpeg paths: %ld images on the hardware engine, %ld one at a time\n", by_engine, by_one);
        report(engine ? "rgb, engine" : "rgb", &rgb);
        report(engine ? "luma, engine" : "luma", &luma);
        if (engine) {
            CHECK_MSG(by_engine > 0, "the GPU has the engine but it decoded nothing: %s", info);
            /* the same batches one image at a time */
            ct_cuda_jpeg_engine_off(cu);
            long engine_before = by_engine, before = by_one;
            compare(be, set, 3, 0.0, &one);
            ct_cuda_jpeg_counts(cu, &by_engine, &by_one);
            /* at least the whole batches' device images, two epochs (the slices add more) */
            CHECK(by_engine == engine_before && by_one - before >= 2 * 3 * 3 * (PER_CLASS / DF_KINDS));
            report("rgb, one at a time", &one);
        } else {
            CHECK(by_engine == 0);
            gpu_report("nvjpeg: skipped the batched hardware path (this GPU has no JPEG engine: %s)\n", info);
        }
        /* half of each batch kept by the workers */
        compare(be, set, 3, 0.5, &shared);
        long on_device = 0;
        for (int k = 0; k <= DF_GREY; k++)
            on_device += shared.device[k];
        CHECK_MSG(on_device > 0 && on_device < 3 * rgb.device[0] && on_device + shared.fallback == 2 * 3 * PER_CLASS,
                  "share 0.5: %ld on the device, %ld by the workers", on_device, shared.fallback);
        report("rgb, CPU share 0.5", &shared);
        ct_gpu_test_close(be);
        be = NULL;
        train(set, "gpu", "", "CPU share");
        train(set, "gpu", "gpu_decode_cpu_share = 0.5", "CPU share 0.50 (gpu_decode_cpu_share)");
        train(set, "auto", "gpu_decode_cpu_share = auto", ", measured on ");
        df_remove(set);
        rmdir(root);
    }
    ct_gpu_test_close(be);
    free(images);
    return ct_test_done();
}

#else

#include "tests/no_cuda_main.h"

#endif
