/* The CUDA backend's row in the registry (registry.h): its entry points, for the code above the
 * backends, which reaches the CUDA backend only through this row. */
#include "cuda/comm_nccl.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_doctor.h"

_Static_assert((int)CT_NCCL_ID_BYTES == (int)CT_GPU_COMM_ID_BYTES, "the registry's communicator id is NCCL's unique id");

const ct_gpu_backend ct_cuda_registry_row = {
    .devices = ct_cuda_devices,
    .name = ct_cuda_device_name,
    .capability = ct_cuda_device_capability,
    .precision_needs = ct_cuda_precision_needs,
    .figures = ct_cuda_device_figures_get,
    .device_create = ct_cuda_device_create,
    .backend_create = ct_cuda_backend_create,
    .comm_create = ct_comm_nccl_create,
    .comm_unique_id = ct_comm_nccl_unique_id,
    .comm_create_rank = ct_comm_nccl_create_rank,
    .doctor = ct_cuda_doctor,
};
