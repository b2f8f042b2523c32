/* decode = gpu without a GPU: what the input workers hand a device decoder, checked on the CPU.
 *   - the pipeline with `encoded` gives the same order, labels and bytes as the CPU decode for the
 *     files it decodes itself (progressive and CMYK JPEGs, PNGs), and for the baseline JPEGs it
 *     leaves compressed: their exact file bytes, the crop region and flip the CPU decode drew, such
 *     that decoding those bytes at that region on the CPU gives the CPU pipeline's sample, for any
 *     number of workers and in sync mode;
 *   - the CPU share (gpu_decode_cpu_share): which places of a batch the workers keep (spread
 *     evenly, the same for every batch), the share that balances measured times, and a pipeline
 *     with a share of 0.5, whose kept places are the CPU pipeline's bytes whatever their file;
 *   - [data] decode: its words, decode = gpu refused with augment_on = cpu and on the CPU
 *     backend (with the reason), decode = auto falling back to the CPU and saying so;
 *   - the nvJPEG loader's messages when the library is absent or is not nvJPEG, and (with
 *     CT_NVJPEG_TEST_LIBRARY naming a real libnvjpeg.so, no GPU needed) its entry points, the
 *     batched hardware path's included, and version. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/nvjpeg_api.h"
#include "cutrain.h"
#include "data/imagefolder.h"
#include "data/pipeline.h"
#include "tests/decode_folder.h"

enum { PER_CLASS = 12, OUT = 32, BATCH = 8 };

static ct_data_settings settings(const char *train)
{
    ct_data_settings dc;
    memset(&dc, 0, sizeof dc);
    dc.format = CT_DATA_IMAGEFOLDER;
    dc.train = (char *)train;
    dc.image_h = dc.image_w = OUT;
    dc.channels = 3;
    dc.random_resized_crop = 1;
    dc.flip = 1;
    dc.crop_scale[0] = 0.08f;
    dc.crop_scale[1] = 1.0f;
    dc.crop_ratio[0] = 0.75f;
    dc.crop_ratio[1] = 4.0f / 3.0f;
    dc.max_pixels = 1L << 26;
    dc.augment_on = CT_AUGMENT_ON_GPU;
    dc.decode = CT_DECODE_AT_GPU;
    return dc;
}

typedef struct counts {
    long on_device, fallback, flipped;
    int kinds_on_device[DF_KINDS];
} counts;

/* Two epochs of the encoded pipeline (workers, sync; the workers keeping cpu_share of each batch)
 * against the CPU pipeline's bytes `ref`. */
