#include "base/proc_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/clock.h"

int ct_proc_parse_self(const char *text, unsigned long long *ticks)
{
    /* the command name is "(...)" and may hold anything: the fields resume after the last ')' */
    const char *p = text ? strrchr(text, ')') : NULL;
    if (!p)
        return -1;
    p++;
    /* past ')' come field 3 (state) to 13, then utime (14) and stime (15) */
    for (int field = 3; field < 14; field++) {
        while (*p == ' ')
            p++;
        if (!*p || *p == '\n')
            return -1;
        while (*p && *p != ' ' && *p != '\n')
            p++;
    }
    char *end;
    unsigned long long utime = strtoull(p, &end, 10);
    if (end == p)
        return -1;
    p = end;
    unsigned long long stime = strtoull(p, &end, 10);
    if (end == p)
        return -1;
    *ticks = utime + stime;
    return 0;
}

int ct_proc_parse_machine(const char *text, unsigned long long *busy, unsigned long long *total)
{
    if (!text || strncmp(text, "cpu ", 4) != 0)
        return -1;
    const char *p = text + 4;
    unsigned long long v[8] = {0};
    int n = 0;
    for (; n < 8; n++) {
        char *end;
        v[n] = strtoull(p, &end, 10);
        if (end == p)
            break;
        p = end;
    }
    /* Linux 2.6 has at least user, nice, system, idle, iowait, irq, softirq */
    if (n < 4)
        return -1;
    unsigned long long sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    *total = sum;
    *busy = sum - v[3] - v[4];
    return 0;
}

static int read_text(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t got = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[got] = '\0';
    return got > 0 ? 0 : -1;
}

void ct_cpu_read(ct_cpu_reading *out)
{
    char buf[1024];
    *out = (ct_cpu_reading){0};
    out->seconds = ct_clock_seconds();
    out->have_self = read_text("/proc/self/stat", buf, sizeof buf) == 0 &&
                     ct_proc_parse_self(buf, &out->self_ticks) == 0;
    /* the "cpu" line comes first, well inside the buffer */
    out->have_machine = read_text("/proc/stat", buf, sizeof buf) == 0 &&
                        ct_proc_parse_machine(buf, &out->machine_busy, &out->machine_total) == 0;
}

double ct_cpu_cores_used(const ct_cpu_reading *a, const ct_cpu_reading *b, long ticks_per_s)
{
    double wall = b->seconds - a->seconds;
    /* a window of a few ticks would read 0 or double: too short to tell */
    if (!a->have_self || !b->have_self || ticks_per_s <= 0 || wall * (double)ticks_per_s < CT_CPU_MIN_TICKS ||
        b->self_ticks < a->self_ticks)
        return -1.0;
    return (double)(b->self_ticks - a->self_ticks) / (double)ticks_per_s / wall;
}

double ct_cpu_machine_percent(const ct_cpu_reading *a, const ct_cpu_reading *b)
{
    if (!a->have_machine || !b->have_machine || b->machine_total < a->machine_total + CT_CPU_MIN_TICKS ||
        b->machine_busy < a->machine_busy)
        return -1.0;
    return 100.0 * (double)(b->machine_busy - a->machine_busy) / (double)(b->machine_total - a->machine_total);
}
