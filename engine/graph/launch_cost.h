/* The many-small-layers check: each layer's kernel time on a GPU, estimated by a roofline, against
 * the cost of launching its kernels. A layer whose kernels finish faster than they can be
 * launched leaves the GPU idle between launches, and a network of many such layers is bound by
 * launches, not by arithmetic or memory. Pure arithmetic on the built graph: no device needed,
 * so that its tests run on the CPU. Internal to the library (ct_launch_report_get is the public
 * face). */
#ifndef CT_LAUNCH_COST_H
#define CT_LAUNCH_COST_H

#include "graph/graph.h"

/* What a roofline needs of a GPU: peaks of compute per number format and of memory bandwidth. */
typedef struct ct_gpu_model {
    char name[96];
    int sms;
    double clock_ghz;        /* SM boost clock */
    double bandwidth;        /* bytes/s */
    double fp32_flops;       /* FLOP/s on the CUDA cores (no tensor cores) */
    double tf32_flops;       /* FLOP/s of TF32 tensor-core products (fp32 where there are none) */
    double half_flops;       /* FLOP/s of dense fp16 / bf16 tensor-core products, fp32 accumulation */
    int measured;            /* 1: from a visible GPU's properties; 0: the H100-class model */
} ct_gpu_model;

/* The model used when no GPU is visible: an H100 SXM (Hopper, compute capability 9.0), as
 * NVIDIA's data sheet gives it: 132 SMs at a ~1.98 GHz boost, ~3.35 TB/s of HBM3, ~990 TFLOP/s
 * dense fp16 / bf16 and ~495 TF32 on the tensor cores, ~67 TFLOP/s fp32 on the CUDA cores. */
void ct_gpu_model_h100(ct_gpu_model *m);

/* A visible GPU's model from what the CUDA runtime reports: SM count, SM clock and memory clock
 * (kHz), memory bus width (bits), compute capability. Bandwidth is the DDR rate,
 * 2 x memory clock x bus width. The peaks multiply SMs by the clock and by the per-SM, per-clock
 * rates of the architecture (fp32 lanes x 2; dense fp16 tensor FLOPs), which NVIDIA's
 * architecture white papers give; unknown newer architectures take the newest known rates. */
void ct_gpu_model_from_properties(ct_gpu_model *m, const char *name, int sms, int clock_khz, int mem_clock_khz,
                                  int bus_bits, int major, int minor);

/* Kernel launches per kernel: the host's cudaLaunchKernel and the GPU's start of a dependent
 * kernel cost a few microseconds each without CUDA graphs; a captured step is one launch, and
 * the GPU still spends about a microsecond starting each kernel inside it. */
#define CT_LAUNCH_US_DIRECT 3.0
#define CT_LAUNCH_US_CAPTURED 1.0

/* One layer, forward and backward at a batch. */
typedef struct ct_layer_cost {
    int kernels;             /* launches, forward + backward (roughly: cuBLASLt and cuDNN may
                              * split a product into more than one kernel) */
    double flops;            /* 3 x the forward FLOPs (backward is about twice forward) */
    double bytes;            /* moved to and from memory (see layer_bytes in launch_cost.c) */
    double kernel_us;        /* max(flops / peak, bytes / bandwidth) */
    double launch_us;        /* kernels x the per-launch cost */
    int launch_bound;        /* kernel_us < launch_us */
} ct_layer_cost;

/* The step: every layer, the loss, the input's conversion and the optimizer update. */
typedef struct ct_step_cost {
    int layers;              /* layers that launch kernels (an aliasing flatten launches none) */
    int launch_bound;        /* of those */
    long launches;           /* kernels per training step */
    double launch_us, kernel_us;
    int warn;                /* more than half the layers are launch-bound */
} ct_step_cost;

/* Layer i of built graph g at `batch` on m, with per_launch_us per kernel. */
void ct_layer_cost_estimate(const ct_graph *g, int i, int batch, const ct_gpu_model *m, double per_launch_us,
                            ct_layer_cost *out);
/* The whole step; per_layer (g->n_layers entries) may be NULL. */
void ct_step_cost_estimate(const ct_graph *g, int batch, ct_optimizer opt, const ct_gpu_model *m,
                           double per_launch_us, ct_layer_cost *per_layer, ct_step_cost *out);

#endif
