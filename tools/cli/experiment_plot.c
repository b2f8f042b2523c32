/* DIR/experiment.png: tools/plot_experiment.py run under $CUTRAIN_PYTHON (else python3), found
 * installed beside the models or in the source tree this binary was built from. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "experiment.h"

extern char **environ;

/* The script's exit code when matplotlib cannot be imported. */
enum { NO_MATPLOTLIB = 3 };

static const char *plot_script(void)
{
#ifdef CT_PLOT_SCRIPT_INSTALLED
    if (access(CT_PLOT_SCRIPT_INSTALLED, R_OK) == 0)
        return CT_PLOT_SCRIPT_INSTALLED;
#endif
#ifdef CT_PLOT_SCRIPT_SOURCE
    if (access(CT_PLOT_SCRIPT_SOURCE, R_OK) == 0)
        return CT_PLOT_SCRIPT_SOURCE;
#endif
    return NULL;
}

static void how_to(const char *python, const char *script, const char *dir, const char *why)
{
    fprintf(stderr, "cutrain: experiment.png not drawn: %s\n", why);
    fprintf(stderr, "cutrain: to draw it, install matplotlib for that Python (%s -m pip install matplotlib) or name "
                    "a Python that has it in CUTRAIN_PYTHON, then run:\n  %s %s %s/experiment.json %s/experiment.png\n",
            python, python, script ? script : "tools/plot_experiment.py", dir, dir);
}

int xp_plot(const char *dir, int quiet)
{
    const char *python = getenv("CUTRAIN_PYTHON");
    if (!python || !*python)
        python = "python3";
    const char *script = plot_script();
    char json[4096], png[4096], why[512];
    snprintf(json, sizeof json, "%s/experiment.json", dir);
    snprintf(png, sizeof png, "%s/experiment.png", dir);
    if (!script) {
        how_to(python, script, dir, "tools/plot_experiment.py is neither installed nor in this build's source tree");
        return 0;
    }
    char *argv[] = {(char *)python, (char *)script, json, png, quiet ? "--quiet" : NULL, NULL};
    pid_t pid;
    int err = posix_spawnp(&pid, python, NULL, NULL, argv, environ);
    if (err != 0) {
        snprintf(why, sizeof why, "could not run '%s' (%s)", python, strerror(err));
        how_to(python, script, dir, why);
        return 0;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == NO_MATPLOTLIB)
        snprintf(why, sizeof why, "'%s' has no matplotlib", python);
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        snprintf(why, sizeof why, "could not run '%s'", python);
    else
        snprintf(why, sizeof why, "'%s %s' failed (see above)", python, script);
    how_to(python, script, dir, why);
    return 0;
}
