// The one place that knows which backends this build contains.
#include "cpu/cpu_backend.h"
#include "engine/backend_registry.h"
#include "engine/error.h"
#ifdef TANDEM_WITH_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/device_query.h"
#endif

namespace tandem {

void register_builtin_backends() {
  register_cpu_backend();
#ifdef TANDEM_WITH_CUDA
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
#ifdef TANDEM_WITH_CUDA
  return cuda_usable(reason);
#else
  if (reason)
    *reason = "this build has no GPU backend (built without CUDA); rebuild with the CUDA toolkit "
              "and cuDNN installed (cmake -DTANDEM_CUDA=ON)";
  return false;
#endif
}

int gpu_count() {
#ifdef TANDEM_WITH_CUDA
  return cuda_device_count();
#else
  return 0;
#endif
}

}  // namespace tandem

#include <ostream>

namespace tandem {

void print_gpu_devices(std::ostream& out) {
#ifdef TANDEM_WITH_CUDA
  print_cuda_devices(out);
#else
  out << "GPU\n  none usable: this build has no GPU backend (built without CUDA); rebuild with the "
         "CUDA toolkit and cuDNN installed (cmake -DTANDEM_CUDA=ON) to train on a GPU\n";
#endif
}

}  // namespace tandem
