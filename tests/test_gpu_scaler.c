/* fp16's dynamic loss scaler on the CUDA backend, against the CPU backend: the same fp16 network
 * (every layer type, a pinned fp32 conv and batch norm, tests/test_mixed_precision.c's) from the
 * same seed on both, its first loss scale at the maximum (2^24) so that the first steps overflow,
 * growth interval 4, trained step by step (ct_train_step, the trainer's step; graphs on) on the
 * same batches. After each step, outside it, the scaler state is read on both (scaler_get) and the
 * trace printed. On the GPU: a skipped step leaves the fp32 masters, their half copy and Adam's
 * moments bit-identical to before it and halves the scale (never below 1) with the applied count
 * unchanged; an applied step moves the weights, rewrites the half copy as the rounding of the new
 * masters (bit for bit) and doubles the scale after 4 clean steps in a row; the verdict is cleared.
 * The GPU's trace must equal the CPU's step for step (scale, clean steps, skipped and applied
 * counts): both decide from whether a gradient overflows fp16, and their gradients differ only by
 * rounding (a relative 1e-3 or so), so they disagree only if a step's largest scaled gradient lies
 * within that of fp16's limit, which with a scale that moves by factors of 2 is a chance of about
 * a tenth of a percent per decisive step, and then the printed trace shows where. tf32 = off and
 * deterministic = on keep the pinned fp32 convolution's own rounding at fp32's, not TF32's (about
 * 1e-3, which would add to the half layers' and widen that chance). Exits 77 (skipped) without a
 * GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "base/half.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"

enum { STEPS = 30, BATCH = 32, GROWTH = 4 };

static const char *const NET =
    "[data]\nformat = synthetic\nshape = 8, 8, 2\nclasses = 5\ncount = 320\ntest_count = 64\n"
    "[train]\nbatch = 32\nseed = 5\noptimizer = adam\nlearning_rate = 0.01\nprecision = fp16\n"
    "loss_scale_init = 16777216\nloss_scale_growth_steps = 4\ngraph = on\ntf32 = off\ndeterministic = on\n"
    "[c1]\ntype = conv2d\nfilters = 6\nsize = 3\npadding = same\nactivation = tanh\n"
    "[bn]\ntype = batchnorm\n"
    "[act]\ntype = activation\nactivation = leaky\n"
    "[c2]\ntype = conv2d\nfilters = 6\nsize = 3\npadding = same\nactivation = gelu\ndtype = fp32\n"
    "[c3]\ntype = conv2d\nfilters = 6\nsize = 1\ninput = act\nbias = off\n"
    "[res]\ntype = add\ninputs = c2, c3\nactivation = relu\n"
    "[bn2]\ntype = batchnorm\ndtype = fp32\n"
    "[mp]\ntype = maxpool\nsize = 2\n"
    "[ap]\ntype = avgpool\nsize = 2\ninput = res\n"
    "[cat]\ntype = concat\ninputs = mp, ap\n"
    "[flat]\ntype = flatten\n"
    "[fc]\ntype = dense\nunits = 16\nactivation = sigmoid\n"
    "[drop]\ntype = dropout\nrate = 0.25\n"
    "[out]\ntype = dense\nunits = 5\n";

static ct_net *open_on(const char *devices)
{
    ct_net *net = NULL;
    ct_status st = ct_open_string(NET, "scaler.ini", &net);
    if (st == CT_OK)
        st = ct_set(net, "train.devices", devices);
    if (st == CT_OK)
        st = ct_prepare(net);
    CHECK_MSG(st == CT_OK, "devices = %s: %s", devices, ct_errmsg(net));
    if (st != CT_OK) {
        ct_close(net);
        return NULL;
    }
    printf("devices = %s: backend %s (%s)\n", devices, ct_backend_name(net), ct_backend_reason(net));
    const char *want = strcmp(devices, "cpu") == 0 ? "cpu" : "cuda";
    ct_graph *g = &net->run.replicas[0].graph;
    CHECK_MSG(strcmp(ct_backend_name(net), want) == 0, "devices = %s built on %s", devices, ct_backend_name(net));
    CHECK_MSG(g->params_half.data && g->params_half.dtype == CT_DTYPE_F16 && g->opt_m.data && g->opt_v.data,
              "devices = %s: not an fp16 Adam network with a half copy", devices);
    if (strcmp(ct_backend_name(net), want) != 0 || !g->params_half.data || !g->opt_m.data || !g->opt_v.data) {
        ct_close(net);
        return NULL;
    }
    return net;
}

/* What a skipped step must leave alone, in host memory. */
typedef struct snapshot {
    void *params, *half, *m, *v;
} snapshot;

