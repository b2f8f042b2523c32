/* The CUDA backend's loss and optimizer, and its device's memory, against the CPU backend on the
 * same random inputs: memory round trips, the loss with its device-side metrics and gradient, and
 * SGD (plain, weight decay, momentum, Nesterov) taking its learning rate from set_step, which must
 * give the CPU's bits. Exits 77 (skipped) without a GPU. */
#include "backend.h"
#include "base/rng.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"

enum { N = 300, K = 10, P = 5000 };

static void fill(float *x, size_t n, ct_rng *rng, float amplitude)
{
    for (size_t i = 0; i < n; i++)
        x[i] = amplitude * (2.0f * ct_rng_uniform(rng) - 1.0f);
}

/* A tensor of n rows of `row` in fresh memory of be's device, holding src when it is not NULL
 * (else zeros). */
static ct_tensor put(ct_backend *be, ct_dtype dtype, int n, ct_shape row, const void *src)
{
    ct_err err;
    ct_device *dev = be->dev;
    ct_tensor t = ct_tensor_make(NULL, dtype, n, row);
    t.data = dev->ops->alloc(dev, ct_tensor_bytes(&t));
    CHECK(t.data != NULL);
    if (t.data && src)
        CHECK(dev->ops->upload(dev, t.data, src, ct_tensor_bytes(&t), &err) == CT_OK);
    return t;
}

static void get(ct_backend *be, void *dst, const ct_tensor *t)
{
    ct_err err;
    CHECK_MSG(be->dev->ops->download(be->dev, dst, t->data, ct_tensor_bytes(t), &err) == CT_OK, "%s", err.msg);
}

static void drop(ct_backend *be, ct_tensor *t)
{
    be->dev->ops->free(be->dev, t->data);
    t->data = NULL;
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i]))
            return INFINITY;
        double d = fabs((double)a[i] - b[i]) / fmax(fabs((double)b[i]), 1e-6);
        if (d > worst)
            worst = d;
    }
    return worst;
}

