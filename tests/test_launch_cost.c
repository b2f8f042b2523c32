/* The many-small-layers check: the GPU models' peaks from a GPU's properties, each layer's roofline
 * against hand-computed figures, and the step's verdict: tiny_layers.ini is launch-bound at its
 * batch of 256, fmnist_mlp_wide.ini at 4096 is not. devices = cpu, so that every build and
 * machine uses the H100-class model and the expectations hold everywhere. */
#define _DEFAULT_SOURCE
#include <unistd.h>

#include "cutrain.h"
#include "graph/launch_cost.h"
#include "graph/scaling.h"
#include "tests/fmnist_form.h"
#include "tests/test_util.h"

/* models/<name> with its data at CT_FMNIST_DIR, on the model GPU; NULL after a failed check */
static ct_net *open_model(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s", CT_SOURCE_DIR, name);
    ct_net *net = NULL;
    ct_status st = ct_open_file(path, &net);
    if (st == CT_OK)
        st = ct_set_fmnist_data(net);
    if (st == CT_OK)
        st = ct_set(net, "train.devices", "cpu");
    CHECK_MSG(st == CT_OK, "%s: %s", name, ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return NULL;
    }
    return net;
}

static void test_models(void)
{
    ct_gpu_model m;
    ct_gpu_model_h100(&m);
    CHECK(m.sms == 132 && !m.measured && ct_contains(m.name, "H100-class"));
    CHECK_NEAR(m.bandwidth, 3.35e12, 1.0);
    CHECK_NEAR(m.fp32_flops, 67e12, 1.0);
    CHECK_NEAR(m.half_flops, 990e12, 1.0);

    /* an A100 40GB as the runtime reports it: 108 SMs, 1410 MHz, 1215 MHz HBM2 on 5120 bits,
     * 8.0: its data sheet's 1555 GB/s, 19.5 TFLOP/s fp32, 312 TFLOP/s fp16 tensor, 156 TF32 */
    ct_gpu_model_from_properties(&m, "NVIDIA A100-SXM4-40GB", 108, 1410000, 1215000, 5120, 8, 0);
    CHECK(m.measured && m.sms == 108 && strcmp(m.name, "NVIDIA A100-SXM4-40GB") == 0);
    CHECK_NEAR(m.bandwidth, 2.0 * 1215e6 * 5120 / 8, 1.0);
    CHECK_NEAR(m.fp32_flops, 108.0 * 64 * 2 * 1.41e9, 1.0);
    CHECK_NEAR(m.half_flops, 108.0 * 2048 * 1.41e9, 1.0);
    CHECK_NEAR(m.tf32_flops, m.half_flops / 2, 1.0);
    /* Volta has no TF32: fp32 products stay on the CUDA cores */
    ct_gpu_model_from_properties(&m, "Tesla V100", 80, 1530000, 877000, 4096, 7, 0);
    CHECK_NEAR(m.tf32_flops, m.fp32_flops, 1.0);
    CHECK_NEAR(m.half_flops, 80.0 * 1024 * 1.53e9, 1.0);
}