static void *download(ct_net *net, const ct_tensor *t)
{
    ct_backend *be = net->run.replicas[0].be;
    size_t bytes = ct_tensor_bytes(t);
    void *host = xmalloc(bytes);
    ct_err err = {0};
    ct_status st = be->dev->ops->download(be->dev, host, t->data, bytes, &err);
    CHECK_MSG(st == CT_OK, "download of %zu bytes: %s", bytes, err.msg);
    if (st != CT_OK) {
        free(host);
        return NULL;
    }
    return host;
}

static void drop(snapshot *s)
{
    free(s->params);
    free(s->half);
    free(s->m);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int take(ct_net *net, snapshot *s)
{
    ct_graph *g = &net->run.replicas[0].graph;
    drop(s);
    s->params = download(net, &g->params);
    s->half = download(net, &g->params_half);
    s->m = download(net, &g->opt_m);
    s->v = download(net, &g->opt_v);
    return s->params && s->half && s->m && s->v;
}

static int scaler_of(ct_net *net, ct_scaler *s)
{
    ct_backend *be = net->run.replicas[0].be;
    ct_err err = {0};
    ct_status st = be->ops->scaler_get(be, s, &err);
    CHECK_MSG(st == CT_OK, "%s scaler_get: %s", be->ops->name, err.msg);
    return st == CT_OK;
}

/* One step of batch k on net; 1 when it ran. */
static int step(ct_net *net, int k)
{
    long idx[BATCH];
    ct_err err = {0};
    for (int i = 0; i < BATCH; i++)
        idx[i] = ((long)k * 29 + (long)i * 11) % net->run.train.count;
    ct_status st = ct_train_stage_batch(&net->run, &net->run.replicas[0], &net->run.train, idx, BATCH, 0, 0, &err);
    if (st == CT_OK)
        st = ct_train_step(&net->run, BATCH, net->run.cfg.train.learning_rate, &err);
    CHECK_MSG(st == CT_OK, "%s step %d: %s", ct_backend_name(net), k, err.msg);
    return st == CT_OK;
}

static int same_trace(const ct_scaler *a, const ct_scaler *b)
{
    return a->loss_scale == b->loss_scale && a->clean_steps == b->clean_steps && a->applied_steps == b->applied_steps &&
           a->skipped_steps == b->skipped_steps && a->nonfinite == b->nonfinite;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* figures and failures interleave in order in a log */
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    ct_net *gpu = open_on("0"), *cpu = open_on("cpu");
    if (!gpu || !cpu) {
        ct_close(gpu);
        ct_close(cpu);
        return ct_test_done();
    }
    ct_graph *g = &gpu->run.replicas[0].graph;
    ct_scaler was, was_cpu;
    snapshot before = {0};
    int ok = scaler_of(gpu, &was) && scaler_of(cpu, &was_cpu) && take(gpu, &before);
    CHECK_MSG(ok && was.loss_scale == 16777216.0f && was.growth_steps == GROWTH && same_trace(&was, &was_cpu),
              "the first scaler: gpu %g / %d, cpu %g / %d", (double)was.loss_scale, (int)was.growth_steps,
              (double)was_cpu.loss_scale, (int)was_cpu.growth_steps);
    /* the same seed gave both the same masters */
    void *p_cpu = ok ? download(cpu, &cpu->run.replicas[0].graph.params) : NULL;
    CHECK_MSG(p_cpu && memcmp(p_cpu, before.params, ct_tensor_bytes(&g->params)) == 0,
              "the initial parameters differ between the backends");
    free(p_cpu);

    int skips = 0, halvings = 0, doublings = 0, mismatches = 0, first_mismatch = 0;
    printf("step  gpu: verdict  scale      clean skipped applied | cpu: scale      clean skipped applied\n");
    for (int k = 1; k <= STEPS && ok; k++) {
        ct_scaler now, now_cpu;
        ok = step(gpu, k) && step(cpu, k) && scaler_of(gpu, &now) && scaler_of(cpu, &now_cpu);
        if (!ok)
            break;
        int skipped = now.skipped_steps == was.skipped_steps + 1 && now.applied_steps == was.applied_steps;
        int applied = now.applied_steps == was.applied_steps + 1 && now.skipped_steps == was.skipped_steps;
        int same = same_trace(&now, &now_cpu);
        printf("%4d  %-8s %-10g %5d %7lld %7lld | %-10g %5d %7lld %7lld%s\n", k,
               skipped ? "skipped" : applied ? "applied" : "NEITHER", (double)now.loss_scale, (int)now.clean_steps,
               (long long)now.skipped_steps, (long long)now.applied_steps, (double)now_cpu.loss_scale,
               (int)now_cpu.clean_steps, (long long)now_cpu.skipped_steps, (long long)now_cpu.applied_steps,
               same ? "" : "  DIFFERS FROM THE CPU");
        CHECK_MSG(skipped || applied, "step %d neither skipped nor applied exactly once", k);
        CHECK_MSG(now.nonfinite == 0, "step %d: the verdict (%d) was not cleared", k, (int)now.nonfinite);
        if (!same && mismatches++ == 0)
            first_mismatch = k;
        snapshot after = {0};
        if (!take(gpu, &after)) {
            ok = 0;
            drop(&after);
            break;
        }
        size_t pb = ct_tensor_bytes(&g->params), hb = ct_tensor_bytes(&g->params_half);
        if (skipped) {
            skips++;
            int kept = memcmp(before.params, after.params, pb) == 0 && memcmp(before.half, after.half, hb) == 0 &&
                       memcmp(before.m, after.m, pb) == 0 && memcmp(before.v, after.v, pb) == 0;
            CHECK_MSG(kept, "step %d was skipped but the masters, their half copy or the moments changed", k);
            CHECK_MSG(now.loss_scale == fmaxf(was.loss_scale * 0.5f, 1.0f) && now.clean_steps == 0,
                      "step %d skipped: scale %g -> %g, clean %d", k, (double)was.loss_scale, (double)now.loss_scale,
                      (int)now.clean_steps);
        } else if (applied) {
            CHECK_MSG(memcmp(before.params, after.params, pb) != 0, "step %d was applied but no weight moved", k);
            int grows = was.clean_steps + 1 >= GROWTH;
            CHECK_MSG(now.loss_scale == (grows ? fminf(was.loss_scale * 2.0f, 0x1p24f) : was.loss_scale) &&
                          now.clean_steps == (grows ? 0 : was.clean_steps + 1),
                      "step %d applied after %d clean steps: scale %g -> %g", k, (int)was.clean_steps,
                      (double)was.loss_scale, (double)now.loss_scale);
            /* the half copy is the rounding of the new masters, written by the update */
            const float *w = after.params;
            const uint16_t *h = after.half;
            size_t wrong = 0, nonfinite = 0;
            for (size_t i = 0; i < g->param_span; i++) {
                wrong += h[i] != ct_f16_from_f32(w[i]);
                nonfinite += !isfinite(w[i]);
            }
            CHECK_MSG(wrong == 0, "step %d: %zu half weights are not the rounding of the masters", k, wrong);
            CHECK_MSG(nonfinite == 0, "step %d: %zu non-finite weights", k, nonfinite);
        }
        halvings += now.loss_scale < was.loss_scale;
        doublings += now.loss_scale > was.loss_scale;
        drop(&before);
        before = after;
        was = now;
    }
    if (ok) {
        printf("%d steps on the GPU: %d skipped, %d halvings, %d doublings; the CPU's trace %s", STEPS, skips,
               halvings, doublings, mismatches ? "" : "is the same\n");
        if (mismatches)
            printf("differs at %d steps, the first at step %d\n", mismatches, first_mismatch);
        CHECK_MSG(skips >= 2 && halvings >= 2, "the first steps should overflow: %d skipped", skips);
        CHECK_MSG(doublings >= 1, "the scale never doubled after %d clean steps", GROWTH);
        CHECK_MSG(mismatches == 0, "the GPU's scaler differs from the CPU's at %d steps, the first at step %d",
                  mismatches, first_mismatch);
        /* for the log: how far the two trainings are apart after the storm (not a check: the
         * rounding differences of 30 Adam steps) */
        float *wg = download(gpu, &g->params), *wc = download(cpu, &cpu->run.replicas[0].graph.params);
        if (wg && wc) {
            double num = 0.0, den = 0.0;
            for (size_t i = 0; i < g->param_span; i++) {
                num += ((double)wg[i] - wc[i]) * ((double)wg[i] - wc[i]);
                den += (double)wc[i] * wc[i];
            }
            printf("masters after %d steps: relative difference gpu vs cpu %.3g\n", STEPS,
                   sqrt(num / fmax(den, 1e-30)));
        }
        free(wg);
        free(wc);
    }
    if (ct_backend_note(gpu)[0])
        printf("note: %s\n", ct_backend_note(gpu));
    CHECK_MSG(gpu->run.replicas[0].be->capture == 1, "the GPU steps ran without graphs: %s", ct_backend_note(gpu));
    drop(&before);
    ct_close(gpu);
    ct_close(cpu);
    return ct_test_done();
}
#else
#include "tests/no_cuda_main.h"
#endif
