// The deviceQuery of this engine: GPUs, their capability and memory, library versions, fitness.
#include "cuda/device_query.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda/check.h"
#include "cuda/dtype_support.h"
#include "cuda/nccl_sums.h"

namespace tandem {
namespace {

// The loaded cuBLAS's version, "13.1.0" (no handle, so it works without a GPU).
std::string cublas_loaded_version() {
  int mj = 0, mn = 0, pt = 0;
  if (cublasGetProperty(MAJOR_VERSION, &mj) != CUBLAS_STATUS_SUCCESS) return "unknown";
  cublasGetProperty(MINOR_VERSION, &mn);
  cublasGetProperty(PATCH_LEVEL, &pt);
  return fmt::format("{}.{}.{}", mj, mn, pt);
}

// A failed step of the self-test: the message, and the error cleared for the next step.
struct Failed {
  std::string what;
};
void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Failed{std::string(what) + ": " + cudaGetErrorString(e)};
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Milliseconds of one cudaMemcpyAsync, median of 5 timed with events after 2 warm-up copies.
double time_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s,
                 cudaEvent_t a, cudaEvent_t b) {
  for (int i = 0; i < 2; ++i) ok(cudaMemcpyAsync(dst, src, bytes, kind, s), "warm-up copy");
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    ok(cudaEventRecord(a, s), "cudaEventRecord");
    ok(cudaMemcpyAsync(dst, src, bytes, kind, s), "cudaMemcpyAsync");
    ok(cudaEventRecord(b, s), "cudaEventRecord");
    ok(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0;
    ok(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  return median(ms);
}

// Host<->device and device<->device bandwidth of 64 MiB copies, GB/s (1e9 bytes/s); device to
// device counts the bytes read and written, like CUDA's bandwidthTest sample.
void bandwidth_test(std::ostream& out) {
  const size_t bytes = size_t{64} << 20;
  void *d0 = nullptr, *d1 = nullptr, *pinned = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  std::vector<unsigned char> pageable(bytes);
  for (size_t i = 0; i < bytes; ++i) pageable[i] = static_cast<unsigned char>(i * 131 + 7);
  try {
    ok(cudaMalloc(&d0, bytes), "cudaMalloc");
    ok(cudaMalloc(&d1, bytes), "cudaMalloc");
    ok(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    std::memcpy(pinned, pageable.data(), bytes);
    ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    ok(cudaEventCreate(&a), "cudaEventCreate");
    ok(cudaEventCreate(&b), "cudaEventCreate");
    auto gbs = [&](double ms, double factor) { return factor * bytes / (ms * 1e-3) / 1e9; };
    double h2d_pinned = gbs(time_copy(d0, pinned, bytes, cudaMemcpyHostToDevice, s, a, b), 1);
    double h2d_pageable =
        gbs(time_copy(d0, pageable.data(), bytes, cudaMemcpyHostToDevice, s, a, b), 1);
    double d2h_pinned = gbs(time_copy(pinned, d0, bytes, cudaMemcpyDeviceToHost, s, a, b), 1);
    double d2d = gbs(time_copy(d1, d0, bytes, cudaMemcpyDeviceToDevice, s, a, b), 2);
    out << fmt::format("    bandwidth      host->device {:.1f} GB/s pinned, {:.1f} GB/s pageable; "
                       "device->host {:.1f} GB/s pinned; device->device {:.0f} GB/s (64 MiB, "
                       "median of 5)\n",
                       h2d_pinned, h2d_pageable, d2h_pinned, d2d);
  } catch (const Failed& f) {
    out << "    bandwidth      test failed: " << f.what << "\n";
  }
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  if (s) cudaStreamDestroy(s);
  if (pinned) cudaFreeHost(pinned);
  if (d0) cudaFree(d0);
  if (d1) cudaFree(d1);
  cudaGetLastError();
}

// cuBLAS sgemm of 2048^3 (FP32, default math), median of 5 after warm-up, with 64 entries of the
// result checked against a double-precision host computation.
void sgemm_test(std::ostream& out) {
  const int n = 2048;
  const size_t elems = size_t{n} * n, bytes = elems * sizeof(float);
  std::vector<float> ha(elems), hb(elems), hc(elems);
  uint32_t state = 12345;  // a small LCG: the test needs varied values, not good randomness
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f * 2.f - 1.f;
  };
  for (size_t i = 0; i < elems; ++i) ha[i] = next(), hb[i] = next();
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  cublasHandle_t h = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  try {
    ok(cudaMalloc(&da, bytes), "cudaMalloc");
    ok(cudaMalloc(&db, bytes), "cudaMalloc");
    ok(cudaMalloc(&dc, bytes), "cudaMalloc");
    ok(cudaMemcpy(da, ha.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    ok(cudaMemcpy(db, hb.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw Failed{"cublasCreate failed"};
    cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    ok(cudaEventCreate(&e0), "cudaEventCreate");
    ok(cudaEventCreate(&e1), "cudaEventCreate");
    const float one = 1.f, zero = 0.f;
    auto run = [&] {
      if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero, dc, n) !=
          CUBLAS_STATUS_SUCCESS)
        throw Failed{"cublasSgemm failed"};
    };
    for (int i = 0; i < 2; ++i) run();
    std::vector<double> ms;
    for (int i = 0; i < 5; ++i) {
      ok(cudaEventRecord(e0, nullptr), "cudaEventRecord");
      run();
      ok(cudaEventRecord(e1, nullptr), "cudaEventRecord");
      ok(cudaEventSynchronize(e1), "cudaEventSynchronize");
      float t = 0;
      ok(cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime");
      ms.push_back(t);
    }
    ok(cudaMemcpy(hc.data(), dc, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    // Column-major: C(i,j) = sum_k A(i,k) B(k,j), A(i,k) at a[i + k*n].
    double worst = 0;
    for (int s = 0; s < 64; ++s) {
      const int i = (s * 977) % n, j = (s * 1531 + 17) % n;
      double ref = 0, mag = 0;
      for (int k = 0; k < n; ++k) {
        const double t = double{ha[i + static_cast<size_t>(k) * n]} * hb[k + static_cast<size_t>(j) * n];
        ref += t, mag += std::fabs(t);
      }
      worst = std::max(worst, std::fabs(hc[i + static_cast<size_t>(j) * n] - ref) / mag);
    }
    const double t = median(ms);
    const double gflops = 2.0 * n * n * n / (t * 1e-3) / 1e9;
    out << fmt::format("    sgemm          {:.0f} GFLOP/s FP32 (2048^3, {:.2f} ms); check against "
                       "the host: {} (worst error {:.1e} of sum|a*b|)\n",
                       gflops, t, worst < 1e-5 ? "ok" : "WRONG", worst);
  } catch (const Failed& f) {
    out << "    sgemm          test failed: " << f.what << "\n";
  }
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (h) cublasDestroy(h);
  if (da) cudaFree(da);
  if (db) cudaFree(db);
  if (dc) cudaFree(dc);
  cudaGetLastError();
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clears it: the backend's creation says what is wrong
    return 0;
  }
  return count;
}

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
  if (auto e = explain_loaded_cudnn()) {
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
  out << fmt::format("  cuDNN            compiled {}, loaded {} (built for CUDA {})\n",
                     format_cudnn_version(CUDNN_VERSION), format_cudnn_version(cudnnGetVersion()),
                     format_cuda_version(static_cast<int>(cudnnGetCudartVersion())));
  out << fmt::format("  cuBLAS           compiled {}.{}.{}, loaded {}\n", CUBLAS_VER_MAJOR,
                     CUBLAS_VER_MINOR, CUBLAS_VER_PATCH, cublas_loaded_version());
#if TANDEM_WITH_NCCL
  std::string nccl_missing;
  const std::string nccl = nccl_version(&nccl_missing);
  out << fmt::format("  NCCL             {}\n",
                     nccl.empty() ? nccl_missing : "loaded " + nccl + " (data-parallel sums)");
#else
  out << "  NCCL             not in this build (data-parallel sums go through host memory)\n";
#endif
  out << fmt::format("  architectures    {}\n", CudaContext::compiled_archs());
  // It hides GPUs from this process, or renumbers them: a first suspect when one is missing.
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"))
    out << fmt::format("  CUDA_VISIBLE_DEVICES  '{}' (only these GPUs are seen, numbered from 0)\n",
                       visible);
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
    auto dnn = explain_loaded_cudnn();
    if (arch) out << "    usable         no: " << arch->cause << "\n";
    else if (dnn) out << "    usable         no: " << dnn->cause << "\n";
    else out << "    usable         yes\n";
    for (DType t : {DType::kBF16, DType::kF16}) {  // as the CPU's bf16 row
      const std::string why = dtype_unsupported_reason(t, p.name, p.major, p.minor);
      out << fmt::format("    {}           {}\n", dtype_name(t),
                         why.empty() ? std::string("native (precision: ") + dtype_name(t) +
                                           " runs on its tensor cores, fp32 accumulation)"
                                     : "no (" + why + ")");
    }
    if (!arch) {  // the self-tests need kernels (cuBLAS's) that run on this device
      bandwidth_test(out);
      sgemm_test(out);
    }
  }
}

}  // namespace tandem
