/* cutrain summary: one row per layer and the totals, the memory plan at the batch, the largest
 * batch that fits and the launch-cost check, without loading the data; --json for one object. */
#include <stdlib.h>
#include <string.h>

#include "summary.h"

static const double MiB = 1024.0 * 1024.0;

/* "12.25 MiB", "3.0 KiB" or "512 B" into buf. */
static const char *format_bytes(double bytes, char *buf, size_t n)
{
    if (bytes >= MiB)
        snprintf(buf, n, "%.2f MiB", bytes / MiB);
    else if (bytes >= 1024.0)
        snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
    else
        snprintf(buf, n, "%.0f B", bytes);
    return buf;
}

static ct_status gather(ct_net *net, const cli_options *opt, summary *s)
{
    s->config = opt->config;
    s->count = ct_layer_count(net);
    if (s->count < 0)
        return ct_prepare(net); /* the count failed: this names the config's problem */
    s->batch = ct_batch_size(net);
    s->layers = calloc((size_t)s->count + 1, sizeof *s->layers);
    s->launch = calloc((size_t)s->count + 1, sizeof *s->launch);
    if (!s->layers || !s->launch)
        return CT_ERR_NOMEM;
    ct_status st = CT_OK;
    for (int i = 0; st == CT_OK && i < s->count; i++)
        st = ct_layer_info_get(net, i, &s->layers[i]);
    if (st == CT_OK)
        st = ct_memory_info_get(net, s->batch, &s->memory);
    if (st == CT_OK)
        st = ct_launch_report_get(net, s->batch, &s->report, s->launch, s->count);
    if (st == CT_OK)
        st = ct_scaling_report_get(net, s->batch, opt->bus_gbps, &s->scaling);
    if (st != CT_OK)
        return st;
    /* summary shows a plan over the cap rather than refusing it: it is how one finds the batch */
    if (s->memory.exceeds_cap) {
        char plan[32];
        format_bytes((double)s->memory.total, plan, sizeof plan);
        if (s->memory.max_batch > 0)
            snprintf(s->cap_warning, sizeof s->cap_warning,
                     "the plan at batch %d (%s) exceeds the memory = limit: cap; batch %d fits", s->batch, plan,
                     s->memory.max_batch);
        else
            snprintf(s->cap_warning, sizeof s->cap_warning,
                     "the plan at batch %d (%s) exceeds the memory = limit: cap; not even batch 8 fits", s->batch,
                     plan);
        s->warnings[s->n_warnings++] = s->cap_warning;
    }
    if (s->report.warn)
        s->warnings[s->n_warnings++] = s->report.message;
    return CT_OK;
}

static void print_table(const summary *s)
{
    char act_head[32];
    snprintf(act_head, sizeof act_head, "act at %d", s->batch);
    printf("%-16s %-11s %-12s %12s %12s %14s %12s %10s\n", "layer", "type", "output", "params", "MFLOPs",
           "act bytes/img", act_head, "kernel us");
    long params = 0, bytes = 0;
    double flops = 0.0;
    for (int i = 0; i < s->count; i++) {
        const ct_layer_info *li = &s->layers[i];
        char shape[48], act[32], us[32] = "-";
        ct_format_shape(li->h, li->w, li->c, shape, sizeof shape);
        format_bytes((double)li->activation_bytes * s->batch, act, sizeof act);
        if (s->launch[i].kernels)
            snprintf(us, sizeof us, "%.2f%s", s->launch[i].kernel_us, s->launch[i].launch_bound ? "*" : "");
        printf("%-16s %-11s %-12s %12ld %12.3f %14ld %12s %10s\n", li->name, li->type, shape, li->params,
               li->flops / 1e6, li->activation_bytes, act, us);
        params += li->params;
        flops += li->flops;
        bytes += li->activation_bytes;
    }
    char act[32];
    format_bytes((double)bytes * s->batch, act, sizeof act);
    printf("%-16s %-11s %-12s %12ld %12.3f %14ld %12s\n", "total", "", "", params, flops / 1e6, bytes, act);
    printf("training FLOPs per image (forward + backward, about 3x forward): %.3f M\n", 3.0 * flops / 1e6);
}

