// CudaBackend: device selection and checks, handles, caching allocator, transfers, descriptor
// caches.
#include "cuda/cuda_backend.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "cuda/cuda_backend_impl.h"
#include "cuda/dtype_support.h"
#include "cuda/nccl_sums.h"
#include "engine/backend_registry.h"

namespace tandem {

// ---------------------------------------------------------------------------------------------
// DevicePool

namespace {
// Makes `device` the calling thread's current GPU. Each backend holds its own device, and in a
// list of GPUs (`--device gpu:0,gpu:1`) every backend starts before the first runs, which leaves
// the last one started current: a run's ops (and a block's cudaFree) must not depend on that.
void make_current(int device) {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device)
    CUDA_CHECK(cudaSetDevice(device));
}

class PoolHandle {  // the deleter of a pool block: returns it to the free list of its pool
 public:
  PoolHandle(std::shared_ptr<DevicePool> pool, size_t size) : pool_(std::move(pool)), size_(size) {}
  void operator()(void* p) const;

 private:
  std::shared_ptr<DevicePool> pool_;
  size_t size_;
};
}  // namespace

DevicePool::DevicePool(int device, int64_t batch_size)
    : batch_size_(batch_size),
      cache_(
          [device](size_t bytes) -> void* {
            make_current(device);
            void* p = nullptr;
            cudaError_t err = cudaMalloc(&p, bytes);
            if (err == cudaSuccess) return p;
            cudaGetLastError();  // not sticky: clear it, so the next launch check sees none
            if (err == cudaErrorMemoryAllocation) return nullptr;  // the cache frees, then retries
            throw_cuda_error(err, "cudaMalloc(&p, bytes)", __FILE__, __LINE__, bytes);
          },
          // A cached block may still be used by queued ops (reuse is stream-ordered), and
          // cudaFree only "may" synchronise: wait for the device first (it is rare: out of
          // memory, and the end).
          [device](void* p, size_t) {
            if (cudaSetDevice(device) != cudaSuccess) {  // no device left to free it on
              cudaGetLastError();
              return;
            }
            cudaDeviceSynchronize();
            cudaFree(p);
          }) {}

std::shared_ptr<void> DevicePool::allocate(size_t bytes) {
  size_t size = 0;
  void* p = cache_.take(bytes, &size);
  if (!p)
    throw_cuda_error(cudaErrorMemoryAllocation, "cudaMalloc(&p, bytes)", __FILE__, __LINE__, size,
                     batch_size_);
  return std::shared_ptr<void>(p, PoolHandle(shared_from_this(), size));
}

void PoolHandle::operator()(void* p) const { pool_->give_back(p, size_); }

// ---------------------------------------------------------------------------------------------
// Descriptor caches

ConvEntry::~ConvEntry() {
  if (x) cudnnDestroyTensorDescriptor(x);
  if (y) cudnnDestroyTensorDescriptor(y);
  if (bias) cudnnDestroyTensorDescriptor(bias);
  if (w) cudnnDestroyFilterDescriptor(w);
  if (conv) cudnnDestroyConvolutionDescriptor(conv);
}

PoolEntry::~PoolEntry() {
  if (x) cudnnDestroyTensorDescriptor(x);
  if (y) cudnnDestroyTensorDescriptor(y);
  if (pool) cudnnDestroyPoolingDescriptor(pool);
}

namespace {
// A 4-D descriptor of t's logical (N,C,H,W) dims, stored in `format` (NCHW, or NHWC).
void set_4d(cudnnTensorDescriptor_t d, const Tensor& t,
            cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW,
            cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, format, type, static_cast<int>(t.dim(0)),
                                         static_cast<int>(t.dim(1)), static_cast<int>(t.dim(2)),
                                         static_cast<int>(t.dim(3))));
}
void set_nchw(cudnnTensorDescriptor_t d, const Tensor& t) { set_4d(d, t); }

cudnnDataType_t cudnn_type(DType d) {
  return d == DType::kBF16  ? CUDNN_DATA_BFLOAT16
         : d == DType::kF16 ? CUDNN_DATA_HALF
                            : CUDNN_DATA_FLOAT;
}
}  // namespace

