/* cutrain eval: test-set loss and accuracy of the network as configured, or of --weights. */
#include "cli.h"

static int cmd_eval(const cli_options *opt)
{
    ct_net *net = NULL;
    int rc = cli_open_inference(opt, &net);
    if (rc != CLI_OK)
        return rc;
    ct_eval_result r;
    double started = cli_now();
    ct_status st = ct_evaluate(net, &r);
    if (st != CT_OK)
        return cli_fail(net, st);
    printf("test: loss %.4f accuracy %.4f (%ld images, %.1f s, backend %s%s%s)\n", r.loss, r.accuracy, r.images,
           cli_now() - started, ct_backend_name(net), opt->weights ? ", weights " : ", initial weights",
           opt->weights ? opt->weights : "");
    ct_close(net);
    return CLI_OK;
}

const cli_command cli_cmd_eval = {
    .name = "eval",
    .run = cmd_eval,
    .usage = "eval --config FILE [options]",
    .about = "test-set loss and accuracy of the network",
    .takes = CLI_OPTS_CONFIG | CLI_OPTS_RUN | CLI_OPT(WEIGHTS),
    .needs = CLI_OPT(CONFIG),
};
