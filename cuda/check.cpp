// Translation of CUDA, cuDNN and cuBLAS failure codes into a cause and a fix (see check.h).
#include "cuda/check.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>
#include <vector>

#include "engine/backend.h"

#ifndef TANDEM_CUDA_ARCHS
#define TANDEM_CUDA_ARCHS "unknown"
#endif

namespace tandem {
namespace {

// "cudaGetDeviceCount" from "cudaGetDeviceCount(&n)".
std::string call_name(const char* call) {
  std::string s(call);
  size_t p = s.find('(');
  return p == std::string::npos ? s : s.substr(0, p);
}

// "cuda/conv.cu" from "/work/main/cuda/conv.cu".
std::string short_file(const char* file) {
  std::string s(file);
  size_t p = s.rfind("/cuda/");
  return p == std::string::npos ? s : s.substr(p + 1);
}

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

struct ArchEntry {
  int cc;        // 90 for sm_90
  bool real;     // machine code (SASS)
  bool virt;     // PTX, JIT-compiled by the driver for newer devices
  bool special;  // an arch-specific variant (90a): runs only on exactly that capability
};

// CMAKE_CUDA_ARCHITECTURES, with ',' for ';': "75-real,90-virtual", "90" (= real and virtual).
std::vector<ArchEntry> parse_archs(const std::string& archs) {
  std::vector<ArchEntry> out;
  std::stringstream ss(archs);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t i = 0;
    while (i < item.size() && std::isdigit(static_cast<unsigned char>(item[i]))) ++i;
    if (i == 0) continue;
    ArchEntry e{std::stoi(item.substr(0, i)), true, true, false};
    std::string rest = item.substr(i);
    if (!rest.empty() && (rest[0] == 'a' || rest[0] == 'f')) e.special = true;
    if (rest.find("-real") != std::string::npos) e.virt = false;
    if (rest.find("-virtual") != std::string::npos) e.real = false;
    out.push_back(e);
  }
  return out;
}

std::string cc_str(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }

// No driver library to load: the driver is not installed (or not visible, as in a container).
std::string no_driver_cause(const std::string& call) {
  return "no NVIDIA driver found (" + call +
         ": the CUDA runtime could load no driver library, libcuda.so.1)";
}
std::string no_gpu_hint() {
  return "install the NVIDIA driver (`nvidia-smi` then lists the GPU), or use --device cpu";
}
// A driver that lists no device: none in the machine, or none let into this process.
std::string no_device_hint() {
  return "check that `nvidia-smi` lists a GPU; in a container, start it with --gpus all; check "
         "that CUDA_VISIBLE_DEVICES is unset or names a GPU; or use --device cpu";
}

std::string oom_explanation(const CudaContext& ctx) {
  std::string s = "out of GPU memory";
  if (ctx.requested_bytes) s += ": asked for " + format_bytes(ctx.requested_bytes);
  if (ctx.total_bytes)
    s += std::string(ctx.requested_bytes ? ", " : ": ") + format_bytes(ctx.free_bytes) +
         " free of " + format_bytes(ctx.total_bytes);
  if (!ctx.device_name.empty()) s += " on " + ctx.device_name;
  return s;
}

std::string oom_hint(const CudaContext& ctx) {
  if (ctx.batch_size > 1)
    return "try --batch-size " +
           std::to_string(batch_to_try(ctx.batch_size, ctx.requested_bytes,
                                       ctx.total_bytes ? ctx.free_bytes : 0)) +
           " or less (this run's is " + std::to_string(ctx.batch_size) +
           "), or close other programs using the GPU";
  return "try a smaller --batch-size, e.g. half the current one (or close other programs using "
         "the GPU)";
}

std::string driver_too_old(const CudaContext& ctx) {
  return "the NVIDIA driver is older than the CUDA runtime: driver supports CUDA " +
         format_cuda_version(ctx.driver_version) + ", this build uses runtime " +
         format_cuda_version(ctx.runtime_version);
}

std::string driver_hint(const CudaContext& ctx) {
  return "update the NVIDIA driver to one supporting CUDA " +
         format_cuda_version(ctx.runtime_version) + " or newer, or use --device cpu";
}

}  // namespace

std::string CudaContext::compiled_archs() { return TANDEM_CUDA_ARCHS; }

