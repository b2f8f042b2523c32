#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/trace.h"

ct_status ct_trace_open(ct_trace *t, const ct_graph *g, int ranks, int per_rank, ct_err *err)
{
    *t = (ct_trace){.ranks = ranks, .graph = g};
    t->rank = calloc((size_t)ranks, sizeof *t->rank);
    for (int i = 0; t->rank && i < ranks; i++) {
        t->rank[i].events = calloc((size_t)per_rank, sizeof *t->rank[i].events);
        t->rank[i].cap = per_rank;
        if (!t->rank[i].events) {
            ct_trace_close(t);
            break;
        }
    }
    if (!t->rank)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for a step trace");
    return CT_OK;
}

void ct_trace_close(ct_trace *t)
{
    for (int i = 0; t->rank && i < t->ranks; i++)
        free(t->rank[i].events);
    free(t->rank);
    t->rank = NULL;
    t->ranks = 0;
}

void ct_trace_add(ct_trace_rank *r, ct_trace_kind kind, int index, size_t bytes, double start_s, double end_s)
{
    if (r->n < r->cap)
        r->events[r->n++] = (ct_trace_event){kind, index, bytes, start_s, end_s};
}

static double earliest(const ct_trace *t)
{
    double first = 0.0;
    int any = 0;
    for (int i = 0; i < t->ranks; i++)
        for (int k = 0; k < t->rank[i].n; k++)
            if (!any || t->rank[i].events[k].start_s < first) {
                first = t->rank[i].events[k].start_s;
                any = 1;
            }
    return first;
}

/* A layer name as a JSON string's contents: names come from the config, which allows no quotes
 * or backslashes, but a trace must stay valid JSON whatever they hold. */
static void put_name(FILE *f, const char *name)
{
    for (const char *c = name; *c; c++)
        fputc(*c == '"' || *c == '\\' || (unsigned char)*c < 0x20 ? '_' : *c, f);
}

static const char *kind_name(ct_trace_kind k)
{
    switch (k) {
    case CT_TRACE_BACKWARD: return "backward";
    case CT_TRACE_REDUCE: return "reduce";
    case CT_TRACE_FORWARD: return "forward";
    case CT_TRACE_LOSS: return "loss";
    case CT_TRACE_UPDATE: return "update";
    }
    return "?";
}

ct_status ct_trace_write(const ct_trace *t, const char *path, ct_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return ct_fail(err, CT_ERR_IO, "cannot write the trace %s: %s", path, strerror(errno));
    double origin = earliest(t);
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"clock\": \"host\"}, \"traceEvents\": [\n");
    int first = 1;
    for (int i = 0; i < t->ranks; i++) {
        fprintf(f, "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": "
                   "\"replica %d\"}}", first ? "" : ",\n", i, i);
        first = 0;
        for (int k = 0; k < t->rank[i].n; k++) {
            const ct_trace_event *e = &t->rank[i].events[k];
            fprintf(f, ",\n{\"name\": \"");
            int per_layer = e->kind == CT_TRACE_BACKWARD || e->kind == CT_TRACE_FORWARD;
            if (per_layer) {
                fprintf(f, "%s ", e->kind == CT_TRACE_BACKWARD ? "backward" : "forward");
                put_name(f, e->index < t->graph->n_layers ? t->graph->layers[e->index].cfg->name : "?");
            } else if (e->kind == CT_TRACE_REDUCE) {
                fprintf(f, "all-reduce bucket %d", e->index);
            } else {
                fprintf(f, "%s", e->kind == CT_TRACE_LOSS ? "loss" : "update");
            }
            fprintf(f, "\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, ",
                    kind_name(e->kind), i, (e->start_s - origin) * 1e6, (e->end_s - e->start_s) * 1e6);
            if (per_layer)
                fprintf(f, "\"args\": {\"layer\": %d}}", e->index);
            else if (e->kind == CT_TRACE_REDUCE)
                fprintf(f, "\"args\": {\"bucket\": %d, \"bytes\": %zu}}", e->index, e->bytes);
            else
                fprintf(f, "\"args\": {}}");
        }
    }
    fprintf(f, "\n]}\n");
    if (ferror(f) | (fclose(f) != 0))
        return ct_fail(err, CT_ERR_IO, "cannot write the trace %s: %s", path, strerror(errno));
    return CT_OK;
}
