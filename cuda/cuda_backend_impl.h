// CudaBackend's class: shared by the op files of cuda/ (conv.cu, pool.cu, ...), private to cuda/.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/block_cache.h"
#include "cuda/check.h"
#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/error.h"

namespace tandem {

// Caching allocator of device memory (its bookkeeping in BlockCache), so a training step never
// calls cudaMalloc/cudaFree once the first step has run. Shared with every block's deleter, so a
// tensor that outlives its backend still frees cleanly. A freed block may be handed out again at
// once: the ops are ordered on the compute stream, so the next user's work runs after the last
// one's; upload_ahead's copies on the copy stream first wait for the ops queued on the compute
// stream before the last take_uploads() (an event), and the ops queued after the next one wait
// for them.
class DevicePool : public std::enable_shared_from_this<DevicePool> {
 public:
  // batch_size: the run's, named in the out-of-memory hint (0: unknown).
  DevicePool(int device, int64_t batch_size);
  std::shared_ptr<void> allocate(size_t bytes);
  size_t in_use() const { return cache_.in_use(); }
  size_t peak() const { return cache_.peak(); }
  size_t reserved() const { return cache_.reserved(); }
  void reset_peak() { cache_.reset_peak(); }
  void give_back(void* p, size_t size) { cache_.give_back(p, size); }  // by a block's deleter

