// The one place that knows which backends this build contains, and how the GPU one is reached:
// - TANDEM_GPU_PLUGIN (the trainer and the test binaries of a CUDA build): through
//   libtandem_gpu.so beside the executable (or, for the tests, in the folder that
//   TANDEM_GPU_PLUGIN_FOLDER names relative to theirs), loaded the first time a GPU is asked for
//   (cuda/plugin.h);
// - TANDEM_WITH_CUDA alone (the tests that call cuda/ directly): linked in;
// - neither (a CPU-only build): a "gpu" entry that says how to get one.
#include <ostream>
#include <string>

#include "cpu/cpu_backend.h"
#include "engine/backend_registry.h"
#include "engine/error.h"
#if defined(TANDEM_GPU_PLUGIN)
#include <cuda_runtime_api.h>  // CUDART_VERSION
#include <cudnn_version.h>     // CUDNN_MAJOR
#include <dlfcn.h>

#include <filesystem>

#include "cuda/plugin.h"
#elif defined(TANDEM_WITH_CUDA)
#include "cuda/cuda_backend.h"
#include "cuda/device_query.h"
#endif

namespace tandem {
namespace {

#if defined(TANDEM_GPU_PLUGIN)

struct Loaded {
  const GpuPlugin* plugin = nullptr;
  std::string cause, hint;  // why not, when plugin is null
};

// The cause and fix for a plugin that did not load, from the loader's message (which names the
// library it could not find or use).
Loaded load_failure(const std::string& path, const std::string& message) {
  Loaded l;
  const auto names = [&](const char* lib) { return message.find(lib) != std::string::npos; };
  const std::string cuda_major = std::to_string(CUDART_VERSION / 1000);
  if (!std::filesystem::exists(path)) {
    l.cause = "this trainer's GPU backend, " + path + ", is missing";
    l.hint = "rebuild (cmake --build) so that it is beside the trainer again, or use --device cpu";
  } else if (names("libcudnn")) {
    l.cause = "cuDNN could not be loaded (" + message + ")";
    l.hint = "install cuDNN " + std::to_string(CUDNN_MAJOR) + " for CUDA " + cuda_major +
             " (e.g. apt install cudnn" + std::to_string(CUDNN_MAJOR) + "-cuda-" + cuda_major +
             "), or add its lib folder to LD_LIBRARY_PATH (`. tools/gpu_env.sh` in tandem's "
             "source folder finds the cuDNN of PyTorch's pip packages); or use --device cpu";
  } else if (names("libcublas") || names("libcudart")) {
    l.cause = "the CUDA runtime libraries could not be loaded (" + message + ")";
    l.hint = "install the CUDA " + cuda_major + " libraries (e.g. apt install cuda-libraries-" +
             cuda_major + "-" + std::to_string(CUDART_VERSION % 1000 / 10) +
             "), or add their folder to LD_LIBRARY_PATH (`. tools/gpu_env.sh` in tandem's "
             "source folder finds those of PyTorch's pip packages); or use --device cpu";
  } else {
    l.cause = "this trainer's GPU backend could not be loaded (" + message + ")";
    l.hint = "rebuild it (cmake --build), or use --device cpu";
  }
  return l;
}

// libtandem_gpu.so from the trainer's own folder, loaded once.
const Loaded& gpu_plugin() {
  static const Loaded loaded = [] {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
#if defined(TANDEM_GPU_PLUGIN_FOLDER)
    const std::filesystem::path folder = exe.parent_path() / TANDEM_GPU_PLUGIN_FOLDER;
#else
    const std::filesystem::path folder = exe.parent_path();
#endif
    const std::string path = (folder / kGpuPluginFile).lexically_normal().string();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = dlerror();
      return load_failure(path, e ? e : "unknown error");
    }
    using Entry = const GpuPlugin* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, kGpuPluginEntry));
    const GpuPlugin* plugin = entry ? entry() : nullptr;
    if (!plugin || std::string(plugin->abi) != kGpuPluginAbi) {
      Loaded l;
      l.cause = "this trainer's GPU backend, " + path + ", is from another build";
      l.hint = "rebuild (cmake --build) so that both come from one build, or use --device cpu";
      return l;
    }
    Loaded l;
    l.plugin = plugin;
    return l;
  }();
  return loaded;
}

#endif

}  // namespace

void register_builtin_backends() {
  register_cpu_backend();
#if defined(TANDEM_GPU_PLUGIN)
  register_backend("gpu", [](const BackendOptions& options) -> std::unique_ptr<Backend> {
    const Loaded& l = gpu_plugin();
    if (!l.plugin) throw DeviceError(l.cause, l.hint);
    return l.plugin->create(options);
  });
#elif defined(TANDEM_WITH_CUDA)
  register_cuda_backend();
#else
  register_backend("gpu", [](const BackendOptions&) -> std::unique_ptr<Backend> {
    throw DeviceError("this build has no GPU backend (built without CUDA)",
                      "rebuild with the CUDA toolkit and cuDNN installed (cmake -DTANDEM_CUDA=ON), "
                      "or use --device cpu");
  });
#endif
}

bool build_has_cuda() {
#ifdef TANDEM_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool gpu_usable(std::string* reason) {
#if defined(TANDEM_GPU_PLUGIN)
  const Loaded& l = gpu_plugin();
  if (l.plugin) return l.plugin->usable(reason);
  if (reason) *reason = l.cause + "; " + l.hint;
  return false;
#elif defined(TANDEM_WITH_CUDA)
  return cuda_usable(reason);
#else
  if (reason)
    *reason = "this build has no GPU backend (built without CUDA); rebuild with the CUDA toolkit "
              "and cuDNN installed (cmake -DTANDEM_CUDA=ON)";
  return false;
#endif
}

int gpu_count() {
#if defined(TANDEM_GPU_PLUGIN)
  const Loaded& l = gpu_plugin();
  return l.plugin ? l.plugin->device_count() : 0;
#elif defined(TANDEM_WITH_CUDA)
  return cuda_device_count();
#else
  return 0;
#endif
}

void print_gpu_devices(std::ostream& out) {
#if defined(TANDEM_GPU_PLUGIN)
  const Loaded& l = gpu_plugin();
  if (l.plugin)
    l.plugin->print_devices(out);
  else
    out << "GPU\n  none usable: " << l.cause << "\n  hint: " << l.hint << "\n";
#elif defined(TANDEM_WITH_CUDA)
  print_cuda_devices(out);
#else
  out << "GPU\n  none usable: this build has no GPU backend (built without CUDA); rebuild with the "
         "CUDA toolkit and cuDNN installed (cmake -DTANDEM_CUDA=ON) to train on a GPU\n";
#endif
}

}  // namespace tandem