ConvEntry& CudaBackend::conv_entry(const Tensor& x, const Tensor& w, const Tensor& y,
                                   const Conv2dParams& p, DType dtype) {
  TANDEM_CHECK(x.shape().rank() == 4 && w.shape().rank() == 4 && y.shape().rank() == 4,
               "conv2d tensors must be 4-D");
  TANDEM_CHECK(p.groups >= 1 && x.dim(1) == w.dim(1) * p.groups && w.dim(0) % p.groups == 0,
               "conv2d channels of x " + x.shape().str() + " and w " + w.shape().str() + " in " +
                   std::to_string(p.groups) + " groups");
  Shape expected{
      x.dim(0), w.dim(0),
      conv_out_size(x.dim(2), static_cast<int>(w.dim(2)), p.stride_h, p.pad_h, p.dilation_h),
      conv_out_size(x.dim(3), static_cast<int>(w.dim(3)), p.stride_w, p.pad_w, p.dilation_w)};
  expect_shape(y, expected, "conv2d output");
  TANDEM_CHECK(dtype != DType::kI32, "conv2d computes in fp32, bf16 or fp16");
  const bool low = is_16bit(dtype);
  const Layout layout = low ? Layout::kChannelsLast : Layout::kPlain;
  const int64_t dt = static_cast<int64_t>(dtype), order = static_cast<int64_t>(layout);
  ConvKey key{x.dim(0),     x.dim(1),     x.dim(2),   x.dim(3),   w.dim(0), w.dim(1),
              w.dim(2),     w.dim(3),     p.stride_h, p.stride_w, p.pad_h,  p.pad_w,
              p.dilation_h, p.dilation_w, p.groups,   dt,         order};
  auto it = conv_cache_.find(key);
  if (it != conv_cache_.end()) return *it->second;

  auto e = std::make_unique<ConvEntry>();
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->y));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->bias));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->w));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&e->conv));
  e->dtype = dtype;
  // 16 bits: NHWC data and a (K,R,S,C) filter (NHWC's filter order), cuDNN's layout for tensor
  // cores; the dims are the logical (N,C,H,W) and (K,C,R,S) either way.
  const cudnnTensorFormat_t format = low ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  set_4d(e->x, x, format, cudnn_type(dtype));
  set_4d(e->y, y, format, cudnn_type(dtype));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                         static_cast<int>(w.dim(0)), 1, 1));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(e->w, cudnn_type(dtype), format,
                                         static_cast<int>(w.dim(0)), static_cast<int>(w.dim(1)),
                                         static_cast<int>(w.dim(2)), static_cast<int>(w.dim(3))));
  // Compute type FLOAT for every dtype: 16-bit products accumulate in fp32 (cuDNN's
  // PSEUDO_HALF and PSEUDO_BFLOAT16 configurations), as autocast's convolutions do.
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(e->conv, p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                                              p.dilation_h, p.dilation_w, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  // Grouped and depthwise: cuDNN's own (the filter's C is the group's channels).
  if (p.groups != 1) CUDNN_CHECK(cudnnSetConvolutionGroupCount(e->conv, p.groups));
  // FMA_MATH forbids TF32 tensor cores; DEFAULT_MATH lets cuDNN use them for fp32 (Ampere+).
  // 16-bit data: TENSOR_OP_MATH, its tensor cores (not TF32; conv.cu sets each pass's own).
  CUDNN_CHECK(cudnnSetConvolutionMathType(e->conv, low             ? CUDNN_TENSOR_OP_MATH
                                                   : options_.tf32 ? CUDNN_DEFAULT_MATH
                                                                   : CUDNN_FMA_MATH));
  int n, c, h, wd;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(e->conv, e->x, e->w, &n, &c, &h, &wd));
  TANDEM_CHECK(n == y.dim(0) && c == y.dim(1) && h == y.dim(2) && wd == y.dim(3),
               "cuDNN output shape differs from conv_out_size");
  // fmt rather than a chain of std::string +, which trips a false -Wrestrict in GCC 12.
  e->shape = fmt::format("x{} w{} stride {}x{} pad {}x{}", x.shape().str(), w.shape().str(),
                         p.stride_h, p.stride_w, p.pad_h, p.pad_w);
  if (p.dilation_h != 1 || p.dilation_w != 1)
    e->shape += fmt::format(" dil {}x{}", p.dilation_h, p.dilation_w);
  if (p.groups != 1) e->shape += fmt::format(" groups {}", p.groups);
  if (low) e->shape += fmt::format(" {} nhwc", dtype_name(dtype));
  ConvEntry& ref = *e;
  conv_order_.push_back(&ref);
  conv_cache_.emplace(key, std::move(e));
  return ref;
}

