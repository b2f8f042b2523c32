/* The public face: handles, status codes, per-handle messages (cutrain.h). */
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "base/event_file.h"
#include "base/file.h"
#include "registry.h"
#include "train/batch_search.h"
#include "train/comms.h"
#include "train/decode_share.h"
#include "train/memory.h"
#include "train/monitor.h"
#include "train/optim.h"
#include "train/world.h"

#define CT_MAX_CONFIG_BYTES ((size_t)16 << 20)

const char *ct_version(void)
{
    return CT_VERSION_STRING;
}

const char *ct_status_name(ct_status status)
{
    static const char *const names[] = {
        "ok", "usage error", "config error", "I/O error", "data error",
        "out of memory", "backend error", "numeric error", "stopped", "internal error",
    };
    if ((unsigned)status < sizeof names / sizeof names[0])
        return names[status];
    return "unknown status";
}

const char *ct_errmsg(const ct_net *net)
{
    if (!net)
        return "out of memory (no handle)";
    return net->run.err.msg;
}

/* Both opens start here: *out gets the handle even when the open then fails, for ct_errmsg. */
static ct_net *new_handle(ct_net **out)
{
    ct_net *net = calloc(1, sizeof *net);
    *out = net;
    if (net)
        net->run.handle = net;
    return net;
}

ct_status ct_open_string(const char *text, const char *name, ct_net **out)
{
    if (!out)
        return CT_ERR_USAGE;
    ct_net *net = new_handle(out);
    if (!net)
        return CT_ERR_NOMEM;
    if (!text)
        net->open_status = ct_fail(&net->run.err, CT_ERR_USAGE, "ct_open_string: text is NULL");
    else
        net->open_status = ct_ini_parse(&net->ini, text, name ? name : "<string>", &net->run.err);
    return net->open_status;
}

/* Reads a whole config file; *text is NUL-terminated. */
static ct_status read_file(const char *path, char **text, ct_err *err)
{
    uint8_t *buf;
    size_t len;
    /* a pipe is read once, within the bound (bash's <(...), /dev/stdin) */
    ct_status st = ct_file_read(path, CT_FILE_STREAM, CT_MAX_CONFIG_BYTES, "a config file", &buf, &len, err);
    if (st == CT_ERR_DATA)
        return ct_fail(err, CT_ERR_CONFIG, "%s: too large for a config file (over 16 MiB)", path);
    if (st != CT_OK)
        return st;
    if (memchr(buf, '\0', len)) {
        free(buf);
        return ct_fail(err, CT_ERR_CONFIG, "%s: not a text file (it holds NUL bytes)", path);
    }
    *text = (char *)buf;
    return CT_OK;
}

ct_status ct_open_file(const char *path, ct_net **out)
{
    if (!out)
        return CT_ERR_USAGE;
    ct_net *net = new_handle(out);
    if (!net)
        return CT_ERR_NOMEM;
    if (!path)
        return net->open_status = ct_fail(&net->run.err, CT_ERR_USAGE, "ct_open_file: path is NULL");
    char *text = NULL;
    ct_status st = read_file(path, &text, &net->run.err);
    if (st == CT_OK)
        st = ct_ini_parse(&net->ini, text, path, &net->run.err);
    free(text);
    return net->open_status = st;
}

static void release_run(ct_net *net)
{
    /* the pipeline's ring may be the backend's pinned memory: it goes first */
    ct_pipeline_destroy(net->run.pipeline);
    net->run.pipeline = NULL;
    ct_replica_threads_stop(net->run.threads);
    net->run.threads = NULL;
    for (int i = 0; i < net->run.n_replicas; i++)
        ct_replica_close(&net->run.replicas[i]);
    free(net->run.replicas);
    net->run.replicas = NULL;
    net->run.n_replicas = 0;
    if (net->run.comm)
        net->run.comm->ops->destroy(net->run.comm);
    net->run.comm = NULL;
    ct_world_close(net->run.world);
    net->run.world = NULL;
    ct_dataset_free(&net->run.train);
    ct_dataset_free(&net->run.test);
    free(net->run.order);
    free(net->run.eval_order);
    net->run.order = net->run.eval_order = NULL;
}

void ct_close(ct_net *net)
{
    if (!net)
        return;
    release_run(net);
    ct_net_forget_class_names(net);
    ct_event_file_close(net->run.tensorboard);
    ct_graph_free(&net->run.graph);
    ct_config_free(&net->run.cfg);
    ct_ini_free(&net->ini);
    free(net);
}

ct_status ct_set(ct_net *net, const char *section_dot_key, const char *value)
{
    if (!net)
        return CT_ERR_USAGE;
    if (net->open_status != CT_OK)
        return net->open_status;
    if (!section_dot_key || !value)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_set: key and value are required");
    if (net->run.graph_built)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_set %s: the network is already prepared; set keys before",
                       section_dot_key);
    return ct_ini_set(&net->ini, section_dot_key, value, &net->run.err);
}

ct_status ct_inject_alloc_failures(ct_net *net, long skip, long count)
{
    if (!net || skip < 0 || count < 0)
        return CT_ERR_USAGE;
    if (net->prepared)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_inject_alloc_failures: the devices exist already; call it "
                                                "before ct_prepare");
    net->alloc_fault = (ct_alloc_fault){.skip = skip, .count = count};
    return CT_OK;
}

/* Joins the processes' world of an mpirun / srun launch: MPI starts here, as soon as the config
 * gives comm_timeout and before any file is read, since MPI_Init waits for every process to reach
 * it, without a timeout; a process stalled later is caught by the join's. */
static ct_status open_world(ct_net *net)
{
    int rank, size, local;
    ct_world_launcher(&rank, &size, &local);
    if (size <= 1 || net->run.world)
        return CT_OK;
    return ct_world_open(&net->run.world, net->run.cfg.train.comm_timeout, &net->run.err);
}

