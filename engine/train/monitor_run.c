/* The monitor of a training run: the GPUs its replicas train on, matched to NVML by PCI bus id. */
#include "train/monitor.h"
#include "train/run.h"

enum { MAX_WATCHED = 64 };

ct_monitor *ct_run_monitor_start(const ct_run *run)
{
    ct_monitor_gpu gpus[MAX_WATCHED];
    char bus_ids[MAX_WATCHED][32];
    int n = 0;
    for (int i = 0; i < run->n_replicas && n < MAX_WATCHED; i++) {
        const ct_device *dev = run->replicas[i].dev;
        /* without a bus id, NVML's index is CUDA's ordinal when no device is hidden */
        if (!dev->ops->pci_bus_id(dev, bus_ids[n], (int)sizeof bus_ids[n]))
            continue;
        gpus[n] = (ct_monitor_gpu){bus_ids[n], dev->ordinal};
        n++;
    }
    /* about 10 Hz: NVML's utilization is itself an average over its own sample period */
    return ct_monitor_start(gpus, n, 0.1, NULL);
}