PoolEntry& CudaBackend::pool_entry(const Tensor& x, const Tensor& y, const Pool2dParams& p) {
  TANDEM_CHECK(x.shape().rank() == 4 && y.shape().rank() == 4, "pool2d tensors must be 4-D");
  expect_shape(y, pool_out_shape(x.shape(), p), "pool2d output");
  PoolKey key{x.dim(0),   x.dim(1),   x.dim(2),   x.dim(3),   static_cast<int64_t>(p.mode),
              p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h,
              p.pad_w,    p.ceil_mode};
  auto it = pool_cache_.find(key);
  if (it != pool_cache_.end()) return *it->second;
  auto e = std::make_unique<PoolEntry>();
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->y));
  CUDNN_CHECK(cudnnCreatePoolingDescriptor(&e->pool));
  set_nchw(e->x, x);
  set_nchw(e->y, y);
  cudnnPoolingMode_t mode = p.mode == PoolMode::kMax ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                     : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  CUDNN_CHECK(cudnnSetPooling2dDescriptor(e->pool, mode, CUDNN_PROPAGATE_NAN, p.kernel_h,
                                          p.kernel_w, p.pad_h, p.pad_w, p.stride_h, p.stride_w));
  PoolEntry& ref = *e;
  pool_cache_.emplace(key, std::move(e));
  return ref;
}

void* CudaBackend::workspace(size_t bytes) {
  if (bytes > workspace_bytes_) {
    workspace_.reset();  // back to the pool first: stream order makes the reuse safe
    workspace_ = pool_->allocate(bytes);
    workspace_bytes_ = bytes;
  }
  return workspace_.get();
}

// ---------------------------------------------------------------------------------------------
// Creation