/* tiny_layers.ini at batch 256, fp32, graph = auto (1 us a launch), on the H100-class model */
static void test_tiny_layers(void)
{
    ct_net *net = open_model("tiny_layers.ini");
    if (!net)
        return;
    int n = ct_layer_count(net);
    CHECK_MSG(n == 19, "%d layers: %s", n, ct_errmsg(net));
    if (n != 19) {
        ct_close(net);
        return;
    }
    ct_launch_layer layers[19];
    ct_launch_report r;
    CHECK(ct_launch_report_get(net, 0, &r, layers, 18) == CT_ERR_USAGE && ct_contains(ct_errmsg(net), "room for"));
    CHECK_MSG(ct_launch_report_get(net, 0, &r, layers, n) == CT_OK, "%s", ct_errmsg(net));

    /* fc0: dense 784 -> 64 with relu after the flatten that copies the input: nothing before it
     * learns, so it makes no dx. FLOPs 3 x (2 x 784 x 64 + 64) x 256 = 77119488, over 67 TFLOP/s
     * (fp32 products): 1.151037 us. Bytes 2 x (256 x 784 x 4) + 3 x (50240 x 4) + 2 x (256 x 64 x
     * 4) = 2339584, over 3.35 TB/s: 0.698383 us. Compute-bound; four kernels (the product with relu
     * and bias in its epilogue; relu's gradient, dw, the bias sums). */
    CHECK_NEAR(layers[1].kernel_us, 77119488.0 / 67e12 * 1e6, 1e-9);
    CHECK(layers[1].kernels == 4);
    CHECK_NEAR(layers[1].launch_us, 4.0, 1e-12);
    CHECK(layers[1].launch_bound);
    /* fc1: dense 64 -> 64: 3 x (2 x 4096 + 64) x 256 = 6340608 FLOPs (0.0946 us) against
     * 2 x 65536 + 3 x 16640 + 2 x 65536 + 65536 = 377600 bytes (0.1127 us): memory-bound */
    CHECK_NEAR(layers[2].kernel_us, 377600.0 / 3.35e12 * 1e6, 1e-9);
    /* out: dense 64 -> 10, no activation: the product, then dx, dw and the bias sums */
    CHECK(layers[18].kernels == 4);

    CHECK(r.batch == 256 && !r.measured && ct_contains(r.device, "H100-class"));
    CHECK_NEAR(r.per_launch_us, 1.0, 0.0);
    CHECK(r.layers == 19 && r.launch_bound == 19 && r.warn);
    /* 1 (flatten's copy) + 4 (fc0) + 16 x 5 (fc1..fc16) + 4 (out) + input, loss, optimizer */
    CHECK_MSG(r.launches == 1 + 4 + 16 * 5 + 4 + 3, "%ld launches", r.launches);
    CHECK(r.kernel_us < r.launch_us);
    CHECK_MSG(ct_contains(r.message, "19 of 19 layers are launch-bound at batch 256: the step is about 92 launches") &&
              ct_contains(r.message, "use wider layers or a larger batch"), "%s", r.message);

    /* twice the batch: fc0 (compute-bound) takes twice as long, the launches stay; the
     * parameters' share of the bytes does not grow, so the step takes less than twice */
    ct_launch_report big;
    ct_launch_layer big_layers[19];
    CHECK(ct_launch_report_get(net, 512, &big, big_layers, 19) == CT_OK && big.batch == 512 &&
          big.launches == r.launches && big.kernel_us > 1.5 * r.kernel_us && big.kernel_us < 2.0 * r.kernel_us);
    CHECK_NEAR(big_layers[1].kernel_us, 2.0 * layers[1].kernel_us, 1e-9);
    /* graph = off pays 3 us a launch, and the message suggests graph = on */
    ct_close(net);
    net = open_model("tiny_layers.ini");
    if (!net)
        return;
    CHECK(ct_set(net, "train.graph", "off") == CT_OK);
    CHECK(ct_launch_report_get(net, 0, &r, NULL, 0) == CT_OK && r.warn);
    CHECK_NEAR(r.per_launch_us, 3.0, 0.0);
    CHECK_NEAR(r.launch_us, 92 * 3.0, 1e-9);
    CHECK_MSG(ct_contains(r.message, "use wider layers, a larger batch, or graph = on"), "%s", r.message);
    ct_close(net);
}

/* fmnist_mlp_wide.ini at batch 4096: three 1024-wide products, no warning */
static void test_wide(void)
{
    ct_net *net = open_model("fmnist_mlp_wide.ini");
    if (!net)
        return;
    ct_launch_layer layers[5];
    ct_launch_report r;
    CHECK_MSG(ct_layer_count(net) == 5 && ct_launch_report_get(net, 4096, &r, layers, 5) == CT_OK, "%s",
              ct_errmsg(net));
    /* fc2: 1024 -> 1024: 3 x (2 x 1048576 + 1024) x 4096 FLOPs at 67 TFLOP/s = 384.8 us */
    CHECK_NEAR(layers[2].kernel_us, 3.0 * (2.0 * 1048576 + 1024) * 4096 / 67e12 * 1e6, 1e-6);
    CHECK(!layers[2].launch_bound);
    CHECK_MSG(!r.warn && r.launch_bound == 0 && r.message[0] == '\0', "%d of %d: %s", r.launch_bound, r.layers,
              r.message);
    ct_close(net);
}