std::string format_cuda_version(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string format_cudnn_version(size_t v) {
  size_t major, minor, patch;
  if (v >= 10000) {  // cuDNN 9: major*10000 + minor*100 + patch
    major = v / 10000, minor = (v % 10000) / 100, patch = v % 100;
  } else {  // cuDNN 8 and older: major*1000 + minor*100 + patch
    major = v / 1000, minor = (v % 1000) / 100, patch = v % 100;
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

CudaContext query_cuda_context(size_t requested_bytes) {
  CudaContext ctx;
  ctx.requested_bytes = requested_bytes;
  if (cudaDriverGetVersion(&ctx.driver_version) != cudaSuccess) ctx.driver_version = 0;
  if (cudaRuntimeGetVersion(&ctx.runtime_version) != cudaSuccess) ctx.runtime_version = 0;
  int count = 0;
  if (ctx.driver_version > 0 && cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess) {
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
        ctx.device = dev;
        ctx.device_name = prop.name;
        ctx.cc_major = prop.major;
        ctx.cc_minor = prop.minor;
        ctx.total_bytes = prop.totalGlobalMem;
      }
      size_t free_b = 0, total_b = 0;
      if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        ctx.free_bytes = free_b;
        ctx.total_bytes = total_b;
      }
    }
  }
  cudaGetLastError();  // the queries above must not leave an error for the next launch check
  return ctx;
}

std::optional<Explanation> explain_arch_support(const std::string& device_name, int major,
                                                int minor, const std::string& archs) {
  std::vector<ArchEntry> entries = parse_archs(archs);
  if (entries.empty()) return std::nullopt;  // "native", "all": cannot tell, let the launch say
  int cc = major * 10 + minor;
  int lowest = 1000;
  std::string list;
  for (const ArchEntry& e : entries) {
    if (e.real && (e.special ? e.cc == cc : (e.cc / 10 == major && e.cc <= cc))) return std::nullopt;
    if (e.virt && !e.special && e.cc <= cc) return std::nullopt;
    lowest = std::min(lowest, e.cc);
    std::string name = cc_str(e.cc) + (e.real ? "" : " (PTX)");
    if (list.find(name) == std::string::npos) list += (list.empty() ? "" : ", ") + name;
  }
  Explanation ex;
  ex.cause = "device " + device_name + " has compute capability " + std::to_string(major) + "." +
             std::to_string(minor) + "; this build contains kernels for " + list + "; minimum " +
             cc_str(lowest);
  if (cc < lowest)
    ex.hint = "this GPU is older than the build supports (CUDA 13 builds for 7.5 and newer); use "
              "--device cpu";
  else
    ex.hint = "rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(cc) +
              " (or add PTX of the newest architecture, e.g. " + std::to_string(cc) +
              "-virtual), or use --device cpu";
  return ex;
}

Explanation explain_cuda_error(cudaError_t code, const std::string& call, const CudaContext& ctx) {
  std::string what = std::string(" (") + call + ": " + cudaGetErrorString(code) + ")";
  switch (code) {
    case cudaErrorInsufficientDriver:
      if (ctx.driver_version <= 0) return {no_driver_cause(call), no_gpu_hint()};
      return {driver_too_old(ctx) + what, driver_hint(ctx)};
    case cudaErrorNoDevice:
      return {"no NVIDIA GPU found: the driver lists none" + what, no_device_hint()};
    case cudaErrorStubLibrary:  // the toolkit's link-time stand-in, found before any driver
      return {
          "the CUDA driver library loaded is the toolkit's stub (a libcuda.so from its "
          "stubs/ folder), not the NVIDIA driver's" +
              what,
          "take the toolkit's stubs/ folder out of LD_LIBRARY_PATH and install the NVIDIA "
          "driver (`nvidia-smi` then lists the GPU); or use --device cpu"};
    case cudaErrorSystemNotReady:
      return {
          "the NVIDIA system is not ready to run work (on NVSwitch machines: the fabric "
          "manager is not running)" +
              what,
          "start the NVIDIA fabric manager (systemctl start nvidia-fabricmanager) and check "
          "`nvidia-smi -q`; or use --device cpu"};
    case cudaErrorSystemDriverMismatch:
      return {"the NVIDIA kernel driver and its user-space library are of different versions" +
                  what,
              "reboot after the driver update, or reinstall the NVIDIA driver; or use --device cpu"};
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorUnsupportedPtxVersion:
      return {driver_too_old(ctx) + what, driver_hint(ctx)};
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction: {
      auto arch = explain_arch_support(ctx.device_name.empty() ? "?" : ctx.device_name,
                                       ctx.cc_major, ctx.cc_minor, ctx.archs);
      if (arch) return {arch->cause + what, arch->hint};
      return {"this build has no kernel image for device " + ctx.device_name + " (compute capability " +
                  std::to_string(ctx.cc_major) + "." + std::to_string(ctx.cc_minor) +
                  "; build contains " + ctx.archs + ")" + what,
              "rebuild with -DCMAKE_CUDA_ARCHITECTURES matching the GPU, or use --device cpu"};
    }
    case cudaErrorMemoryAllocation:
      return {oom_explanation(ctx) + what, oom_hint(ctx)};
    case cudaErrorDevicesUnavailable:
      return {"the GPU is busy or in exclusive-process mode, used by another program" + what,
              "wait for the other program, pick another GPU, or use --device cpu"};
    case cudaErrorInvalidDevice:
      return {"GPU index does not exist on this machine" + what,
              "pick an index listed by `trainer devices`"};
    default:
      return {"CUDA call failed" + what,
              "this is probably a bug in tandem or a faulty GPU; run `trainer devices`, and "
              "report it with the log"};
  }
}

