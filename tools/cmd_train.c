/* cutrain train: fit the network, report each epoch, print the final test figures. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cmd_train(const cli_options *opt)
{
    ct_net *net = NULL;
    int rc = cli_open(opt, &net);
    if (rc != CLI_OK)
        return rc;
    cli_progress progress = {.tty = isatty(STDOUT_FILENO) && !opt->quiet, .quiet = opt->quiet};
    if (opt->log_path && !(progress.log = fopen(opt->log_path, "a"))) {
        fprintf(stderr, "cutrain: cannot open log %s: %s\n", opt->log_path, strerror(errno));
        ct_close(net);
        return CLI_FAILURE;
    }
    ct_status st = ct_prepare(net);
    if (st == CT_OK && !opt->quiet) {
        printf("cutrain: backend %s (%s)\n", ct_backend_name(net), ct_backend_reason(net));
        printf("cutrain: %s: %ld training images, batch %d\n", opt->config, ct_train_images(net),
               ct_batch_size(net));
        fflush(stdout);
    }
    ct_callbacks cb = {.on_epoch = cli_on_epoch, .on_step = progress.tty ? cli_on_step : NULL,
                       .step_every = 10, .user = &progress};
    progress.started = cli_now();
    if (st == CT_OK)
        st = ct_fit(net, &cb);
    if (progress.log)
        fclose(progress.log);
    if (st != CT_OK)
        return cli_fail(net, st);
    ct_close(net);
    return CLI_OK;
}