 private:
  int64_t batch_size_;
  BlockCache cache_;
};

// Descriptors and algorithms of one convolution shape, parameter set and compute dtype (chosen
// once). fp32 convolutions take NCHW tensors; bf16 and fp16 ones NHWC tensors and a (K,R,S,C)
// filter of their dtype, with fp32 accumulation (the descriptor's compute type FLOAT).
// One pass of a convolution shape: cuDNN's candidates that qualify, in the order they are tried
// (conv_algo.h), and the one in use. Each is an algorithm of the pass's enum, the math type it
// runs with (set on the descriptor before every call: the passes share it) and its workspace.
struct ConvPass {
  bool ranked = false;     // the candidates were gathered (at the pass's first call)
  bool timed = false;      // by cudnnFind*, not heuristics
  bool ran = false;        // the candidate in use has run once
  bool fp32 = false;       // 16-bit data, no candidate left: the pass computes in fp32 (conv.cu)
  std::vector<int> algos;  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  std::vector<cudnnMathType_t> maths;
  std::vector<size_t> workspaces;
  size_t at = 0;  // the candidate in use
  bool none_left() const { return at >= algos.size(); }
  int algo() const { return algos[at]; }
  cudnnMathType_t math() const { return maths[at]; }
  size_t workspace() const { return workspaces[at]; }
  // Whether the pass runs one of its candidates (not yet ranked, or in fp32: no).
  bool in_use() const { return ranked && !fp32 && !none_left(); }
};

struct ConvEntry {
  ConvEntry() = default;
  ConvEntry(const ConvEntry&) = delete;
  ConvEntry& operator=(const ConvEntry&) = delete;
  ~ConvEntry();
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  DType dtype = DType::kF32;  // of x, w and y as cuDNN sees them (kBF16, kF16: NHWC)
  // "x[64, 1, 28, 28] w[20, 1, 5, 5] stride 1x1 pad 0x0 dil 1x1", then " bf16 nhwc" in 16 bits
  std::string shape;
  ConvPass fwd, bwd_data, bwd_filter;
};

// Descriptors of one pooling shape and parameter set.
struct PoolEntry {
  PoolEntry() = default;
  PoolEntry(const PoolEntry&) = delete;
  PoolEntry& operator=(const PoolEntry&) = delete;
  ~PoolEntry();
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
};

using ConvKey = std::array<int64_t, 17>;  // shapes, parameters, compute dtype and layout
using PoolKey = std::array<int64_t, 12>;

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "gpu"; }
  InfoRows info() const override;
  std::vector<std::string> placement_log() const override;
  // bf16 from compute capability 8.0 (Ampere), fp16 from 7.0 (Volta): where their tensor cores are.
  bool supports_dtype(DType d, std::string* why_not) const override;

  std::shared_ptr<void> allocate(size_t bytes) override;
  std::shared_ptr<void> allocate_host(size_t bytes) override;
  void upload(Tensor& dst, const void* host) override;
  void upload_ahead(Tensor& dst, const void* host) override;
  void take_uploads() override;
  void wait_taken_uploads() override;
  void download(void* host, const Tensor& src) override;
  void download_later(void* host, const Tensor& src) override;
  void wait_downloads() override;
  void fill(Tensor& t, float value) override;
  void copy(Tensor& dst, const Tensor& src) override;
  void synchronize() override;
  size_t peak_memory_bytes() const override { return pool_->peak(); }
  void reset_peak_memory() override { pool_->reset_peak(); }

  void gemm(Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, float alpha,
            float beta) override;
  void bias_add(Tensor& y, const Tensor& b) override;
  void bias_backward(Tensor& db, const Tensor& dy) override;
  void add(Tensor& y, const Tensor& a, const Tensor& b) override;
  void multiply(Tensor& y, const Tensor& a, const Tensor& b) override;
  void multiply_backward(Tensor* da, Tensor* db, const Tensor& dy, const Tensor& a,
                         const Tensor& b) override;
  void scale_by(Tensor& t, const Tensor& factor) override;
  void copy_columns(Tensor& dst, int64_t dst_col, const Tensor& src, int64_t src_col,
                    int64_t cols) override;

  void conv2d_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b,
                      const Conv2dParams& p) override;
  void conv2d_backward_data(Tensor& dx, const Tensor& dy, const Tensor& w,
                            const Conv2dParams& p) override;
  void conv2d_backward_filter(Tensor& dw, const Tensor& dy, const Tensor& x,
                              const Conv2dParams& p) override;

  void pool2d_forward(Tensor& y, const Tensor& x, const Pool2dParams& p) override;
  void pool2d_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                       const Pool2dParams& p) override;

  void activation_forward(Tensor& y, const Tensor& x, Activation a, float alpha) override;
  void activation_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                           Activation a, float alpha) override;

  void softmax_cross_entropy_forward(Tensor& loss, Tensor& probs, const Tensor& logits,
                                     const Tensor& labels, float smoothing) override;
  void softmax_cross_entropy_backward(Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                                      float smoothing) override;
  void mse_forward(Tensor& loss, const Tensor& pred, const Tensor& labels) override;
  void mse_backward(Tensor& dpred, const Tensor& pred, const Tensor& labels) override;
  void accuracy(Tensor& correct, const Tensor& scores, const Tensor& labels) override;

  void dropout_forward(Tensor& y, Tensor& mask, const Tensor& x, float p, uint64_t seed,
                       uint64_t offset) override;
  void dropout_backward(Tensor& dx, const Tensor& dy, const Tensor& mask) override;

  void batchnorm_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                  Tensor& running_mean, Tensor& running_var, const Tensor& x,
                                  const Tensor& gamma, const Tensor& beta, float momentum,
                                  float eps) override;
  void batchnorm_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& running_mean,
                                   const Tensor& running_var, float eps) override;
  void batchnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                          const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_inv_std) override;

  void groupnorm_forward(Tensor& y, Tensor& save_mean, Tensor& save_inv_std, const Tensor& x,
                         const Tensor& gamma, const Tensor& beta, int groups, float eps) override;
  void groupnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                          const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_inv_std, int groups) override;

  void sgd_update(Tensor& w, Tensor& velocity, const Tensor& grad, const SgdParams& p) override;
  void adam_update(Tensor& w, Tensor& m, Tensor& v, const Tensor& grad,
                   const AdamParams& p) override;
  void gradient_norm(Tensor& norm, const Tensor& grads) override;
  void update_gate(Tensor& gate, const Tensor& loss, const Tensor* grad_norm,
                   const GateParams& p) override;

  int64_t count_nonfinite(const Tensor& t) override;
  int64_t count_nonfinite(const std::vector<const Tensor*>& ts) override;

  // NCCL (cuda/nccl_sums.cpp), when it loads and this host's processes have a GPU each.
  bool device_sums_available(const Communicator& comm, std::string* why_not) override;
  std::unique_ptr<DeviceSums> start_device_sums(Communicator& comm) override;

  // --- helpers for the op files ---
  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  const BackendOptions& options() const { return options_; }
  // The convolution workspace, grown (never shrunk) to at least `bytes`.
  void* workspace(size_t bytes);
  // The cached descriptors of one convolution shape computed in `dtype` (algorithms are chosen by
  // conv.cu): NCHW fp32, or NHWC bf16 / fp16 (the tensors' own layouts do not matter here: the
  // convolution reads stand-ins of that form).
  ConvEntry& conv_entry(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p,
                        DType dtype = DType::kF32);
  // The --log-placement line of one pass of a convolution.
  std::string conv_placement(const char* pass, const ConvEntry& e, const ConvPass& c,
                             const std::string& algo) const;
  PoolEntry& pool_entry(const Tensor& x, const Tensor& y, const Pool2dParams& p);
  // A device scratch buffer of `bytes` from the pool (freed when the handle goes).
  std::shared_ptr<void> scratch(size_t bytes) { return pool_->allocate(bytes); }
  // A small device word for a kernel's count (count_nonfinite), and its pinned host mirror;
  // reset with cudaMemsetAsync before use.
  unsigned long long* device_flag() const { return device_flag_; }
  unsigned long long* host_flag() const { return host_flag_; }
  // Labels outside [0, C), found by the loss and accuracy kernels. They atomicMin (sample << 32 |
  // label) into label_flag(); label_flag_queued() says a check is due. It needs no wait or copy of
  // its own: the next wait for the stream (synchronize, download, count_nonfinite) first queues
  // copy_label_flag() and ends with check_labels(), which throws the DataError. So a step has one
  // wait and one copy back, its loss read.
  unsigned long long* label_flag();  // reset to ~0 by the first use after a check
  void label_flag_queued(int64_t classes);

 private:
  void* staging(size_t bytes);  // pinned host buffer, grown to `bytes`
  void release();               // frees every handle and buffer; safe on a half-built backend
  void wait_copies();           // the host waits for upload_ahead's copies
  void copy_label_flag();       // before a wait for stream_, when a check is due
  void check_labels();          // after that wait: throws for a bad label the kernels found
  // After a wait that covers download_later's copy: its own label check (its word in
  // host_flag_[2], taken from the device word, which it reset for the ops queued after it).
  void check_later_labels();

  BackendOptions options_;
  int device_ = 0;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;       // every op
  cudaStream_t copy_stream_ = nullptr;  // upload_ahead's copies, beside the ops
  cudaEvent_t copy_done_ = nullptr;     // recorded after the last of them
  cudaEvent_t taken_done_ = nullptr;    // copy_done_ of the copies the last take_uploads() took
  bool taken_pending_ = false;          // the host has not waited for taken_done_ yet
  cudaEvent_t ops_queued_ = nullptr;    // on stream_ at take_uploads(): the copies wait for it
  bool taken_ = false;                  // ops_queued_ was recorded (take_uploads was called)
  bool copies_pending_ = false;         // copies that stream_ does not wait for yet
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::shared_ptr<DevicePool> pool_;
  std::shared_ptr<void> workspace_;
  size_t workspace_bytes_ = 0;
  void* staging_ = nullptr;  // pinned
  size_t staging_bytes_ = 0;
  cudaEvent_t staging_free_ = nullptr;  // recorded after the last copy out of the staging buffer
  unsigned long long* device_flag_ = nullptr;
  unsigned long long* host_flag_ = nullptr;   // pinned; [0] counts, [1] is the label word
  cudaEvent_t later_done_ = nullptr;          // recorded after download_later's copy
  bool later_pending_ = false;                // a download_later not yet waited for
  int64_t later_label_classes_ = 0;           // > 0: its label word ([2]) is still to be checked
  std::atomic<bool> warned_pageable_{false};  // allocate_host fell back to pageable memory once
  int64_t label_classes_ = 0;   // > 0: a label check is queued, for a model of this many classes
  DType gemm16_ = DType::kF32;  // the dtype of the last 16-bit product, for placement_log()
  std::map<ConvKey, std::unique_ptr<ConvEntry>> conv_cache_;
  std::vector<const ConvEntry*> conv_order_;  // insertion order, for placement_log()
  std::map<PoolKey, std::unique_ptr<PoolEntry>> pool_cache_;
};

