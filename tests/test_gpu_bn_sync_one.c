/* sync_bn = on over NCCL with one rank (devices = 0, comm = nccl) takes the synced batch norm of
 * our own kernels, the hook's all-reduces on the communication stream joined back before batch
 * norm reads them; with one rank the global batch's statistics are the replica's own, so it must
 * train like sync_bn = off (cuDNN's batch norm): a conv + batch norm network on a Fashion-MNIST
 * subset (2946 samples at batch 64: 47 steps, the last of 2 samples), one epoch of SGD (no
 * adaptive step to scale rounding noise up; the convolution has no bias, which batch norm would
 * take away), parameters and running statistics within TOL_PARAMS relative and test accuracy
 * within 0.01. Both runs have tf32 = off and deterministic = on: each run's backend measures its
 * own convolution algorithms, which may differ between the two, but deterministic fp32 ones
 * without TF32 differ from each other only in the order they add in, as the two batch norms do
 * (other reductions, other orders); so the parameters agree to fp32 rounding grown over 47 steps
 * and are not bit-identical: that shows the synced path ran. comm_timeout = 20 s: a stalled
 * collective is named by the communicator's watchdog well inside ctest's timeout. Exits 77 without
 * a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "tests/fmnist_form.h"
#include "tests/test_util.h"

#ifdef CUTRAIN_HAVE_CUDA
#include "tests/gpu_test.h"
#include "tests/gpu_replicas.h"

#define TOL_PARAMS 5e-4
#define TOL_ACCURACY 0.01

static const char *const BN_NET =
    "[data]\nformat = idx\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
    "test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n"
    "normalize = 0.2860, 0.3530\ntrain_limit = 2946\ntest_limit = 1000\n"
    "[train]\nepochs = 1\nbatch = 64\noptimizer = sgd\nlearning_rate = 0.05\nprecision = fp32\n"
    "devices = 0\ncomm = nccl\ncomm_timeout = 20\ntf32 = off\ndeterministic = on\n"
    "[conv]\ntype = conv2d\nfilters = 8\nsize = 3\nstride = 2\nbias = off\n"
    "[bn]\ntype = batchnorm\n"
    "[relu]\ntype = activation\nactivation = relu\n"
    "[pool]\ntype = maxpool\n"
    "[flat]\ntype = flatten\n"
    "[out]\ntype = dense\nunits = 10\n";

static ct_net *fit(const char *sync_bn)
{
    ct_net *net = NULL;
    CHECK(ct_open_fmnist_form(BN_NET, "bn_sync_one.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.sync_bn", sync_bn) == CT_OK);
    CHECK_MSG(ct_fit(net, NULL) == CT_OK, "sync_bn = %s: %s", sync_bn, ct_errmsg(net));
    return net;
}

/* The running statistics of rank 0, copied from its GPU into a new host buffer of *count floats. */
static float *gpu_state(ct_net *net, size_t *count)
{
    const ct_tensor *s = &net->run.replicas[0].graph.state;
    *count = s->count;
    float *host = xmalloc(ct_tensor_bytes(s));
    GPU_OK(cudaSetDevice(net->run.replicas[0].dev->ordinal));
    GPU_OK(cudaDeviceSynchronize());
    GPU_OK(cudaMemcpy(host, s->data, ct_tensor_bytes(s), cudaMemcpyDeviceToHost));
    return host;
}

static double accuracy(ct_net *net)
{
    ct_eval_result r;
    CHECK_MSG(ct_evaluate(net, &r) == CT_OK, "evaluate: %s", ct_errmsg(net));
    return r.accuracy;
}

int main(void)
{
    int absent = ct_gpu_test_absent();
    if (absent)
        return absent;
    ct_net *off = fit("off"), *on = fit("on");
    CHECK(on->run.n_replicas == 1 && strcmp(on->run.comm->ops->name, "nccl") == 0);
    CHECK(ct_steps_done(on) == ct_steps_done(off) && ct_steps_done(on) == 47);
    size_t n1 = 0, n2 = 0, s1 = 0, s2 = 0;
    float *a = gpu_params(off, 0, &n1), *b = gpu_params(on, 0, &n2);
    float *sa = gpu_state(off, &s1), *sb = gpu_state(on, &s2);
    CHECK(n1 == n2 && s1 == s2 && s1 > 0);
    size_t n = n1 < n2 ? n1 : n2, s = s1 < s2 ? s1 : s2;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&a[i], &b[i], sizeof *a) != 0;
    double rel = gpu_relative_difference(b, a, n), rel_state = gpu_relative_difference(sb, sa, s);
    double acc_off = accuracy(off), acc_on = accuracy(on);
    gpu_report("sync_bn = on over one NCCL rank against sync_bn = off (cuDNN), one epoch of SGD: parameters %.3g "
               "relative (%zu of %zu differ in bits), running statistics %.3g, test accuracy %.4f against %.4f; "
               "backend: %s\n", rel, differ, n, rel_state, acc_on, acc_off, ct_backend_reason(on));
    CHECK_MSG(rel <= TOL_PARAMS, "parameters differ by %g relative", rel);
    CHECK_MSG(rel_state <= TOL_PARAMS, "running statistics differ by %g relative", rel_state);
    CHECK_MSG(fabs(acc_on - acc_off) <= TOL_ACCURACY, "test accuracy %.4f against %.4f", acc_on, acc_off);
    CHECK_MSG(acc_on > 0.4, "test accuracy %.4f: the network did not learn (chance is 0.1)", acc_on);
    CHECK_MSG(differ > 0, "the parameters are cuDNN's bit for bit: the synced path did not run");
    free(a);
    free(b);
    free(sa);
    free(sb);
    ct_close(off);
    ct_close(on);
    return ct_test_done();
}

#else
#include "tests/no_cuda_main.h"
#endif