CudaBackend::CudaBackend(const BackendOptions& options) : options_(options) {
  try {
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    if (count == 0)
      throw_cuda_error(cudaErrorNoDevice, "cudaGetDeviceCount(&count)", __FILE__, __LINE__);
    device_ = options.device_index;
    if (device_ < 0 || device_ >= count)
      throw DeviceError(
          "GPU " + std::to_string(device_) + " does not exist: this machine has " +
              std::to_string(count) + " GPU" + (count > 1 ? "s" : ""),
          "pick a GPU index from 0 to " + std::to_string(count - 1) + " (see `trainer devices`)");
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaGetDeviceProperties(&prop_, device_));
    if (auto why = explain_arch_support(prop_.name, prop_.major, prop_.minor,
                                        CudaContext::compiled_archs()))
      throw DeviceError(why->cause, why->hint);
    if (auto why = explain_loaded_cudnn()) throw DeviceError(why->cause, why->hint);

    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&copy_done_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&taken_done_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&ops_queued_, cudaEventDisableTiming));
    CUDNN_CHECK(cudnnCreate(&cudnn_));
    CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // DISALLOW_REDUCED_PRECISION_REDUCTION: a 16-bit product (cublasGemmEx) that cuBLAS splits
    // along K adds its parts in fp32, not in the 16-bit output type, so it is rounded once, as
    // the CPU's and the tests' reference; sgemm has no such reduction and is unchanged by it.
    CUBLAS_CHECK(cublasSetMathMode(
        cublas_, static_cast<cublasMath_t>(
                     (options_.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) |
                     CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    CUDA_CHECK(cudaEventCreateWithFlags(&staging_free_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&later_done_, cudaEventDisableTiming));
    CUDA_CHECK_ALLOC(cudaMalloc(&device_flag_, 4 * sizeof(unsigned long long)), 32);
    CUDA_CHECK(cudaHostAlloc(&host_flag_, 4 * sizeof(unsigned long long), cudaHostAllocDefault));
    pool_ = std::make_shared<DevicePool>(device_, options.batch_size);
  } catch (...) {
    release();
    throw;
  }
}

void CudaBackend::release() {
  cudaSetDevice(device_);  // its handles and buffers belong to its device
  if (copy_stream_) cudaStreamSynchronize(copy_stream_);
  if (stream_) cudaStreamSynchronize(stream_);
  conv_cache_.clear();
  conv_order_.clear();
  pool_cache_.clear();
  workspace_.reset();
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (staging_free_) cudaEventDestroy(staging_free_);
  if (later_done_) cudaEventDestroy(later_done_);
  later_done_ = nullptr;
  if (staging_) cudaFreeHost(staging_);
  if (host_flag_) cudaFreeHost(host_flag_);
  if (device_flag_) cudaFree(device_flag_);
  if (copy_done_) cudaEventDestroy(copy_done_);
  if (taken_done_) cudaEventDestroy(taken_done_);
  taken_done_ = nullptr;
  if (ops_queued_) cudaEventDestroy(ops_queued_);
  ops_queued_ = nullptr;
  if (copy_stream_) cudaStreamDestroy(copy_stream_);
  if (stream_) cudaStreamDestroy(stream_);
  copy_done_ = nullptr, copy_stream_ = nullptr;
  cublas_ = nullptr, cudnn_ = nullptr, staging_free_ = nullptr, staging_ = nullptr;
  host_flag_ = nullptr, device_flag_ = nullptr, stream_ = nullptr;
  cudaGetLastError();
}

CudaBackend::~CudaBackend() { release(); }

InfoRows CudaBackend::info() const {
  InfoRows rows;
  rows.emplace_back("Device", std::string(prop_.name) + " (GPU " + std::to_string(device_) + ")");
  rows.emplace_back("Compute capability", std::to_string(prop_.major) + "." +
                                              std::to_string(prop_.minor) + ", " +
                                              std::to_string(prop_.multiProcessorCount) + " SMs");
  // cudaMemGetInfo reads the calling thread's current device, which in a device list of several
  // GPUs is the last one started (start_gpus), not necessarily this one: make this one current.
  size_t free_b = 0, total_b = prop_.totalGlobalMem;
  if (cudaSetDevice(device_) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
    cudaGetLastError();
  rows.emplace_back("Memory", format_bytes(total_b) + " total, " + format_bytes(free_b) + " free");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  rows.emplace_back("Driver / runtime", "CUDA " + format_cuda_version(driver) + " / " +
                                            format_cuda_version(runtime) + " (compiled " +
                                            format_cuda_version(CUDART_VERSION) + ")");
  rows.emplace_back("cuDNN", format_cudnn_version(cudnnGetVersion()) + " (compiled " +
                                 format_cudnn_version(CUDNN_VERSION) + ")");
  int mj = 0, mn = 0, pt = 0;
  cublasGetProperty(MAJOR_VERSION, &mj);
  cublasGetProperty(MINOR_VERSION, &mn);
  cublasGetProperty(PATCH_LEVEL, &pt);
  rows.emplace_back("cuBLAS", std::to_string(mj) + "." + std::to_string(mn) + "." +
                                  std::to_string(pt) + " (compiled " +
                                  std::to_string(CUBLAS_VER_MAJOR) + "." +
                                  std::to_string(CUBLAS_VER_MINOR) + "." +
                                  std::to_string(CUBLAS_VER_PATCH) + ")");
  rows.emplace_back("Math", std::string(options_.tf32 ? "TF32 tensor cores" : "FP32 (TF32 off)") +
                                (options_.deterministic ? ", deterministic" : ""));
  // As the CPU's "bf16" row: whether precision: bf16 / fp16 runs here, on what.
  for (DType d : {DType::kBF16, DType::kF16}) {
    std::string why;
    rows.emplace_back(dtype_name(d), supports_dtype(d, &why)
                                         ? std::string("native (precision: ") + dtype_name(d) +
                                               " runs cuDNN and cuBLAS on " + dtype_name(d) +
                                               " tensor cores, fp32 accumulation)"
                                         : "no (" + why + ")");
  }
  rows.emplace_back("Conv workspace limit", format_bytes(options_.workspace_bytes));
  return rows;
}

bool CudaBackend::supports_dtype(DType d, std::string* why_not) const {
  const std::string why = dtype_unsupported_reason(d, prop_.name, prop_.major, prop_.minor);
  if (why_not) *why_not = why;
  return why.empty();
}

std::vector<std::string> CudaBackend::placement_log() const {
  std::vector<std::string> lines;
  std::string math = options_.tf32 ? "TF32" : "FP32";
  for (const ConvEntry* e : conv_order_) {
    // 16-bit entries: their dtype's tensor-op math (fp32 accumulation), whatever the tf32 option.
    const std::string entry_math = is_16bit(e->dtype)
                                       ? fmt::format("{} tensor-op math, fp32 accumulation",
                                                     e->dtype == DType::kBF16 ? "BF16" : "FP16")
                                       : math;
    std::string s = "conv2d " + e->shape + ": cuDNN";
    auto pass = [&](const char* name, const ConvPass& c, const std::string& algo) {
      if (c.fp32) {  // 16-bit data without a 16-bit algorithm: the fp32 entry's line has it
        s += std::string(name) + "in fp32 (no " + dtype_name(e->dtype) + " algorithm)";
      } else if (c.in_use()) {
        s += std::string(name) + algo + (c.timed ? " (timed" : " (heuristic") + ", workspace " +
             format_bytes(c.workspace()) + ")";
      }
    };
    auto at = [](const ConvPass& c) { return c.in_use() ? c.algo() : 0; };
    pass(" fwd ", e->fwd, conv_fwd_algo_name(static_cast<cudnnConvolutionFwdAlgo_t>(at(e->fwd))));
    pass(", bwd_data ", e->bwd_data,
         conv_bwd_data_algo_name(static_cast<cudnnConvolutionBwdDataAlgo_t>(at(e->bwd_data))));
    pass(
        ", bwd_filter ", e->bwd_filter,
        conv_bwd_filter_algo_name(static_cast<cudnnConvolutionBwdFilterAlgo_t>(at(e->bwd_filter))));
    lines.push_back(s + ", " + entry_math + (options_.deterministic ? ", deterministic" : ""));
  }
  lines.push_back("gemm: cuBLAS sgemm (" + math +
                  (options_.tf32 ? " tensor-op math)" : " default math)"));
  if (is_16bit(gemm16_))
    lines.push_back(fmt::format(
        "gemm with {} operands: cuBLAS GemmEx ({} tensor-op math, "
        "CUBLAS_COMPUTE_32F; fp32 operands rounded to {} first)",
        dtype_name(gemm16_), gemm16_ == DType::kBF16 ? "BF16" : "FP16", dtype_name(gemm16_)));
  lines.push_back("pool2d: cuDNN pooling forward; backward: tandem kernels (max: first maximum)");
  lines.push_back(
      "activations, bias, dropout, losses, optimizers: tandem CUDA kernels "
      "(fixed-order reductions)");
  if (is_16bit(gemm16_) || std::any_of(conv_order_.begin(), conv_order_.end(),
                                       [](const ConvEntry* e) { return is_16bit(e->dtype); }))
    lines.push_back(
        "16-bit tensors: activations, add and bias in 16-bit kernels (fp32 "
        "arithmetic, rounded once); pooling, batch normalization, dropout and the "
        "losses in fp32 on converted copies");
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Memory

void* CudaBackend::staging(size_t bytes) {
  if (bytes > staging_bytes_) {
    CUDA_CHECK(cudaEventSynchronize(staging_free_));
    if (staging_) CUDA_CHECK(cudaFreeHost(staging_));
    staging_ = nullptr;
    staging_bytes_ = 0;
    CUDA_CHECK_ALLOC(cudaHostAlloc(&staging_, bytes, cudaHostAllocDefault), bytes);
    staging_bytes_ = bytes;
  }
  return staging_;
}

namespace {
constexpr size_t kStagingChunk = 16u << 20;  // larger transfers go through in chunks of this
}

std::shared_ptr<void> CudaBackend::allocate_host(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault);
  if (err == cudaSuccess) return {p, [](void* q) { cudaFreeHost(q); }};
  cudaGetLastError();  // not sticky
  if (err != cudaErrorMemoryAllocation)
    throw_cuda_error(err, "cudaHostAlloc(&p, bytes, cudaHostAllocDefault)", __FILE__, __LINE__,
                     bytes);
  // Page-locked memory is limited (ulimit -l, or the host's RAM), unlike the device's: pageable
  // memory still works, its uploads go through the staging buffer and do not overlap the ops.
  if (!warned_pageable_.exchange(true))
    log_warning("could not pin " + format_bytes(bytes) +
                " of host memory for the batches; using pageable memory, so uploads are staged "
                "and do not overlap the computation (raise the locked-memory limit, ulimit -l, or "
                "lower data.workers to pin less)");
  return Backend::allocate_host(bytes);
}

namespace {
bool is_pinned(const void* host) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, host) != cudaSuccess) {
    cudaGetLastError();  // pageable memory on an old runtime: not an error worth keeping
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}
}  // namespace