// --- 16-bit and channels-last tensors ---
//
// In a 16-bit run (engine/precision.h) activations are bf16 or fp16, 4-D ones channels-last, and
// every op takes any mix of those with fp32 plain tensors. Elementwise ops have 16-bit kernels
// (cuda/mixed_precision.cu: load as fp32, compute in fp32, round once to nearest even);
// convolutions and matrix products run in cuDNN and cuBLAS in 16 bits with fp32 accumulation;
// the rest compute in fp32 on stand-ins (below), as the recipe has them.

// Whether every tensor given is fp32 in plain order: the form the fp32 kernels take.
inline bool plain_f32(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (!t->is_f32_plain()) return false;
  return true;
}

// A stand-in for tensor t in dtype `d` and memory order `l` (plain for a tensor that is not 4-D),
// for an op whose kernel or library call takes only that form: t itself when it has that form;
// otherwise a tensor of the backend (device memory from its pool), filled from t by copy() when
// `read`, and copied back into t by finish() when `write`. The default form, fp32 plain, is the
// CPU's F32Stage: the ops without a 16-bit kernel (pooling, batch normalization, dropout, the
// losses) run their fp32 kernel on such stand-ins. Stream order makes the pool's reuse of the
// memory after the stand-in goes safe.
class StandIn {
 public:
  StandIn(CudaBackend& backend, const Tensor& t, bool read, bool write)
      : StandIn(backend, t, DType::kF32, Layout::kPlain, read, write) {}
  StandIn(CudaBackend& backend, const Tensor& t, DType d, Layout l, bool read, bool write);
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;
  Tensor& get() { return stand_in_; }
  // After the op: copies the stand-in back into the tensor (when it is one, and `write`).
  void finish();

