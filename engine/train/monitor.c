#include "train/monitor.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/nvml.h"
#include "base/proc_cpu.h"

enum { MAX_GPUS = 64 };

struct ct_monitor {
    pthread_mutex_t lock;     /* guards everything below but the thread's own fields */
    pthread_cond_t wake;
    pthread_t thread;
    int has_thread, stopping;
    double period_s;

    ct_nvml *nvml;            /* NULL: no GPU figures */
    int handles[MAX_GPUS], n_gpus;
    char why[256];            /* why there are no GPU figures */
    char note[256];
    int note_pending;

    /* the window */
    ct_cpu_reading cpu_start;
    double util_sum, power_sum, clock_sum, mem_max;
    long util_n, power_n, clock_n, mem_n;
};

static void reset_window(ct_monitor *m)
{
    m->util_sum = m->power_sum = m->clock_sum = 0.0;
    m->mem_max = -1.0;
    m->util_n = m->power_n = m->clock_n = m->mem_n = 0;
    ct_cpu_read(&m->cpu_start);
}

/* With m->lock held. */
static void sample_locked(ct_monitor *m)
{
    if (!m->nvml)
        return;
    double util = 0.0, power = 0.0, clock = 0.0, mem = 0.0;
    int n_util = 0, n_power = 0, n_clock = 0, n_mem = 0;
    for (int i = 0; i < m->n_gpus; i++) {
        ct_gpu_reading r;
        int rc = ct_nvml_read(m->nvml, m->handles[i], &r);
        if (rc != 0) {
            /* the GPU fell off the bus, the driver went away...: stop asking, say so once */
            snprintf(m->note, sizeof m->note,
                     "NVML stopped answering during the run (error %d on GPU %d): gpu_util, gpu_mem_mib and "
                     "power_w are unknown from here on; training goes on", rc, i);
            snprintf(m->why, sizeof m->why, "NVML failed during the run (error %d)", rc);
            m->note_pending = 1;
            ct_nvml_close(m->nvml);
            m->nvml = NULL;
            return;
        }
        if (r.util >= 0) { util += r.util; n_util++; }
        if (r.power_w >= 0) { power += r.power_w; n_power++; }
        if (r.sm_clock_mhz >= 0) { clock += r.sm_clock_mhz; n_clock++; }
        if (r.mem_mib >= 0) { mem += r.mem_mib; n_mem++; }
    }
    if (n_util) { m->util_sum += util / n_util; m->util_n++; }
    if (n_power) { m->power_sum += power; m->power_n++; }
    if (n_clock) { m->clock_sum += clock / n_clock; m->clock_n++; }
    if (n_mem) {
        m->mem_max = mem > m->mem_max ? mem : m->mem_max;
        m->mem_n++;
    }
}

static void *sampler(void *p)
{
    ct_monitor *m = p;
    pthread_mutex_lock(&m->lock);
    while (!m->stopping && m->nvml) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)(m->period_s * 1e9);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        int rc = 0;
        while (!m->stopping && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&m->wake, &m->lock, &until);
        if (!m->stopping)
            sample_locked(m);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

ct_monitor *ct_monitor_start(const ct_monitor_gpu *gpus, int n, double period_s, const char *library)
{
    ct_monitor *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake, NULL);
    m->period_s = period_s;
    if (n <= 0) {
        snprintf(m->why, sizeof m->why, "no GPU trains");
    } else if ((m->nvml = ct_nvml_open(library, m->why, (int)sizeof m->why)) != NULL) {
        for (int i = 0; i < n && m->n_gpus < MAX_GPUS; i++) {
            int h = ct_nvml_device(m->nvml, gpus[i].pci_bus_id, gpus[i].index);
            if (h >= 0)
                m->handles[m->n_gpus++] = h;
        }
        if (m->n_gpus == 0) {
            snprintf(m->why, sizeof m->why, "NVML does not know the GPUs that train");
            ct_nvml_close(m->nvml);
            m->nvml = NULL;
        }
    }
    reset_window(m);
    if (m->nvml && period_s > 0)
        m->has_thread = pthread_create(&m->thread, NULL, sampler, m) == 0;
    return m;
}

int ct_monitor_has_gpu(ct_monitor *m, char *why, int n)
{
    if (!m) {
        if (why && n > 0)
            snprintf(why, (size_t)n, "no monitor");
        return 0;
    }
    pthread_mutex_lock(&m->lock);
    int has = m->nvml != NULL;
    if (why && n > 0)
        snprintf(why, (size_t)n, "%s", has ? "" : m->why);
    pthread_mutex_unlock(&m->lock);
    return has;
}

void ct_monitor_begin(ct_monitor *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    reset_window(m);
    pthread_mutex_unlock(&m->lock);
}

void ct_monitor_sample(ct_monitor *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    sample_locked(m);
    pthread_mutex_unlock(&m->lock);
}

void ct_monitor_figures_get(ct_monitor *m, ct_monitor_figures *out)
{
    *out = (ct_monitor_figures){-1.0, -1.0, -1.0, -1.0, 0, -1.0, -1.0};
    if (!m)
        return;
    ct_cpu_reading now;
    ct_cpu_read(&now);
    pthread_mutex_lock(&m->lock);
    /* figures from a window in which NVML failed are not to be trusted: unknown */
    if (m->nvml) {
        out->gpu_util = m->util_n ? m->util_sum / m->util_n : -1.0;
        out->power_w = m->power_n ? m->power_sum / m->power_n : -1.0;
        out->sm_clock_mhz = m->clock_n ? m->clock_sum / m->clock_n : -1.0;
        out->gpu_mem_mib = m->mem_n ? m->mem_max : -1.0;
        out->gpu_samples = m->util_n;
    }
    out->cpu_util = ct_cpu_cores_used(&m->cpu_start, &now, sysconf(_SC_CLK_TCK));
    out->cpu_util_machine = ct_cpu_machine_percent(&m->cpu_start, &now);
    pthread_mutex_unlock(&m->lock);
}

int ct_monitor_take_note(ct_monitor *m, char *buf, int n)
{
    if (n > 0)
        buf[0] = '\0';
    if (!m)
        return 0;
    pthread_mutex_lock(&m->lock);
    int had = m->note_pending;
    if (had && n > 0)
        snprintf(buf, (size_t)n, "%s", m->note);
    m->note_pending = 0;
    pthread_mutex_unlock(&m->lock);
    return had;
}

void ct_monitor_epoch_stats(ct_monitor *m, ct_epoch_stats *es)
{
    ct_monitor_figures f;
    ct_monitor_figures_get(m, &f);
    /* an epoch shorter than the sampling period: one sample now (NVML's utilization is itself an
     * average over its last second or so) */
    if (f.gpu_samples == 0 && ct_monitor_has_gpu(m, NULL, 0)) {
        ct_monitor_sample(m);
        ct_monitor_figures_get(m, &f);
    }
    es->gpu_util = f.gpu_util;
    es->gpu_mem_mib = f.gpu_mem_mib;
    es->power_w = f.power_w;
    es->sm_clock_mhz = f.sm_clock_mhz;
    es->cpu_util = f.cpu_util;
    es->cpu_util_machine = f.cpu_util_machine;
    ct_monitor_take_note(m, es->monitor_note, (int)sizeof es->monitor_note);
}

void ct_monitor_stop(ct_monitor *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->stopping = 1;
    pthread_cond_broadcast(&m->wake);
    pthread_mutex_unlock(&m->lock);
    if (m->has_thread)
        pthread_join(m->thread, NULL);
    ct_nvml_close(m->nvml);
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
