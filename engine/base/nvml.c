/* NVML through dlopen: the declarations below are NVML's C ABI (nvml.h), restated so that no NVML
 * header or library is needed to build. */
#include "base/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_return;                 /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_device_st *nvml_device;
typedef struct {
    unsigned int gpu, memory;            /* nvmlUtilization_t, percent */
} nvml_utilization;
typedef struct {
    unsigned long long total, free, used; /* nvmlMemory_t, bytes */
} nvml_memory;
enum { NVML_ERROR_NOT_SUPPORTED = 3, NVML_CLOCK_SM = 1, MAX_DEVICES = 64 };

/* A figure the device does not have (power on some boards) is null, not a failure. */
static nvml_return first_failure(nvml_return so_far, nvml_return rc)
{
    return so_far ? so_far : rc == NVML_ERROR_NOT_SUPPORTED ? 0 : rc;
}

struct ct_nvml {
    void *lib;
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    nvml_return (*by_index)(unsigned int index, nvml_device *device);
    nvml_return (*by_bus_id)(const char *bus_id, nvml_device *device);
    nvml_return (*utilization)(nvml_device device, nvml_utilization *u);
    nvml_return (*memory)(nvml_device device, nvml_memory *m);
    nvml_return (*power)(nvml_device device, unsigned int *milliwatts);
    nvml_return (*clock)(nvml_device device, int type, unsigned int *mhz);
    nvml_device devices[MAX_DEVICES];
    int n_devices;
};

ct_nvml *ct_nvml_open(const char *library, char *why, int n)
{
    char ignored[8];
    if (!why) {
        why = ignored;
        n = (int)sizeof ignored;
    }
    if (!library)
        library = getenv("CT_NVML_LIBRARY");
    if (!library || !library[0])
        library = "libnvidia-ml.so.1";
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, (size_t)n, "%s not loaded: %s", library, dlerror());
        return NULL;
    }
    ct_nvml *nv = calloc(1, sizeof *nv);
    if (!nv) {
        dlclose(lib);
        snprintf(why, (size_t)n, "out of memory");
        return NULL;
    }
    nv->lib = lib;
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&nv->init, "nvmlInit_v2"},
        {(void **)&nv->shutdown, "nvmlShutdown"},
        {(void **)&nv->by_index, "nvmlDeviceGetHandleByIndex_v2"},
        {(void **)&nv->utilization, "nvmlDeviceGetUtilizationRates"},
        {(void **)&nv->memory, "nvmlDeviceGetMemoryInfo"},
        {(void **)&nv->power, "nvmlDeviceGetPowerUsage"},
        {(void **)&nv->clock, "nvmlDeviceGetClockInfo"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(lib, syms[i].name);
        if (!*syms[i].fn) {
            snprintf(why, (size_t)n, "%s has no %s", library, syms[i].name);
            dlclose(lib);
            free(nv);
            return NULL;
        }
    }
    /* optional: without it devices are matched by index */
    *(void **)&nv->by_bus_id = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml_return rc = nv->init();
    if (rc != 0) {
        snprintf(why, (size_t)n, "nvmlInit failed (NVML error %d)", rc);
        dlclose(lib);
        free(nv);
        return NULL;
    }
    return nv;
}

int ct_nvml_device(ct_nvml *nv, const char *pci_bus_id, int index)
{
    if (!nv || nv->n_devices == MAX_DEVICES)
        return -1;
    nvml_device d = NULL;
    nvml_return rc = 1;
    if (pci_bus_id && pci_bus_id[0] && nv->by_bus_id)
        rc = nv->by_bus_id(pci_bus_id, &d);
    if (rc != 0 && index >= 0)
        rc = nv->by_index((unsigned int)index, &d);
    if (rc != 0)
        return -1;
    nv->devices[nv->n_devices] = d;
    return nv->n_devices++;
}

int ct_nvml_read(ct_nvml *nv, int handle, ct_gpu_reading *out)
{
    *out = (ct_gpu_reading){-1.0, -1.0, -1.0, -1.0};
    if (!nv || handle < 0 || handle >= nv->n_devices)
        return -1;
    nvml_device d = nv->devices[handle];
    nvml_utilization u;
    nvml_memory m;
    unsigned int mw = 0, mhz = 0;
    nvml_return rc = 0, next = nv->utilization(d, &u);
    if (next == 0)
        out->util = u.gpu;
    rc = first_failure(rc, next);
    if ((next = nv->memory(d, &m)) == 0)
        out->mem_mib = (double)m.used / 1048576.0;
    rc = first_failure(rc, next);
    if ((next = nv->power(d, &mw)) == 0)
        out->power_w = mw / 1000.0;
    rc = first_failure(rc, next);
    if ((next = nv->clock(d, NVML_CLOCK_SM, &mhz)) == 0)
        out->sm_clock_mhz = mhz;
    return first_failure(rc, next);
}

void ct_nvml_close(ct_nvml *nv)
{
    if (!nv)
        return;
    nv->shutdown();
    dlclose(nv->lib);
    free(nv);
}
