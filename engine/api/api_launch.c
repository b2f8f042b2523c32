/* ct_launch_report_get: the many-small-layers check (graph/launch_cost.h) for the GPU that
 * would train, or for the H100-class model where none is visible. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handle.h"
#include "graph/launch_cost.h"
#include "graph/scaling.h"
#include "registry.h"

/* The first GPU of `devices` when one is visible (a missing ordinal is ct_prepare's to report:
 * here the first GPU stands in); else, and with devices = cpu, the model. */
static void choose_model(const ct_net *net, ct_gpu_model *m)
{
    ct_gpu_model_h100(m);
    const ct_gpu_backend *gpu = ct_registry_gpu();
    const char *devices = net->run.cfg.train.devices;
    int count = 0;
    if (!gpu || strcmp(devices, "cpu") == 0 || gpu->devices(&count, NULL, 0) != CT_OK || count == 0)
        return;
    int ordinal = strcmp(devices, "all") == 0 ? 0 : atoi(devices);
    if (ordinal < 0 || ordinal >= count)
        ordinal = 0;
    ct_gpu_figures f;
    ct_err ignored;  /* a GPU that cannot be asked leaves the model in place */
    if (gpu->figures(ordinal, &f, &ignored) == CT_OK && f.sms > 0 && f.clock_khz > 0 && f.mem_clock_khz > 0 &&
        f.bus_bits > 0)
        ct_gpu_model_from_properties(m, f.name, f.sms, f.clock_khz, f.mem_clock_khz, f.bus_bits, f.major, f.minor);
}

/* "84", or "0.4" below 10 us, where a whole number would round a small time to nothing. */
static void format_us(double us, char *buf, size_t n)
{
    snprintf(buf, n, us < 10.0 ? "%.1f" : "%.0f", us);
}

ct_status ct_launch_report_get(ct_net *net, int batch, ct_launch_report *report, ct_launch_layer *layers,
                               int n_layers)
{
    if (!net || !report || batch < 0)
        return CT_ERR_USAGE;
    ct_status st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    const ct_graph *g = &net->run.graph;
    if (layers && n_layers < g->n_layers)
        return ct_fail(&net->run.err, CT_ERR_USAGE, "ct_launch_report_get: room for %d layers, the network has %d",
                       n_layers, g->n_layers);
    if (batch == 0)
        batch = net->run.cfg.train.batch;
    ct_gpu_model m;
    choose_model(net, &m);
    /* graph = auto means on for a GPU, and a GPU is what this models */
    double per_launch = net->run.cfg.train.capture == 0 ? CT_LAUNCH_US_DIRECT : CT_LAUNCH_US_CAPTURED;
    ct_layer_cost *costs = calloc((size_t)g->n_layers + 1, sizeof *costs);
    if (!costs)
        return ct_fail(&net->run.err, CT_ERR_NOMEM, "out of memory for the launch report");
    ct_step_cost s;
    ct_step_cost_estimate(g, batch, net->run.cfg.train.optimizer, &m, per_launch, costs, &s);
    for (int i = 0; layers && i < g->n_layers; i++)
        layers[i] = (ct_launch_layer){.kernels = costs[i].kernels, .kernel_us = costs[i].kernel_us,
                                      .launch_us = costs[i].launch_us, .launch_bound = costs[i].launch_bound};
    free(costs);

    *report = (ct_launch_report){.batch = batch, .measured = m.measured, .per_launch_us = per_launch,
                                 .layers = s.layers, .launch_bound = s.launch_bound, .launches = s.launches,
                                 .launch_us = s.launch_us, .kernel_us = s.kernel_us, .warn = s.warn};
    if (m.measured)
        snprintf(report->device, sizeof report->device, "%s (%d SMs at %.2f GHz, %.2f TB/s)", m.name, m.sms,
                 m.clock_ghz, m.bandwidth / 1e12);
    else
        snprintf(report->device, sizeof report->device, "an H100-class GPU (model: %d SMs at %.2f GHz, %.2f TB/s)",
                 m.sms, m.clock_ghz, m.bandwidth / 1e12);
    if (s.warn) {
        char launch_us[32], kernel_us[32];
        format_us(s.launch_us, launch_us, sizeof launch_us);
        format_us(s.kernel_us, kernel_us, sizeof kernel_us);
        const char *advice = net->run.cfg.train.capture == 0
                                 ? "use wider layers, a larger batch, or graph = on"
                                 : "use wider layers or a larger batch (graph = on makes the step one launch, "
                                   "but the GPU still starts each kernel)";
        snprintf(report->message, sizeof report->message,
                 "%d of %d layers are launch-bound at batch %d: the step is about %ld launches (~%s us of launch "
                 "overhead vs ~%s us of kernel time); %s",
                 s.launch_bound, s.layers, batch, s.launches, launch_us, kernel_us, advice);
    }
    return CT_OK;
}

ct_status ct_scaling_report_get(ct_net *net, int batch, double bus_gbps, ct_scaling_report *report)
{
    if (!net || !report || batch < 0 || !(bus_gbps >= 0))
        return CT_ERR_USAGE;
    ct_status st = ct_net_build_graph(net);
    if (st != CT_OK)
        return st;
    const ct_graph *g = &net->run.graph;
    if (batch == 0)
        batch = net->run.cfg.train.batch;
    ct_gpu_model m;
    choose_model(net, &m);
    double per_launch = net->run.cfg.train.capture == 0 ? CT_LAUNCH_US_DIRECT : CT_LAUNCH_US_CAPTURED;
    ct_link_model link;
    ct_link_model_default(&link);
    if (bus_gbps > 0)
        link.bus_bytes_per_s = bus_gbps * 1e9;
    double bytes = (double)g->param_span * 4.0;
    *report = (ct_scaling_report){.batch = batch, .allreduce_bytes = (long long)bytes,
                                  .buckets = (int)((bytes + link.bucket_bytes - 1) / link.bucket_bytes),
                                  .bus_gbps = link.bus_bytes_per_s / 1e9, .call_us = link.call_us,
                                  .single_step_us = ct_step_us(g, batch, net->run.cfg.train.optimizer, &m, per_launch)};
    static const int gpus[] = {2, 4, 8};
    for (int i = 0; i < 3; i++) {
        ct_scaling_row r;
        ct_scaling_estimate(g, batch, net->run.cfg.train.optimizer, &m, per_launch, &link, gpus[i], &r);
        report->rows[i].gpus = r.gpus;
        report->rows[i].batch_per_gpu = r.batch_per_gpu;
        report->rows[i].step_us = r.step_us;
        report->rows[i].allreduce_us = r.allreduce_us;
        report->rows[i].efficiency_serial = r.efficiency_serial;
        report->rows[i].efficiency_overlap = r.efficiency_overlap;
    }
    report->n_rows = 3;
    return CT_OK;
}