/* The network's output disagrees with the class count the labels gave: where that count came from,
 * so that a stray label (255 in a 10-class file) is seen as the data's fault, not the network's. */
static void explain_classes(ct_net *net)
{
    char where[600];
    ct_data_largest_label(&net->run.cfg.data, where, sizeof where);
    size_t used = strlen(net->run.err.msg);
    if (where[0] && used < sizeof net->run.err.msg - 1)
        snprintf(net->run.err.msg + used, sizeof net->run.err.msg - used,
                 " (from the labels: %s; a label file with a wrong value, or an output layer of the wrong width)",
                 where);
}

ct_status ct_net_build_graph(ct_net *net)
{
    if (net->run.graph_built)
        return CT_OK;
    if (net->open_status != CT_OK)
        return net->open_status;
    ct_status st = ct_config_load(&net->run.cfg, &net->ini, &net->run.err);
    if (st == CT_OK)
        st = open_world(net);
    if (st != CT_OK) {
        ct_config_free(&net->run.cfg);
        return st;
    }
    ct_shape shape;
    int classes;
    st = ct_data_probe(&net->run.cfg.data, &shape, &classes, &net->run.err);
    if (st == CT_OK)
        st = ct_graph_build(&net->run.graph, &net->run.cfg, shape, classes, &net->run.err);
    if (st != CT_OK && net->run.graph.classes_mismatch)
        explain_classes(net);
    if (st != CT_OK) {
        ct_graph_free(&net->run.graph);
        ct_config_free(&net->run.cfg);
        return st;
    }
    net->run.graph_built = 1;
    return CT_OK;
}

static size_t memory_limit(const ct_train_config *t)
{
    return t->memory == CT_MEMORY_LIMIT ? (size_t)t->memory_limit_mib << 20 : 0;
}

/* [train] memory onto a new device's allocator, before anything is allocated on it (the backend's own
 * buffers included). */
static ct_status apply_memory(ct_net *net, ct_device *dev)
{
    const ct_train_config *t = &net->run.cfg.train;
    ct_devmem_policy policy = t->memory == CT_MEMORY_LIMIT         ? CT_DEVMEM_LIMIT
                            : t->memory == CT_MEMORY_PREALLOCATE ? CT_DEVMEM_PREALLOCATE
                                                                 : CT_DEVMEM_GROW;
    return dev->ops->set_memory(dev, policy, memory_limit(t), &net->run.err);
}

/* [train]'s options for a backend. */
static ct_backend_options backend_options(const ct_train_config *t)
{
    return (ct_backend_options){.capture = t->capture != 0, .allow_tf32 = t->tf32 != 0,
                                .deterministic = t->deterministic, .allow_winograd = t->winograd != 0,
                                .allow_sparse_backward = t->sparse_backward != 0};
}

/* The ordinals `devices` names among `count` visible GPUs (all: every one), or -1 after failing
 * when it names a missing device or the GPUs do not split the batch. */
static int gpu_list(ct_net *net, int count, int *ordinals)
{
    const ct_train_config *t = &net->run.cfg.train;
    const char *devices = t->devices;
    int n = 0;
    if (strcmp(devices, "all") == 0) {
        for (n = 0; n < count && n < CT_MAX_REPLICAS; n++)
            ordinals[n] = n;
    } else {
        for (const char *p = devices; *p && n < CT_MAX_REPLICAS; p = strchr(p, ',') ? strchr(p, ',') + 1 : "") {
            int ordinal = atoi(p);
            if (ordinal >= count) {
                ct_config_fail_train(&net->run.err, CT_ERR_CONFIG, &net->run.cfg, t->devices_line, "devices",
                           "devices = %s: there is no CUDA device %d (%d visible; CUDA_VISIBLE_DEVICES %s)", devices,
                           ordinal, count, getenv("CUDA_VISIBLE_DEVICES") ? "is set" : "is not set");
                return -1;
            }
            ordinals[n++] = ordinal;
        }
    }
    /* the list's count was checked against batch with the config; all's is known only now */
    if (n > 1 && (t->batch_mode != CT_BATCH_FIXED || t->batch % n != 0)) {
        ct_config_fail_train(&net->run.err, CT_ERR_CONFIG, &net->run.cfg, t->devices_line, "devices",
                   "devices = %s: %d GPUs train one replica each, and batch = %s does not split over them: give the "
                   "global batch as a multiple of %d", devices, n,
                   t->batch_mode == CT_BATCH_MAX ? "max" : t->batch_mode == CT_BATCH_AUTO ? "auto" : "that number", n);
        return -1;
    }
    return n;
}

/* GPU `device`'s device and backend, with [train]'s options (a GPU was counted: the registry has
 * a GPU backend). */
static ct_status open_gpu_one(ct_net *net, int device, ct_device **dev, ct_backend **be)
{
    const ct_gpu_backend *gpu = ct_registry_gpu();
    ct_backend_options opt = backend_options(&net->run.cfg.train);
    /* half precision needs the tensor cores its kernels are chosen for: refused before any
     * allocation, naming the [train] precision setting, the GPU and its capability */
    if (net->run.cfg.train.precision != CT_PREC_FP32) {
        int major = 0, minor = 0;
        char name[96] = "";
        ct_status cst = gpu->capability(device, &major, &minor, &net->run.err);
        if (cst == CT_OK)
            cst = gpu->name(device, name, sizeof name, NULL, &net->run.err);
        if (cst != CT_OK)
            return cst;
        const char *needs = gpu->precision_needs((int)net->run.cfg.train.precision, major, minor);
        if (needs)
            return ct_fail_at(&net->run.err, CT_ERR_CONFIG, net->run.cfg.file, net->run.cfg.train.line,
                              "[train] precision = %s: CUDA device %d (%s) has compute capability %d.%d, and %s "
                              "needs %s or newer (its tensor cores); use precision = fp32 on this GPU",
                              ct_precision_name(net->run.cfg.train.precision), device, name, major, minor,
                              ct_precision_name(net->run.cfg.train.precision), needs);
    }
    ct_status st = gpu->device_create(dev, device, &net->run.err);
    if (st == CT_OK)
        st = apply_memory(net, *dev);
    if (st == CT_OK)
        st = gpu->backend_create(be, *dev, &opt, &net->run.err);
    return st;
}