static void compare_encoded(const ct_data_settings *dc, const ct_dataset *ds, int workers, int sync,
                            double cpu_share, const uint8_t *ref, size_t ref_bytes, counts *cnt)
{
    ct_pipeline_config pc;
    ct_pipeline_config_init(&pc, dc, ds, NULL, BATCH, 42, 1);
    pc.workers = workers;
    pc.sync = sync;
    pc.encoded = 1;
    pc.cpu_share = cpu_share;
    CHECK(pc.raw_u8 == 1);
    ct_pipeline *p = NULL;
    ct_err err;
    ct_err_clear(&err);
    CHECK_MSG(ct_pipeline_create(&p, &pc, &err) == CT_OK, "%s", err.msg);
    ct_image_decoder *dec = NULL;
    CHECK(ct_image_decoder_new(&dec, NULL, &err) == CT_OK);
    size_t sample = ct_shape_size(ds->shape), used = 0;
    uint8_t *mine = malloc(sample);
    for (int e = 0; p && dec && e < 2; e++) {
        CHECK(ct_pipeline_start_epoch(p, e, 0, &err) == CT_OK);
        for (;;) {
            ct_batch_view v;
            ct_status st = ct_pipeline_next(p, &v, NULL, &err);
            CHECK_MSG(st == CT_OK, "%s", err.msg);
            if (st != CT_OK || v.n == 0)
                break;
            CHECK(v.encoded && v.encoded->n == v.n && v.x_u8);
            int on_device = 0;
            for (int i = 0; v.encoded && i < v.n && used + sample <= ref_bytes; i++) {
                const ct_encoded_image *im = &v.encoded->images[i];
                const uint8_t *want = ref + used + (size_t)i * sample;
                /* the share's places stay with the workers, whatever the file */
                CHECK(!ct_encoded_place_on_cpu(i, cpu_share) || im->size == 0);
                if (im->size == 0) {
                    /* decoded by the worker: the CPU pipeline's bytes */
                    CHECK(memcmp(v.x_u8 + (size_t)i * sample, want, sample) == 0);
                    cnt->fallback++;
                    continue;
                }
                on_device++;
                cnt->on_device++;
                cnt->flipped += im->flip;
                int kind = df_kind(im->name);
                CHECK_MSG(kind >= 0 && df_on_device(kind), "%s left compressed", im->name);
                if (kind >= 0)
                    cnt->kinds_on_device[kind]++;
                /* the file's own bytes */
                long len = 0;
                unsigned char *file = ct_slurp(im->name, &len);
                CHECK(file && (size_t)len == im->size && memcmp(file, v.encoded->bytes + im->offset, im->size) == 0);
                free(file);
                /* the crop the CPU drew for this place of the batch */
                ct_image_region r = ct_imagefolder_region(ds, 1, v.augment_seed, i, im->width, im->height);
                CHECK(r.x == im->x && r.y == im->y && r.w == im->w && r.h == im->h && r.flip == im->flip);
                CHECK(im->width == DF_W && im->height == DF_H);
                /* everything a device decoder needs: decoding them here gives the CPU's sample */
                ct_image_region mine_r = {im->x, im->y, im->w, im->h, im->flip};
                CHECK(ct_image_decode_region(dec, v.encoded->bytes + im->offset, im->size, &mine_r, OUT, OUT, 3, mine,
                                             &err) == CT_OK &&
                      memcmp(mine, want, sample) == 0);
            }
            CHECK(v.encoded && v.encoded->on_device == on_device);
            /* the order and labels: the CPU pipeline's */
            used += (size_t)v.n * sample;
            CHECK(used + (size_t)v.n * sizeof(int32_t) <= ref_bytes &&
                  memcmp(v.y, ref + used, (size_t)v.n * sizeof(int32_t)) == 0);
            used += (size_t)v.n * sizeof(int32_t);
            ct_pipeline_release(p, v.slot);
        }
    }
    CHECK(used == ref_bytes);
    free(mine);
    ct_image_decoder_free(dec);
    ct_pipeline_destroy(p);
}

/* The CPU pipeline's two epochs: per batch its uint8 samples then its labels. */
static size_t cpu_epochs(const ct_data_settings *dc, const ct_dataset *ds, uint8_t *out)
{
    ct_pipeline_config pc;
    ct_pipeline_config_init(&pc, dc, ds, NULL, BATCH, 42, 1);
    pc.workers = 2;
    ct_pipeline *p = NULL;
    ct_err err;
    ct_err_clear(&err);
    size_t used = 0;
    CHECK_MSG(ct_pipeline_create(&p, &pc, &err) == CT_OK, "%s", err.msg);
    for (int e = 0; p && e < 2; e++) {
        CHECK(ct_pipeline_start_epoch(p, e, 0, &err) == CT_OK);
        for (;;) {
            ct_batch_view v;
            if (ct_pipeline_next(p, &v, NULL, &err) != CT_OK || v.n == 0)
                break;
            CHECK(v.encoded == NULL);
            size_t bytes = (size_t)v.n * ct_shape_size(ds->shape);
            memcpy(out + used, v.x_u8, bytes);
            used += bytes;
            memcpy(out + used, v.y, (size_t)v.n * sizeof(int32_t));
            used += (size_t)v.n * sizeof(int32_t);
            ct_pipeline_release(p, v.slot);
        }
    }
    ct_pipeline_destroy(p);
    return used;
}