std::shared_ptr<void> CudaBackend::allocate(size_t bytes) {
  make_current(device_);  // a run's first call: its graph's tensors (a cached block sets none)
  return pool_->allocate(bytes);
}

void CudaBackend::upload(Tensor& dst, const void* host) {
  make_current(device_);  // each step starts here; another backend may have run on this thread
  size_t n = dst.bytes();
  if (n == 0) return;
  if (is_pinned(host)) {  // allocate_host memory: straight to the device, no staging copy
    CUDA_CHECK(cudaMemcpyAsync(dst.data(), host, n, cudaMemcpyHostToDevice, stream_));
    return;
  }
  staging(std::min(n, kStagingChunk));
  auto* d = reinterpret_cast<char*>(dst.data());
  auto* h = static_cast<const char*>(host);
  for (size_t off = 0; off < n;) {
    size_t len = std::min(staging_bytes_, n - off);
    // The previous copy out of the staging buffer must be done before it is overwritten; the
    // caller may reuse `host` as soon as this returns.
    CUDA_CHECK(cudaEventSynchronize(staging_free_));
    std::memcpy(staging_, h + off, len);
    CUDA_CHECK(cudaMemcpyAsync(d + off, staging_, len, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaEventRecord(staging_free_, stream_));
    off += len;
  }
}

void CudaBackend::upload_ahead(Tensor& dst, const void* host) {
  make_current(device_);
  if (dst.bytes() == 0) return;
  if (!is_pinned(host)) {  // a pageable copy cannot run beside the ops anyway
    upload(dst, host);
    return;
  }
  // The copy waits for the ops queued before the last take_uploads(), which may still read dst
  // (the buffer the copy before it filled), or for every op so far; not for those queued since,
  // which it runs beside (in training: the step that reads the batch before).
  if (!taken_) CUDA_CHECK(cudaEventRecord(ops_queued_, stream_));
  CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, ops_queued_, 0));
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), host, dst.bytes(), cudaMemcpyHostToDevice, copy_stream_));
  CUDA_CHECK(cudaEventRecord(copy_done_, copy_stream_));
  copies_pending_ = true;
}