/* How many values differ in their bits. */
static size_t bit_diffs(const float *a, const float *b, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return count;
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    ct_err err;
    ct_backend *cpu = NULL, *gpu = NULL;
    CHECK(ct_gpu_test_open(&cpu, NULL, &err) == CT_OK);
    CHECK_MSG(ct_gpu_test_open(&gpu, &(ct_backend_options){.deterministic = 1}, &err) == CT_OK, "%s", err.msg);
    if (!cpu || !gpu) {
        ct_gpu_test_close(cpu);
        ct_gpu_test_close(gpu);
        return ct_test_done();
    }

    static float logits[N * K], dl_cpu[N * K], dl_gpu[N * K];
    static int32_t labels[N];
    ct_rng rng = {2024};
    fill(logits, N * K, &rng, 4.0f);
    for (int i = 0; i < N; i++)
        labels[i] = (int32_t)(ct_rng_next(&rng) % K);

    ct_backend *bes[2] = {cpu, gpu};
    float *dls[2] = {dl_cpu, dl_gpu};
    double loss[2];
    long correct[2];
    for (int b = 0; b < 2; b++) {
        ct_backend *be = bes[b];
        ct_tensor d_logits = put(be, CT_DTYPE_F32, N, (ct_shape){1, 1, K}, logits);
        ct_tensor d_labels = put(be, CT_DTYPE_I32, N, (ct_shape){1, 1, 1}, labels);
        ct_tensor d_grad = put(be, CT_DTYPE_F32, N, (ct_shape){1, 1, K}, NULL);
        CHECK(be->ops->read_metrics(be, &loss[b], &correct[b], 1, &err) == CT_OK);
        CHECK(be->ops->loss(be, &d_logits, &d_labels, &d_grad, N, &err) == CT_OK);
        CHECK(be->ops->read_metrics(be, &loss[b], &correct[b], 1, &err) == CT_OK);
        get(be, dls[b], &d_grad);
        drop(be, &d_logits);
        drop(be, &d_labels);
        drop(be, &d_grad);
    }
    CHECK_NEAR(loss[1], loss[0], 1e-5 * loss[0]);
    CHECK(correct[1] == correct[0]);
    CHECK_MSG(max_rel_diff(dl_gpu, dl_cpu, N * K) < 1e-4, "dlogits differ by %g", max_rel_diff(dl_gpu, dl_cpu, N * K));

    /* three steps of each SGD form from the same weights and gradients, which must give the CPU's
     * bits: the kernel rounds in the CPU's order. Every fourth weight is near zero (|w| < 1e-4),
     * where a fused multiply-add's single rounding used to part from the CPU by ~2e-5 relative. */
    static float w0[P], g0[P], w_out[2][P], v_out[2][P];
    fill(w0, P, &rng, 1.0f);
    for (int i = 3; i < P; i += 4)
        w0[i] *= 1e-4f;
    fill(g0, P, &rng, 0.1f);
    static const struct {
        const char *name;
        ct_optimizer kind;
        float weight_decay;
        int nesterov;   /* -1: on the second step only */
    } forms[] = {
        {"sgd", CT_OPT_SGD, 0.0f, 0},
        {"sgd, weight decay", CT_OPT_SGD, 1e-3f, 0},
        {"momentum", CT_OPT_MOMENTUM, 0.0f, 0},
        {"momentum, weight decay, nesterov on step 2", CT_OPT_MOMENTUM, 1e-3f, -1},
        {"nesterov, weight decay", CT_OPT_MOMENTUM, 5e-4f, 1},
    };
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        for (int b = 0; b < 2; b++) {
            ct_backend *be = bes[b];
            ct_tensor w = put(be, CT_DTYPE_F32, 1, (ct_shape){1, 1, P}, w0);
            ct_tensor g = put(be, CT_DTYPE_F32, 1, (ct_shape){1, 1, P}, g0);
            ct_tensor v = put(be, CT_DTYPE_F32, 1, (ct_shape){1, 1, P}, NULL);
            memset(v_out[b], 0, sizeof v_out[b]);
            for (int t = 1; t <= 3; t++) {
                int nesterov = forms[f].nesterov < 0 ? t == 2 : forms[f].nesterov;
                ct_optim_step s = {.kind = forms[f].kind, .params = &w, .grads = &g,
                                   .m = forms[f].kind == CT_OPT_MOMENTUM ? &v : NULL, .momentum = 0.9f,
                                   .nesterov = nesterov, .weight_decay = forms[f].weight_decay};
                ct_step_scalars now = {.lr = 0.05f * (float)t, .t = t, .bias1 = 1.0f, .bias2 = 1.0f};
                CHECK(be->ops->set_step(be, &now, &err) == CT_OK);
                CHECK_MSG(be->ops->optimizer_step(be, &s, &err) == CT_OK, "%s: %s", forms[f].name, err.msg);
            }
            get(be, w_out[b], &w);
            if (forms[f].kind == CT_OPT_MOMENTUM)
                get(be, v_out[b], &v);
            CHECK(be->ops->all_finite(be, &w, P) == 1);
            drop(be, &w);
            drop(be, &g);
            drop(be, &v);
        }
        CHECK_MSG(memcmp(w_out[0], w0, sizeof w0) != 0, "%s: the steps changed nothing", forms[f].name);
        size_t wd = bit_diffs(w_out[1], w_out[0], P), vd = bit_diffs(v_out[1], v_out[0], P);
        printf("%-45s weights: %zu of %d differ from the CPU's bits (max rel %.3g); velocity: %zu\n",
               forms[f].name, wd, P, max_rel_diff(w_out[1], w_out[0], P), vd);
        CHECK_MSG(wd == 0, "%s: %zu weights differ from the CPU's, by up to %g relative", forms[f].name, wd,
                  max_rel_diff(w_out[1], w_out[0], P));
        CHECK_MSG(vd == 0, "%s: %zu velocity values differ from the CPU's, by up to %g relative", forms[f].name, vd,
                  max_rel_diff(v_out[1], v_out[0], P));
    }

    ct_gpu_test_close(cpu);
    ct_gpu_test_close(gpu);
    return ct_test_done();
}
#else
#include "tests/no_cuda_main.h"
#endif
