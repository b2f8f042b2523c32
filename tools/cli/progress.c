/* The progress bar on a terminal, one plain line per epoch otherwise, and the JSON-lines log. */
#include <math.h>

#include "cli.h"

/* A figure of the monitor's, or null where it is unknown (negative). */
static void json_figure(char *buf, size_t n, double v, const char *fmt)
{
    if (v >= 0)
        snprintf(buf, n, fmt, v);
    else
        snprintf(buf, n, "null");
}

/* s as a JSON string: quotes and backslashes escaped, control characters dropped. */
static void json_text(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, out);
    }
    fputc('"', out);
}

static void format_rate(double per_s, char *buf, size_t n)
{
    if (per_s >= 1e6)
        snprintf(buf, n, "%.2fM", per_s / 1e6);
    else if (per_s >= 1e3)
        snprintf(buf, n, "%.1fk", per_s / 1e3);
    else
        snprintf(buf, n, "%.0f", per_s);
}

int cli_on_step(const ct_progress *p, void *user)
{
    (void)user;
    enum { WIDTH = 24 };
    int filled = p->steps_per_epoch ? (int)(WIDTH * p->step_in_epoch / p->steps_per_epoch) : WIDTH;
    char bar[WIDTH + 1], rate[32];
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
    bar[WIDTH] = '\0';
    format_rate(p->images_per_s, rate, sizeof rate);
    double eta = p->step_in_epoch ? p->seconds * (double)(p->steps_per_epoch - p->step_in_epoch) /
                                        (double)p->step_in_epoch : 0.0;
    printf("\repoch %d/%d [%s] %ld/%ld loss %.4f acc %.4f %s img/s", p->epoch, p->epochs, bar,
           p->step_in_epoch, p->steps_per_epoch, p->loss, p->accuracy, rate);
    if (p->gpu_util >= 0)
        printf(" GPU %.0f%%", p->gpu_util);
    printf(" ETA %d:%02d", (int)eta / 60, (int)eta % 60);
    /* the TensorFlow Profiler's "moderately input-bound" threshold: below it, say nothing */
    if (p->input_wait_share >= 0.05)
        printf(" input-bound %.0f%%", 100.0 * p->input_wait_share);
    if (p->skipped_steps > 0)
        printf(" skipped %ld", p->skipped_steps);
    printf("  ");
    fflush(stdout);
    return 0;
}

