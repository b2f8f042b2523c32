/* cutrain summary --json: the summary as one JSON object. */
#include "summary.h"

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_string(const char *text)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)(text ? text : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void print_layer(const summary *s, int i)
{
    const ct_layer_info *li = &s->layers[i];
    const ct_launch_layer *ll = &s->launch[i];
    printf("    {\"name\": ");
    json_string(li->name);
    printf(", \"type\": ");
    json_string(li->type);
    printf(", \"output\": [%d, %d, %d], \"params\": %ld, \"flops\": %.0f, \"activation_bytes\": %lld, "
           "\"activation_bytes_per_sample\": %ld, \"kernels\": %d, \"kernel_us\": %.4f, \"launch_bound\": %s}",
           li->h, li->w, li->c, li->params, li->flops, (long long)li->activation_bytes * s->batch,
           li->activation_bytes, ll->kernels, ll->kernel_us, ll->launch_bound ? "true" : "false");
}

static void print_memory(const ct_memory_info *m)
{
    printf("  \"memory\": {\"params\": %lld, \"params_half\": %lld, \"optimizer\": %lld, \"state\": %lld, "
           "\"inputs\": %lld, \"activations\": %lld, \"gradients\": %lld, \"workspace\": %lld, "
           "\"backend\": %lld, \"padding\": %lld, \"total_bytes\": %lld, \"planned_with\": \"%s\",\n",
           m->params, m->params_half, m->optimizer, m->state, m->inputs, m->activations, m->gradients, m->workspace,
           m->backend, m->padding, m->total, m->planned_with ? m->planned_with : "cpu");
    printf("             \"by_dtype\": {\"fp32\": %lld, \"fp16\": %lld, \"bf16\": %lld, \"int32\": %lld, "
           "\"uint8\": %lld}},\n",
           m->fp32, m->fp16, m->bf16, m->int32, m->uint8);
    /* without a budget the largest batch is not known: null, not 0 (which means none fits) */
    if (m->budget > 0)
        printf("  \"max_batch\": %d, \"budget_bytes\": %lld, ", m->max_batch, m->budget);
    else
        printf("  \"max_batch\": null, \"budget_bytes\": null, ");
    printf("\"exceeds_cap\": %s,\n", m->exceeds_cap ? "true" : "false");
}

static void print_scaling(const ct_scaling_report *r)
{
    printf("  \"scaling\": {\"allreduce_bytes\": %lld, \"buckets\": %d, \"bus_gbps\": %.1f, \"call_us\": %.1f, "
           "\"single_step_us\": %.4f, \"gpus\": [",
           r->allreduce_bytes, r->buckets, r->bus_gbps, r->call_us, r->single_step_us);
    for (int i = 0; i < r->n_rows; i++)
        printf("%s{\"gpus\": %d, \"batch_per_gpu\": %d, \"step_us\": %.4f, \"allreduce_us\": %.4f, "
               "\"efficiency_serial\": %.4f, \"efficiency_overlap\": %.4f}",
               i ? ", " : "", r->rows[i].gpus, r->rows[i].batch_per_gpu, r->rows[i].step_us, r->rows[i].allreduce_us,
               r->rows[i].efficiency_serial, r->rows[i].efficiency_overlap);
    printf("]},\n");
}

static void print_launch(const ct_launch_report *r)
{
    printf("  \"launch\": {\"device\": ");
    json_string(r->device);
    printf(", \"measured\": %s, \"per_launch_us\": %.2f, \"launches\": %ld, \"launch_us\": %.4f, "
           "\"kernel_us\": %.4f, \"layers\": %d, \"launch_bound\": %d, \"warn\": %s},\n",
           r->measured ? "true" : "false", r->per_launch_us, r->launches, r->launch_us, r->kernel_us, r->layers,
           r->launch_bound, r->warn ? "true" : "false");
}

void summary_print_json(const summary *s)
{
    printf("{\n  \"config\": ");
    json_string(s->config);
    printf(",\n  \"batch\": %d,\n  \"layers\": [\n", s->batch);
    long params = 0;
    double flops = 0.0;
    for (int i = 0; i < s->count; i++) {
        print_layer(s, i);
        printf(i + 1 < s->count ? ",\n" : "\n");
        params += s->layers[i].params;
        flops += s->layers[i].flops;
    }
    printf("  ],\n  \"params\": %ld, \"flops_per_sample\": %.0f,\n", params, flops);
    print_memory(&s->memory);
    print_launch(&s->report);
    print_scaling(&s->scaling);
    printf("  \"warnings\": [");
    for (int i = 0; i < s->n_warnings; i++) {
        printf(i ? ", " : "");
        json_string(s->warnings[i]);
    }
    printf("]\n}\n");
}
