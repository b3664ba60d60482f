// CpuBackend's class: shared by the op files of cpu/ (conv.cpp, pool.cpp, ...), private to cpu/.
//
// The op files' elementwise loops are `#pragma omp parallel for simd ... if (parallel : n > N)`.
// The `parallel :` matters: a bare `if` applies to the `simd` too, and GCC then runs a tensor
// below N elements unvectorised (relu over 65,536 floats took 0.31 ms instead of 0.007 ms).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/tensor.h"

namespace tandem {

// Bytes held by a backend's allocations. Shared with every allocation's deleter, so a tensor that
// outlives its backend still frees cleanly.
struct CpuMemoryStats {
  std::atomic<size_t> current{0};
  std::atomic<size_t> peak{0};
};

// A cached oneDNN primitive (or group of primitives) for one op kind, shape and parameter set.
// Each op file derives its own entry holding primitives, reorders and intermediate buffers.
struct CpuCacheEntry {
  virtual ~CpuCacheEntry() = default;
  std::string placement;  // the --log-placement line, e.g. "conv2d_forward [..]x[..] -> jit:..."
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads, int64_t batch_size = 0, bool winograd = true);

  std::string name() const override { return "cpu"; }
  InfoRows info() const override;
  std::vector<std::string> placement_log() const override;
  ArithmeticPeak arithmetic_peak(DType d) override;  // peak.cpp
  Layout activation_layout(DType d, const Shape& s) const override;
  bool supports_dtype(DType d, std::string* why_not) const override;

  std::shared_ptr<void> allocate(size_t bytes) override;
  void upload(Tensor& dst, const void* host) override;
  void download(void* host, const Tensor& src) override;
  void fill(Tensor& t, float value) override;
  void copy(Tensor& dst, const Tensor& src) override;
  size_t peak_memory_bytes() const override { return stats_->peak.load(); }
  void reset_peak_memory() override { stats_->peak.store(stats_->current.load()); }

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
  bool fuses_relu(ReluFusion op, DType d) const override;
  void batchnorm_relu_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                       Tensor& running_mean, Tensor& running_var, const Tensor& x,
                                       const Tensor& gamma, const Tensor& beta, float momentum,
                                       float eps) override;
  void batchnorm_relu_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                        const Tensor& beta, const Tensor& running_mean,
                                        const Tensor& running_var, float eps) override;
  void batchnorm_relu_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                               const Tensor& y, const Tensor& x, const Tensor& gamma,
                               const Tensor& save_mean, const Tensor& save_inv_std) override;
  void add_relu(Tensor& y, const Tensor& a, const Tensor& b) override;
  void add_relu_backward(const std::vector<Tensor*>& dxs, const Tensor& dy,
                         const Tensor& y) override;
  void relu_max_pool_forward(Tensor& y, const Tensor& x, const Pool2dParams& p) override;
  void relu_max_pool_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                              const Pool2dParams& p) override;

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

  using Backend::count_nonfinite;  // the several-tensor form
  int64_t count_nonfinite(const Tensor& t) override;

  // --- helpers for the op files ---
  const dnnl::engine& engine() const { return engine_; }
  dnnl::stream& stream() { return stream_; }

  // The cached entry for `key`, built by `make` (which fills in the placement line) on first use.
  template <typename Entry>
  Entry& cached(const std::string& key, const std::function<std::unique_ptr<Entry>()>& make) {
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      placed(it->second->placement);
      return static_cast<Entry&>(*it->second);
    }
    std::unique_ptr<Entry> e = make();
    Entry& ref = *e;
    placed(ref.placement);
    cache_.emplace(key, std::move(e));
    cache_order_.push_back(key);
    return ref;
  }

  // Scratch memory for a primitive's scratchpad (user mode): one buffer shared by every primitive,
  // grown to the largest need, so the library never allocates during a step.
  dnnl::memory scratchpad(const dnnl::memory::desc& md);

  // An attribute asking for a user-provided scratchpad (see scratchpad()).
  static dnnl::primitive_attr scratchpad_attr();

  // Whether fp32 3x3 stride-1 convolutions may take oneDNN's Winograd kernel (cpu/conv.cpp).
  bool winograd() const { return winograd_; }

  // Placement lines for ops written outside the class (cpu/mixed_precision.cpp).
  bool tracing_placement() const { return tracing(); }
  void place(const std::string& line) const { placed(line); }

 private:
  int threads_;
  Layout fp32_images_;  // fp32 activations' blocked order (plain where oneDNN blocks nothing)
  std::map<DType, ArithmeticPeak> peaks_;  // arithmetic_peak's, by dtype
  int64_t batch_size_;                     // the run's, for the out-of-memory hint (0: unknown)
  bool winograd_;                          // BackendOptions::cpu_winograd
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::shared_ptr<CpuMemoryStats> stats_;
  std::unordered_map<std::string, std::unique_ptr<CpuCacheEntry>> cache_;
  std::vector<std::string> cache_order_;  // insertion order, for placement_log()
  std::shared_ptr<void> scratch_;
  size_t scratch_bytes_ = 0;
};

