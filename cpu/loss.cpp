// Losses and metrics on the CPU: softmax cross-entropy, mean squared error, accuracy.
//
// Written by hand as OpenMP loops over rows: oneDNN has a softmax but no fused loss, and the
// label check with its error message belongs here anyway. Sums are accumulated in double.
#include <cmath>
#include <string>

#include "cpu/cpu_backend_impl.h"

// clang-format off: last, so that only what follows is compiled for AVX2 with FMA
#include "cpu/isa.h"
// clang-format on

namespace tandem {
namespace {

// Labels (N) against a (N,C) score tensor: every label must be a class index in [0, C).
void check_labels(const Tensor& scores, const Tensor& labels, const char* what) {
  TANDEM_CHECK(
      scores.shape().rank() == 2 && labels.numel() == scores.dim(0),
      std::string(what) + ": scores " + scores.shape().str() + ", labels " + labels.shape().str());
  TANDEM_CHECK(labels.dtype() == DType::kI32, std::string(what) + ": labels must be int32");
  const int64_t n = scores.dim(0), c = scores.dim(1);
  const int32_t* l = labels.data_i32();
  for (int64_t i = 0; i < n; ++i) {
    if (l[i] < 0 || l[i] >= c) {
      throw DataError("label " + std::to_string(l[i]) + " of sample " + std::to_string(i) +
                          " is outside [0, " + std::to_string(c) + ")",
                      "check that the data set's labels match the model's " + std::to_string(c) +
                          " output classes");
    }
  }
}

}  // namespace

// probs (N,C) = softmax(logits), loss (1) = mean over n of -sum_j t_j log probs_j, with
// t = (1 - e) onehot(label) + e / C: log(sum exp) - (1 - e) logits[n, label] - e mean_j logits
// (each logit less the row's maximum).
void CpuBackend::softmax_cross_entropy_forward(Tensor& loss, Tensor& probs, const Tensor& logits,
                                               const Tensor& labels, float smoothing) {
  if (!all_f32_plain({&loss, &probs, &logits})) {  // the loss is computed in fp32
    F32Stage sl(*this, loss, false, true), sp(*this, probs, false, true),
        sx(*this, logits, true, false);
    softmax_cross_entropy_forward(sl.f32(), sp.f32(), sx.f32(), labels, smoothing);
    sl.finish();
    return sp.finish();
  }
  check_labels(logits, labels, "softmax_cross_entropy_forward");
  expect_shape(probs, logits.shape(), "softmax probs");
  const int64_t n = logits.dim(0), c = logits.dim(1);
  const float* x = logits.data();
  const int32_t* l = labels.data_i32();
  float* pr = probs.data();
  double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static) if (n * c > 16384)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * c;
    float* out = pr + i * c;
    float m = row[0];
    for (int64_t j = 1; j < c; ++j) m = std::fmax(m, row[j]);  // max-subtracted: no overflow
    double sum = 0, shifted = 0;
    for (int64_t j = 0; j < c; ++j) {
      out[j] = std::exp(row[j] - m);
      sum += out[j];
      shifted += static_cast<double>(row[j]) - m;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < c; ++j) out[j] *= inv;
    total += std::log(sum) - (1.0 - smoothing) * (static_cast<double>(row[l[i]]) - m);
    if (smoothing != 0.f) total -= smoothing * shifted / static_cast<double>(c);
  }
  loss.data()[0] = n ? static_cast<float>(total / static_cast<double>(n)) : 0.f;
}

// dlogits (N,C) = (probs - t) / N, t = (1 - e) onehot(labels) + e / C.
void CpuBackend::softmax_cross_entropy_backward(Tensor& dlogits, const Tensor& probs,
                                                const Tensor& labels, float smoothing) {
  if (!all_f32_plain({&dlogits, &probs})) {
    F32Stage sd(*this, dlogits, false, true), sp(*this, probs, true, false);
    softmax_cross_entropy_backward(sd.f32(), sp.f32(), labels, smoothing);
    return sd.finish();
  }
  check_labels(probs, labels, "softmax_cross_entropy_backward");
  expect_shape(dlogits, probs.shape(), "softmax dlogits");
  const int64_t n = probs.dim(0), c = probs.dim(1);
  const float scale = 1.f / static_cast<float>(n);
  const float spread = smoothing / static_cast<float>(c), hit = 1.f - smoothing + spread;
  const float* p = probs.data();
  const int32_t* l = labels.data_i32();
  float* d = dlogits.data();
#pragma omp parallel for schedule(static) if (n * c > 16384)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) d[i * c + j] = (p[i * c + j] - spread) * scale;
    d[i * c + l[i]] = (p[i * c + l[i]] - hit) * scale;
  }
}

// loss (1) = mean over N*C of (pred - onehot(labels))^2.
void CpuBackend::mse_forward(Tensor& loss, const Tensor& pred, const Tensor& labels) {
  if (!all_f32_plain({&loss, &pred})) {
    F32Stage sl(*this, loss, false, true), sp(*this, pred, true, false);
    mse_forward(sl.f32(), sp.f32(), labels);
    return sl.finish();
  }
  check_labels(pred, labels, "mse_forward");
  const int64_t n = pred.dim(0), c = pred.dim(1);
  const float* p = pred.data();
  const int32_t* l = labels.data_i32();
  double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static) if (n * c > 16384)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      const double e = static_cast<double>(p[i * c + j]) - (j == l[i] ? 1.0 : 0.0);
      total += e * e;
    }
  }
  loss.data()[0] = n * c > 0 ? static_cast<float>(total / static_cast<double>(n * c)) : 0.f;
}

// dpred (N,C) = 2 (pred - onehot(labels)) / (N*C).
void CpuBackend::mse_backward(Tensor& dpred, const Tensor& pred, const Tensor& labels) {
  if (!all_f32_plain({&dpred, &pred})) {
    F32Stage sd(*this, dpred, false, true), sp(*this, pred, true, false);
    mse_backward(sd.f32(), sp.f32(), labels);
    return sd.finish();
  }
  check_labels(pred, labels, "mse_backward");
  expect_shape(dpred, pred.shape(), "mse dpred");
  const int64_t n = pred.dim(0), c = pred.dim(1);
  const float scale = 2.f / static_cast<float>(n * c);
  const float* p = pred.data();
  const int32_t* l = labels.data_i32();
  float* d = dpred.data();
#pragma omp parallel for schedule(static) if (n * c > 16384)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) d[i * c + j] = (p[i * c + j] - (j == l[i] ? 1.f : 0.f)) * scale;
  }
}

// correct (1) = number of rows whose first maximum is at the label.
void CpuBackend::accuracy(Tensor& correct, const Tensor& scores, const Tensor& labels) {
  if (!all_f32_plain({&correct, &scores})) {
    F32Stage sc(*this, correct, false, true), ss(*this, scores, true, false);
    accuracy(sc.f32(), ss.f32(), labels);
    return sc.finish();
  }
  check_labels(scores, labels, "accuracy");
  const int64_t n = scores.dim(0), c = scores.dim(1);
  const float* s = scores.data();
  const int32_t* l = labels.data_i32();
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = s + i * c;
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j) {
      if (row[j] > row[best]) best = j;
    }
    hits += best == l[i] ? 1 : 0;
  }
  correct.data()[0] = static_cast<float>(hits);
}

}  // namespace tandem
