/* cutrain bench: training images/s and milliseconds per step after warm-up, as one JSON line,
 * for side-by-side tables with the PyTorch peer (tools/device_check.sh); with --input-only, the
 * input pipeline alone: images/s, images per CPU-second and MB/s read (for tools/image_peers.py's
 * table). The line names the precision ([train] precision, or --precision) and, in fp16, the loss
 * scale and the steps skipped for a non-finite gradient. */
#include <stdio.h>

#include "cli.h"

/* The JSON string body of s (quotes and backslashes escaped, control characters dropped). */
static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, out);
    }
    fputc('"', out);
}

static int cmd_bench(const cli_options *opt)
{
    ct_net *net = NULL;
    int rc = cli_open(opt, &net);
    if (rc != CLI_OK)
        return rc;
    long steps = opt->steps > 0 ? opt->steps : 100;
    int warmup = opt->warmup >= 0 ? (int)opt->warmup : 20;
    if (opt->input_only) {
        ct_input_bench_result r;
        ct_status st = ct_bench_input(net, warmup, steps, &r);
        if (st != CT_OK)
            return cli_fail(net, st);
        printf("{\"config\": ");
        json_string(stdout, opt->config);
        printf(", \"input_only\": true, \"pipeline\": \"%s\", \"workers\": %d, \"prefetch\": %d, "
               "\"batch\": %d, \"batches\": %ld, \"images_per_s\": %.0f, \"seconds\": %.3f",
               r.sync ? "sync" : "parallel", r.workers, r.prefetch, ct_batch_size(net), r.batches,
               r.images_per_s, r.seconds);
        /* per CPU-second: what the loader costs, whatever else shares the machine */
        if (r.cpu_seconds > 0)
            printf(", \"cpu_seconds\": %.3f, \"images_per_cpu_s\": %.1f", r.cpu_seconds,
                   (double)r.images / r.cpu_seconds);
        else
            printf(", \"cpu_seconds\": null, \"images_per_cpu_s\": null");
        printf(", \"input_bytes\": %lld, \"mb_per_s\": %.2f}\n", r.input_bytes,
               r.seconds > 0 ? (double)r.input_bytes / 1e6 / r.seconds : 0.0);
        ct_close(net);
        return CLI_OK;
    }
    ct_bench_result r;
    ct_status st = ct_bench(net, warmup, steps, &r);
    if (st == CT_OK && opt->trace)
        st = ct_trace_step(net, opt->trace);
    if (st != CT_OK)
        return cli_fail(net, st);
    printf("{\"config\": ");
    json_string(stdout, opt->config);
    printf(", \"backend\": ");
    json_string(stdout, ct_backend_name(net));
    printf(", \"device\": ");
    json_string(stdout, ct_backend_reason(net));
    printf(", \"note\": ");
    json_string(stdout, ct_backend_note(net));
    printf(", \"precision\": ");
    json_string(stdout, r.precision ? r.precision : "fp32");
    printf(", \"batch\": %d, \"steps\": %ld, \"warmup\": %d, \"graph\": %s, \"images_per_s\": %.0f, "
           "\"ms_per_step\": %.4f, \"ms_per_step_min\": %.4f",
           r.batch, r.steps, warmup, r.graph ? "true" : "false", r.images_per_s, r.ms_per_step,
           r.ms_per_step_min);
    /* fp16's loss scaler: null without one (fp32, bf16) */
    if (r.loss_scale > 0)
        printf(", \"loss_scale\": %g, \"skipped_steps\": %ld}\n", r.loss_scale, r.skipped_steps);
    else
        printf(", \"loss_scale\": null, \"skipped_steps\": null}\n");
    ct_close(net);
    return CLI_OK;
}

/* --trace times a training step, which --input-only leaves out. */
static int check_bench(const cli_options *opt)
{
    if (opt->input_only && opt->trace) {
        fprintf(stderr, "cutrain: --trace (it traces a training step, not the input pipeline) does not apply to "
                        "'bench'\n");
        return CLI_USAGE;
    }
    return CLI_OK;
}

const cli_command cli_cmd_bench = {
    .name = "bench",
    .run = cmd_bench,
    .usage = "bench --config FILE [--steps N] [--batch B] [--precision P]\n"
             "[--warmup N] [--input-only] [--trace FILE]",
    .about = "training images/s and ms per step after warm-up, as one JSON line",
    .takes = CLI_OPTS_CONFIG | CLI_OPTS_RUN | CLI_OPT(STEPS) | CLI_OPT(WARMUP) | CLI_OPT(INPUT_ONLY) | CLI_OPT(TRACE),
    .needs = CLI_OPT(CONFIG),
    .check = check_bench,
};