// --- small shared utilities ---

// Moves data between a plain NCHW tensor and the layout a primitive chose (format `any`): when
// the two differ, a cached reorder into an internal buffer owned by the cache entry; when they
// match, the primitive reads and writes the tensor directly.
class LayoutBridge {
 public:
  LayoutBridge() = default;
  LayoutBridge(CpuBackend& backend, const dnnl::memory::desc& plain_md,
               const dnnl::memory::desc& chosen_md, bool to_chosen);
  bool reorders() const { return reorder_needed_; }
  // The memory the primitive uses, after pointing the plain side at `ptr`.
  dnnl::memory& bind(const void* ptr);
  // Plain -> chosen (inputs) or chosen -> plain (outputs); no-op when the layouts match.
  void run(dnnl::stream& s);

 private:
  bool reorder_needed_ = false;
  bool to_chosen_ = true;
  dnnl::memory plain_, chosen_;
  std::shared_ptr<void> buffer_;
  dnnl::reorder reorder_;
};

// "[64, 1, 28, 28]" of a tensor, for cache keys and placement lines.
inline std::string shape_str(const Tensor& t) { return t.shape().str(); }

// Plain row-major fp32 descriptor of the given dims (tag a, ab, abc, abcd by rank).
dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims);

// --- 16-bit and channels-last tensors (cpu/mixed_precision.cpp) ---

// oneDNN's name of a tensor dtype (f32, s32, bf16, f16).
dnnl::memory::data_type dnnl_dtype(DType d);
// The descriptor of a tensor as it is stored, over `dims` (its shape by default): its dtype, and
// tag abcd (plain), acdb (channels-last), aBcd8b or aBcd16b (blocked) for a 4-D tensor, a / ab /
// abc otherwise.
dnnl::memory::desc tensor_desc(const Tensor& t, const dnnl::memory::dims& dims);
dnnl::memory::desc tensor_desc(const Tensor& t);
// A bf16 tensor's memory as bit patterns, for the 16-bit loops.
inline uint16_t* bits(Tensor& t) { return static_cast<uint16_t*>(t.raw()); }
inline const uint16_t* bits(const Tensor& t) { return static_cast<const uint16_t*>(t.raw()); }
// Whether every tensor given is fp32 in plain order: the form the fp32 kernels take.
inline bool all_f32_plain(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (!t->is_f32_plain()) return false;
  return true;
}
// Whether every tensor given is fp32 in one memory order (plain, or one shape in a blocked or
// channels-last order): element i of each is then the same logical element, so an elementwise
// loop runs on their memory as it is.
inline bool all_f32_same_order(std::initializer_list<const Tensor*> ts) {
  const Tensor* first = *ts.begin();
  for (const Tensor* t : ts)
    if (t->dtype() != DType::kF32 || t->layout() != first->layout() ||
        (t->layout() != Layout::kPlain && t->shape() != first->shape()))
      return false;
  return true;
}
// The block (8, 16) of tensors, of any shapes, that are all fp32 in one blocked order; else 0.
// The caller checks their shapes.
inline int blocked_f32(std::initializer_list<const Tensor*> ts) {
  const Layout l = (*ts.begin())->layout();
  for (const Tensor* t : ts)
    if (t->dtype() != DType::kF32 || t->layout() != l) return 0;
  return channel_block(l);
}

// A relu fused into an op's loop (Backend::fuses_relu), as the relu layer computes it
// (engine/activation_math.h): relu_if<Relu>(v) its value; relu_grad_if<Relu>(g, y, e) its
// gradient from dy = g and its output y[e] (y is 0 exactly where its input was not above 0).
template <bool Relu>
inline float relu_if(float v) {
  return Relu ? activation_value(Activation::kRelu, v, 0.f) : v;
}
template <bool Relu>
inline float relu_grad_if(float g, const float* y, int64_t e) {
  return Relu ? activation_grad(Activation::kRelu, g, y[e], 0.f) : g;
}

