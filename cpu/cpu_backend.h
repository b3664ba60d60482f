// CpuBackend: the Backend ops on host memory, with oneDNN primitives and OpenMP loops.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/backend.h"

namespace tandem {

// Registers "cpu" in the backend registry.
void register_cpu_backend();

// threads: 0 for every core. batch_size: the run's, named in the out-of-memory hint (0: unknown).
// winograd: BackendOptions::cpu_winograd.
std::unique_ptr<Backend> make_cpu_backend(int threads, int64_t batch_size = 0,
                                          bool winograd = true);

}  // namespace tandem