static ct_status open_gpu(ct_net *net, int count, ct_device **dev, ct_backend **be)
{
    int ordinals[CT_MAX_REPLICAS];
    int n = gpu_list(net, count, ordinals);
    if (n < 1)
        return n < 0 ? CT_ERR_CONFIG : ct_fail(&net->run.err, CT_ERR_CONFIG, "devices = %s names no GPU",
                                                 net->run.cfg.train.devices);
    memcpy(net->gpu_ordinals, ordinals, (size_t)n * sizeof *ordinals);
    net->n_gpus = n;
    ct_status st = open_gpu_one(net, ordinals[0], dev, be);
    if (st != CT_OK)
        return st;
    char name[96] = "";
    size_t total = 0;
    ct_err ignored;
    ct_registry_gpu()->name(ordinals[0], name, sizeof name, &total, &ignored);
    snprintf(net->backend_reason, sizeof net->backend_reason, "devices = %s: CUDA device %d (%s, %.1f GiB), graph %s",
             net->run.cfg.train.devices, ordinals[0], name, (double)total / (1024.0 * 1024.0 * 1024.0),
             (*be)->capture ? "on" : "off");
    return CT_OK;
}

static ct_status open_cpu(ct_net *net, ct_device **dev, ct_backend **be)
{
    ct_status st = ct_cpu_device_create(dev, &net->run.err);
    if (st == CT_OK)
        st = apply_memory(net, *dev);
    ct_backend_options opt = backend_options(&net->run.cfg.train);
    if (st == CT_OK)
        st = ct_cpu_backend_create(be, *dev, &opt, &net->run.err);
    if (st == CT_OK && net->run.cfg.train.memory == CT_MEMORY_PREALLOCATE)
        ct_backend_add_note(*be, "memory = preallocate acts as grow on the CPU: reserving the free host memory "
                                 "would take it from every other process");
    return st;
}

/* Picks the device and its backend from `devices`; the reason is reported by the command. */
static ct_status choose_backend(ct_net *net, ct_device **dev, ct_backend **be)
{
    const char *devices = net->run.cfg.train.devices;
    if (strcmp(devices, "cpu") == 0) {
        snprintf(net->backend_reason, sizeof net->backend_reason, "devices = cpu");
        return open_cpu(net, dev, be);
    }
    const ct_gpu_backend *gpu = ct_registry_gpu();
    if (!gpu) {
        snprintf(net->backend_reason, sizeof net->backend_reason,
                 "devices = %s: this build has no CUDA backend, so the CPU trains", devices);
        return open_cpu(net, dev, be);
    }
    int count = 0;
    char why[160] = "";
    gpu->devices(&count, why, sizeof why); /* a failure is a reason to use the CPU */
    if (count > 0)
        return open_gpu(net, count, dev, be);
    snprintf(net->backend_reason, sizeof net->backend_reason, "devices = %s: no CUDA device (%s), so the CPU trains",
             devices, why);
    return open_cpu(net, dev, be);
}

/* A device and its backend opened for a replica or a question, released together (either may be
 * NULL when opening failed part way). */
static void close_pair(ct_device *dev, ct_backend *be)
{
    if (be)
        be->ops->destroy(be);
    if (dev)
        dev->ops->destroy(dev);
}

/* Replicas 1 .. n-1, each a device and backend of its own: the CPU's for devices = cpu:N, the
 * listed GPUs' otherwise. */
static ct_status open_more_replicas(ct_net *net, int n, int on_gpu)
{
    for (int i = 1; i < n; i++) {
        ct_device *dev = NULL;
        ct_backend *be = NULL;
        ct_status st = on_gpu ? open_gpu_one(net, net->gpu_ordinals[i], &dev, &be) : open_cpu(net, &dev, &be);
        if (st != CT_OK) {
            close_pair(dev, be);
            return st;
        }
        dev->fault = net->alloc_fault;
        net->run.replicas[i] = (ct_replica){.rank = i, .dev = dev, .be = be};
        net->run.n_replicas = i + 1;
    }
    /* replica 0's device stays current on this thread, which resolves, binds and evaluates on it */
    return net->run.replicas[0].dev->ops->activate(net->run.replicas[0].dev, &net->run.err);
}

/* The communicator of n replicas on replica 0's kind of device: NCCL over GPUs when there are
 * several or comm = nccl asks for it, shared memory over CPU replicas, else none. */
static ct_status open_comm(ct_net *net, int n)
{
    const ct_train_config *t = &net->run.cfg.train;
    int on_gpu = !net->run.replicas[0].dev->host_memory;
    if (on_gpu && (n > 1 || t->comm == CT_COMM_NCCL)) {
        ct_backend *bes[CT_MAX_REPLICAS];
        for (int i = 0; i < n; i++)
            bes[i] = net->run.replicas[i].be;
        return ct_registry_gpu()->comm_create(&net->run.comm, bes, n, t->comm_timeout, &net->run.err);
    }
    if (t->comm == CT_COMM_NCCL)
        return ct_fail_at(&net->run.err, CT_ERR_CONFIG, net->run.cfg.file, t->line,
                          "comm = nccl needs CUDA devices, and %s", net->backend_reason);
    return n > 1 ? ct_comm_local_create(&net->run.comm, n, t->comm_timeout, &net->run.err)
                 : ct_comm_single_create(&net->run.comm, &net->run.err);
}

/* OpenMP threads of each replica's host thread: [train] threads (else every core) shared out. */
static int threads_per_replica(const ct_net *net)
{
    int total = net->run.cfg.train.threads > 0 ? net->run.cfg.train.threads : omp_get_max_threads();
    int each = total / net->run.n_replicas;
    return each > 0 ? each : 1;
}

