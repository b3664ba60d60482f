// Losses and metrics on the GPU: softmax cross-entropy, mean squared error, accuracy.
//
// One thread per row (classifier rows are short), then one block sums the per-row values in a
// fixed order, so the loss is deterministic. A label outside [0, C) is recorded in a device word
// and reported as the same DataError the CPU backend raises, at the next wait for the stream.
#include "cuda/cuda_backend_impl.h"
#include "cuda/kernel_math.h"

namespace tandem {
namespace {

// flag[0] = (row << 32 | uint32 label) of the smallest row with a bad label, all ones for none:
// one atomicMin on the packed word keeps the row and its label together.
__device__ bool label_ok(const int32_t* labels, int64_t n, int64_t c, unsigned long long* flag) {
  const int32_t l = labels[n];
  if (l >= 0 && l < c) return true;
  atomicMin(&flag[0], (static_cast<unsigned long long>(n) << 32) | static_cast<uint32_t>(l));
  return false;
}

// probs (N,C) = softmax(logits); row_loss (N) = log(sum exp(z - max)) - (z[label] - max)
// (kernel::softmax_ce_row).
__global__ void softmax_ce_rows(float* probs, float* row_loss, const float* logits,
                                const int32_t* labels, int64_t n, int64_t c, float smoothing,
                                unsigned long long* flag) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < n;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    label_ok(labels, r, c, flag);
    row_loss[r] = kernel::softmax_ce_row(probs + r * c, logits + r * c, c, labels[r], smoothing);
  }
}

// row_loss (N) = sum_j (pred - onehot)^2 (kernel::mse_row).
__global__ void mse_rows(float* row_loss, const float* pred, const int32_t* labels, int64_t n,
                         int64_t c, unsigned long long* flag) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < n;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    label_ok(labels, r, c, flag);
    row_loss[r] = kernel::mse_row(pred + r * c, c, labels[r]);
  }
}

// row (N) = 1 where the first maximum of scores is at the label (kernel::accuracy_row).
__global__ void accuracy_rows(float* row, const float* scores, const int32_t* labels, int64_t n,
                              int64_t c, unsigned long long* flag) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < n;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    label_ok(labels, r, c, flag);
    row[r] = kernel::accuracy_row(scores + r * c, c, labels[r]);
  }
}

// out[0] = scale * sum(rows), one block, fixed order.
__global__ void sum_rows(float* out, const float* rows, int64_t n, double scale) {
  __shared__ double partial[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += rows[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {  // launched with kThreads threads
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = static_cast<float>(partial[0] * scale);
}

// d (N,C) = scale * (v - target), target `hit` at the label and `spread` elsewhere (mse: 1 and 0;
// smoothed cross-entropy: 1 - e + e / C and e / C).
__global__ void minus_target(float* d, const float* v, const int32_t* labels, int64_t n, int64_t c,
                             float scale, float hit, float spread) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n * c;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / c, j = i % c;
    d[i] = scale * (v[i] - (labels[r] == j ? hit : spread));
  }
}

}  // namespace

namespace {
void check_rows(const Tensor& scores, const Tensor& labels, const char* what) {
  TANDEM_CHECK(
      scores.shape().rank() == 2 && labels.numel() == scores.dim(0),
      std::string(what) + ": scores " + scores.shape().str() + ", labels " + labels.shape().str());
  TANDEM_CHECK(labels.dtype() == DType::kI32, std::string(what) + ": labels must be int32");
}
}  // namespace

// Runs `rows_kernel` over the batch, then sums its per-row values into out (1) times scale; a bad
// label is reported at the next wait for the stream (check_labels).
template <typename Launch>
static void rows_then_sum(CudaBackend& be, Tensor& out, int64_t n, int64_t c, double scale,
                          Launch launch) {
  auto rows = be.scratch(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float));
  launch(static_cast<float*>(rows.get()), be.label_flag());
  CUDA_CHECK_LAUNCH();
  be.label_flag_queued(c);
  sum_rows<<<1, kThreads, 0, be.stream()>>>(out.data(), static_cast<float*>(rows.get()), n, scale);
  CUDA_CHECK_LAUNCH();
}

unsigned long long* CudaBackend::label_flag() {
  if (!label_classes_)
    CUDA_CHECK(cudaMemsetAsync(device_flag_ + 1, 0xFF, sizeof(unsigned long long), stream_));
  return device_flag_ + 1;
}

void CudaBackend::label_flag_queued(int64_t classes) {
  if (!label_classes_) label_classes_ = classes;
}

// The label word of the kernels (~0: every label was in range; else the first bad sample << 32 |
// its label), for a model of c classes.
static void throw_if_bad_label(unsigned long long word, int64_t c) {
  if (word == ~0ull) return;
  const int64_t row = static_cast<int64_t>(word >> 32);
  const int32_t label = static_cast<int32_t>(static_cast<uint32_t>(word & 0xFFFFFFFFull));
  throw DataError("label " + std::to_string(label) + " of sample " + std::to_string(row) +
                      " is outside [0, " + std::to_string(c) + ")",
                  "check that the data set's labels match the model's " + std::to_string(c) +
                      " output classes");
}

