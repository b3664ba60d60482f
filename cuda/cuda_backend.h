// CudaBackend: the Backend ops on device memory, with cuDNN, cuBLAS and small CUDA kernels.
#pragma once

#include <memory>

#include "engine/backend.h"
#include "engine/backend_registry.h"

namespace tandem {

// Registers "gpu" in the backend registry (creation throws DeviceError when no GPU is usable).
void register_cuda_backend();
// A CudaBackend (throws DeviceError when no GPU is usable).
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options);

}  // namespace tandem