/* Under mpirun / srun with GPUs: each process trains on one GPU, the listed GPU at its rank on
 * its machine (devices = all: every visible GPU is listed), as one process per GPU is launched.
 * choose_backend opened the first listed; another is opened in its place. */
static ct_status take_local_gpu(ct_net *net, int size, ct_device **dev, ct_backend **be)
{
    int rank = 0, world = 0, local = 0;
    ct_world_launcher(&rank, &world, &local);
    if (local >= net->n_gpus)
        return ct_config_fail_train(&net->run.err, CT_ERR_CONFIG, &net->run.cfg, net->run.cfg.train.devices_line,
                                    "devices",
                          "devices = %s in one of %d processes (mpirun, srun): rank %d is process %d on its machine, "
                          "but devices lists %d GPU%s there; launch one process per GPU", net->run.cfg.train.devices,
                          size, rank, local, net->n_gpus, net->n_gpus == 1 ? "" : "s");
    if (local == 0)
        return CT_OK;
    close_pair(*dev, *be);
    *dev = NULL;
    *be = NULL;
    ct_status st = open_gpu_one(net, net->gpu_ordinals[local], dev, be);
    if (st == CT_OK)
        snprintf(net->backend_reason, sizeof net->backend_reason, "devices = %s: CUDA device %d, graph %s",
                 net->run.cfg.train.devices, net->gpu_ordinals[local], (*be)->capture ? "on" : "off");
    return st;
}

/* GPU processes reduce with NCCL: rank 0 makes NCCL's unique id and sends it to the others over
 * MPI (within comm_timeout), then every process creates its rank of the communicator. */
static ct_status open_process_nccl(ct_net *net, int rank, int size)
{
    const ct_gpu_backend *gpu = ct_registry_gpu();
    if (!gpu)
        return ct_fail(&net->run.err, CT_ERR_INTERNAL, "GPU processes in a build without CUDA");
    unsigned char id[CT_GPU_COMM_ID_BYTES] = {0};
    ct_status st = rank == 0 ? gpu->comm_unique_id(id, &net->run.err) : CT_OK;
    if (st == CT_OK)
        st = ct_world_broadcast(net->run.world, id, sizeof id, 0, "NCCL's unique id", &net->run.err);
    if (st == CT_OK)
        st = gpu->comm_create_rank(&net->run.comm, size, rank, id, net->run.replicas[0].be,
                                   net->run.cfg.train.comm_timeout, &net->run.err);
    return st;
}

/* Under mpirun / srun: what one process of several can train, refused before any data loads.
 * Each process is one replica; batch stays the global batch. */
static ct_status check_process_config(ct_net *net, int size)
{
    const ct_train_config *t = &net->run.cfg.train;
    if (t->replicas > 1)
        return ct_config_fail_train(&net->run.err, CT_ERR_CONFIG, &net->run.cfg, t->devices_line, "devices",
                          "devices = cpu:%d in one of %d processes (mpirun, srun): each process trains one replica, "
                          "so use devices = cpu (the %d processes then train %d replicas)", t->replicas, size, size,
                          size);
    if (t->batch_mode != CT_BATCH_FIXED)
        return ct_config_fail_train(&net->run.err, CT_ERR_CONFIG, &net->run.cfg, t->batch_line, "batch",
                          "batch = %s in one of %d processes (mpirun, srun): the batch search runs one device; give "
                          "the global batch as a number (a multiple of %d)",
                          t->batch_mode == CT_BATCH_MAX ? "max" : "auto", size, size);
    if (t->batch % size != 0) {
        int lower = t->batch / size * size;
        return ct_config_fail_train(&net->run.err, CT_ERR_CONFIG, &net->run.cfg, t->batch_line, "batch",
                          "batch = %d does not split evenly over %d processes (mpirun, srun): batch is the global "
                          "batch, each process takes batch / %d; use %d or %d", t->batch, size, size,
                          lower > 0 ? lower : size, lower + size);
    }
    return CT_OK;
}


/* This process's replica, rank r of P: one CPU replica bound at batch / P, the join (the first
 * exchange, bounded by comm_timeout), then rank 0's initial state broadcast. */
static ct_status open_process_replica(ct_net *net)
{
    const ct_train_config *t = &net->run.cfg.train;
    int rank = ct_world_rank(net->run.world), size = ct_world_size(net->run.world);
    ct_device *dev = NULL;
    ct_backend *be = NULL;
    ct_status st = choose_backend(net, &dev, &be);
    int on_gpu = st == CT_OK && !dev->host_memory;
    if (on_gpu)
        st = take_local_gpu(net, size, &dev, &be);
    net->run.replicas = st == CT_OK ? calloc(1, sizeof *net->run.replicas) : NULL;
    if (st == CT_OK && !net->run.replicas)
        st = ct_fail(&net->run.err, CT_ERR_NOMEM, "out of memory for replicas");
    if (st != CT_OK) {
        close_pair(dev, be);
        return st;
    }
    dev->fault = net->alloc_fault;
    net->run.n_replicas = 1;
    net->run.replicas[0] = (ct_replica){.rank = rank, .dev = dev, .be = be};
    st = dev->ops->activate(dev, &net->run.err);
    if (st == CT_OK)
        st = on_gpu ? open_process_nccl(net, rank, size)
                    : ct_comm_mpi_create(&net->run.comm, net->run.world, &net->run.err);
    if (st == CT_OK)
        st = ct_batch_resolve(&net->run, &net->run.batch);
    if (st == CT_OK) {
        net->run.cfg.train.lr_factor = ct_lr_factor(&net->run.cfg.train, net->run.batch);
        st = ct_memory_check_plan(&net->run, &net->run.replicas[0], net->run.batch / size, 1);
    }
    if (st == CT_OK)
        st = ct_replica_bind(&net->run.replicas[0], &net->run.cfg, net->run.graph.input, net->run.graph.classes,
                             net->run.batch / size, t->seed, memory_limit(t), &net->run.err);
    if (st == CT_OK && t->precision == CT_PREC_FP16) {
        ct_scaler s = ct_train_scaler_start(t);
        st = be->ops->scaler_set(be, &s, &net->run.err);
    }
    if (st == CT_OK) {
        char *agreed = NULL;
        st = ct_run_agreement(&net->run, CT_VERSION_STRING, net->run.resumed, &agreed, &net->run.err);
        if (st == CT_OK)
            st = ct_world_join(net->run.world, agreed, &net->run.err);
        free(agreed);
    }
    if (st == CT_OK) {
        ct_train_apply_threads(&net->run);
        int threads = omp_get_max_threads();
        size_t used = on_gpu ? strlen(net->backend_reason) : 0;
        if (on_gpu)
            snprintf(net->backend_reason + used, sizeof net->backend_reason - used,
                     "; rank %d of %d processes, one GPU each (NCCL), global batch %d (%d per replica)", rank, size,
                     net->run.batch, net->run.batch / size);
        else
            snprintf(net->backend_reason, sizeof net->backend_reason,
                     "devices = %s: rank %d of %d processes, one CPU replica each, %d thread%s, global batch %d (%d "
                     "per replica)", t->devices, rank, size, threads, threads == 1 ? "" : "s", net->run.batch,
                     net->run.batch / size);
        st = ct_train_broadcast_state(&net->run, &net->run.err);
    }
    return st;
}