Explanation explain_cudnn_error(cudnnStatus_t code, const std::string& call,
                                const CudaContext& ctx) {
  std::string what = std::string(" (") + call + ": " + cudnnGetErrorString(code) + ")";
  int category = static_cast<int>(code) / 1000 * 1000;
  switch (static_cast<int>(code)) {
    case CUDNN_STATUS_NOT_INITIALIZED:
      if (ctx.driver_version <= 0)
        return {"no NVIDIA driver found, so cuDNN cannot start" + what, no_gpu_hint()};
      if (ctx.device < 0)
        return {"no NVIDIA GPU found, so cuDNN cannot start" + what, no_device_hint()};
      return {"cuDNN could not initialise on " + ctx.device_name + what,
              "check that the NVIDIA driver supports CUDA " +
                  format_cuda_version(ctx.runtime_version) + " and the GPU is free; or use "
                  "--device cpu"};
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH:
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED:
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
      return {"cuDNN is incomplete or mixes versions: one of its sub-libraries (libcudnn_cnn, "
              "libcudnn_ops, ...) could not be loaded" + what,
              "install the complete cuDNN " + format_cudnn_version(CUDNN_VERSION) +
                  " (or newer 9.x) and put its lib folder on LD_LIBRARY_PATH; or use --device cpu"};
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
    case CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER:
      return {"cuDNN " + format_cudnn_version(cudnnGetVersion()) +
                  " does not work with this driver/runtime (driver CUDA " +
                  format_cuda_version(ctx.driver_version) + ", runtime " +
                  format_cuda_version(ctx.runtime_version) + ")" + what,
              driver_hint(ctx)};
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
      return {"cuDNN " + format_cudnn_version(cudnnGetVersion()) + " does not support " +
                  ctx.device_name + " (compute capability " + std::to_string(ctx.cc_major) +
                  "." + std::to_string(ctx.cc_minor) + ")" + what,
              "install a cuDNN that supports this GPU, or use --device cpu"};
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      return {oom_explanation(ctx) + what, oom_hint(ctx)};
    default:
      break;
  }
  if (category == CUDNN_STATUS_NOT_SUPPORTED)
    return {"cuDNN does not support this operation or shape" + what,
            "try another shape or --device cpu, and report the layer with `--log-placement`"};
  return {"cuDNN call failed" + what,
          "this is probably a bug in tandem; run with --log-placement and report the log"};
}

Explanation explain_cublas_error(cublasStatus_t code, const std::string& call,
                                 const CudaContext& ctx) {
  std::string what = std::string(" (") + call + ": " + cublas_status_name(code) + ")";
  switch (code) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      if (ctx.driver_version <= 0)
        return {"no NVIDIA driver found, so cuBLAS cannot start" + what, no_gpu_hint()};
      if (ctx.device < 0)
        return {"no NVIDIA GPU found, so cuBLAS cannot start" + what, no_device_hint()};
      return {"cuBLAS could not initialise on " + ctx.device_name + what,
              "check that libcublas matches the CUDA runtime " +
                  format_cuda_version(ctx.runtime_version) + "; or use --device cpu"};
    case CUBLAS_STATUS_ALLOC_FAILED:
      return {oom_explanation(ctx) + what, oom_hint(ctx)};
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return {"cuBLAS does not support " + ctx.device_name + " (compute capability " +
                  std::to_string(ctx.cc_major) + "." + std::to_string(ctx.cc_minor) + ")" + what,
              "install a cuBLAS that supports this GPU, or use --device cpu"};
    default:
      return {"cuBLAS call failed" + what,
              "this is probably a bug in tandem; run with --log-placement and report the log"};
  }
}

