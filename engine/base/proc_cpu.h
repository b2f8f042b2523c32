/* CPU time from Linux's /proc: the process's (utime + stime of /proc/self/stat) and the
 * machine's (the "cpu" line of /proc/stat), in clock ticks, so that two readings give the CPU
 * use between them. The parsers take text, so that their tests run on fixed text. */
#ifndef CT_PROC_CPU_H
#define CT_PROC_CPU_H

/* /proc/self/stat's text: utime + stime (fields 14 and 15, counted past the command name, which
 * may hold spaces and parentheses) into *ticks. 0 on success, -1 on text it does not know. */
int ct_proc_parse_self(const char *text, unsigned long long *ticks);
/* /proc/stat's text: the first "cpu" line's busy ticks (all but idle and iowait) and its total
 * (user, nice, system, idle, iowait, irq, softirq, steal: guest time is inside user already).
 * 0 on success, -1 on text it does not know. */
int ct_proc_parse_machine(const char *text, unsigned long long *busy, unsigned long long *total);

/* One reading of both, from the files; a part that could not be read is marked so. */
typedef struct ct_cpu_reading {
    int have_self, have_machine;
    unsigned long long self_ticks, machine_busy, machine_total;
    double seconds;               /* CLOCK_MONOTONIC when read */
} ct_cpu_reading;
void ct_cpu_read(ct_cpu_reading *out);

/* Between two readings: the process's CPU use in cores (ticks / ticks per second / wall seconds)
 * and the machine's in % of all its cores; negative where either reading lacks the figure, or
 * where the readings are less than CT_CPU_MIN_TICKS ticks apart (of one core, for the process; of
 * all of them, for the machine). */
enum { CT_CPU_MIN_TICKS = 10 };
double ct_cpu_cores_used(const ct_cpu_reading *a, const ct_cpu_reading *b, long ticks_per_s);
double ct_cpu_machine_percent(const ct_cpu_reading *a, const ct_cpu_reading *b);

#endif