void CudaBackend::take_uploads() {
  make_current(device_);
  if (copies_pending_) {
    CUDA_CHECK(cudaStreamWaitEvent(stream_, copy_done_, 0));
    // The taken copies' event is kept for wait_taken_uploads(); the next copy records the other.
    // Copies on one stream finish in order, so the newest taken event covers any older one.
    std::swap(copy_done_, taken_done_);
    taken_pending_ = true;
  }
  copies_pending_ = false;
  CUDA_CHECK(cudaEventRecord(ops_queued_, stream_));
  taken_ = true;
}

void CudaBackend::wait_taken_uploads() {
  if (!taken_pending_) return;
  make_current(device_);
  CUDA_CHECK(cudaEventSynchronize(taken_done_));
  taken_pending_ = false;
}

void CudaBackend::wait_copies() {
  if (copies_pending_) CUDA_CHECK(cudaEventSynchronize(copy_done_));
  wait_taken_uploads();
}

void CudaBackend::download(void* host, const Tensor& src) {
  size_t n = src.bytes();
  if (n == 0) return;
  staging(std::min(n, kStagingChunk));
  auto* s = reinterpret_cast<const char*>(src.data());
  auto* h = static_cast<char*>(host);
  wait_copies();  // their host memory is the caller's again on return
  copy_label_flag();
  for (size_t off = 0; off < n;) {
    size_t len = std::min(staging_bytes_, n - off);
    CUDA_CHECK(cudaMemcpyAsync(staging_, s + off, len, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    later_pending_ = false;  // queued before: done
    std::memcpy(h + off, staging_, len);
    off += len;
  }
  check_later_labels();
  check_labels();
}

void CudaBackend::download_later(void* host, const Tensor& src) {
  if (src.bytes() == 0) return;
  if (!is_pinned(host)) {  // a pageable copy is not asynchronous anyway
    download(host, src);
    return;
  }
  wait_downloads();
  make_current(device_);
  if (label_classes_) {
    // The labels of the ops queued so far are checked when this copy is waited for; the device
    // word starts again for the ops queued after it.
    CUDA_CHECK(cudaMemcpyAsync(host_flag_ + 2, device_flag_ + 1, sizeof(unsigned long long),
                               cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaMemsetAsync(device_flag_ + 1, 0xFF, sizeof(unsigned long long), stream_));
    later_label_classes_ = label_classes_;
    label_classes_ = 0;
  }
  CUDA_CHECK(cudaMemcpyAsync(host, src.data(), src.bytes(), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaEventRecord(later_done_, stream_));
  later_pending_ = true;
}

void CudaBackend::wait_downloads() {
  if (!later_pending_) return;
  CUDA_CHECK(cudaEventSynchronize(later_done_));
  later_pending_ = false;
  check_later_labels();
}

void CudaBackend::copy(Tensor& dst, const Tensor& src) {
  expect_numel(dst, src.numel(), "copy destination");
  // One dtype in one memory order (a channels-last tensor under the same 4-D shape): the bytes.
  const bool same_form = dst.dtype() == src.dtype() && dst.layout() == src.layout() &&
                         (dst.layout() == Layout::kPlain || dst.shape() == src.shape());
  if (!same_form) return typed::convert(*this, dst, src);
  if (dst.data() == src.data() || dst.bytes() == 0) return;
  CUDA_CHECK(
      cudaMemcpyAsync(dst.data(), src.data(), dst.bytes(), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::copy_columns(Tensor& dst, int64_t dst_col, const Tensor& src, int64_t src_col,
                               int64_t cols) {
  const ColumnCopy g = check_copy_columns(dst, dst_col, src, src_col, cols);
  if (cols == 0 || g.rows == 0) return;
  // Rows of plain tensors of one dtype are contiguous runs of bytes; any other pair (a
  // channels-last tensor's logical rows are scattered) goes through fp32 plain stand-ins.
  if (dst.dtype() != src.dtype() || dst.layout() != Layout::kPlain ||
      src.layout() != Layout::kPlain) {
    StandIn sd(*this, dst, true, true), ss(*this, src, true, false);
    copy_columns(sd.get(), dst_col, ss.get(), src_col, cols);
    return sd.finish();
  }
  const size_t f = dtype_size(dst.dtype());
  CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(dst.raw()) + dst_col * f,
                               static_cast<size_t>(g.dst_row) * f,
                               static_cast<const char*>(src.raw()) + src_col * f,
                               static_cast<size_t>(g.src_row) * f, static_cast<size_t>(cols) * f,
                               static_cast<size_t>(g.rows), cudaMemcpyDeviceToDevice, stream_));
}

StandIn::StandIn(CudaBackend& backend, const Tensor& t, DType d, Layout l, bool read, bool write)
    : backend_(backend), original_(t), write_(write) {
  if (t.shape().rank() != 4) l = Layout::kPlain;  // channels-last is a 4-D order
  staged_ = t.dtype() != d || t.layout() != l;
  if (!staged_) {
    stand_in_ = t;
    return;
  }
  stand_in_ = Tensor(backend, t.shape(), d, l);
  if (read) backend.copy(stand_in_, t);
}

void StandIn::finish() {
  if (staged_ && write_) backend_.copy(original_, stand_in_);
}

void CudaBackend::synchronize() {
  wait_copies();
  copy_label_flag();
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  later_pending_ = false;
  check_later_labels();
  check_labels();
}

bool CudaBackend::device_sums_available(const Communicator& comm, std::string* why_not) {
#if TANDEM_WITH_NCCL
  int gpus = 0;
  CUDA_CHECK(cudaGetDeviceCount(&gpus));
  std::string why = nccl_unavailable(comm, gpus);
#else
  (void)comm;
  std::string why =
      "this build has no NCCL (nccl.h was not found when it was built); install NCCL's "
      "development files (e.g. apt install libnccl-dev) and rebuild";
#endif
  if (why_not) *why_not = why;
  return why.empty();
}

std::unique_ptr<DeviceSums> CudaBackend::start_device_sums(Communicator& comm) {
#if TANDEM_WITH_NCCL
  return start_nccl_sums(comm, device_, stream_, cublas_);
#else
  (void)comm;
  return nullptr;
#endif
}

// ---------------------------------------------------------------------------------------------

void log_warning(const std::string& line) { spdlog::warn("{}", line); }

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

void register_cuda_backend() { register_backend("gpu", make_cuda_backend); }

}  // namespace tandem
