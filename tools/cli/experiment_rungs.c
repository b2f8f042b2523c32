/* The ladder's rungs: each keeps every technique below it and adds one, as the advice orders
 * them, by the same config keys a user would set. */
#include <stdlib.h>
#include <string.h>

#include "experiment.h"

static const struct {
    const char *name, *adds;
} ladder[XP_RUNGS] = {
    {"naive", "pipeline = sync, batch = 32, fp32, graph = off, augment_on = cpu"},
    {"+ prefetch", "pipeline = parallel, workers = auto"},
    {"+ big batch", "batch = auto"},
    {"+ fp16", "precision = fp16"},
    {"+ CUDA graph", "graph = on"},
    {"+ GPU augment", "augment_on = gpu"},
    {"+ all GPUs", "devices = all (mirrored)"},
};

void xp_rungs_init(xp_report *r)
{
    for (int k = 0; k < XP_RUNGS; k++)
        r->rungs[k] = (xp_rung){.rung = k, .name = ladder[k].name, .adds = ladder[k].adds, .batch_mode = "fixed",
                                .precision = "fp32", .images_per_s = -1, .gpu_util = -1, .gpu_mem_mib = -1,
                                .power_w = -1, .cpu_util = -1, .cpu_util_machine = -1, .input_wait_share = -1,
                                .memory_peak_mib = -1, .speedup_prev = -1, .prev_rung = -1, .speedup_0 = -1,
                                .split = {-1, -1, -1, -1, -1}};
}

static int bad_rungs(const char *text, const char *why)
{
    fprintf(stderr,
            "cutrain: --rungs %s: %s (rungs are 0 to 6: 0 naive, 1 + prefetch, 2 + big batch, 3 + fp16, "
            "4 + CUDA graph, 5 + GPU augment, 6 + all GPUs; e.g. --rungs 0-3 or --rungs 0,2,5)\n",
            text, why);
    return 0;
}

/* One rung number at *p, advanced past it; -1 when there is none or it is out of range. */
static int rung_number(const char **p)
{
    char *end = NULL;
    if (**p < '0' || **p > '9')
        return -1;
    long v = strtol(*p, &end, 10);
    *p = end;
    return v >= 0 && v < XP_RUNGS ? (int)v : -1;
}

int xp_parse_rungs(const char *text, int asked[XP_RUNGS])
{
    memset(asked, 0, XP_RUNGS * sizeof *asked);
    if (strcmp(text, "all") == 0) {
        for (int k = 0; k < XP_RUNGS; k++)
            asked[k] = 1;
        return 1;
    }
    const char *p = text;
    char item[32];
    while (*p) {
        const char *start = p;
        size_t n = strcspn(p, ",");
        snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item ? n : sizeof item - 1), start);
        int lo = rung_number(&p), hi = lo;
        if (lo >= 0 && *p == '-') {
            p++;
            hi = rung_number(&p);
        }
        if (lo < 0 || hi < 0 || (*p && *p != ',')) {
            char why[64];
            snprintf(why, sizeof why, "unknown rung '%s'", item);
            return bad_rungs(text, why);
        }
        if (hi < lo)
            return bad_rungs(text, "a range goes upwards");
        for (int k = lo; k <= hi; k++)
            asked[k] = 1;
        if (*p == ',' && !*++p)
            return bad_rungs(text, "a list does not end with ','");
    }
    for (int k = 0; k < XP_RUNGS; k++)
        if (asked[k])
            return 1;
    return bad_rungs(text, "no rung named");
}

ct_status xp_apply_rung(ct_net *net, int k, const char *devices)
{
    const char *keys[][2] = {
        {"data.pipeline", k >= 1 ? "parallel" : "sync"},
        {"data.augment_on", k >= 5 ? "gpu" : "cpu"},
        {"train.batch", k >= 2 ? "auto" : "32"},
        {"train.precision", k >= 3 ? "fp16" : "fp32"},
        {"train.graph", k >= 4 ? "on" : "off"},
        {"train.devices", k >= 6 ? "all" : devices},
    };
    ct_status st = CT_OK;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && st == CT_OK; i++)
        st = ct_set(net, keys[i][0], keys[i][1]);
    /* the prefetching pipeline sizes itself; the naive one has no workers to size */
    if (st == CT_OK && k >= 1)
        st = ct_set(net, "data.workers", "auto");
    if (st == CT_OK && k >= 1)
        st = ct_set(net, "data.prefetch", "auto");
    return st;
}
