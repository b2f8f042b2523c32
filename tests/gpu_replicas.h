/* What the NCCL replica tests share (test_gpu_nccl_one.c, test_gpu_nccl_replicas.c): a small MLP
 * on a Fashion-MNIST subset whose 2010 samples at batch 100 end with a partial batch of 10 (the
 * replicas' weighted mean), opened on given devices, and its parameters read back from a
 * replica's GPU. No batch norm, dropout or augmentation: one replica's step is the others' mean.
 * No convolution either, so no cuDNN algorithm search: two networks opened apart at one batch run
 * the same cuBLASLt algorithms (chosen by heuristic, not by timing). comm_timeout = 20 s: a
 * collective that stalls is named by the communicator's watchdog well inside ctest's timeout.
 * Include inside #ifdef CUTRAIN_HAVE_CUDA, after tests/gpu_test.h. */
#ifndef CT_GPU_REPLICAS_H
#define CT_GPU_REPLICAS_H

#include <string.h>

#include "api/handle.h"
#include "tests/test_util.h"

static const char *const GPU_MLP =
    "[data]\nformat = idx\ntrain = %s/train-images-idx3-ubyte.gz\ntrain_labels = %s/train-labels-idx1-ubyte.gz\n"
    "test = %s/t10k-images-idx3-ubyte.gz\ntest_labels = %s/t10k-labels-idx1-ubyte.gz\n"
    "normalize = 0.2860, 0.3530\ntrain_limit = 2010\ntest_limit = 2000\n"
    "[train]\nepochs = 1\nbatch = 100\noptimizer = adam\nlearning_rate = 0.002\ncomm_timeout = 20\n"
    "[flat]\ntype = flatten\n"
    "[fc1]\ntype = dense\nunits = 64\nactivation = relu\n"
    "[out]\ntype = dense\nunits = 10\n";

/* The MLP on `devices` with [train] comm = `comm`, trained for its one epoch. */
static inline ct_net *gpu_mlp_fit(const char *devices, const char *comm)
{
    static char text[4096];
    const char *d = ct_fmnist_dir();
    snprintf(text, sizeof text, GPU_MLP, d, d, d, d);
    ct_net *net = NULL;
    CHECK(ct_open_string(text, "gpu_replicas.ini", &net) == CT_OK);
    CHECK(ct_set(net, "train.devices", devices) == CT_OK);
    CHECK(ct_set(net, "train.comm", comm) == CT_OK);
    CHECK_MSG(ct_fit(net, NULL) == CT_OK, "devices = %s, comm = %s: %s", devices, comm, ct_errmsg(net));
    return net;
}

/* Replica rank's parameters, copied from its GPU into a new host buffer of *count floats. */
static inline float *gpu_params(ct_net *net, int rank, size_t *count)
{
    const ct_tensor *p = &net->run.replicas[rank].graph.params;
    *count = p->count;
    float *host = xmalloc(ct_tensor_bytes(p));
    GPU_OK(cudaSetDevice(net->run.replicas[rank].dev->ordinal));
    GPU_OK(cudaDeviceSynchronize());
    GPU_OK(cudaMemcpy(host, p->data, ct_tensor_bytes(p), cudaMemcpyDeviceToHost));
    return host;
}

#endif
