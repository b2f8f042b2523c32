/* cutrain summary's figures, gathered once (cmd_summary.c) and printed as a table there or as one
 * JSON object (summary_json.c), so that the two always say the same. */
#ifndef CT_SUMMARY_H
#define CT_SUMMARY_H

#include "cli.h"

#define SUMMARY_MAX_WARNINGS 2

typedef struct summary {
    const char *config;
    int batch;
    int count;                  /* layers */
    ct_layer_info *layers;      /* (count) */
    ct_launch_layer *launch;    /* (count) */
    ct_memory_info memory;      /* the plan at batch */
    ct_launch_report report;
    ct_scaling_report scaling;  /* data parallelism predicted on 2, 4, 8 GPUs */
    char cap_warning[256];      /* the plan is over the memory = limit: cap; "" otherwise */
    const char *warnings[SUMMARY_MAX_WARNINGS];
    int n_warnings;
} summary;

/* The whole summary as one JSON object on stdout (docs/commands.md, "summary", lists its keys). */
void summary_print_json(const summary *s);

#endif
