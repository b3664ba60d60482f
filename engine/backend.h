// The Backend interface: every op a layer, loss or optimizer needs, on one device's memory.
//
// Conventions: outputs first, then inputs, then parameters; tensors are dense fp32 (labels int32)
// in plain NCHW order and live on this backend. In a 16-bit run (engine/precision.h) activations
// and their gradients are 16-bit, images channels-last; every op takes them, and defines its
// result by the logical shape. Parameters, their gradients and optimizer state are always fp32.
// A backend never knows which layer calls it; stateful objects (oneDNN primitives, cuDNN
// descriptors and algorithms, workspaces) are cached inside the backend, keyed by shape, never
// rebuilt every step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "engine/activation_math.h"
#include "engine/tensor.h"

namespace tandem {

class Communicator;  // engine/communicator.h

struct Conv2dParams {
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  // The channels in this many groups, each convolved with its own K / groups filters of
  // C / groups channels (w is (K, C / groups, R, S)); groups = C is a depthwise convolution.
  int groups = 1;
};

enum class PoolMode { kMax, kAverage };  // average excludes padding from the divisor

struct Pool2dParams {
  PoolMode mode = PoolMode::kMax;
  int kernel_h = 2, kernel_w = 2;
  int stride_h = 2, stride_w = 2;
  int pad_h = 0, pad_w = 0;
  // The output keeps a last, partial window (PyTorch's ceil_mode): see pool_out_size.
  bool ceil_mode = false;
};

// --- The update gate: what a step's update does, decided on the device, with no wait ---
//
// A training step queues its forward and backward, then
//   gradient_norm(gate.rows(kGateGradNorm, 1), graph.packed_grads())  (when GateParams needs it)
//   update_gate(gate, loss, &norm, params)  and the optimizer's updates with SgdParams::gate or
//   AdamParams::gate pointing at the gate,
// and reads the gate back later (Backend::download_later) with the step's loss: the host learns
// of a skipped step after the device has already skipped it. The gate is a small fp32 tensor
// (kGateSize) on the backend, kept from step to step (it carries the loss scale):
//   [kGateFactor]   what the update multiplies every gradient by: 1 / loss scale, times
//                   min(1, max_norm / (norm + 1e-6)) when clipping (PyTorch's clip_grad_norm_);
//   [kGateSkip]     1: the update leaves weights and optimizer state as they are (the loss, or
//                   with check_gradients a gradient, is not finite); 0: it applies;
//   [kGateLossScale], [kGateGrowthTracker]  the dynamic loss scale S that the loss gradient was
//                   multiplied by, and the applied steps since it last changed (PyTorch's
//                   GradScaler rules, below); S stays 1 unless the caller sets it;
//   [kGateGradNorm] the global L2 norm of the gradients divided by S (NaN or Inf when one is not
//                   finite), when it was computed this step.
// Adam's bias correction counts applied updates: the caller counts a step once it has read that
// it was not skipped, before it queues the next gated update (TrainStep does).
constexpr int kGateFactor = 0, kGateSkip = 1, kGateLossScale = 2, kGateGrowthTracker = 3,
              kGateGradNorm = 4, kGateSize = 5;

struct GateParams {
  // Skip the step when a gradient is not finite, too (needs the norm): on_nan: skip_step, and
  // loss scaling. Otherwise only a non-finite loss skips it.
  bool check_gradients = false;
  float max_norm = 0.f;  // > 0: clip the gradients to this global L2 norm
  // Dynamic loss scaling, as PyTorch's GradScaler: a skipped step multiplies S by
  // backoff_factor; growth_interval applied steps in a row multiply it by growth_factor (unless
  // that is not finite). 0: S stays.
  int growth_interval = 0;
  float growth_factor = 2.f, backoff_factor = 0.5f;
};

struct SgdParams {
  float lr = 0.01f, momentum = 0.f, weight_decay = 0.f;
  bool nesterov = false;
  const Tensor* gate = nullptr;  // the update gate (kGateSize, above), or null: always applies
};

struct AdamParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.f;
  bool decoupled = false;  // AdamW: decay the weights directly instead of adding to the gradient
  int64_t step = 1;        // 1-based step count for bias correction
  const Tensor* gate = nullptr;  // the update gate (kGateSize, above), or null: always applies
};

