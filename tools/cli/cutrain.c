/* cutrain: the command line. `cutrain --config F` trains; the subcommands are listed in commands.c,
 * their options in options.c. */
#include <stdio.h>

#include "cli.h"

int main(int argc, char **argv)
{
    const cli_command *cmd = cli_commands[0];
    int first = 1;
    if (argc > 1 && argv[1][0] != '-') {
        if (!(cmd = cli_find_command(argv[1])))
            return CLI_USAGE;
        first = 2;
    }
    cli_options opt = {0};
    int rc = cli_parse_options(argc, argv, first, cmd, &opt);
    if (rc == CLI_OK)
        rc = cli_check_options(cmd, &opt);
    if (rc != CLI_OK)
        return rc;
    /* one of several processes (mpirun, srun): rank 0 alone prints, logs and saves */
    int rank, size;
    ct_process_world(&rank, &size);
    if (rank > 0) {
        /* errors still go to stderr, prefixed with the rank (cli_fail) */
        if (!freopen("/dev/null", "w", stdout))
            fprintf(stderr, "cutrain: rank %d: cannot silence standard output\n", rank);
        opt.quiet = 1;
        opt.log_path = NULL;
        opt.checkpoint_dir = NULL;
        opt.tensorboard_dir = NULL;
    }
    rc = cmd->run(&opt);
    /* a failed process ends the others: a stopped or waiting peer would not end by itself */
    if (rc != CLI_OK && size > 1)
        ct_process_abort(rc);
    return rc;
}