 private:
  CudaBackend& backend_;
  Tensor original_, stand_in_;
  bool staged_, write_;
};

// The elementwise kernels of every float dtype, fp32 included (cuda/mixed_precision.cu). The
// bool ones return false, having queued nothing, when the tensors are not of the form they take
// (one dtype and memory order); the caller then uses fp32 plain stand-ins, which they take.
namespace typed {
// dst = src in another dtype or memory order, element for element in logical order (copy()).
void convert(CudaBackend& b, Tensor& dst, const Tensor& src);
void fill(CudaBackend& b, Tensor& t, float value);
// Queues the count of t's non-finite entries, added to *counter.
void count_nonfinite(CudaBackend& b, unsigned long long* counter, const Tensor& t);
// y, x of one dtype and one layout.
bool activation_forward(CudaBackend& b, Tensor& y, const Tensor& x, Activation a, float alpha);
// dx, dy and the input it reads (x for relu-like, y for sigmoid and tanh) of one dtype and one
// layout.
bool activation_backward(CudaBackend& b, Tensor& dx, const Tensor& dy, const Tensor& x,
                         const Tensor& y, Activation a, float alpha);
bool add(CudaBackend& b, Tensor& y, const Tensor& x1, const Tensor& x2);  // one dtype and layout
// y (plain of rank >= 2, or channels-last 4-D), bias fp32 plain.
bool bias_add(CudaBackend& b, Tensor& y, const Tensor& bias);
// dy (plain of rank >= 2, or channels-last 4-D), db fp32 plain; sums in fp32 as channel_sums
// does.
bool bias_backward(CudaBackend& b, Tensor& db, const Tensor& dy);
}  // namespace typed

// --- small shared utilities ---

// A warning on the run's log (spdlog stays out of the .cu files that nvcc compiles).
void log_warning(const std::string& line);

// Names of cuDNN's convolution algorithms, for placement_log() (defined in conv.cu).
std::string conv_fwd_algo_name(cudnnConvolutionFwdAlgo_t a);
std::string conv_bwd_data_algo_name(cudnnConvolutionBwdDataAlgo_t a);
std::string conv_bwd_filter_algo_name(cudnnConvolutionBwdFilterAlgo_t a);

// Elements per launch grid: enough blocks to fill the GPU, grid-stride loops do the rest.
constexpr int kThreads = 256;
static_assert((kThreads & (kThreads - 1)) == 0, "the block reductions halve kThreads down to 1");
inline unsigned grid_for(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65535LL * 8) blocks = 65535LL * 8;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Checks that a tensor has the expected shape (a bug in the caller otherwise).
inline void expect_shape(const Tensor& t, const Shape& s, const char* what) {
  TANDEM_CHECK(t.shape() == s,
               std::string(what) + " has shape " + t.shape().str() + ", expected " + s.str());
}
inline void expect_numel(const Tensor& t, int64_t n, const char* what) {
  TANDEM_CHECK(t.numel() == n, std::string(what) + " has " + std::to_string(t.numel()) +
                                   " elements, expected " + std::to_string(n));
}

}  // namespace tandem