/* The all-reduce against hand-computed figures, and the scaling report's wiring and shape. */
static void test_scaling(void)
{
    /* 100 MiB over 4 GPUs at 100 GB/s, 10 us a call, 25 MiB buckets: 4 calls (40 us) plus
     * 104857600 x 2 x 3 / 4 bytes at 1e11 B/s (1572.864 us) */
    ct_link_model l = {.bus_bytes_per_s = 100e9, .call_us = 10.0, .bucket_bytes = 25.0 * 1048576};
    CHECK_NEAR(ct_allreduce_us(100.0 * 1048576, 4, &l), 40.0 + 1572.864, 1e-9);
    CHECK(ct_allreduce_us(100.0 * 1048576, 1, &l) == 0.0);
    /* one byte past a bucket is one call more */
    CHECK_NEAR(ct_allreduce_us(25.0 * 1048576 + 1, 2, &l) - ct_allreduce_us(25.0 * 1048576, 2, &l), 10.0, 1e-4);

    ct_net *net = open_model("fmnist_resnet18.ini");
    if (!net)
        return;
    ct_scaling_report r, slow;
    CHECK_MSG(ct_scaling_report_get(net, 512, 0, &r) == CT_OK, "%s", ct_errmsg(net));
    CHECK(ct_scaling_report_get(net, 512, 20, &slow) == CT_OK);   /* PCIe-class */
    CHECK(ct_scaling_report_get(net, 512, -1, &slow) == CT_ERR_USAGE);
    CHECK(ct_scaling_report_get(net, 512, 20, &slow) == CT_OK);
    /* 11.2 M fp32 gradients: 42.6 MiB, two 25 MiB buckets */
    CHECK_MSG(r.allreduce_bytes > 40 * 1048576LL && r.allreduce_bytes < 45 * 1048576LL && r.buckets == 2,
              "%lld bytes in %d buckets", r.allreduce_bytes, r.buckets);
    CHECK(r.n_rows == 3 && r.rows[0].gpus == 2 && r.rows[1].gpus == 4 && r.rows[2].gpus == 8);
    for (int i = 0; i < 3; i++) {
        int n = r.rows[i].gpus;
        CHECK(r.rows[i].batch_per_gpu == 512 / n);
        CHECK_NEAR(r.rows[i].allreduce_us, ct_allreduce_us((double)r.allreduce_bytes, n,
                                                           &(ct_link_model){450e9, 15.0, 25.0 * 1048576}), 1e-6);
        /* serial: one GPU's step at the whole batch over n times (share's step + all-reduce) */
        CHECK_NEAR(r.rows[i].efficiency_serial,
                   r.single_step_us / (n * (r.rows[i].step_us + r.rows[i].allreduce_us)), 1e-9);
        /* two buckets: half the all-reduce can hide under backward, never more than all of it */
        CHECK(r.rows[i].efficiency_overlap > r.rows[i].efficiency_serial);
        CHECK(r.rows[i].efficiency_overlap <= r.single_step_us / (n * r.rows[i].step_us) + 1e-12);
        /* a slower link costs efficiency */
        CHECK(slow.rows[i].efficiency_serial < r.rows[i].efficiency_serial);
        if (i)
            CHECK(r.rows[i].efficiency_serial < r.rows[i - 1].efficiency_serial);
    }
    /* batch 4 over 8 GPUs gives some none */
    CHECK(ct_scaling_report_get(net, 4, 0, &r) == CT_OK && r.rows[2].batch_per_gpu == 0 &&
          r.rows[2].efficiency_serial == 0.0 && r.rows[1].batch_per_gpu == 1);
    ct_close(net);
}

int main(void)
{
    test_models();
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/%s", ct_fmnist_dir(), CT_FMNIST_KEYS[0][1]);
    if (access(probe, R_OK) != 0) {
        printf("skipped the models' checks: %s is missing (set CT_FMNIST_DIR)\n", probe);
    } else {
        test_tiny_layers();
        test_wide();
        test_scaling();
    }
    return ct_test_done();
}
