// The deviceQuery of this engine: GPUs, their capability and memory, library versions, fitness.
#include "cuda/device_query.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <fmt/format.h>

#include "cuda/check.h"

namespace tandem {

bool cuda_usable(std::string* reason) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    Explanation e = explain_cuda_error(err == cudaSuccess ? cudaErrorNoDevice : err,
                                       "cudaGetDeviceCount", query_cuda_context());
    if (reason) *reason = e.cause + "; " + e.hint;
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    if (reason) *reason = "cudaGetDeviceProperties failed for GPU 0";
    return false;
  }
  if (auto e = explain_arch_support(prop.name, prop.major, prop.minor, CudaContext::compiled_archs())) {
    if (reason) *reason = e->cause + "; " + e->hint;
    return false;
  }
  if (auto e = explain_cudnn_version(cudnnGetVersion(), CUDNN_VERSION)) {
    if (reason) *reason = e->cause + "; " + e->hint;
    return false;
  }
  return true;
}

void print_cuda_devices(std::ostream& out) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  out << "GPU\n";
  out << fmt::format("  driver (CUDA)    {}\n", driver ? format_cuda_version(driver) : "none loaded");
  out << fmt::format("  runtime          {}\n", format_cuda_version(runtime));
  out << fmt::format("  cuDNN            compiled {}, loaded {}\n", format_cudnn_version(CUDNN_VERSION),
                     format_cudnn_version(cudnnGetVersion()));
  out << fmt::format("  cuBLAS           compiled {}.{}.{}\n", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR,
                     CUBLAS_VER_PATCH);
  out << fmt::format("  architectures    {}\n", CudaContext::compiled_archs());
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    Explanation e = explain_cuda_error(err == cudaSuccess ? cudaErrorNoDevice : err,
                                       "cudaGetDeviceCount", query_cuda_context());
    out << "  none usable: " << e.cause << "\n  hint: " << e.hint << "\n";
    return;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) continue;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(d) == cudaSuccess) cudaMemGetInfo(&free_b, &total_b);
    int clock_khz = 0, mem_clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, d);
    cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, d);
    out << fmt::format("  gpu:{}            {}\n", d, p.name);
    out << fmt::format("    capability     {}.{}, {} SMs\n", p.major, p.minor, p.multiProcessorCount);
    out << fmt::format("    memory         {} total, {} free\n", format_bytes(p.totalGlobalMem),
                       format_bytes(free_b));
    out << fmt::format("    clocks         {} MHz SM, {} MHz memory\n", clock_khz / 1000,
                       mem_clock_khz / 1000);
    auto arch = explain_arch_support(p.name, p.major, p.minor, CudaContext::compiled_archs());
    auto dnn = explain_cudnn_version(cudnnGetVersion(), CUDNN_VERSION);
    if (arch) out << "    usable         no: " << arch->cause << "\n";
    else if (dnn) out << "    usable         no: " << dnn->cause << "\n";
    else out << "    usable         yes\n";
  }
}

}  // namespace tandem
