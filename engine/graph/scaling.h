/* Mirrored data parallelism predicted before it is measured: one replica's step time from the
 * roofline (launch_cost.h) at its share of the global batch, against a ring all-reduce of every
 * fp32 gradient in buckets, on 2, 4 and 8 GPUs, with and without the all-reduce overlapping
 * backward. Pure arithmetic on the built graph, so its tests run on the CPU; a multi-GPU machine
 * is to check it. Internal to the library (ct_scaling_report_get is the public face). */
#ifndef CT_SCALING_H
#define CT_SCALING_H

#include "graph/launch_cost.h"

/* The interconnect. The default is an NVLink/NVSwitch node of H100 SXM GPUs: about 450 GB/s of
 * all-reduce bus bandwidth at large messages, as nccl-tests reports it (busbw = algbw x
 * 2 (n - 1) / n), and about 15 us for one all-reduce call; buckets of 25 MiB, DDP's default. */
typedef struct ct_link_model {
    double bus_bytes_per_s;
    double call_us;          /* fixed cost of one all-reduce call */
    double bucket_bytes;
} ct_link_model;

#define CT_LINK_BUS_GBPS_DEFAULT 450.0
#define CT_LINK_CALL_US_DEFAULT 15.0
#define CT_BUCKET_MIB_DEFAULT 25.0

void ct_link_model_default(ct_link_model *l);

/* Microseconds of a ring all-reduce of `bytes` over `gpus` in buckets: one call per bucket plus
 * 2 (gpus - 1) / gpus of the bytes at the bus bandwidth. 0 for one GPU. */
double ct_allreduce_us(double bytes, int gpus, const ct_link_model *l);

/* One replica count at a global batch. */
typedef struct ct_scaling_row {
    int gpus;
    int batch_per_gpu;       /* batch / gpus; 0 when the batch does not give each GPU a sample */
    double step_us;          /* one replica's step at its share: max(kernel time, launch time) */
    double allreduce_us;
    /* Speedup over one GPU at the whole batch, divided by the GPUs. Serial: the all-reduce after
     * the step. Overlapped: buckets reduced while backward (about 2/3 of the step) still runs,
     * but for the last bucket, which only starts once backward ends. */
    double efficiency_serial, efficiency_overlap;
} ct_scaling_row;

/* Step time (us) of one GPU at `batch`: the roofline's kernel time or the launches, whichever
 * bounds it. */
double ct_step_us(const ct_graph *g, int batch, ct_optimizer opt, const ct_gpu_model *m, double per_launch_us);

void ct_scaling_estimate(const ct_graph *g, int batch, ct_optimizer opt, const ct_gpu_model *m, double per_launch_us,
                         const ct_link_model *l, int gpus, ct_scaling_row *out);

#endif