int cli_on_epoch(const ct_epoch_stats *s, void *user)
{
    cli_progress *pr = user;
    char rate[32];
    format_rate(s->images_per_s, rate, sizeof rate);
    if (pr->tty)
        printf("\r\033[K");
    /* NVML failing mid-run: once, and training goes on */
    if (s->monitor_note[0])
        fprintf(stderr, "cutrain: note: %s\n", s->monitor_note);
    if (!pr->quiet || s->epoch == s->epochs) {
        printf("epoch %d/%d: loss %.4f train_acc %.4f", s->epoch, s->epochs, s->loss, s->train_accuracy);
        if (s->test_accuracy >= 0)
            printf(" test_loss %.4f test_acc %.4f", s->test_loss, s->test_accuracy);
        printf(" %s img/s %.1f s", rate, s->seconds);
        if (s->skipped_steps > 0)
            printf(" (loss scale %g, %ld steps skipped)", s->loss_scale, s->skipped_steps);
        if (s->bad_images > 0)
            printf(" (%ld bad image%s replaced)", s->bad_images, s->bad_images == 1 ? "" : "s");
        if (s->input_wait_share >= 0.05) {
            char maker[48];
            if (s->input_on_caller)
                snprintf(maker, sizeof maker, "batches made on the trainer's thread");
            else
                snprintf(maker, sizeof maker, "%d workers", s->input_workers);
            printf(" (%s: %.0f%% of the time waiting for input, %s)", ct_input_verdict(s->input_wait_share),
                   100.0 * s->input_wait_share, maker);
        }
        if (s->gpu_util >= 0)
            printf(" GPU %.0f%%", s->gpu_util);
        if (s->gpu_mem_mib >= 0)
            printf(" %.0f MiB", s->gpu_mem_mib);
        if (s->power_w >= 0)
            printf(" %.0f W", s->power_w);
        if (s->cpu_util >= 0)
            printf(" CPU %.1f cores", s->cpu_util);
        if (s->cpu_util_machine >= 0)
            printf(" (machine %.0f%%)", s->cpu_util_machine);
        printf("\n");
        if (!pr->quiet && s->time_verdict[0])
            printf("  %s\n", s->time_verdict);
        fflush(stdout);
    }
    if (pr->log) {
        /* no test set: null, so a reader never mistakes a placeholder for a figure */
        char test_loss[32] = "null", test_acc[32] = "null", loss_scale[32] = "null", skipped[32] = "null";
        if (s->test_accuracy >= 0) {
            snprintf(test_loss, sizeof test_loss, "%.6f", s->test_loss);
            snprintf(test_acc, sizeof test_acc, "%.6f", s->test_accuracy);
        }
        /* null without a loss scaler (fp32, bf16) */
        if (s->skipped_steps >= 0) {
            snprintf(loss_scale, sizeof loss_scale, "%.9g", s->loss_scale);
            snprintf(skipped, sizeof skipped, "%ld", s->skipped_steps);
        }
        fprintf(pr->log,
                "{\"epoch\": %d, \"epochs\": %d, \"step\": %ld, \"loss\": %.6f, \"train_accuracy\": %.6f, "
                "\"test_loss\": %s, \"test_accuracy\": %s, \"images_per_s\": %.1f, "
                "\"seconds\": %.3f, \"learning_rate\": %.8g, \"input_wait_share\": %.4f, "
                "\"input_verdict\": \"%s\", \"input_workers\": %d, \"input_prefetch\": %d, \"input_on_caller\": %s, "
                "\"precision\": \"%s\", \"loss_scale\": %s, \"skipped_steps\": %s, \"bad_images\": %ld, "
                "\"batch\": %d",
                s->epoch, s->epochs, s->step, s->loss, s->train_accuracy, test_loss, test_acc,
                s->images_per_s, s->seconds, s->learning_rate, s->input_wait_share,
                ct_input_verdict(s->input_wait_share), s->input_workers, s->input_prefetch,
                s->input_on_caller ? "true" : "false",
                s->precision ? s->precision : "fp32", loss_scale, skipped, s->bad_images, pr->batch);
        if (pr->search && pr->search->n_trials) {
            /* the search, once: what was tried; images_per_s null where nothing was measured */
            fprintf(pr->log, ", \"batch_search\": [");
            for (int i = 0; i < pr->search->n_trials; i++) {
                const ct_batch_trial *t = &pr->search->trials[i];
                char ips[32] = "null";
                if (t->images_per_s >= 0)
                    snprintf(ips, sizeof ips, "%.1f", t->images_per_s);
                fprintf(pr->log, "%s{\"batch\": %d, \"images_per_s\": %s, \"fits\": %s}", i ? ", " : "", t->batch,
                        ips, t->fits ? "true" : "false");
            }
            fprintf(pr->log, "], \"batch_mode\": \"%s\", \"batch_reason\": ", pr->search->mode);
            json_text(pr->log, pr->search->reason);
        }
        /* lr_scaling = none above base_batch: once, with the search */
        if (pr->search && pr->search->warning[0]) {
            fprintf(pr->log, ", \"batch_warning\": ");
            json_text(pr->log, pr->search->warning);
        }
        pr->search = NULL;
        char gpu[32], mem[32], power[32], clock[32], cpu[32], machine[32];
        json_figure(gpu, sizeof gpu, s->gpu_util, "%.1f");
        json_figure(mem, sizeof mem, s->gpu_mem_mib, "%.1f");
        json_figure(power, sizeof power, s->power_w, "%.1f");
        json_figure(clock, sizeof clock, s->sm_clock_mhz, "%.0f");
        json_figure(cpu, sizeof cpu, s->cpu_util, "%.3f");
        json_figure(machine, sizeof machine, s->cpu_util_machine, "%.1f");
        char busy[32];
        json_figure(busy, sizeof busy, s->time_split.device_busy, "%.4f");
        fprintf(pr->log,
                ", \"gpu_util\": %s, \"gpu_mem_mib\": %s, \"power_w\": %s, \"sm_clock_mhz\": %s, \"cpu_util\": %s, "
                "\"cpu_util_machine\": %s, \"time_split\": {\"input_wait\": %.4f, \"copy\": %.4f, \"compute\": %.4f, "
                "\"comm\": %.4f, \"device_busy\": %s}, \"time_verdict\": \"%s\"}\n",
                gpu, mem, power, clock, cpu, machine, s->time_split.input_wait, s->time_split.copy,
                s->time_split.compute, s->time_split.comm, busy, s->time_verdict);
        fflush(pr->log);
    }
    return 0;
}

void cli_print_batch_search(const ct_batch_search *s, const ct_lr_scaling_info *lr)
{
    if (s->n_trials) {
        printf("cutrain: batch = %s, memory budget %.1f MiB; tried:\n", s->mode, (double)s->budget / 1048576.0);
        printf("  %7s %12s %10s %5s\n", "batch", "images/s", "plan MiB", "fits");
        for (int i = 0; i < s->n_trials; i++) {
            const ct_batch_trial *t = &s->trials[i];
            char ips[32] = "-";
            if (t->images_per_s >= 0)
                snprintf(ips, sizeof ips, "%.0f", t->images_per_s);
            printf("  %7d %12s %10.1f %5s  %s\n", t->batch, ips, (double)t->plan_bytes / 1048576.0,
                   t->fits ? "yes" : "no", t->note);
        }
        printf("cutrain: %s\n", s->reason);
    }
    if (lr->factor != 1.0)
        printf("cutrain: lr_scaling = %s: learning_rate %g x %.4g (batch %d / base_batch %d%s) = %g\n", lr->rule,
               lr->learning_rate, lr->factor, lr->batch, lr->base_batch, lr->rule[0] == 's' ? ", square root" : "",
               lr->learning_rate * lr->factor);
    else if (s->n_trials && lr->base_batch > 0 && lr->rule[0] == 'n')
        printf("cutrain: lr_scaling = none: learning_rate %g is used as is at batch %d; linear scaling from "
               "base_batch %d would multiply it by %.4g\n", lr->learning_rate, lr->batch, lr->base_batch,
               lr->linear_factor);
    else if (s->n_trials && lr->rule[0] == 'n')
        printf("cutrain: lr_scaling = none: learning_rate %g is used as is at batch %d; linear scaling would "
               "multiply it by %d / the batch it was tuned for (set lr_scaling and base_batch)\n",
               lr->learning_rate, lr->batch, lr->batch);
    if (s->warning[0])
        printf("cutrain: warning: %s\n", s->warning);
}
