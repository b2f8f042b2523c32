/* The experiment's three text files: CSV (one row per rung asked), JSON (the same, with the
 * machine) and Markdown (the table with the speed-ups, the skipped rungs and why). Unknown
 * figures are empty in the CSV, null in the JSON and "-" in the table. */
#include <string.h>

#include "experiment.h"

static const char *status_word(xp_status s)
{
    return s == XP_RAN ? "ran" : s == XP_SKIPPED ? "skipped" : "failed";
}

void xp_speedups(xp_report *r)
{
    const xp_rung *zero = r->rungs[0].status == XP_RAN ? &r->rungs[0] : NULL;
    const xp_rung *prev = NULL;
    for (int k = 0; k < XP_RUNGS; k++) {
        xp_rung *g = &r->rungs[k];
        if (g->status != XP_RAN || g->images_per_s <= 0)
            continue;
        if (prev) {
            g->speedup_prev = g->images_per_s / prev->images_per_s;
            g->prev_rung = prev->rung;
        }
        if (zero && zero->images_per_s > 0)
            g->speedup_0 = g->images_per_s / zero->images_per_s;
        prev = g;
    }
}

/* ---- CSV ---- */

static void csv_text(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_num(FILE *f, double v, const char *fmt)
{
    fputc(',', f);
    if (v >= 0)
        fprintf(f, fmt, v);
}

static void write_csv(FILE *f, const xp_report *r)
{
    fprintf(f, "rung,name,adds,status,reason,backend,batch,batch_mode,precision,workers,prefetch,steps,seconds,"
               "images_per_s,speedup_prev,speedup_0,gpu_util,gpu_mem_mib,power_w,cpu_util,cpu_util_machine,"
               "input_wait_share,split_input_wait,split_copy,split_compute,split_comm,device_busy,memory_peak_mib,"
               "verdict,note\n");
    for (int k = 0; k < XP_RUNGS; k++) {
        const xp_rung *g = &r->rungs[k];
        if (g->status == XP_NOT_ASKED)
            continue;
        int ran = g->status == XP_RAN;
        fprintf(f, "%d,", g->rung);
        csv_text(f, g->name);
        fputc(',', f);
        csv_text(f, g->adds);
        fprintf(f, ",%s,", status_word(g->status));
        csv_text(f, g->reason);
        fputc(',', f);
        if (ran)
            fprintf(f, "%s,%d,%s,%s,%d,%d,%ld,%.3f", g->backend, g->batch, g->batch_mode, g->precision, g->workers,
                    g->prefetch, g->steps, g->seconds);
        else
            fprintf(f, ",,,,,,,");
        csv_num(f, g->images_per_s, "%.1f");
        csv_num(f, g->speedup_prev, "%.3f");
        csv_num(f, g->speedup_0, "%.3f");
        csv_num(f, g->gpu_util, "%.1f");
        csv_num(f, g->gpu_mem_mib, "%.0f");
        csv_num(f, g->power_w, "%.1f");
        csv_num(f, g->cpu_util, "%.2f");
        csv_num(f, g->cpu_util_machine, "%.1f");
        csv_num(f, g->input_wait_share, "%.4f");
        csv_num(f, g->split.input_wait, "%.4f");
        csv_num(f, g->split.copy, "%.4f");
        csv_num(f, g->split.compute, "%.4f");
        csv_num(f, g->split.comm, "%.4f");
        csv_num(f, g->split.device_busy, "%.4f");
        csv_num(f, g->memory_peak_mib, "%.1f");
        fputc(',', f);
        csv_text(f, g->verdict);
        fputc(',', f);
        csv_text(f, g->note);
        fputc('\n', f);
    }
}

/* ---- JSON ---- */

static void json_text(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_opt_text(FILE *f, const char *key, const char *s)
{
    fprintf(f, ", \"%s\": ", key);
    if (s && *s)
        json_text(f, s);
    else
        fputs("null", f);
}

static void json_num(FILE *f, const char *key, double v, const char *fmt)
{
    fprintf(f, ", \"%s\": ", key);
    if (v >= 0)
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

static void write_json(FILE *f, const xp_report *r)
{
    fputs("{\"config\": ", f);
    json_text(f, r->config);
    json_opt_text(f, "device", r->device);
    fprintf(f, ", \"cores\": %d", r->cores);
    json_num(f, "seconds_per_rung", r->seconds_per_rung > 0 ? r->seconds_per_rung : -1, "%g");
    json_num(f, "steps_per_rung", r->steps_per_rung > 0 ? (double)r->steps_per_rung : -1, "%.0f");
    fputs(", \"rungs\": [", f);
    int first = 1;
    for (int k = 0; k < XP_RUNGS; k++) {
        const xp_rung *g = &r->rungs[k];
        if (g->status == XP_NOT_ASKED)
            continue;
        int ran = g->status == XP_RAN;
        fprintf(f, "%s\n  {\"rung\": %d, \"name\": ", first ? "" : ",", g->rung);
        first = 0;
        json_text(f, g->name);
        fputs(", \"adds\": ", f);
        json_text(f, g->adds);
        fprintf(f, ", \"status\": \"%s\"", status_word(g->status));
        json_opt_text(f, "reason", g->reason);
        json_opt_text(f, "backend", ran ? g->backend : NULL);
        json_num(f, "batch", ran ? g->batch : -1, "%.0f");
        json_opt_text(f, "batch_mode", ran ? g->batch_mode : NULL);
        json_opt_text(f, "precision", ran ? g->precision : NULL);
        json_num(f, "workers", ran ? g->workers : -1, "%.0f");
        json_num(f, "prefetch", ran ? g->prefetch : -1, "%.0f");
        json_num(f, "steps", ran ? (double)g->steps : -1, "%.0f");
        json_num(f, "seconds", ran ? g->seconds : -1, "%.3f");
        json_num(f, "images_per_s", g->images_per_s, "%.1f");
        json_num(f, "speedup_prev", g->speedup_prev, "%.3f");
        json_num(f, "speedup_prev_rung", g->prev_rung, "%.0f");
        json_num(f, "speedup_0", g->speedup_0, "%.3f");
        json_num(f, "gpu_util", g->gpu_util, "%.1f");
        json_num(f, "gpu_mem_mib", g->gpu_mem_mib, "%.0f");
        json_num(f, "power_w", g->power_w, "%.1f");
        json_num(f, "cpu_util", g->cpu_util, "%.3f");
        json_num(f, "cpu_util_machine", g->cpu_util_machine, "%.1f");
        json_num(f, "input_wait_share", g->input_wait_share, "%.4f");
        if (ran) {
            fprintf(f, ", \"time_split\": {\"input_wait\": %.4f, \"copy\": %.4f, \"compute\": %.4f, \"comm\": %.4f",
                    g->split.input_wait, g->split.copy, g->split.compute, g->split.comm);
            json_num(f, "device_busy", g->split.device_busy, "%.4f");
            fputc('}', f);
        } else {
            fputs(", \"time_split\": null", f);
        }
        json_opt_text(f, "verdict", g->verdict);
        json_num(f, "memory_peak_mib", g->memory_peak_mib, "%.1f");
        json_opt_text(f, "note", g->note);
        fputc('}', f);
    }
    fputs("\n]}\n", f);
}

/* ---- Markdown ---- */

static void md_num(FILE *f, double v, const char *fmt)
{
    fputs(" | ", f);
    if (v >= 0)
        fprintf(f, fmt, v);
    else
        fputc('-', f);
}

static void write_md(FILE *f, const xp_report *r)
{
    fprintf(f, "# cutrain experiment: %s\n\n", r->config);
    fprintf(f, "Machine: %s; %d CPU cores. Each rung: ", r->device[0] ? r->device : "-", r->cores);
    if (r->steps_per_rung > 0)
        fprintf(f, "%ld timed steps", r->steps_per_rung);
    else
        fprintf(f, "about %g s of timed steps", r->seconds_per_rung);
    fprintf(f, " after a warm-up epoch. x prev: over the rung above that ran; x 0: over rung 0.\n\n");
    fprintf(f, "| rung | adds | batch | precision | images/s | x prev | x 0 | GPU %% | GPU MiB | CPU cores | "
               "machine CPU %% | input wait | verdict |\n");
    fprintf(f, "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (int k = 0; k < XP_RUNGS; k++) {
        const xp_rung *g = &r->rungs[k];
        if (g->status == XP_NOT_ASKED)
            continue;
        fprintf(f, "| %d %s | %s", g->rung, g->name, g->adds);
        if (g->status != XP_RAN) {
            fprintf(f, " | | | %s | | | | | | | | %s |\n", status_word(g->status), g->reason);
            continue;
        }
        fprintf(f, " | %d%s | %s", g->batch, strcmp(g->batch_mode, "auto") == 0 ? " (auto)" : "", g->precision);
        md_num(f, g->images_per_s, "%.0f");
        md_num(f, g->speedup_prev, "%.2fx");
        md_num(f, g->speedup_0, "%.2fx");
        md_num(f, g->gpu_util, "%.0f");
        md_num(f, g->gpu_mem_mib, "%.0f");
        md_num(f, g->cpu_util, "%.2f");
        md_num(f, g->cpu_util_machine, "%.0f");
        md_num(f, g->input_wait_share >= 0 ? 100.0 * g->input_wait_share : -1, "%.0f%%");
        fprintf(f, " | %s |\n", g->verdict);
    }
    fprintf(f, "\nTime split (shares of the train loop) and memory:\n\n");
    fprintf(f, "| rung | workers | input wait | copy | compute | comm | device busy | peak MiB (cutrain) | steps | "
               "seconds | note |\n");
    fprintf(f, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (int k = 0; k < XP_RUNGS; k++) {
        const xp_rung *g = &r->rungs[k];
        if (g->status != XP_RAN)
            continue;
        fprintf(f, "| %d | %d", g->rung, g->workers);
        md_num(f, g->split.input_wait, "%.2f");
        md_num(f, g->split.copy, "%.2f");
        md_num(f, g->split.compute, "%.2f");
        md_num(f, g->split.comm, "%.2f");
        md_num(f, g->split.device_busy, "%.2f");
        md_num(f, g->memory_peak_mib, "%.1f");
        fprintf(f, " | %ld | %.2f | %s |\n", g->steps, g->seconds, g->note);
    }
    int skipped = 0;
    for (int k = 0; k < XP_RUNGS; k++) {
        const xp_rung *g = &r->rungs[k];
        if (g->status == XP_SKIPPED || g->status == XP_FAILED) {
            if (!skipped++)
                fprintf(f, "\nNot run here:\n\n");
            fprintf(f, "- rung %d (%s): %s: %s\n", g->rung, g->name, status_word(g->status), g->reason);
        }
    }
}

static int write_one(const xp_report *r, const char *dir, const char *ext, void (*writer)(FILE *, const xp_report *))
{
    char path[4096];
    snprintf(path, sizeof path, "%s/experiment.%s", dir, ext);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cutrain: cannot write %s\n", path);
        return 0;
    }
    writer(f, r);
    if (fclose(f) != 0) {
        fprintf(stderr, "cutrain: cannot write %s\n", path);
        return 0;
    }
    return 1;
}

int xp_write_reports(const xp_report *r, const char *dir)
{
    return write_one(r, dir, "csv", write_csv) && write_one(r, dir, "json", write_json) &&
           write_one(r, dir, "md", write_md);
}
