/* The subcommands, one row each: a row X(name) is `cutrain name`, run by the record cli_cmd_<name>
 * (a cli_command, cli.h) that cmd_<name>.c defines with its usage line, description and the
 * options it takes. Adding a subcommand is that file plus one row here. The order is --help's;
 * the first row is the default (`cutrain --config F` trains). */
#include <string.h>

#include "cli.h"

#define CLI_COMMANDS(X) \
    X(train)            \
    X(eval)             \
    X(summary)          \
    X(predict)          \
    X(export)           \
    X(bench)            \
    X(doctor)           \
    X(experiment)       \
    /* a new subcommand: one row above this line */

#define CLI_COMMAND_DECL(name) extern const cli_command cli_cmd_##name;
CLI_COMMANDS(CLI_COMMAND_DECL)
#undef CLI_COMMAND_DECL

const cli_command *const cli_commands[] = {
#define CLI_COMMAND_ENTRY(name) &cli_cmd_##name,
    CLI_COMMANDS(CLI_COMMAND_ENTRY)
#undef CLI_COMMAND_ENTRY
    NULL};

const cli_command *cli_find_command(const char *name)
{
    for (int i = 0; cli_commands[i]; i++)
        if (strcmp(cli_commands[i]->name, name) == 0)
            return cli_commands[i];
    fprintf(stderr, "cutrain: unknown command '%s' (commands:", name);
    for (int i = 0; cli_commands[i]; i++)
        fprintf(stderr, "%s %s", i ? "," : "", cli_commands[i]->name);
    fprintf(stderr, ")\n");
    return NULL;
}
