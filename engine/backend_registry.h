// The backend registry: backends are picked once, at run time, by name ("cpu", "gpu").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"

namespace tandem {

struct BackendOptions {
  int threads = 0;       // CPU threads; 0 = every core
  int device_index = 0;  // GPU index
  bool deterministic = false;
  bool tf32 = false;
  size_t workspace_bytes = 256u << 20;  // GPU convolution workspace limit
  // GPU convolutions: time cuDNN's candidate algorithms once per shape (cudnnFind*) rather than
  // take its heuristic ranking (gpu.conv_algo).
  bool find_conv_algorithms = false;
  // CPU fp32 convolutions with a 3x3 window at stride 1: oneDNN's Winograd kernel where it has one
  // for the shape (cpu.conv_algo: auto); false: its direct kernels only (cpu.conv_algo: direct).
  bool cpu_winograd = true;
  int64_t batch_size = 0;  // the run's, named in the GPU's out-of-memory hint (0: unknown)
  // Tests: every 16-bit GPU convolution pass takes the path of a shape for which cuDNN offers no
  // 16-bit algorithm (computed in fp32 on converted copies), so that path is checked on any GPU.
  bool conv16_in_fp32 = false;
};

using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendOptions&)>;

// Registers a backend under a name; a later registration of the same name replaces it.
void register_backend(const std::string& name, BackendFactory factory);
// Creates the named backend; throws UsageError listing the known names when there is none.
std::unique_ptr<Backend> create_backend(const std::string& name, const BackendOptions& options);
std::vector<std::string> backend_names();

// Registers every backend this build contains (cpu always; gpu when built with CUDA, otherwise a
// "gpu" entry that explains how to get one). Defined in tools/builtin_backends.cpp, the one place
// that knows which backends were compiled in.
void register_builtin_backends();
// Whether this build contains the GPU backend (same file).
bool build_has_cuda();
// Whether the GPU backend can run here (built in, a driver, a device of a built architecture, a
// compatible cuDNN); if not, `reason` gets the cause and the fix in one line.
bool gpu_usable(std::string* reason);
// The GPUs the GPU backend sees here; 0 without one (or without the backend).
int gpu_count();

}  // namespace tandem
