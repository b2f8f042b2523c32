/* What every subcommand does first: open the config, apply overrides; and how failures print. */
#include <string.h>
#include <time.h>

#include "cli.h"

int cli_exit_code(ct_status status)
{
    switch (status) {
    case CT_OK:
        return CLI_OK;
    case CT_ERR_USAGE:
    case CT_ERR_CONFIG:
        return CLI_USAGE;
    default:
        return CLI_FAILURE;
    }
}

int cli_fail(ct_net *net, ct_status status)
{
    /* one of several processes: say which, since every rank's errors reach one terminal */
    int rank, size;
    ct_process_world(&rank, &size);
    if (size > 1)
        fprintf(stderr, "cutrain: rank %d: %s\n", rank, ct_errmsg(net));
    else
        fprintf(stderr, "cutrain: %s\n", ct_errmsg(net));
    ct_close(net);
    return cli_exit_code(status);
}

/* assignment: "section.key=value", already known to hold '=' */
static ct_status apply_set(ct_net *net, const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    char key[256];
    size_t n = (size_t)(eq - assignment);
    if (n >= sizeof key)
        n = sizeof key - 1; /* ct_set then reports the truncated key as unknown */
    memcpy(key, assignment, n);
    key[n] = '\0';
    return ct_set(net, key, eq + 1);
}

int cli_open(const cli_options *opt, ct_net **out)
{
    ct_net *net = NULL;
    ct_status st = ct_open_file(opt->config, &net);
    for (int i = 0; st == CT_OK && i < opt->n_sets; i++) {
        if (!strchr(opt->sets[i], '=') || opt->sets[i][0] == '=') {
            fprintf(stderr, "cutrain: --set %s: expected SECTION.KEY=VALUE\n", opt->sets[i]);
            ct_close(net);
            return CLI_USAGE;
        }
        st = apply_set(net, opt->sets[i]);
    }
    if (st == CT_OK && opt->devices)
        st = ct_set(net, "train.devices", opt->devices);
    if (st == CT_OK && opt->batch)
        st = ct_set(net, "train.batch", opt->batch);
    if (st == CT_OK && opt->precision)
        st = ct_set(net, "train.precision", opt->precision);
    if (st != CT_OK)
        return cli_fail(net, st);
    *out = net;
    return CLI_OK;
}

int cli_open_inference(const cli_options *opt, ct_net **out)
{
    ct_net *net = NULL;
    int rc = cli_open(opt, &net);
    if (rc != CLI_OK)
        return rc;
    /* before the weights load: batch = max | auto are refused here, nothing trains */
    ct_status prepared = ct_prepare_inference(net);
    if (prepared != CT_OK)
        return cli_fail(net, prepared);
    if (opt->weights && (rc = cli_load_weights(net, opt->weights)) != CLI_OK) {
        ct_close(net);
        return rc;
    }
    *out = net;
    return CLI_OK;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
