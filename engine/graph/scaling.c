/* Data-parallel scaling from the roofline step time and a ring all-reduce (scaling.h). */
#include <math.h>

#include "graph/scaling.h"

void ct_link_model_default(ct_link_model *l)
{
    *l = (ct_link_model){.bus_bytes_per_s = CT_LINK_BUS_GBPS_DEFAULT * 1e9, .call_us = CT_LINK_CALL_US_DEFAULT,
                         .bucket_bytes = CT_BUCKET_MIB_DEFAULT * 1024.0 * 1024.0};
}

double ct_allreduce_us(double bytes, int gpus, const ct_link_model *l)
{
    if (gpus < 2 || bytes <= 0)
        return 0.0;
    double calls = ceil(bytes / l->bucket_bytes);
    double moved = bytes * 2.0 * (gpus - 1) / gpus;
    return calls * l->call_us + 1e6 * moved / l->bus_bytes_per_s;
}

double ct_step_us(const ct_graph *g, int batch, ct_optimizer opt, const ct_gpu_model *m, double per_launch_us)
{
    ct_step_cost s;
    ct_step_cost_estimate(g, batch, opt, m, per_launch_us, NULL, &s);
    return s.kernel_us > s.launch_us ? s.kernel_us : s.launch_us;
}

void ct_scaling_estimate(const ct_graph *g, int batch, ct_optimizer opt, const ct_gpu_model *m, double per_launch_us,
                         const ct_link_model *l, int gpus, ct_scaling_row *out)
{
    *out = (ct_scaling_row){.gpus = gpus, .batch_per_gpu = gpus > 0 ? batch / gpus : 0};
    if (out->batch_per_gpu < 1)
        return;
    /* every replica all-reduces the fp32 gradient of every parameter, whatever the precision */
    double bytes = (double)g->param_span * 4.0;
    double calls = ceil(bytes / l->bucket_bytes);
    double one = ct_step_us(g, batch, opt, m, per_launch_us);
    out->step_us = ct_step_us(g, out->batch_per_gpu, opt, m, per_launch_us);
    out->allreduce_us = ct_allreduce_us(bytes, gpus, l);
    double forward = out->step_us / 3.0, backward = out->step_us - forward;
    double last = calls > 0 ? out->allreduce_us / calls : 0.0;
    double serial = out->step_us + out->allreduce_us;
    double overlapped = forward + fmax(backward, out->allreduce_us - last) + last;
    out->efficiency_serial = one / (gpus * serial);
    out->efficiency_overlap = one / (gpus * overlapped);
}