/* The replicas and their communicator; the batch is resolved on replica 0's device (batch = max |
 * auto run their real steps there; several replicas take a fixed global batch) before the run's
 * binding, and lr_scaling follows the batch found. Every replica is bound at its share of the
 * global batch; replica 0's initial state is then broadcast. */
static ct_status open_replicas(ct_net *net)
{
    if (net->run.world)
        return open_process_replica(net);
    const ct_train_config *t = &net->run.cfg.train;
    ct_device *dev = NULL;
    ct_backend *be = NULL;
    ct_status st = choose_backend(net, &dev, &be);
    if (st != CT_OK) {
        close_pair(dev, be);
        return st;
    }
    int on_gpu = !dev->host_memory;
    int n = on_gpu ? (net->n_gpus > 0 ? net->n_gpus : 1)
                   : strcmp(t->devices, "cpu") == 0 && t->replicas > 1 ? t->replicas : 1;
    dev->fault = net->alloc_fault;
    net->run.replicas = calloc((size_t)n, sizeof *net->run.replicas);
    if (!net->run.replicas) {
        close_pair(dev, be);
        return ct_fail(&net->run.err, CT_ERR_NOMEM, "out of memory for replicas");
    }
    net->run.n_replicas = 1;
    net->run.replicas[0] = (ct_replica){.rank = 0, .dev = dev, .be = be};
    st = dev->ops->activate(dev, &net->run.err);
    /* several replicas take a fixed batch: only one replica's batch search runs steps, with its
     * communicator (comm = nccl's one rank included) */
    if (st == CT_OK && n > 1)
        st = open_more_replicas(net, n, on_gpu);
    if (st == CT_OK)
        st = open_comm(net, n);
    if (st == CT_OK)
        st = ct_batch_resolve(&net->run, &net->run.batch);
    if (st == CT_OK) {
        net->run.cfg.train.lr_factor = ct_lr_factor(&net->run.cfg.train, net->run.batch);
        /* an allocation failure here is explained by the binding (device, batch, plan); each
         * replica's device is current while it binds, replica 0's again after. A plan over the
         * budget is refused first: CPU replicas share the host's memory, GPUs have their own. */
        for (int i = 0; i < n && st == CT_OK; i++) {
            st = net->run.replicas[i].dev->ops->activate(net->run.replicas[i].dev, &net->run.err);
            if (st == CT_OK && (on_gpu || i == 0))
                st = ct_memory_check_plan(&net->run, &net->run.replicas[i], net->run.batch / n, on_gpu ? 1 : n);
            if (st == CT_OK)
                st = ct_replica_bind(&net->run.replicas[i], &net->run.cfg, net->run.graph.input, net->run.graph.classes,
                                     net->run.batch / n, t->seed, memory_limit(t), &net->run.err);
        }
        if (st == CT_OK)
            st = dev->ops->activate(dev, &net->run.err);
    }
    for (int i = 0; i < n && st == CT_OK && t->precision == CT_PREC_FP16; i++) {
        ct_scaler s = ct_train_scaler_start(t);
        st = net->run.replicas[i].dev->ops->activate(net->run.replicas[i].dev, &net->run.err);
        if (st == CT_OK)
            st = net->run.replicas[i].be->ops->scaler_set(net->run.replicas[i].be, &s, &net->run.err);
    }
    if (st == CT_OK)
        st = dev->ops->activate(dev, &net->run.err);
    if (st == CT_OK && n > 1) {
        int each = threads_per_replica(net);
        size_t used = strlen(net->backend_reason);
        if (on_gpu)
            snprintf(net->backend_reason + used, sizeof net->backend_reason - used,
                     "; %d GPU replicas (NCCL), global batch %d (%d per replica)", n, net->run.batch,
                     net->run.batch / n);
        else
            snprintf(net->backend_reason, sizeof net->backend_reason,
                     "devices = cpu:%d: %d CPU replicas, %d thread%s each, global batch %d (%d per replica)", n, n,
                     each, each == 1 ? "" : "s", net->run.batch, net->run.batch / n);
        st = ct_replica_threads_start(&net->run.threads, n, each, net->run.comm, &net->run.err);
        if (st == CT_OK)
            st = ct_train_broadcast_state(&net->run, &net->run.err);
    } else if (st == CT_OK && on_gpu && t->comm == CT_COMM_NCCL) {
        size_t used = strlen(net->backend_reason);
        snprintf(net->backend_reason + used, sizeof net->backend_reason - used, "; comm = nccl: NCCL with one rank");
    }
    return st;
}