std::optional<Explanation> explain_cudnn_version(size_t runtime, size_t compiled) {
  auto major = [](size_t v) { return v >= 10000 ? v / 10000 : v / 1000; };
  std::string rt = format_cudnn_version(runtime), ct = format_cudnn_version(compiled);
  if (major(runtime) != major(compiled))
    return Explanation{"cuDNN " + rt + " is loaded but this build was compiled against cuDNN " + ct +
                           " (another major version)",
                       "install cuDNN " + std::to_string(major(compiled)) + ".x (>= " + ct +
                           ") and put it first on LD_LIBRARY_PATH, or rebuild against cuDNN " +
                           rt + "; or use --device cpu"};
  // An older minor version of the same major runs this build when it has every call the backend
  // makes, which decides, not the headers' minor version: cuDNN keeps its API and ABI within a
  // major version, and each function the backend calls (cudnnCreate, the tensor, filter,
  // convolution and pooling descriptors, cudnnGetConvolution*Algorithm_v7,
  // cudnnFindConvolution*AlgorithmEx, cudnnConvolutionForward / BackwardData / BackwardFilter,
  // cudnnPoolingForward, cudnnGetLastErrorString, cudnnGetCudartVersion) is in cuDNN 9.0.
  // A library older than kOldestCudnn is refused. Raise it with the first call of a later 9.x.
  if (runtime < kOldestCudnn && major(compiled) == kOldestCudnn / 10000)
    return Explanation{"cuDNN " + rt + " is loaded but this build calls functions of cuDNN " +
                           format_cudnn_version(kOldestCudnn) + " and later",
                       "install cuDNN >= " + format_cudnn_version(kOldestCudnn) + " (" + ct +
                           " is what it was built with) and put it first on LD_LIBRARY_PATH; or "
                           "use --device cpu"};
  return std::nullopt;
}

std::optional<Explanation> explain_cudnn_cuda(size_t cudnn_cudart, int cudart) {
  const int theirs = static_cast<int>(cudnn_cudart / 1000), ours = cudart / 1000;
  if (theirs == ours) return std::nullopt;
  return Explanation{"the loaded cuDNN " + format_cudnn_version(cudnnGetVersion()) +
                         " was built for CUDA " + std::to_string(theirs) +
                         " but this build runs CUDA " + format_cuda_version(cudart),
                     "install the cuDNN " + std::to_string(CUDNN_MAJOR) + " package for CUDA " +
                         std::to_string(ours) + " (e.g. cudnn" + std::to_string(CUDNN_MAJOR) +
                         "-cuda-" + std::to_string(ours) +
                         ") and put it first on LD_LIBRARY_PATH; or use --device cpu"};
}

std::optional<Explanation> explain_loaded_cudnn() {
  if (auto why = explain_cudnn_version(cudnnGetVersion(), CUDNN_VERSION)) return why;
  int cudart = 0;
  if (cudaRuntimeGetVersion(&cudart) != cudaSuccess) cudart = CUDART_VERSION;
  return explain_cudnn_cuda(cudnnGetCudartVersion(), cudart);
}

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line,
                      size_t requested_bytes, int64_t batch_size) {
  CudaContext ctx = query_cuda_context(requested_bytes);
  ctx.batch_size = batch_size;
  std::string name = call_name(call);
  Explanation ex = explain_cuda_error(code, name, ctx);
  if (ex.cause.rfind("CUDA call failed", 0) == 0) ex.cause = "CUDA call " + std::string(call) + " failed" + ex.cause.substr(16);
  throw DeviceError(ex.cause + " at " + short_file(file) + ":" + std::to_string(line), ex.hint);
}

void throw_cudnn_error(cudnnStatus_t code, const char* call, const char* file, int line) {
  CudaContext ctx = query_cuda_context();
  Explanation ex = explain_cudnn_error(code, call_name(call), ctx);
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string extra = detail[0] ? std::string(" [") + detail + "]" : "";
  throw DeviceError(ex.cause + extra + " at " + short_file(file) + ":" + std::to_string(line),
                    ex.hint);
}

void throw_cublas_error(cublasStatus_t code, const char* call, const char* file, int line) {
  CudaContext ctx = query_cuda_context();
  Explanation ex = explain_cublas_error(code, call_name(call), ctx);
  throw DeviceError(ex.cause + " at " + short_file(file) + ":" + std::to_string(line), ex.hint);
}

}  // namespace tandem
