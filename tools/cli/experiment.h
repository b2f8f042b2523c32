/* cutrain experiment: the ladder of rungs, each adding one technique of the advice, what each
 * measured, and the four files that report it. */
#ifndef CT_EXPERIMENT_H
#define CT_EXPERIMENT_H

#include <stdio.h>

#include "cli.h"

enum { XP_RUNGS = 7 };

typedef enum xp_status { XP_NOT_ASKED = 0, XP_RAN, XP_SKIPPED, XP_FAILED } xp_status;

/* One rung: what it adds, then what it measured over its timed epochs (negative: unknown). */
typedef struct xp_rung {
    int rung;
    const char *name;        /* "naive", "+ prefetch", ... */
    const char *adds;        /* the keys it changes, e.g. "workers = auto" */
    xp_status status;
    char reason[320];        /* why it was skipped or failed */
    char backend[16];
    int batch;
    const char *batch_mode;  /* "fixed" or "auto" */
    const char *precision;
    int workers, prefetch;
    long steps;              /* timed steps */
    double seconds;          /* timed train-loop seconds */
    double images_per_s;
    double gpu_util, gpu_mem_mib, power_w, cpu_util, cpu_util_machine;
    double input_wait_share;
    ct_time_split split;
    char verdict[192];       /* of the last timed epoch */
    double memory_peak_mib;  /* cutrain's own allocator: the most in use at once */
    char note[256];          /* the backend's note, or the monitor's */
    double speedup_prev;     /* over the nearest earlier rung that ran; negative: none */
    int prev_rung;
    double speedup_0;        /* over rung 0; negative when rung 0 did not run */
} xp_rung;

typedef struct xp_report {
    const char *config;
    char device[256];        /* the machine, as the backend tells it */
    int cores;               /* online CPU cores */
    double seconds_per_rung; /* --seconds, or 0 */
    long steps_per_rung;     /* --steps, or 0 */
    xp_rung rungs[XP_RUNGS];
} xp_report;

/* The rung table (experiment_rungs.c): names and what each adds, statuses cleared. */
void xp_rungs_init(xp_report *r);
/* Parses --rungs ("0-3", "0,2,5", "all") into asked[XP_RUNGS]; 0 after printing the problem. */
int xp_parse_rungs(const char *text, int asked[XP_RUNGS]);
/* Applies rung k's settings (every technique up to k) to an open handle; devices is the one
 * device rungs 0..5 train on ("cpu" or "0"). */
ct_status xp_apply_rung(ct_net *net, int k, const char *devices);

/* The speed-ups, then DIR/experiment.csv, .json and .md (experiment_report.c); 0 after printing
 * what failed. */
void xp_speedups(xp_report *r);
int xp_write_reports(const xp_report *r, const char *dir);
/* DIR/experiment.png by tools/plot_experiment.py under $CUTRAIN_PYTHON (else python3); when it
 * cannot, says exactly how to draw it. 1 when drawn. */
int xp_plot(const char *dir, int quiet);

#endif