// A 4-D image tensor whose channels are innermost in runs: blocked fp32 ((N, C/B, H*W, B): `runs`
// N*C/B of `inner` H*W positions of `width` B channels) or channels-last ((N, H*W, C): N runs
// of H*W positions of C). An op that works per channel then handles run r's channel j as
// channel (r * width + j) mod C of sample r * width / C. False for other forms.
struct ChannelRuns {
  int64_t runs = 0, inner = 0, width = 0;
};
inline bool channel_runs(const Tensor& t, ChannelRuns* v) {
  if (t.shape().rank() != 4) return false;
  const int64_t n = t.dim(0), c = t.dim(1), inner = t.dim(2) * t.dim(3);
  if (const int b = channel_block(t.layout())) {
    *v = {n * c / b, inner, b};
    return true;
  }
  if (t.layout() == Layout::kChannelsLast) {
    *v = {n, inner, c};
    return true;
  }
  return false;
}

// An fp32 plain stand-in for a tensor of another dtype or layout, for the ops that have no 16-bit
// kernel (the loss, dropout, batch normalization, ...): they run their fp32 kernel on stand-ins,
// so they compute in fp32 as the mixed-precision recipe has them. `read`: the stand-in starts
// with the tensor's values; `write`: finish() converts it back into the tensor. A tensor already
// fp32 and plain is its own stand-in.
class F32Stage {
 public:
  F32Stage(CpuBackend& backend, const Tensor& t, bool read, bool write);
  Tensor& f32() { return stand_in_; }
  void finish();

 private:
  CpuBackend& backend_;
  Tensor original_, stand_in_;
  bool staged_, write_;
};

// The ops' paths for tensors that are not all fp32 and plain: a 16-bit kernel where the op has
// one (activations, add, bias, max pooling, the non-finite count), fp32 on stand-ins otherwise.
// Each op of CpuBackend hands over to these when all_f32_plain() is false.

// Pooling of 2x2 windows of stride 2, unpadded and each whole (pool.cpp): the fast loops' case.
bool is_2x2_stride_2(const Pool2dParams& p, const Shape& x, const Shape& y);

namespace mixed {
void activation_forward(CpuBackend& b, Tensor& y, const Tensor& x, Activation a, float alpha);
void activation_backward(CpuBackend& b, Tensor& dx, const Tensor& dy, const Tensor& x,
                         const Tensor& y, Activation a, float alpha);
void add(CpuBackend& b, Tensor& y, const Tensor& x1, const Tensor& x2);
void bias_add(CpuBackend& b, Tensor& y, const Tensor& bias);
void bias_backward(CpuBackend& b, Tensor& db, const Tensor& dy);
void pool2d_forward(CpuBackend& b, Tensor& y, const Tensor& x, const Pool2dParams& p);
void pool2d_backward(CpuBackend& b, Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                     const Pool2dParams& p);
// Batch normalization of bf16 tensors whose channels are innermost (channels-last images, (N,C)
// rows), statistics in fp32 and double; false (nothing done) for any other form.
bool batchnorm_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                Tensor& running_mean, Tensor& running_var, const Tensor& x,
                                const Tensor& gamma, const Tensor& beta, float momentum, float eps);
bool batchnorm_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, const Tensor& running_mean,
                                 const Tensor& running_var, float eps);
bool batchnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                        const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_inv_std);
int64_t count_nonfinite(const Tensor& t);
void fill(Tensor& t, float value);
// dst = src in another dtype or memory order, element for element in logical order.
void convert(CpuBackend& b, Tensor& dst, const Tensor& src);
}  // namespace mixed

// The oneDNN implementation name of a primitive descriptor, e.g. "jit:avx512_core".
std::string impl_name(const dnnl::primitive_desc_base& pd);

// Runs `build`, turning a oneDNN failure into a tandem::Error naming the op.
template <typename F>
auto dnnl_guard(const std::string& what, F&& build) -> decltype(build()) {
  try {
    return build();
  } catch (const dnnl::error& e) {
    throw Error("oneDNN could not set up " + what + ": " + e.what(),
                "this shape or parameter set is not supported by the CPU backend");
  }
}

// Checks that a tensor has the expected shape (a bug in the caller otherwise).
inline void expect_shape(const Tensor& t, const Shape& s, const char* what) {
  TANDEM_CHECK(t.shape() == s,
               std::string(what) + " has shape " + t.shape().str() + ", expected " + s.str());
}

}  // namespace tandem
