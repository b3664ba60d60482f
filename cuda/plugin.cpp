// libtandem_gpu.so's one exported entry point (see plugin.h).
#include "cuda/plugin.h"

#include "cuda/cuda_backend.h"
#include "cuda/device_query.h"

extern "C" __attribute__((visibility("default"))) const tandem::GpuPlugin* tandem_gpu_plugin() {
  static const tandem::GpuPlugin plugin{tandem::kGpuPluginAbi, &tandem::make_cuda_backend,
                                        &tandem::cuda_usable, &tandem::cuda_device_count,
                                        &tandem::print_cuda_devices};
  return &plugin;
}
