/* The backend registry (engine/backend.c): the one place that knows which backends this build
 * has. The CPU backend is always there (device.h, backend.h). A GPU backend is a row of entry
 * points, declared here without its libraries' types and filled in by the backend itself (the
 * CUDA backend's in cuda/registry.c). Code above the backends asks the registry for the row, and
 * never names a backend nor tests CUTRAIN_HAVE_CUDA: a build without a GPU backend has no row. */
#ifndef CT_REGISTRY_H
#define CT_REGISTRY_H

#include <stddef.h>

#include "backend.h"
#include "comm.h"

/* What the launch-cost model (graph/launch_cost.h) needs of a GPU: its name, SM count, SM and
 * memory clocks (kHz, peak), memory bus width (bits) and compute capability. */
typedef struct ct_gpu_figures {
    char name[96];
    int sms, clock_khz, mem_clock_khz, bus_bits, major, minor;
} ct_gpu_figures;

/* What rank 0 of a communicator across processes sends the others for them to join it. */
enum { CT_GPU_COMM_ID_BYTES = 128 };

/* A GPU backend's entry points; GPUs are named by their ordinal among the visible ones. */
typedef struct ct_gpu_backend {
    /* Visible GPUs into *count. A machine without one, or without a driver recent enough, is not
     * an error: CT_OK, *count = 0, and `reason` says why; any other failure is CT_ERR_BACKEND,
     * *count = 0, the message in `reason` (reason_size bytes, always terminated; may be NULL). */
    ct_status (*devices)(int *count, char *reason, size_t reason_size);
    /* GPU `ordinal`'s name into buf (n bytes, always terminated), its memory in bytes into
     * *total_mem when not NULL. */
    ct_status (*name)(int ordinal, char *buf, size_t n, size_t *total_mem, ct_err *err);
    /* Its compute capability. */
    ct_status (*capability)(int ordinal, int *major, int *minor, ct_err *err);
    /* Whether a GPU of capability major.minor runs `precision` (a ct_precision): NULL when it
     * does, else the lowest capability it needs ("8.0"). */
    const char *(*precision_needs)(int precision, int major, int minor);
    ct_status (*figures)(int ordinal, ct_gpu_figures *out, ct_err *err);
    ct_status (*device_create)(ct_device **out, int ordinal, ct_err *err);
    /* The backend on dev, a device of this row's device_create. */
    ct_status (*backend_create)(ct_backend **out, ct_device *dev, const ct_backend_options *opt, ct_err *err);
    /* The communicator of n GPUs in this process: rank i runs on bes[i] (n = 1 is valid). */
    ct_status (*comm_create)(ct_comm **out, ct_backend *const *bes, int n, double timeout_s, ct_err *err);
    /* Several processes, one GPU each: rank 0 makes the id and sends it to the others (over MPI),
     * then each process creates its rank of an nranks communicator on be. */
    ct_status (*comm_unique_id)(unsigned char id[CT_GPU_COMM_ID_BYTES], ct_err *err);
    ct_status (*comm_create_rank)(ct_comm **out, int nranks, int rank, const unsigned char id[CT_GPU_COMM_ID_BYTES],
                                  ct_backend *be, double timeout_s, ct_err *err);
    /* `cutrain doctor`'s checks (ct_doctor) into *report, which the caller has zeroed (together =
     * -1, built_with_cuda = 1). */
    ct_status (*doctor)(ct_doctor_report *report);
} ct_gpu_backend;

/* The GPU backend this build has; NULL in a build without one. */
const ct_gpu_backend *ct_registry_gpu(void);

/* The CUDA backend's row (cuda/registry.c, built only with the CUDA backend): only the registry
 * names it. */
extern const ct_gpu_backend ct_cuda_registry_row;

#endif