// multiply's geometry: a as rows of `inner` values, b one value per row (inner 1: b is a's
// shape; b of one value per sample, (N) or (N,1,...): rows are samples, drop_path's scale). Checks
// the shapes (TANDEM_CHECK) and names them in the message.
struct MultiplyGeometry {
  int64_t rows = 0, inner = 1;
};
MultiplyGeometry multiply_geometry(const Tensor& y, const Tensor& a, const Tensor& b);

// groupnorm's geometry: x (N,C,...) as N samples of `groups` groups of C / groups channels of
// `inner` values each. Checks x, gamma (C) and the statistics (N * groups), naming them.
struct GroupGeometry {
  int64_t n, c, groups, per_group, inner;
};
GroupGeometry group_geometry(const Tensor& x, const Tensor& gamma, const Tensor& stat, int groups,
                             const char* what);

// Output spatial size of a convolution (and of a pooling window in floor mode).
inline int64_t conv_out_size(int64_t in, int kernel, int stride, int pad, int dilation = 1) {
  return (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}

// Output size of a pooling window along one axis: floor mode as conv_out_size; ceil mode adds a
// last window that reaches past the end (clipped there), unless it would start in the padding
// after the input (PyTorch's rule, which ONNX Runtime follows).
inline int64_t pool_out_size(int64_t in, int kernel, int stride, int pad, bool ceil_mode) {
  if (!ceil_mode) return conv_out_size(in, kernel, stride, pad);
  int64_t out = (in + 2 * pad - kernel + stride - 1) / stride + 1;
  if ((out - 1) * stride >= in + pad) --out;
  return out;
}
// The padding after the input along one axis that reaches the last of `out` windows: the layer's
// own, or more in ceil mode (less than a window). For a kernel or format that pads each end
// explicitly (oneDNN's pooling, ONNX's floor mode); padding stays out of an average's divisor.
inline int64_t pool_end_pad(int64_t in, int64_t out, int kernel, int stride, int pad) {
  return std::max<int64_t>(pad, (out - 1) * stride + kernel - in - pad);
}
// pool2d's output shape (N,C,P,Q) for an input x (N,C,H,W).
inline Shape pool_out_shape(const Shape& x, const Pool2dParams& p) {
  return Shape{x[0], x[1], pool_out_size(x[2], p.kernel_h, p.stride_h, p.pad_h, p.ceil_mode),
               pool_out_size(x[3], p.kernel_w, p.stride_w, p.pad_w, p.ceil_mode)};
}

// copy_columns' geometry, checked: the rows and the two row lengths.
struct ColumnCopy {
  int64_t rows, dst_row, src_row;
};
ColumnCopy check_copy_columns(const Tensor& dst, int64_t dst_col, const Tensor& src,
                              int64_t src_col, int64_t cols);

// The batch size an out-of-memory hint suggests after a tensor of `asked` bytes did not fit in a
// run of `batch` samples: half of it; or, when that tensor alone is more than half of the
// `available` bytes (0: unknown), the largest power of two at which it would take half (the
// model holds several such tensors).
int64_t batch_to_try(int64_t batch, size_t asked, size_t available);

// Plain host memory, 64-byte aligned: the CPU's batch buffers, and any host memory a backend
// does not pin.

inline std::shared_ptr<void> aligned_host_memory(size_t bytes) {
  return {::operator new(bytes, std::align_val_t(64)),
          [](void* p) { ::operator delete(p, std::align_val_t(64)); }};
}

// Rows of the start-up table: ("Device", "NVIDIA H200"), ("BLAS", "oneDNN 2.6.3"), ...
using InfoRows = std::vector<std::pair<std::string, std::string>>;

// The most GFLOP/s (an FMA counted as two) a backend computes in one dtype, and how that figure
// was found; gflops 0 where it is not known, `how` then says why.
struct ArithmeticPeak {
  double gflops = 0;
  std::string how;
};

// Sums of one backend's tensors over the processes of a data-parallel run, made by a library of
// the device's own (NCCL between GPUs) in device memory, with no copy through the host.
class DeviceSums {
 public:
  virtual ~DeviceSums() = default;
  virtual std::string library() const = 0;  // "NCCL 2.28.3"
  // In place, queued like the backend's ops: every tensor (fp32) becomes the sum over the
  // processes of its values times that process's `weight` (0: it adds nothing, whatever it holds).
  virtual void sum(const std::vector<Tensor*>& tensors, double weight) = 0;
  // Every process's tensors become process `root`'s, byte for byte.
  virtual void broadcast(const std::vector<Tensor*>& tensors, int root) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu", "gpu"
  virtual InfoRows info() const = 0;
  // What ran the op last called for each kind and shape, e.g. "jit:avx512_core" (--log-placement).
  virtual std::vector<std::string> placement_log() const { return {}; }
  // The roofline of `trainer bench`: the arithmetic peak of this backend's threads in dtype d
  // (found once, then remembered; the first call may take a fraction of a second).
  virtual ArithmeticPeak arithmetic_peak(DType d) {
    (void)d;
    return {0, "not known for " + name()};
  }
  // While a sink is set, every op that a library primitive or algorithm runs appends the line
  // that names it (per-layer --log-placement); ops of tandem's own kernels append nothing.
  void trace_placement(std::vector<std::string>* sink) { trace_ = sink; }

  // Whether this backend computes with activations of dtype d (bf16, fp16) in hardware; when not,
  // `why_not` gets the cause and what to use instead. fp32 always.
  virtual bool supports_dtype(DType d, std::string* why_not) const {
    if (!is_16bit(d)) return true;
    if (why_not) *why_not = name() + " computes in fp32 only";
    return false;
  }

  // The memory order the graph gives an activation of dtype d and logical shape s (inner layers'
  // outputs and their gradients; the model's input and logits stay plain). By default 16-bit
  // images are channels-last, what 16-bit convolution kernels read; the CPU keeps fp32 images
  // in oneDNN's blocked order.
  virtual Layout activation_layout(DType d, const Shape& s) const {
    return is_16bit(d) && s.rank() == 4 ? Layout::kChannelsLast : Layout::kPlain;
  }

  // --- memory ---
  // At least `bytes`, 64-byte aligned, freed when the last reference goes.
  virtual std::shared_ptr<void> allocate(size_t bytes) = 0;
  // Host memory for batches on their way to this backend, 64-byte aligned: pinned on a GPU, so
  // that an upload from it needs no staging copy. An upload from it may still be reading it until
  // the next synchronize() or download(); from any other memory upload() has read it on return.
  virtual std::shared_ptr<void> allocate_host(size_t bytes) { return aligned_host_memory(bytes); }
  virtual void upload(Tensor& dst, const void* host) = 0;  // dst.bytes() from host memory
  // Like upload(), from allocate_host memory, but on a copy stream where the device has one, so
  // that it overlaps the ops queued since the last take_uploads(): the copy waits for the ops
  // queued before that call (one may still use dst's memory: the buffer the copy before filled
  // was read until then), or for every op queued so far when take_uploads() was never called.
  // The ops queued after the next take_uploads() wait for the copy; `host` may be read until
  // wait_taken_uploads() after that take_uploads(), or the next synchronize() or download().
  virtual void upload_ahead(Tensor& dst, const void* host) { upload(dst, host); }
  // The buffers of upload_ahead's copies become the ops': the ops queued from now on wait for
  // those copies, and the ops queued so far are the ones the next copy waits for.
  virtual void take_uploads() {}
  // The host waits until the copies the last take_uploads() took have read their host memory,
  // which the caller may then refill (cheap in practice: they ran beside the step before). The
  // copies queued since are not waited for.
  virtual void wait_taken_uploads() {}
  virtual void download(void* host, const Tensor& src) = 0;  // src.bytes() to host memory
  // Like download(), into allocate_host memory, but queued like an op: `host` holds src's values
  // once wait_downloads() returns (or the next synchronize() or download()), and the ops queued
  // meanwhile run on. One at a time: a second call first waits for the first.
  virtual void download_later(void* host, const Tensor& src) { download(host, src); }
  virtual void wait_downloads() {}
  virtual void fill(Tensor& t, float value) = 0;
  // Same numel; converts between dtypes (rounding to nearest even) and memory orders, element for
  // element in logical order (a channels-last (N,C,H,W) into a plain (N, C*H*W) is a flatten).
  virtual void copy(Tensor& dst, const Tensor& src) = 0;
  virtual void synchronize() {}
  virtual size_t peak_memory_bytes() const = 0;
  virtual void reset_peak_memory() = 0;

  // --- linear algebra ---
  // c (M,N) = alpha * op(a) * op(b) + beta * c, op(a) (M,K), op(b) (K,N); 2-D row-major tensors.
  virtual void gemm(Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                    float alpha, float beta) = 0;
  // y (N,C,...) += b (C) broadcast over every axis but the channel axis 1.
  virtual void bias_add(Tensor& y, const Tensor& b) = 0;
  // db (C) = sum of dy (N,C,...) over every axis but 1.
  virtual void bias_backward(Tensor& db, const Tensor& dy) = 0;
  // y = a + b, elementwise, same shapes (y may alias a or b).
  virtual void add(Tensor& y, const Tensor& a, const Tensor& b) = 0;
  // y = a * b elementwise (y may alias a). b has a's shape, or it is (N,C) or (N,C,1,1) against
  // an a of (N,C,...), its value broadcast over a's positions (squeeze-and-excitation's gate), or
  // it holds one value per sample, broadcast over the sample (multiply_geometry).
  virtual void multiply(Tensor& y, const Tensor& a, const Tensor& b) = 0;
  // multiply's gradients: da = dy * b (broadcast as there), db = dy * a summed over the positions
  // b is broadcast over. Either may be null; neither aliases dy, a or b.
  virtual void multiply_backward(Tensor* da, Tensor* db, const Tensor& dy, const Tensor& a,
                                 const Tensor& b) = 0;
  // t *= factor[0], elementwise; t fp32, factor (1) fp32 on this backend, read by the op itself
  // (fp16's loss scale multiplies the loss gradient so, with no wait for the device).
  virtual void scale_by(Tensor& t, const Tensor& factor) = 0;
  // dst and src seen as matrices of N = dim(0) rows (N, dst.numel()/N) and (N, src.numel()/N):
  // dst[r, dst_col + j] = src[r, src_col + j] for every row r and j < cols (concat and its
  // backward). dst and src do not overlap.
  virtual void copy_columns(Tensor& dst, int64_t dst_col, const Tensor& src, int64_t src_col,
                            int64_t cols) = 0;

  // --- convolution (cross-correlation, like every framework) ---
  // x (N,C,H,W), w (K,C,R,S), b (K) or null, y (N,K,P,Q).
  virtual void conv2d_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b,
                              const Conv2dParams& p) = 0;
  // dx (N,C,H,W) from dy (N,K,P,Q) and w (K,C,R,S).
  virtual void conv2d_backward_data(Tensor& dx, const Tensor& dy, const Tensor& w,
                                    const Conv2dParams& p) = 0;
  // dw (K,C,R,S) from dy (N,K,P,Q) and x (N,C,H,W); overwrites dw.
  virtual void conv2d_backward_filter(Tensor& dw, const Tensor& dy, const Tensor& x,
                                      const Conv2dParams& p) = 0;

  // --- pooling ---
  // x (N,C,H,W) -> y (N,C,P,Q).
  virtual void pool2d_forward(Tensor& y, const Tensor& x, const Pool2dParams& p) = 0;
  // dx (N,C,H,W) from dy, x and y; max pooling routes each gradient to the first maximum.
  virtual void pool2d_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                               const Pool2dParams& p) = 0;

  // --- activations (elementwise, any shape; y may alias x in forward) ---
  // alpha: the negative slope of leaky relu, elu's alpha, ignored otherwise
  // (engine/activation_math.h defines each kind).
  virtual void activation_forward(Tensor& y, const Tensor& x, Activation a, float alpha) = 0;
  // dx from dy, the forward input x and output y (sigmoid and tanh read y, every other kind x:
  // activation_uses_output).
  virtual void activation_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                                   Activation a, float alpha) = 0;

  // --- losses and metrics ---
  // logits (N,C), labels int32 (N) -> probs (N,C) softmax, loss (1) mean cross-entropy over N
  // against the target t = (1 - smoothing) onehot(label) + smoothing / C (label smoothing,
  // PyTorch's CrossEntropyLoss(label_smoothing); 0: the plain one-hot target).
  // A label outside [0, C) throws DataError naming the sample: here, or on a device that queues
  // ops, at the next synchronize() or download() (so that checking adds no wait for the device).
  // The same holds for mse_forward and accuracy.
  virtual void softmax_cross_entropy_forward(Tensor& loss, Tensor& probs, const Tensor& logits,
                                             const Tensor& labels, float smoothing) = 0;
  // dlogits (N,C) = (probs - t) / N, t the forward's target.
  virtual void softmax_cross_entropy_backward(Tensor& dlogits, const Tensor& probs,
                                              const Tensor& labels, float smoothing) = 0;
  // pred (N,C), labels (N) -> loss (1) = mean over N*C of (pred - onehot(labels))^2.
  virtual void mse_forward(Tensor& loss, const Tensor& pred, const Tensor& labels) = 0;
  // dpred = 2 (pred - onehot(labels)) / (N*C).
  virtual void mse_backward(Tensor& dpred, const Tensor& pred, const Tensor& labels) = 0;
  // correct (1) = number of rows of scores (N,C) whose first maximum is at labels[n].
  virtual void accuracy(Tensor& correct, const Tensor& scores, const Tensor& labels) = 0;

  // --- dropout ---
  // mask[i] = (philox_uniform(seed, offset, i) >= p) / (1 - p); y = x * mask. Same mask on every
  // backend for the same (seed, offset).
  virtual void dropout_forward(Tensor& y, Tensor& mask, const Tensor& x, float p, uint64_t seed,
                               uint64_t offset) = 0;
  virtual void dropout_backward(Tensor& dx, const Tensor& dy, const Tensor& mask) = 0;

  // --- batch normalization: per channel (axis 1) over every other axis, M = numel / C values ---
  // Training: y = gamma * (x - mean) * inv_std + beta with the batch's mean and biased variance,
  // inv_std = 1 / sqrt(var + eps); saves mean and inv_std (C) for the backward and moves the
  // running statistics, r = (1 - momentum) r + momentum * batch value, the variance unbiased
  // (M / (M - 1)), as PyTorch does. Needs M > 1.
  virtual void batchnorm_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                          Tensor& running_mean, Tensor& running_var,
                                          const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                          float momentum, float eps) = 0;
  // Inference: y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta.
  virtual void batchnorm_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                           const Tensor& beta, const Tensor& running_mean,
                                           const Tensor& running_var, float eps) = 0;
  // dgamma, dbeta (C, overwritten) and dx (null: not needed) from dy, the forward's x, gamma and
  // the statistics it saved.
  virtual void batchnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                                  const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                  const Tensor& save_inv_std) = 0;

  // --- fusions: an op and a relu next to it, in one pass (Graph::allocate) ---
  // Whether this backend computes batch normalization or add and the relu after it, or a relu
  // and the max pooling after it, in one pass for activations of dtype d, each value read and
  // written once instead of twice. The graph fuses only then: the relu layer is not run, and its
  // output is its input's buffer (written relu'd by batchnorm or add; left as it is for max
  // pooling, which reads the relu's input). The fused ops below give the same values, bit for
  // bit, as the two ops; by default they are the two ops.
  enum class ReluFusion { kBatchnorm, kAdd, kMaxPool };
  virtual bool fuses_relu(ReluFusion op, DType d) const {
    (void)op, (void)d;
    return false;
  }
  // y = relu(batch normalization of x), as batchnorm_forward_training and _inference.
  virtual void batchnorm_relu_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                               Tensor& running_mean, Tensor& running_var,
                                               const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, float momentum, float eps);
  virtual void batchnorm_relu_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                                const Tensor& beta, const Tensor& running_mean,
                                                const Tensor& running_var, float eps);
  // batchnorm_backward from dy, the gradient of y = relu(bn(x)): relu's gradient (dy where y > 0,
  // else 0, as activation_backward's) goes into batch normalization's.
  virtual void batchnorm_relu_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                                       const Tensor& y, const Tensor& x, const Tensor& gamma,
                                       const Tensor& save_mean, const Tensor& save_inv_std);
  // y = relu(a + b).
  virtual void add_relu(Tensor& y, const Tensor& a, const Tensor& b);
  // add_relu's backward: every non-null dx = relu's gradient from dy and y (each input of a sum
  // gets the sum's gradient).
  virtual void add_relu_backward(const std::vector<Tensor*>& dxs, const Tensor& dy,
                                 const Tensor& y);
  // y = max pooling (p.mode kMax) of relu(x), computed as relu of the max (the same values: relu
  // keeps the order and a NaN); and its backward, dx the gradient of x: dy where y > 0 (relu's
  // gradient, from y), routed as pool2d_backward routes it.
  virtual void relu_max_pool_forward(Tensor& y, const Tensor& x, const Pool2dParams& p);
  virtual void relu_max_pool_backward(Tensor& dx, const Tensor& dy, const Tensor& x,
                                      const Tensor& y, const Pool2dParams& p);

  // --- group normalization: per sample, over each group of C / G channels and their positions ---
  // x (N,C,...): y = gamma[c] * (x - mean) * inv_std + beta[c], mean and inv_std = 1 /
  // sqrt(biased variance + eps) those of the (sample, group)'s values, saved (N*G) for the
  // backward. groups 1: layer normalization over (C,H,W); groups C: instance normalization.
  virtual void groupnorm_forward(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                 const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 int groups, float eps) = 0;
  // dgamma, dbeta (C, overwritten) and dx (null: not needed) from dy, the forward's x, gamma and
  // the statistics it saved.
  virtual void groupnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                                  const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                  const Tensor& save_inv_std, int groups) = 0;

  // --- optimizer updates (in place on w and the state tensors) ---
  // With p.gate set, an update reads the gate on the device: it skips when [kGateSkip] is set,
  // and otherwise uses [kGateFactor] * grad as the gradient.
  virtual void sgd_update(Tensor& w, Tensor& velocity, const Tensor& grad, const SgdParams& p) = 0;
  virtual void adam_update(Tensor& w, Tensor& m, Tensor& v, const Tensor& grad,
                           const AdamParams& p) = 0;

  // --- the update gate (above) ---
  // norm (1) = sqrt(sum of g^2 over every element of grads), summed in double in a fixed order
  // (deterministic), so it is finite exactly when every gradient is: NaN or Inf otherwise.
  virtual void gradient_norm(Tensor& norm, const Tensor& grads) = 0;
  // gate (kGateSize) from this step's loss (1), the norm of the gradients as the backward left
  // them (1, may be the gate's own kGateGradNorm; null: not computed) and p; see the top.
  virtual void update_gate(Tensor& gate, const Tensor& loss, const Tensor* grad_norm,
                           const GateParams& p) = 0;

  // --- data-parallel runs ---
  // Whether start_device_sums() can work on this process (its library loads, the processes on
  // this host have a device each); when not, `why_not` says why and what would fix it, or stays
  // empty where the host is the backend's own memory (the CPU: nothing is lost). Asks no other
  // process.
  virtual bool device_sums_available(const Communicator& comm, std::string* why_not) {
    (void)comm, (void)why_not;
    return false;
  }
  // Collective: every process of comm calls it, once every one found device sums available.
  // Throws DeviceError when the library cannot connect the processes.
  virtual std::unique_ptr<DeviceSums> start_device_sums(Communicator& comm) {
    (void)comm;
    return nullptr;
  }

  // Number of non-finite (NaN or Inf) entries of t.
  virtual int64_t count_nonfinite(const Tensor& t) = 0;
  // The same over several tensors (every gradient of a step), with one wait for the device.
  virtual int64_t count_nonfinite(const std::vector<const Tensor*>& ts) {
    int64_t n = 0;
    for (const Tensor* t : ts) n += count_nonfinite(*t);
    return n;
  }

 protected:
  bool tracing() const { return trace_ != nullptr; }  // build a placement line only when asked
  void placed(const std::string& line) const {
    if (trace_) trace_->push_back(line);
  }

 private:
  std::vector<std::string>* trace_ = nullptr;
};

}  // namespace tandem