static void test_pipeline(const char *root)
{
    ct_data_settings dc = settings(root);
    ct_dataset tr, te;
    ct_err err;
    ct_err_clear(&err);
    CHECK_MSG(ct_data_load(&dc, 1, &tr, &te, &err) == CT_OK, "%s", err.msg);
    CHECK(tr.count == 3 * PER_CLASS && ct_dataset_can_encode(&tr));
    size_t cap = 2 * (size_t)tr.count * (ct_shape_size(tr.shape) + sizeof(int32_t));
    uint8_t *ref = malloc(cap);
    size_t ref_bytes = cpu_epochs(&dc, &tr, ref);
    CHECK(ref_bytes == cap);
    counts cnt;
    memset(&cnt, 0, sizeof cnt);
    compare_encoded(&dc, &tr, 1, 0, 0.0, ref, ref_bytes, &cnt);
    compare_encoded(&dc, &tr, 3, 0, 0.0, ref, ref_bytes, &cnt);
    compare_encoded(&dc, &tr, 0, 1, 0.0, ref, ref_bytes, &cnt);
    /* every kind the device takes went there, every other kind to the workers: 3 runs x 2 epochs */
    long per_kind = 3 * 2 * 3 * (PER_CLASS / DF_KINDS);
    CHECK(cnt.on_device == 3 * per_kind && cnt.fallback == 3 * per_kind);
    CHECK(cnt.kinds_on_device[DF_BASELINE_444] == per_kind && cnt.kinds_on_device[DF_BASELINE_420] == per_kind &&
          cnt.kinds_on_device[DF_GREY] == per_kind);
    CHECK(cnt.flipped > 0 && cnt.flipped < cnt.on_device);
    /* half of each batch's places kept by the workers: fewer on the device, the same batches */
    counts half;
    memset(&half, 0, sizeof half);
    compare_encoded(&dc, &tr, 2, 0, 0.5, ref, ref_bytes, &half);
    compare_encoded(&dc, &tr, 0, 1, 0.5, ref, ref_bytes, &half);
    CHECK_MSG(half.on_device > 0 && half.on_device < 2 * per_kind && half.on_device + half.fallback == 4 * per_kind,
              "share 0.5: %ld on the device, %ld by the workers", half.on_device, half.fallback);
    /* a set held in memory cannot leave anything compressed */
    ct_dataset mem = tr;
    mem.images = (uint8_t *)"";
    CHECK(!ct_dataset_can_encode(&mem));
    ct_pipeline_config pc;
    ct_pipeline_config_init(&pc, &dc, &tr, NULL, BATCH, 42, 1);
    pc.encoded = 1;
    pc.raw_u8 = 0;
    ct_pipeline *p = NULL;
    CHECK(ct_pipeline_create(&p, &pc, &err) == CT_ERR_USAGE && ct_contains(err.msg, "uint8"));
    pc.raw_u8 = 1;
    pc.cpu_share = 1.5;
    CHECK(ct_pipeline_create(&p, &pc, &err) == CT_ERR_USAGE && ct_contains(err.msg, "cpu_share"));
    free(ref);
    ct_dataset_free(&tr);
    ct_dataset_free(&te);
}

