/* A stand-in for the driver's libnvidia-ml.so.1, built by the tests and loaded through cutrain's
 * own dlopen path (CT_NVML_LIBRARY), so that the monitor's NVML side runs without a GPU.
 * Two devices with fixed readings that differ per device: index i has utilization 40 + 10 i %,
 * 1024 + 512 i MiB in use, 100 + 50 i W and an SM clock of 1400 + 10 i MHz; PCI bus id
 * "0000:3b:00.0" is device 1. CT_STANDIN_FAIL_AFTER=N makes every utilization call after the
 * Nth, and every other reading after it, fail with NVML_ERROR_GPU_IS_LOST (15);
 * CT_STANDIN_INIT_FAIL=1 makes nvmlInit_v2 fail. State is per load: nvmlInit_v2 resets it. */
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned int gpu, memory;
} utilization;
typedef struct {
    unsigned long long total, free, used;
} memory;
typedef struct device_st {
    int index;
} device_st;

static device_st devices[2] = {{0}, {1}};
static long fail_after = -1, util_calls;
static int lost;

static int gone(void)
{
    return lost ? 15 : 0;
}

int nvmlInit_v2(void)
{
    const char *f = getenv("CT_STANDIN_FAIL_AFTER"), *i = getenv("CT_STANDIN_INIT_FAIL");
    fail_after = f && f[0] ? atol(f) : -1;
    util_calls = 0;
    lost = 0;
    return i && i[0] == '1' ? 9 /* NVML_ERROR_DRIVER_NOT_LOADED */ : 0;
}

int nvmlShutdown(void)
{
    return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, device_st **out)
{
    if (index > 1)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *out = &devices[index];
    return 0;
}

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, device_st **out)
{
    if (strcmp(bus_id, "0000:3b:00.0") != 0)
        return 6; /* NVML_ERROR_NOT_FOUND */
    *out = &devices[1];
    return 0;
}

int nvmlDeviceGetUtilizationRates(device_st *d, utilization *u)
{
    if (fail_after >= 0 && ++util_calls > fail_after)
        lost = 1;
    if (gone())
        return gone();
    u->gpu = 40u + 10u * (unsigned)d->index;
    u->memory = 10;
    return 0;
}

int nvmlDeviceGetMemoryInfo(device_st *d, memory *m)
{
    if (gone())
        return gone();
    m->total = 16ull << 30;
    m->used = (1024ull + 512ull * (unsigned)d->index) << 20;
    m->free = m->total - m->used;
    return 0;
}

int nvmlDeviceGetPowerUsage(device_st *d, unsigned int *milliwatts)
{
    if (gone())
        return gone();
    *milliwatts = 100000u + 50000u * (unsigned)d->index;
    return 0;
}

int nvmlDeviceGetClockInfo(device_st *d, int type, unsigned int *mhz)
{
    if (gone())
        return gone();
    if (type != 1) /* NVML_CLOCK_SM */
        return 2;
    *mhz = 1400u + 10u * (unsigned)d->index;
    return 0;
}