static ct_status allocate_host(ct_net *net)
{
    int batch = net->run.batch;
    net->run.order = malloc((size_t)(net->run.train.count > 0 ? net->run.train.count : 1) * sizeof *net->run.order);
    net->run.eval_order = malloc((size_t)batch * sizeof *net->run.eval_order);
    if (!net->run.order || !net->run.eval_order)
        return ct_fail(&net->run.err, CT_ERR_NOMEM, "out of memory for batch staging at batch %d", batch);
    return CT_OK;
}

/* Appends "; text" to the reason the log and the summary show. */
static void add_reason(ct_net *net, const char *text)
{
    size_t used = strlen(net->backend_reason);
    snprintf(net->backend_reason + used, sizeof net->backend_reason - used, "; %s", text);
}

/* [data] gpu_decode_cpu_share: the share of each batch the workers still decode, as set or (auto)
 * measured now, said on the backend line. */
static ct_status choose_cpu_share(ct_net *net, ct_pipeline_config *pc)
{
    char line[256];
    double set = net->run.cfg.data.gpu_decode_cpu_share;
    if (set >= 0) {
        pc->cpu_share = set;
        snprintf(line, sizeof line, "CPU share %.2f (gpu_decode_cpu_share)", set);
        add_reason(net, line);
        return CT_OK;
    }
    ct_decode_share m;
    ct_err e;
    ct_err_clear(&e);
    if (ct_decode_share_measure(&net->run, pc, &m, &e) != CT_OK)
        return ct_fail(&net->run.err, e.status, "[data] gpu_decode_cpu_share = auto, measuring: %s", e.msg);
    pc->cpu_share = m.share;
    if (m.images == 0)
        snprintf(line, sizeof line, "CPU share 0 (no image of the measured sample goes to the device)");
    else
        snprintf(line, sizeof line,
                 "CPU share %.2f, measured on %d images (per image: %.2f ms decoded by a worker, %.2f ms handed "
                 "over, %.2f ms on the device; %d workers)",
                 m.share, m.images, 1e3 * m.cpu_s, 1e3 * m.handover_s, 1e3 * m.device_s, m.workers);
    add_reason(net, line);
    return CT_OK;
}

/* [data] decode = gpu | auto: the backends' image decoders, made ready here, outside any step, so
 * that the workers leave the JPEGs they take compressed (pc->encoded). gpu without one is an
 * error; auto then decodes on the CPU. Either way the reason says where images are decoded. */
static ct_status choose_decoder(ct_net *net, ct_pipeline_config *pc)
{
    const ct_data_settings *dc = &net->run.cfg.data;
    if (dc->decode == CT_DECODE_AT_CPU || !ct_dataset_can_encode(&net->run.train))
        return CT_OK;
    int gpu = dc->decode == CT_DECODE_AT_GPU;
    ct_err e;
    ct_err_clear(&e);
    char why[sizeof e.msg] = "", info[256] = "";
    for (int i = 0; i < net->run.n_replicas && !why[0]; i++)
        if (!net->run.replicas[i].be->ops->image_decoder)
            snprintf(why, sizeof why, "the %s backend has no image decoder", net->run.replicas[i].be->ops->name);
    if (!why[0] && !pc->raw_u8)
        snprintf(why, sizeof why, "augment_on = cpu: the workers normalise the images, so they decode them too");
    for (int i = 0; i < net->run.n_replicas && !why[0]; i++) {
        ct_backend *be = net->run.replicas[i].be;
        if (be->ops->image_decoder(be, info, sizeof info, &e) != CT_OK)
            snprintf(why, sizeof why, "%s", e.msg);
    }
    if (why[0] && gpu)
        return ct_fail(&net->run.err, e.status == CT_ERR_NOMEM ? CT_ERR_NOMEM : CT_ERR_CONFIG,
                       "[data] decode = gpu: %s; use decode = cpu, or auto to fall back to it", why);
    char line[sizeof why + 64];
    if (why[0]) {
        snprintf(line, sizeof line, "decode = auto: on the CPU (%s)", why);
        add_reason(net, line);
        return CT_OK;
    }
    pc->encoded = 1;
    snprintf(line, sizeof line, "decode = %s: %s", gpu ? "gpu" : "auto", info);
    add_reason(net, line);
    return choose_cpu_share(net, pc);
}

/* The training batches' pipeline, and the augmentation parameters a device needs. */
static ct_status open_pipeline(ct_net *net)
{
    ct_pipeline_config pc;
    ct_run_pipeline_config(&net->run, &pc);
    ct_status st = choose_decoder(net, &pc);
    if (st != CT_OK)
        return st;
    if (net->run.cfg.data.augment_on == CT_AUGMENT_ON_GPU && !pc.raw_u8) {
        size_t used = strlen(net->backend_reason);
        snprintf(net->backend_reason + used, sizeof net->backend_reason - used,
                 "; augment_on = gpu without a GPU: the workers augment");
    }
    net->run.pipeline_depth = pc.sync || pc.prefetch == 1 ? 1 : 2;
    ct_augment_params *a = &net->run.augment_params;
    *a = (ct_augment_params){.crop_pad = net->run.augment.crop_pad, .flip = net->run.augment.flip,
                             .channels = net->run.graph.input.c};
    ct_augment_fold(&net->run.augment, a->norm_scale, a->norm_bias);
    return ct_pipeline_create(&net->run.pipeline, &pc, &net->run.err);
}

const char *ct_input_verdict(double share)
{
    return share >= 0.20 ? "highly input-bound" : share >= 0.05 ? "moderately input-bound" : "not input-bound";
}

