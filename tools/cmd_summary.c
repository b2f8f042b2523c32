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
    ct_close(net);
    return CLI_OK;
}