void CudaBackend::copy_label_flag() {
  if (label_classes_)
    CUDA_CHECK(cudaMemcpyAsync(host_flag_ + 1, device_flag_ + 1, sizeof(unsigned long long),
                               cudaMemcpyDeviceToHost, stream_));
}

void CudaBackend::check_later_labels() {
  if (!later_label_classes_ || later_pending_) return;
  const int64_t c = later_label_classes_;
  later_label_classes_ = 0;
  throw_if_bad_label(host_flag_[2], c);
}

void CudaBackend::check_labels() {
  if (!label_classes_) return;
  const int64_t c = label_classes_;
  label_classes_ = 0;
  throw_if_bad_label(host_flag_[1], c);
}

void CudaBackend::softmax_cross_entropy_forward(Tensor& loss, Tensor& probs, const Tensor& logits,
                                                const Tensor& labels, float smoothing) {
  if (!plain_f32({&loss, &probs, &logits})) {  // the loss is computed in fp32
    StandIn sl(*this, loss, false, true), sp(*this, probs, false, true),
        sx(*this, logits, true, false);
    softmax_cross_entropy_forward(sl.get(), sp.get(), sx.get(), labels, smoothing);
    sl.finish();
    return sp.finish();
  }
  check_rows(logits, labels, "softmax_cross_entropy_forward");
  expect_shape(probs, logits.shape(), "probs");
  const int64_t n = logits.dim(0), c = logits.dim(1);
  rows_then_sum(*this, loss, n, c, n > 0 ? 1.0 / static_cast<double>(n) : 0.0,
                [&](float* rows, unsigned long long* flag) {
                  softmax_ce_rows<<<grid_for(n), kThreads, 0, stream_>>>(
                      probs.data(), rows, logits.data(), labels.data_i32(), n, c, smoothing, flag);
                });
}

void CudaBackend::softmax_cross_entropy_backward(Tensor& dlogits, const Tensor& probs,
                                                 const Tensor& labels, float smoothing) {
  if (!plain_f32({&dlogits, &probs})) {
    StandIn sd(*this, dlogits, false, true), sp(*this, probs, true, false);
    softmax_cross_entropy_backward(sd.get(), sp.get(), labels, smoothing);
    return sd.finish();
  }
  check_rows(probs, labels, "softmax_cross_entropy_backward");
  expect_shape(dlogits, probs.shape(), "dlogits");
  const int64_t n = probs.dim(0), c = probs.dim(1);
  const float spread = smoothing / static_cast<float>(c);  // the CPU backend's fp32 targets
  minus_target<<<grid_for(n * c), kThreads, 0, stream_>>>(
      dlogits.data(), probs.data(), labels.data_i32(), n, c, 1.f / static_cast<float>(n),
      1.f - smoothing + spread, spread);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::mse_forward(Tensor& loss, const Tensor& pred, const Tensor& labels) {
  if (!plain_f32({&loss, &pred})) {
    StandIn sl(*this, loss, false, true), sp(*this, pred, true, false);
    mse_forward(sl.get(), sp.get(), labels);
    return sl.finish();
  }
  check_rows(pred, labels, "mse_forward");
  const int64_t n = pred.dim(0), c = pred.dim(1);
  rows_then_sum(*this, loss, n, c, n * c > 0 ? 1.0 / static_cast<double>(n * c) : 0.0,
                [&](float* rows, unsigned long long* flag) {
                  mse_rows<<<grid_for(n), kThreads, 0, stream_>>>(rows, pred.data(),
                                                                  labels.data_i32(), n, c, flag);
                });
}

void CudaBackend::mse_backward(Tensor& dpred, const Tensor& pred, const Tensor& labels) {
  if (!plain_f32({&dpred, &pred})) {
    StandIn sd(*this, dpred, false, true), sp(*this, pred, true, false);
    mse_backward(sd.get(), sp.get(), labels);
    return sd.finish();
  }
  check_rows(pred, labels, "mse_backward");
  expect_shape(dpred, pred.shape(), "dpred");
  const int64_t n = pred.dim(0), c = pred.dim(1);
  minus_target<<<grid_for(n * c), kThreads, 0, stream_>>>(
      dpred.data(), pred.data(), labels.data_i32(), n, c, 2.f / static_cast<float>(n * c), 1.f,
      0.f);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::accuracy(Tensor& correct, const Tensor& scores, const Tensor& labels) {
  if (!plain_f32({&correct, &scores})) {
    StandIn sc(*this, correct, false, true), ss(*this, scores, true, false);
    accuracy(sc.get(), ss.get(), labels);
    return sc.finish();
  }
  check_rows(scores, labels, "accuracy");
  const int64_t n = scores.dim(0), c = scores.dim(1);
  rows_then_sum(*this, correct, n, c, 1.0, [&](float* rows, unsigned long long* flag) {
    accuracy_rows<<<grid_for(n), kThreads, 0, stream_>>>(rows, scores.data(), labels.data_i32(), n,
                                                         c, flag);
  });
}

}  // namespace tandem
