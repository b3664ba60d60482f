// CudaBackend: the Backend ops on device memory, with cuDNN, cuBLAS and small CUDA kernels.
#pragma once

#include "engine/backend.h"

namespace tandem {

// Registers "gpu" in the backend registry (creation throws DeviceError when no GPU is usable).
void register_cuda_backend();

}  // namespace tandem