ct_status ct_prepare(ct_net *net)
{
    if (!net)
        return CT_ERR_USAGE;
    if (net->prepared)
        return CT_OK;
    ct_status st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    ct_err *err = &net->run.err;
    st = net->run.world ? check_process_config(net, ct_world_size(net->run.world)) : CT_OK;
    if (st == CT_OK)
        st = ct_data_load(&net->run.cfg.data, net->run.cfg.train.seed, &net->run.train, &net->run.test, err);
    if (st == CT_OK && net->run.train.count == 0)
        st = ct_fail(err, CT_ERR_DATA, "the training set is empty");
    if (st == CT_OK && (net->run.train.shape.h != net->run.graph.input.h ||
                        net->run.train.shape.w != net->run.graph.input.w ||
                        net->run.train.shape.c != net->run.graph.input.c))
        st = ct_fail(err, CT_ERR_DATA, "the training images are %dx%dx%d but their header said %dx%dx%d",
                     net->run.train.shape.h, net->run.train.shape.w, net->run.train.shape.c, net->run.graph.input.h,
                     net->run.graph.input.w, net->run.graph.input.c);
    if (st == CT_OK && net->run.train.classes > net->run.graph.classes)
        st = ct_fail(err, CT_ERR_DATA, "the training labels go up to %d but the network has %d classes",
                     net->run.train.classes - 1, net->run.graph.classes);
    /* before the replicas: a batch search stages normalised batches */
    if (st == CT_OK)
        ct_augment_from_config(&net->run.augment, &net->run.cfg.data, net->run.graph.input.c);
    if (st == CT_OK)
        st = open_replicas(net);
    if (st == CT_OK)
        st = allocate_host(net);
    if (st == CT_OK)
        st = open_pipeline(net);
    if (st != CT_OK) {
        release_run(net);
        ct_graph_free(&net->run.graph);
        net->run.graph_built = 0;
        ct_config_free(&net->run.cfg);
        return st;
    }
    net->run.last_test_accuracy = -1.0;
    net->prepared = 1;
    return CT_OK;
}

ct_status ct_prepare_inference(ct_net *net)
{
    if (!net)
        return CT_ERR_USAGE;
    if (net->prepared)
        return CT_OK;
    ct_status st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    net->run.inference = 1;
    /* refused before any data loads (ct_batch_resolve words it) */
    if (net->run.cfg.train.batch_mode != CT_BATCH_FIXED)
        return ct_batch_resolve(&net->run, &net->run.batch);
    return ct_prepare(net);
}

ct_status ct_fit(ct_net *net, const ct_callbacks *callbacks)
{
    ct_status st = ct_prepare(net);
    if (st != CT_OK)
        return st;
    net->run.monitor = ct_run_monitor_start(&net->run);
    st = ct_train_fit(&net->run, callbacks);
    ct_monitor_stop(net->run.monitor);
    net->run.monitor = NULL;
    return st;
}

ct_status ct_evaluate(ct_net *net, ct_eval_result *result)
{
    if (!net || !result)
        return CT_ERR_USAGE;
    ct_status st = ct_prepare_inference(net);
    if (st != CT_OK)
        return st;
    if (net->run.test.count == 0)
        return ct_fail(&net->run.err, CT_ERR_CONFIG, "%s: [data] has no test set to evaluate on", net->run.cfg.file);
    return ct_train_evaluate(&net->run, &net->run.test, result);
}

int ct_layer_count(ct_net *net)
{
    if (!net || ct_net_build_graph(net) != CT_OK)
        return -1;
    return net->run.graph.n_layers;
}

ct_status ct_layer_info_get(ct_net *net, int index, ct_layer_info *info)
{
    if (!net || !info)
        return CT_ERR_USAGE;
    ct_status st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    if (index < 0 || index >= net->run.graph.n_layers)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "layer index %d out of range (0..%d)", index,
                       net->run.graph.n_layers - 1);
    const ct_layer *l = &net->run.graph.layers[index];
    *info = (ct_layer_info){
        .name = l->cfg->name, .type = ct_layer_type_name(l->type), .h = l->out.h, .w = l->out.w,
        .c = l->out.c, .params = (long)(l->w_count + l->b_count),
        .flops = l->def->flops(l),
        .activation_bytes = (long)ct_graph_activation_bytes(&net->run.graph, index),
    };
    return CT_OK;
}

const char *ct_backend_name(const ct_net *net)
{
    return net && net->run.n_replicas ? net->run.replicas[0].be->ops->name : "none";
}

const char *ct_backend_reason(const ct_net *net)
{
    return net ? net->backend_reason : "";
}

const char *ct_backend_note(const ct_net *net)
{
    return net && net->run.n_replicas ? net->run.replicas[0].be->note : "";
}

int ct_batch_size(const ct_net *net)
{
    if (!net || !net->run.graph_built)
        return 0;
    return net->prepared ? net->run.batch : net->run.cfg.train.batch;
}

ct_status ct_batch_search_get(ct_net *net, ct_batch_search *out)
{
    if (!net || !out)
        return CT_ERR_USAGE;
    ct_status st = ct_prepare(net);
    if (st == CT_OK)
        *out = net->run.search;
    return st;
}

ct_status ct_lr_scaling_get(ct_net *net, ct_lr_scaling_info *out)
{
    static const char *const rules[] = {"none", "linear", "sqrt"};
    if (!net || !out)
        return CT_ERR_USAGE;
    ct_status st = ct_prepare(net);
    if (st != CT_OK)
        return st;
    const ct_train_config *t = &net->run.cfg.train;
    *out = (ct_lr_scaling_info){
        .rule = rules[t->lr_scaling], .batch = net->run.batch, .base_batch = t->base_batch,
        .learning_rate = t->learning_rate, .factor = t->lr_factor,
        .linear_factor = t->base_batch > 0 ? (double)net->run.batch / (double)t->base_batch : 0.0,
    };
    return CT_OK;
}

long ct_train_images(const ct_net *net)
{
    return net ? net->run.train.count : 0;
}

