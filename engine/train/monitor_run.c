/* The monitor of a training run: the GPUs its replicas train on, matched to NVML by PCI bus id. */
#include <string.h>

#include "api/handle.h"
#include "train/monitor.h"
#ifdef CUTRAIN_HAVE_CUDA
#include "cuda/cuda_device.h"
#endif

enum { MAX_WATCHED = 64 };

ct_monitor *ct_run_monitor_start(ct_net *net)
{
    ct_monitor_gpu gpus[MAX_WATCHED];
    char bus_ids[MAX_WATCHED][32];
    int n = 0;
    for (int i = 0; i < net->n_replicas && n < MAX_WATCHED; i++) {
        const ct_device *dev = net->replicas[i].dev;
        if (strcmp(dev->ops->name, "cuda") != 0)
            continue;
        bus_ids[n][0] = '\0';
#ifdef CUTRAIN_HAVE_CUDA
        ct_err ignored;
        /* without a bus id, NVML's index is CUDA's ordinal when no device is hidden */
        if (ct_cuda_pci_bus_id(dev->ordinal, bus_ids[n], (int)sizeof bus_ids[n], &ignored) != CT_OK)
            bus_ids[n][0] = '\0';
#endif
        gpus[n] = (ct_monitor_gpu){bus_ids[n], dev->ordinal};
        n++;
    }
    /* about 10 Hz: NVML's utilization is itself an average over its own sample period */
    return ct_monitor_start(gpus, n, 0.1, NULL);
}