/* The share's split and the balance it is sized by: pure functions of their figures. */
static void test_share(void)
{
    /* the places kept: round(share * 1000) of every 1000, spread evenly (any window of 1 / share
     * places holds one), the same for every call */
    static const double shares[] = {0, 0.001, 0.1, 0.25, 0.3, 0.5, 0.77, 0.999, 1};
    for (size_t k = 0; k < sizeof shares / sizeof shares[0]; k++) {
        double s = shares[k];
        int kept = 0, run = 0, longest = 0;
        for (int i = 0; i < 1000; i++) {
            int cpu = ct_encoded_place_on_cpu(i, s);
            CHECK(cpu == ct_encoded_place_on_cpu(i, s) && cpu == ct_encoded_place_on_cpu(i + 1000, s));
            kept += cpu;
            run = cpu ? 0 : run + 1;
            longest = run > longest ? run : longest;
        }
        CHECK_MSG(kept == (int)(s * 1000 + 0.5), "share %g: %d of 1000 places kept", s, kept);
        if (s > 0)
            CHECK_MSG(longest <= (int)(1 / s), "share %g: %d device places in a row", s, longest);
    }
    CHECK(ct_encoded_place_on_cpu(0, 0.25) + ct_encoded_place_on_cpu(1, 0.25) + ct_encoded_place_on_cpu(2, 0.25) +
              ct_encoded_place_on_cpu(3, 0.25) == 1);
    CHECK(!ct_encoded_place_on_cpu(-1, 1.0) && !ct_encoded_place_on_cpu(5, -0.5));
    /* balanced: the workers' time per batch equals the device's */
    static const double cases[][4] = {{4e-3, 0.5e-3, 1e-3, 2}, {3e-3, 0.2e-3, 0.3e-3, 8}, {2e-3, 0.1e-3, 5e-3, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        double c = cases[k][0], h = cases[k][1], g = cases[k][2];
        int w = (int)cases[k][3];
        double s = ct_encoded_balanced_share(c, h, g, w);
        double workers = (s * c + (1 - s) * h) / w, device = (1 - s) * g;
        CHECK_MSG(s > 0 && s < 1 && fabs(workers - device) < 1e-12, "share %g: workers %g s, device %g s", s, workers,
                  device);
    }
    /* a device faster than handing over: nothing kept; a device far slower than the workers: all
     * but a sliver; a missing figure: 0 */
    CHECK(ct_encoded_balanced_share(4e-3, 1e-3, 1e-4, 2) == 0);
    CHECK(ct_encoded_balanced_share(1e-3, 1e-4, 10.0, 8) > 0.99);
    CHECK(ct_encoded_balanced_share(0, 1e-4, 1e-3, 2) == 0 && ct_encoded_balanced_share(1e-3, 1e-4, 0, 2) == 0 &&
          ct_encoded_balanced_share(1e-3, 1e-4, 1e-3, 0) == 0);
}

static ct_status open_with(const char *root, const char *data_keys, ct_net **net)
{
    char ini[2048];
    snprintf(ini, sizeof ini,
             "[data]\nformat = imagefolder\ntrain = %s\nimage_size = %d\nchannels = 3\n"
             "augment = random_resized_crop, flip\n%s\n"
             "[train]\nepochs = 1\nbatch = 8\ndevices = cpu\n[flat]\ntype = flatten\n[out]\ntype = dense\nunits = 3\n",
             root, OUT, data_keys);
    *net = NULL;
    ct_status st = ct_open_string(ini, "decode.ini", net);
    return st == CT_OK ? ct_prepare(*net) : st;
}

static void test_config(const char *root)
{
    ct_net *net = NULL;
    /* the default: the workers decode, nothing said */
    CHECK_MSG(open_with(root, "", &net) == CT_OK, "%s", ct_errmsg(net));
    CHECK(!ct_contains(ct_backend_reason(net), "decode"));
    ct_close(net);
    /* a word outside the list, named with its line */
    CHECK(open_with(root, "decode = tpu", &net) != CT_OK && ct_contains(ct_errmsg(net), "tpu") &&
          ct_contains(ct_errmsg(net), "auto"));
    ct_close(net);
    /* gpu needs the device to normalise */
    CHECK(open_with(root, "decode = gpu\naugment_on = cpu", &net) == CT_ERR_CONFIG &&
          ct_contains(ct_errmsg(net), "decode = gpu needs augment_on = gpu"));
    ct_close(net);
    /* gpu on the CPU backend: refused, saying why */
    ct_status st = open_with(root, "decode = gpu\naugment_on = gpu", &net);
    CHECK_MSG(st == CT_ERR_CONFIG && ct_contains(ct_errmsg(net), "[data] decode = gpu:") &&
                  ct_contains(ct_errmsg(net), "cpu"),
              "%s", ct_errmsg(net));
    ct_close(net);
    /* auto falls back and says so; training works */
    CHECK_MSG(open_with(root, "decode = auto\naugment_on = gpu", &net) == CT_OK, "%s", ct_errmsg(net));
    CHECK_MSG(ct_contains(ct_backend_reason(net), "decode = auto: on the CPU"), "%s", ct_backend_reason(net));
    CHECK_MSG(net && ct_fit(net, NULL) == CT_OK, "%s", ct_errmsg(net));
    ct_close(net);
    /* the CPU share: auto or a fraction, nothing else */
    CHECK_MSG(open_with(root, "decode = auto\naugment_on = gpu\ngpu_decode_cpu_share = 0.25", &net) == CT_OK, "%s",
              ct_errmsg(net));
    ct_close(net);
    CHECK_MSG(open_with(root, "decode = auto\naugment_on = gpu\ngpu_decode_cpu_share = auto", &net) == CT_OK, "%s",
              ct_errmsg(net));
    ct_close(net);
    st = open_with(root, "decode = auto\ngpu_decode_cpu_share = 1.5", &net);
    CHECK_MSG(st == CT_ERR_CONFIG && ct_contains(ct_errmsg(net), "gpu_decode_cpu_share") &&
                  ct_contains(ct_errmsg(net), "expected auto or a fraction from 0 to 1") &&
                  ct_contains(ct_errmsg(net), "decode.ini:"),
              "%s", ct_errmsg(net));
    ct_close(net);
    CHECK(open_with(root, "gpu_decode_cpu_share = half", &net) == CT_ERR_CONFIG && ct_contains(ct_errmsg(net), "half"));
    ct_close(net);
    /* auto with augment_on = cpu: the CPU, no error */
    CHECK_MSG(open_with(root, "decode = auto", &net) == CT_OK, "%s", ct_errmsg(net));
    CHECK(ct_contains(ct_backend_reason(net), "decode = auto: on the CPU"));
    ct_close(net);
    /* other formats do not take the key */
    char ini[512];
    snprintf(ini, sizeof ini, "[data]\ntrain = a\ntrain_labels = b\ndecode = gpu\n[flat]\ntype = flatten\n"
                              "[out]\ntype = dense\nunits = 3\n");
    st = ct_open_string(ini, "idx.ini", &net);
    if (st == CT_OK)
        st = ct_prepare(net);
    CHECK_MSG(st == CT_ERR_CONFIG && ct_contains(ct_errmsg(net), "decode"), "%s", ct_errmsg(net));
    ct_close(net);
}

static void test_loader(void)
{
    ct_nvjpeg_lib lib;
    char why[1024];
    memset(&lib, 0, sizeof lib);
    CHECK(ct_nvjpeg_load(&lib, "/nonexistent/libnvjpeg.so.13", why, sizeof why) == -1 && lib.dl == NULL);
    CHECK_MSG(ct_contains(why, "nvJPEG (/nonexistent/libnvjpeg.so.13) not loaded"), "%s", why);
    /* the environment's choice, as the backend's decoder takes it */
    setenv("CT_NVJPEG_LIBRARY", "/nonexistent/libnvjpeg-test.so", 1);
    CHECK(ct_nvjpeg_load(&lib, NULL, why, sizeof why) == -1 && ct_contains(why, "libnvjpeg-test.so"));
    /* a library that is not nvJPEG names the first entry point it lacks */
    CHECK(ct_nvjpeg_load(&lib, "libz.so.1", why, sizeof why) == -1);
    CHECK_MSG(ct_contains(why, "libz.so.1 has no nvjpegGetProperty"), "%s", why);
    unsetenv("CT_NVJPEG_LIBRARY");
    /* the default search: here either found (a machine with nvJPEG) or every name said */
    if (ct_nvjpeg_load(&lib, NULL, why, sizeof why) == 0) {
        CHECK(lib.version[0] >= 12 && lib.decode && lib.get_image_info);
        ct_nvjpeg_unload(&lib);
    } else {
        CHECK_MSG(ct_contains(why, "libnvjpeg.so.13, .so.12, .so") && ct_contains(why, "LD_LIBRARY_PATH"), "%s", why);
    }
    CHECK(strcmp(ct_nvjpeg_status_name(CT_NVJ_BAD_JPEG), "bad JPEG") == 0);
    CHECK(strcmp(ct_nvjpeg_status_name(99), "unknown nvJPEG status") == 0);
    ct_nvjpeg_unload(NULL);
    /* a real nvJPEG, when the environment names one: loading needs no GPU */
    const char *real = getenv("CT_NVJPEG_TEST_LIBRARY");
    if (real && real[0]) {
        memset(&lib, 0, sizeof lib);
        CHECK_MSG(ct_nvjpeg_load(&lib, real, why, sizeof why) == 0, "%s", why);
        CHECK(lib.dl && lib.get_property && lib.create_simple && lib.destroy && lib.hw_decoder_info &&
              lib.state_create && lib.state_destroy && lib.get_image_info && lib.decode);
        /* the batched hardware path's */
        CHECK(lib.create_ex && lib.jpeg_stream_create && lib.jpeg_stream_destroy && lib.jpeg_stream_parse_header &&
              lib.decode_params_create && lib.decode_params_destroy && lib.decode_params_set_output_format &&
              lib.decode_params_set_roi && lib.decode_batched_supported_ex && lib.decode_batched_initialize &&
              lib.decode_batched_ex);
        CHECK_MSG(lib.version[0] >= 12, "nvJPEG %d.%d.%d", lib.version[0], lib.version[1], lib.version[2]);
        printf("test_image_encoded: loaded %s, nvJPEG %d.%d.%d\n", real, lib.version[0], lib.version[1],
               lib.version[2]);
        ct_nvjpeg_unload(&lib);
        CHECK(lib.dl == NULL);
    } else {
        printf("test_image_encoded: CT_NVJPEG_TEST_LIBRARY not set: the real library's load not tried\n");
    }
}

int main(void)
{
    uint8_t *images = enc_fmnist(3 * PER_CLASS * 6);
    if (!images) {
        fprintf(stderr, "test_image_encoded: no Fashion-MNIST\n");
        return 1;
    }
    char root[] = "/tmp/ct_encoded_XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    char set[300];
    snprintf(set, sizeof set, "%s/set", root);
    CHECK(df_make(set, images, PER_CLASS) == 3 * PER_CLASS);
    test_share();
    test_pipeline(set);
    test_config(set);
    test_loader();
    df_remove(set);
    rmdir(root);
    free(images);
    return ct_test_done();
}
