// CpuBackend: the Backend ops on host memory, with oneDNN primitives and OpenMP loops.
#pragma once

#include <memory>

#include "engine/backend.h"

namespace tandem {

// Registers "cpu" in the backend registry.
void register_cpu_backend();

std::unique_ptr<Backend> make_cpu_backend(int threads);

}  // namespace tandem