void ct_train_files_skipped(const ct_net *net, long *hidden, long *not_images)
{
    ct_dataset_skipped(net ? &net->run.train : NULL, hidden, not_images);
}

long ct_bad_image_files(const ct_net *net, const char **paths, long max)
{
    return net ? ct_dataset_bad_files(&net->run.train, paths, max) : 0;
}

/* The device and backend a plan is sized with: the training replica's once prepared; before that,
 * those training would choose (the first listed GPU's, for cuDNN's and cuBLASLt's workspaces, else
 * the CPU's), created without the memory policy, which could reserve the GPU. *owned is 1 when
 * the caller destroys them. */
static ct_status plan_backend(ct_net *net, ct_device **dev, ct_backend **be, int *owned)
{
    *owned = 0;
    if (net->run.n_replicas) {
        *dev = net->run.replicas[0].dev;
        *be = net->run.replicas[0].be;
        return CT_OK;
    }
    *owned = 1;
    *dev = NULL;
    *be = NULL;
    const ct_gpu_backend *gpu = ct_registry_gpu();
    if (gpu && strcmp(net->run.cfg.train.devices, "cpu") != 0) {
        int count = 0;
        gpu->devices(&count, NULL, 0);
        if (count > 0) {
            int ordinals[CT_MAX_REPLICAS];
            if (gpu_list(net, count, ordinals) < 1)
                return CT_ERR_CONFIG;
            int ordinal = ordinals[0];
            ct_backend_options opt = backend_options(&net->run.cfg.train);
            ct_status st = gpu->device_create(dev, ordinal, &net->run.err);
            return st == CT_OK ? gpu->backend_create(be, *dev, &opt, &net->run.err) : st;
        }
    }
    ct_status st = ct_cpu_device_create(dev, &net->run.err);
    ct_backend_options opt = backend_options(&net->run.cfg.train);
    return st == CT_OK ? ct_cpu_backend_create(be, *dev, &opt, &net->run.err) : st;
}

/* max_batch, budget and exceeds_cap of *info (whose total is the plan at info->batch), against
 * dev's free memory or the limit: cap. */
static ct_status fill_budget(ct_net *net, ct_device *dev, ct_backend *be, ct_memory_info *info)
{
    const ct_train_config *t = &net->run.cfg.train;
    size_t budget = 0, cap = 0;
    ct_status st = ct_memory_budget(t, dev, &budget, &cap, &net->run.err);
    if (st != CT_OK)
        return st;
    /* capped by batch_max, else the training set once loaded (before, by nothing but memory) */
    long count = net->run.train.count > 0 ? net->run.train.count : 1L << 22;
    int batch_max = t->batch_max ? t->batch_max : (int)(count < INT_MAX ? count : INT_MAX);
    info->budget = (long long)budget;
    info->max_batch = ct_graph_max_batch(&net->run.graph, be, t->optimizer, budget, batch_max);
    info->exceeds_cap = cap && (size_t)info->total > cap;
    return CT_OK;
}

ct_status ct_memory_info_get(ct_net *net, int batch, ct_memory_info *info)
{
    if (!net || !info || batch < 0)
        return CT_ERR_USAGE;
    ct_status st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    /* the plan asks a backend for its workspace and its own buffers */
    ct_device *dev = NULL;
    ct_backend *be = NULL;
    int owned = 0;
    st = plan_backend(net, &dev, &be, &owned);
    ct_memory_info fit = {0};
    /* a batch still to be searched for: the largest that fits, what batch = max would start from */
    if (st == CT_OK && batch == 0 && !net->prepared && net->run.cfg.train.batch_mode != CT_BATCH_FIXED)
        st = fill_budget(net, dev, be, &fit);
    if (batch == 0)
        batch = net->prepared                                   ? net->run.batch
                : net->run.cfg.train.batch_mode == CT_BATCH_FIXED ? net->run.cfg.train.batch
                                                                                         : fit.max_batch;
    if (batch == 0)
        batch = 8;
    if (st == CT_OK) {
        ct_memory_plan p;
        ct_graph_plan(&net->run.graph, be, batch, net->run.cfg.train.optimizer, &p);
        *info = (ct_memory_info){
            .batch = batch, .params = (long long)p.params, .params_half = (long long)p.params_half,
            .optimizer = (long long)p.optimizer, .state = (long long)p.state, .inputs = (long long)p.inputs,
            .activations = (long long)p.activations, .gradients = (long long)p.gradients,
            .workspace = (long long)p.workspace, .backend = (long long)p.backend,
            .padding = (long long)p.padding, .total = (long long)p.total,
            .fp32 = (long long)p.by_dtype[CT_DTYPE_F32], .fp16 = (long long)p.by_dtype[CT_DTYPE_F16],
            .bf16 = (long long)p.by_dtype[CT_DTYPE_BF16], .int32 = (long long)p.by_dtype[CT_DTYPE_I32],
            .uint8 = (long long)p.by_dtype[CT_DTYPE_U8],
        };
        st = fill_budget(net, dev, be, info);
    }
    if (st == CT_OK)
        info->planned_with = be->ops->name;
    if (owned)   /* made for the question, not the replica's */
        close_pair(dev, be);
    return st;
}

ct_status ct_memory_usage_get(ct_net *net, ct_memory_usage *out)
{
    if (!net || !out)
        return CT_ERR_USAGE;
    if (!net->run.n_replicas)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_memory_usage_get: nothing is allocated before ct_prepare");
    ct_device *dev = net->run.replicas[0].dev;
    ct_devmem_usage u;
    dev->ops->memory_usage(dev, &u);
    *out = (ct_memory_usage){.in_use = (long long)u.in_use, .peak = (long long)u.peak,
                             .reserved = (long long)u.reserved, .cap = (long long)u.cap,
                             .pinned_in_use = (long long)u.host_in_use, .pinned_peak = (long long)u.host_peak};
    return CT_OK;
}
