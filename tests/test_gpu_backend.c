/* The CUDA backend's memory, loss and optimizer against the CPU backend on the same random inputs:
 * memory round trips, the loss with its device-side metrics and gradient, and SGD with momentum
 * taking its learning rate from set_step. Exits 77 (skipped) without a GPU. */
#include "backend.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"

enum { N = 300, K = 10, P = 5000 };

static void fill(float *x, size_t n, ct_rng *rng, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * (2.0f * ct_rng_uniform(rng) - 1.0f);
}

/* Copies host data into fresh memory of `be`. */
static void *put(ct_backend *be, const void *src, size_t bytes)
{
    ct_err err;
    void *p = be->ops->alloc(be, bytes);
    CHECK(p != NULL);
    if (p)
        CHECK(be->ops->upload(be, p, src, bytes, &err) == CT_OK);
    return p;
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

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    ct_err err;
    ct_backend *cpu = NULL, *gpu = NULL;
    CHECK(ct_cpu_backend_create(&cpu, &err) == CT_OK);
    CHECK_MSG(ct_cuda_backend_create(&gpu, &(ct_cuda_options){.device = 0}, &err) == CT_OK, "%s", err.msg);
    if (!cpu || !gpu)
        return ct_test_done();

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
        float *d_logits = put(be, logits, sizeof logits);
        int32_t *d_labels = put(be, labels, sizeof labels);
        float *d_grad = be->ops->alloc(be, sizeof logits);
        CHECK(be->ops->read_metrics(be, &loss[b], &correct[b], 1, &err) == CT_OK);
        CHECK(be->ops->loss(be, d_logits, d_labels, d_grad, N, K, &err) == CT_OK);
        CHECK(be->ops->read_metrics(be, &loss[b], &correct[b], 1, &err) == CT_OK);
        CHECK(be->ops->download(be, dls[b], d_grad, sizeof logits, &err) == CT_OK);
        be->ops->free(be, d_logits);
        be->ops->free(be, d_labels);
        be->ops->free(be, d_grad);
    }
    CHECK_NEAR(loss[1], loss[0], 1e-5 * loss[0]);
    CHECK(correct[1] == correct[0]);
    CHECK_MSG(max_rel_diff(dl_gpu, dl_cpu, N * K) < 1e-4, "dlogits differ by %g", max_rel_diff(dl_gpu, dl_cpu, N * K));

    /* three momentum steps from the same weights and gradients */
    static float w0[P], g0[P], w_out[2][P], v_out[2][P];
    fill(w0, P, &rng, 1.0f);
    fill(g0, P, &rng, 0.1f);
    for (int b = 0; b < 2; b++) {
        ct_backend *be = bes[b];
        float *w = put(be, w0, sizeof w0), *g = put(be, g0, sizeof g0), *v = be->ops->alloc(be, sizeof w0);
        for (int t = 1; t <= 3; t++) {
            ct_optim_step s = {.kind = CT_OPT_MOMENTUM, .params = w, .grads = g, .m = v, .count = P,
                               .momentum = 0.9f, .nesterov = t == 2, .weight_decay = 1e-3f};
            ct_step_scalars now = {.lr = 0.05f, .t = t, .bias1 = 1.0f, .bias2 = 1.0f};
            CHECK(be->ops->set_step(be, &now, &err) == CT_OK);
            CHECK(be->ops->optimizer_step(be, &s, &err) == CT_OK);
        }
        CHECK(be->ops->download(be, w_out[b], w, sizeof w0, &err) == CT_OK);
        CHECK(be->ops->download(be, v_out[b], v, sizeof w0, &err) == CT_OK);
        CHECK(be->ops->all_finite(be, w, P) == 1);
        be->ops->free(be, w);
        be->ops->free(be, g);
        be->ops->free(be, v);
    }
    CHECK_MSG(max_rel_diff(w_out[1], w_out[0], P) < 1e-5, "weights differ by %g", max_rel_diff(w_out[1], w_out[0], P));
    CHECK_MSG(max_rel_diff(v_out[1], v_out[0], P) < 1e-5, "velocity differs by %g", max_rel_diff(v_out[1], v_out[0], P));

    cpu->ops->destroy(cpu);
    gpu->ops->destroy(gpu);
    return ct_test_done();
}
#else
int main(void)
{
    printf("skipped: built without the CUDA backend\n");
    return 77;
}
#endif
