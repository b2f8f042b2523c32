/* The run's monitor: what nvidia-smi and top would show while training, averaged over a window
 * (an epoch, or the epoch so far). A thread samples NVML (base/nvml.h) about every
 * `period_s` for each watched GPU; the process's and the machine's CPU use come from /proc at the
 * window's ends (base/proc_cpu.h). It only watches: nothing it does touches the training's
 * numbers. Without NVML, or with no GPU to watch, there is no thread and the GPU figures are
 * unknown; NVML failing mid-run makes them unknown from then on, with one note. */
#ifndef CT_MONITOR_H
#define CT_MONITOR_H

#include "cutrain.h"

/* Averages over a window; a figure that is not known is negative. */
typedef struct ct_monitor_figures {
    double gpu_util;         /* %: mean over the samples of the watched GPUs' mean */
    double gpu_mem_mib;      /* MiB: the highest total over the watched GPUs */
    double power_w;          /* W: mean of the total */
    double sm_clock_mhz;     /* MHz: mean over samples and GPUs */
    long gpu_samples;        /* samples that gave a figure */
    double cpu_util;         /* the process, in cores */
    double cpu_util_machine; /* the machine, % of all its cores */
} ct_monitor_figures;

/* A GPU to watch: its PCI bus id (NULL or "" when unknown) and its NVML index to fall back on. */
typedef struct ct_monitor_gpu {
    const char *pci_bus_id;
    int index;
} ct_monitor_gpu;

typedef struct ct_monitor ct_monitor;

/* Starts watching n GPUs through NVML from `library` (NULL: ct_nvml_open's default), sampling
 * every period_s seconds on a thread of its own; period_s 0: no thread, ct_monitor_sample is
 * called by hand (tests). Opens a first window. NULL only when memory runs out; every function
 * takes NULL as a monitor that knows nothing. */
ct_monitor *ct_monitor_start(const ct_monitor_gpu *gpus, int n, double period_s, const char *library);
/* Whether NVML is loaded and answering; when not, why into buf (n bytes). */
int ct_monitor_has_gpu(ct_monitor *m, char *why, int n);
/* Opens a new window: figures from here on. */
void ct_monitor_begin(ct_monitor *m);
/* One NVML sample now, into the window. */
void ct_monitor_sample(ct_monitor *m);
/* The current window's figures so far. */
void ct_monitor_figures_get(ct_monitor *m, ct_monitor_figures *out);
/* The note on NVML failing mid-run, once: copied into buf (n bytes) and 1 the first call after
 * the failure, 0 otherwise (buf then ""). */
int ct_monitor_take_note(ct_monitor *m, char *buf, int n);
/* The window's figures and the pending note, if any, into an epoch's stats; a window with no NVML
 * sample yet (shorter than the period) takes one first. */
void ct_monitor_epoch_stats(ct_monitor *m, ct_epoch_stats *es);
/* Stops the thread, unloads NVML, frees. */
void ct_monitor_stop(ct_monitor *m);

#endif
