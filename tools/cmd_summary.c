/* cutrain summary: one row per layer and the totals, without loading the data. */
#include "cli.h"

int cmd_summary(const cli_options *opt)
{
    ct_net *net = NULL;
    int rc = cli_open(opt, &net);
    if (rc != CLI_OK)
        return rc;
    int count = ct_layer_count(net);
    if (count < 0)
        return cli_fail(net, ct_prepare(net));
    printf("%-16s %-11s %-12s %12s %12s %14s\n", "layer", "type", "output", "params", "MFLOPs",
           "act bytes/img");
    long params = 0, bytes = 0;
    double flops = 0.0;
    for (int i = 0; i < count; i++) {
        ct_layer_info li;
        ct_status st = ct_layer_info_get(net, i, &li);
        if (st != CT_OK)
            return cli_fail(net, st);
        char shape[48];
        ct_format_shape(li.h, li.w, li.c, shape, sizeof shape);
        printf("%-16s %-11s %-12s %12ld %12.3f %14ld\n", li.name, li.type, shape, li.params,
               li.flops / 1e6, li.activation_bytes);
        params += li.params;
        flops += li.flops;
        bytes += li.activation_bytes;
    }
    printf("%-16s %-11s %-12s %12ld %12.3f %14ld\n", "total", "", "", params, flops / 1e6, bytes);
    printf("training FLOPs per image (forward + backward, about 3x forward): %.3f M\n", 3.0 * flops / 1e6);
    ct_memory_info m;
    ct_status st = ct_memory_info_get(net, 0, &m);
    if (st != CT_OK)
        return cli_fail(net, st);
    const double MiB = 1024.0 * 1024.0;
    printf("memory at batch %d (CPU workspace): %.2f MiB = parameters and gradients (fp32) %.2f, half copy %.2f, "
           "optimizer %.2f, state %.2f, inputs %.2f, activations %.2f, activation gradients %.2f, workspace %.2f\n",
           m.batch, m.total / MiB, m.params / MiB, m.params_half / MiB, m.optimizer / MiB, m.state / MiB,
           m.inputs / MiB, m.activations / MiB, m.gradients / MiB, m.workspace / MiB);
    printf("memory by type: fp32 %.2f MiB, fp16 %.2f MiB, bf16 %.2f MiB, int32 %.2f MiB, uint8 %.2f MiB\n",
           m.fp32 / MiB, m.fp16 / MiB, m.bf16 / MiB, m.int32 / MiB, m.uint8 / MiB);
    ct_close(net);
    return CLI_OK;
}
