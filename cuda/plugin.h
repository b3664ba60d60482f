// The GPU backend as a plugin: libtandem_gpu.so, beside the trainer, which loads it the first time
// a GPU is asked for. So the trainer starts, and trains on the CPU, on a machine whose CUDA
// libraries or cuDNN are missing or broken, and says which when a GPU is asked for; and a CPU
// run does not load cuBLAS and cuDNN at all.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "engine/backend_registry.h"

namespace tandem {

// The plugin's entry points (cuda/cuda_backend.h, cuda/device_query.h), in one table.
struct GpuPlugin {
  const char* abi;  // kGpuPluginAbi of the build that made it
  std::unique_ptr<Backend> (*create)(const BackendOptions& options);
  bool (*usable)(std::string* reason);
  int (*device_count)();
  void (*print_devices)(std::ostream& out);
};

// A hash of the headers that define GpuPlugin and the types it passes (Backend, BackendOptions),
// computed by CMake: a plugin built against other versions of them is refused.
#ifndef TANDEM_GPU_PLUGIN_ABI
#error "TANDEM_GPU_PLUGIN_ABI is set by CMakeLists.txt"
#endif
constexpr const char* kGpuPluginAbi = TANDEM_GPU_PLUGIN_ABI;
constexpr const char* kGpuPluginFile = "libtandem_gpu.so";
constexpr const char* kGpuPluginEntry = "tandem_gpu_plugin";

}  // namespace tandem

extern "C" const tandem::GpuPlugin* tandem_gpu_plugin();