static void print_memory(const summary *s)
{
    const ct_memory_info *m = &s->memory;
    printf("memory at batch %d (%s workspace): %.2f MiB (%lld bytes) = parameters and gradients (fp32) %.2f, "
           "half copy %.2f, optimizer %.2f, state %.2f, inputs %.2f, activations %.2f, activation gradients %.2f, "
           "workspace %.2f, backend %.2f, allocator rounding %.2f\n",
           m->batch, m->planned_with && strcmp(m->planned_with, "cuda") == 0 ? "GPU" : "CPU", m->total / MiB,
           m->total, m->params / MiB, m->params_half / MiB, m->optimizer / MiB,
           m->state / MiB, m->inputs / MiB, m->activations / MiB, m->gradients / MiB, m->workspace / MiB,
           m->backend / MiB, m->padding / MiB);
    printf("memory by type: fp32 %.2f MiB, fp16 %.2f MiB, bf16 %.2f MiB, int32 %.2f MiB, uint8 %.2f MiB\n",
           m->fp32 / MiB, m->fp16 / MiB, m->bf16 / MiB, m->int32 / MiB, m->uint8 / MiB);
    if (m->budget <= 0)
        printf("largest batch that fits: unknown (no memory budget known)\n");
    else if (m->max_batch > 0)
        printf("largest batch that fits: %d (a budget of %.2f MiB)\n", m->max_batch, m->budget / MiB);
    else
        printf("largest batch that fits: none (batch 8 needs more than the budget of %.2f MiB)\n", m->budget / MiB);
}

static void print_launch(const summary *s)
{
    const ct_launch_report *r = &s->report;
    printf("launch cost on %s: about %ld kernel launches per step at %.0f us each, ~%.1f us of launch overhead "
           "vs ~%.1f us of kernel time; %d of %d layers launch-bound (*)\n",
           r->device, r->launches, r->per_launch_us, r->launch_us, r->kernel_us, r->launch_bound, r->layers);
}

static void print_scaling(const summary *s)
{
    const ct_scaling_report *r = &s->scaling;
    printf("data parallelism (predicted): each step all-reduces %.2f MiB of fp32 gradients in %d bucket%s "
           "(ring, %.0f GB/s bus bandwidth, %.0f us a call); one GPU at batch %d: ~%.1f us a step\n",
           (double)r->allreduce_bytes / MiB, r->buckets, r->buckets == 1 ? "" : "s", r->bus_gbps, r->call_us,
           r->batch, r->single_step_us);
    for (int i = 0; i < r->n_rows; i++) {
        if (r->rows[i].batch_per_gpu < 1) {
            printf("  %d GPUs: batch %d gives a GPU no sample\n", r->rows[i].gpus, r->batch);
            continue;
        }
        printf("  %d GPUs: %d each, step ~%.1f us + all-reduce ~%.1f us: efficiency %.0f%% serial, %.0f%% "
               "overlapped\n",
               r->rows[i].gpus, r->rows[i].batch_per_gpu, r->rows[i].step_us, r->rows[i].allreduce_us,
               100.0 * r->rows[i].efficiency_serial, 100.0 * r->rows[i].efficiency_overlap);
    }
    for (int i = 0; i < s->n_warnings; i++)
        printf("warning: %s\n", s->warnings[i]);
}

static int cmd_summary(const cli_options *opt)
{
    ct_net *net = NULL;
    int rc = cli_open(opt, &net);
    if (rc != CLI_OK)
        return rc;
    summary s = {0};
    ct_status st = gather(net, opt, &s);
    if (st == CT_OK) {
        if (opt->json) {
            summary_print_json(&s);
        } else {
            print_table(&s);
            print_memory(&s);
            print_launch(&s);
            print_scaling(&s);
        }
    }
    free(s.layers);
    free(s.launch);
    if (st == CT_ERR_NOMEM && !ct_errmsg(net)[0]) {
        fprintf(stderr, "cutrain: out of memory for the summary\n");
        ct_close(net);
        return CLI_FAILURE;
    }
    if (st != CT_OK)
        return cli_fail(net, st);
    ct_close(net);
    return CLI_OK;
}

const cli_command cli_cmd_summary = {
    .name = "summary",
    .run = cmd_summary,
    .usage = "summary --config FILE [--batch B] [--json] [options]",
    .about = "per layer: output shape, parameters, FLOPs, activation memory at the batch;\n"
             "the memory plan, the largest batch that fits, the launch-cost check",
    .takes = CLI_OPTS_CONFIG | CLI_OPTS_RUN | CLI_OPT(JSON) | CLI_OPT(BUS_GBPS),
    .needs = CLI_OPT(CONFIG),
};
