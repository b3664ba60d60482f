// Sums of GPU tensors over the processes of a data-parallel run with NCCL, in device memory. NCCL
// is opened when a run first needs it (libnccl.so.2), not linked: a machine without it still
// trains on its GPUs, its sums going through host memory and MPI, and the run says so.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "engine/backend.h"

namespace tandem {

class Communicator;

// The NCCL this process can use, "2.28.9"; empty when none, with `why_not` saying what was tried,
// the loader's reason, and what to install.
std::string nccl_version(std::string* why_not);

// Why the processes of comm cannot sum with NCCL from this one, on a machine with `gpus` GPUs;
// empty when they can (NCCL loads, and this host's processes have a GPU each: NCCL refuses two
// processes on one GPU).
std::string nccl_unavailable(const Communicator& comm, int gpus);

// Connects every process of comm (collective: each calls it) with NCCL, this one on GPU `device`;
// sums and broadcasts are queued on `stream`, and the weights applied with `cublas` (set to that
// stream). Throws DeviceError naming NCCL's reason when the processes cannot be connected.
std::unique_ptr<DeviceSums> start_nccl_sums(Communicator& comm, int device, cudaStream_t stream,
                                            cublasHandle_t cublas);

}  // namespace tandem
