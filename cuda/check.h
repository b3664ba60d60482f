// CUDA_CHECK, CUDNN_CHECK, CUBLAS_CHECK and the translation of known failure codes into one
// sentence with the cause and a hint for the fix (tandem::DeviceError).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/error.h"
#include "engine/progress.h"  // format_bytes

namespace tandem {

// What the translation needs to know of the machine; filled from the live system by
// query_cuda_context(), or by hand in tests.
struct CudaContext {
  int driver_version = 0;   // cudaDriverGetVersion: 0 when no driver is loaded, else 1000*major+10*minor
  int runtime_version = 0;  // cudaRuntimeGetVersion
  int device = -1;          // -1: unknown (no device, or the query failed)
  std::string device_name;
  int cc_major = 0, cc_minor = 0;
  size_t free_bytes = 0, total_bytes = 0;  // cudaMemGetInfo, 0 when unknown
  size_t requested_bytes = 0;              // the allocation that failed, 0 when none
  int64_t batch_size = 0;                  // the run's, for the out-of-memory hint; 0 when unknown
  std::string archs = compiled_archs();    // the build's CMAKE_CUDA_ARCHITECTURES, "75-real,90-virtual"

  static std::string compiled_archs();
};

// The cause and the fix of a failure, each one sentence.
struct Explanation {
  std::string cause;
  std::string hint;
};

// Fills a CudaContext from the live system without throwing (fields it cannot query stay unknown).
CudaContext query_cuda_context(size_t requested_bytes = 0);

// Translations; `call` is the failing call's name ("cudaGetDeviceCount"). Unknown codes give a
// generic sentence naming the call and the library's own message.
Explanation explain_cuda_error(cudaError_t code, const std::string& call, const CudaContext& ctx);
Explanation explain_cudnn_error(cudnnStatus_t code, const std::string& call, const CudaContext& ctx);
Explanation explain_cublas_error(cublasStatus_t code, const std::string& call,
                                 const CudaContext& ctx);
// The oldest cuDNN that has every function the backend calls (check.cpp says which): 9.0.0.
constexpr size_t kOldestCudnn = 90000;
// Whether the loaded cuDNN runs this build: never across major versions; within one, any library
// from kOldestCudnn on, older than the headers or not (check.cpp says why). `runtime` is
// cudnnGetVersion(), `compiled` CUDNN_VERSION. nullopt when it does.
std::optional<Explanation> explain_cudnn_version(size_t runtime, size_t compiled);
// cuDNN is built for one CUDA major version: `cudnn_cudart` is cudnnGetCudartVersion() (13010),
// `cudart` the runtime this build uses (cudaRuntimeGetVersion). nullopt when the majors agree.
std::optional<Explanation> explain_cudnn_cuda(size_t cudnn_cudart, int cudart);
// Both checks on the loaded library: why it cannot run this build, or nullopt.
std::optional<Explanation> explain_loaded_cudnn();
// Whether the build has machine code (same major, lower or equal minor) or PTX (lower or equal) for
// a device of capability major.minor; nullopt when it does, else why not.
std::optional<Explanation> explain_arch_support(const std::string& device_name, int major,
                                                int minor, const std::string& archs);

// "12.8" from 12080 (cudaDriverGetVersion / cudaRuntimeGetVersion format).
std::string format_cuda_version(int v);
// "9.19.0" from 91900 (cudnnGetVersion format; also accepts cuDNN 8's 8907).
std::string format_cudnn_version(size_t v);

// The throwing halves of the macros; `call` is the full call text.
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line,
                                   size_t requested_bytes = 0, int64_t batch_size = 0);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t code, const char* call, const char* file,
                                    int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t code, const char* call, const char* file,
                                     int line);

}  // namespace tandem

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t tandem_err_ = (call);                                                 \
    if (tandem_err_ != cudaSuccess)                                                   \
      ::tandem::throw_cuda_error(tandem_err_, #call, __FILE__, __LINE__);             \
  } while (0)

// For allocations: the message names the bytes asked for.
#define CUDA_CHECK_ALLOC(call, bytes)                                                 \
  do {                                                                                \
    cudaError_t tandem_err_ = (call);                                                 \
    if (tandem_err_ != cudaSuccess)                                                   \
      ::tandem::throw_cuda_error(tandem_err_, #call, __FILE__, __LINE__, (bytes));    \
  } while (0)

#define CUDNN_CHECK(call)                                                             \
  do {                                                                                \
    cudnnStatus_t tandem_st_ = (call);                                                \
    if (tandem_st_ != CUDNN_STATUS_SUCCESS)                                           \
      ::tandem::throw_cudnn_error(tandem_st_, #call, __FILE__, __LINE__);             \
  } while (0)

#define CUBLAS_CHECK(call)                                                            \
  do {                                                                                \
    cublasStatus_t tandem_st_ = (call);                                               \
    if (tandem_st_ != CUBLAS_STATUS_SUCCESS)                                          \
      ::tandem::throw_cublas_error(tandem_st_, #call, __FILE__, __LINE__);            \
  } while (0)

// After a kernel launch: launch-configuration errors now, execution errors at the next sync.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
