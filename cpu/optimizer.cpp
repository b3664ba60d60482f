// Optimizer updates on the CPU, in place: SGD (momentum, Nesterov, weight decay) and Adam/AdamW,
// with PyTorch's semantics so that runs can be checked against it; and the update gate.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "cpu/cpu_backend_impl.h"
#include "engine/optimizer_math.h"

// clang-format off: last, so that only what follows is compiled for AVX2 with FMA
#include "cpu/isa.h"
// clang-format on

namespace tandem {
namespace {

// The gate's multiplier for an update, or 0 when the gate says to skip it (null gate: 1).
float gate_factor(const Tensor* gate) {
  if (!gate) return 1.f;
  TANDEM_CHECK(gate->numel() == kGateSize, "update gate " + gate->shape().str());
  const float* g = gate->data();
  return g[kGateSkip] != 0.f ? 0.f : g[kGateFactor];
}

bool gate_skips(const Tensor* gate) { return gate && gate->data()[kGateSkip] != 0.f; }

}  // namespace

// g = grad + wd*w; v = momentum*v + g; step = nesterov ? g + momentum*v : v; w -= lr*step.
// The velocity starts at zero, so the first step gives v = g as in PyTorch; with momentum 0 the
// velocity tensor is not touched (it may be undefined).
void CpuBackend::sgd_update(Tensor& w, Tensor& velocity, const Tensor& grad, const SgdParams& p) {
  TANDEM_CHECK(grad.numel() == w.numel(),
               "sgd grad " + grad.shape().str() + " for w " + w.shape().str());
  const bool momentum = p.momentum != 0.f;
  if (momentum) {
    TANDEM_CHECK(velocity.numel() == w.numel(), "sgd velocity " + velocity.shape().str());
  }
  const int64_t n = w.numel();
  float* wp = w.data();
  float* vp = momentum ? velocity.data() : nullptr;
  const float* gp = grad.data();
  const float lr = p.lr, mu = p.momentum, wd = p.weight_decay;
  const bool nesterov = p.nesterov;
  if (gate_skips(p.gate)) return;
  const float factor = gate_factor(p.gate);  // 1 without a gate: the same products as before
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float g = factor * gp[i] + wd * wp[i];
    if (momentum) {
      const float v = mu * vp[i] + g;
      vp[i] = v;
      g = nesterov ? g + mu * v : v;
    }
    wp[i] -= lr * g;
  }
}

// PyTorch Adam: g = grad (+ wd*w unless decoupled); AdamW first decays w *= 1 - lr*wd;
// m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
// w -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps). Bias corrections in double; the
// element's update is engine/optimizer_math.h's, as on the GPU.
void CpuBackend::adam_update(Tensor& w, Tensor& m, Tensor& v, const Tensor& grad,
                             const AdamParams& p) {
  TANDEM_CHECK(grad.numel() == w.numel() && m.numel() == w.numel() && v.numel() == w.numel(),
               "adam state for w " + w.shape().str());
  TANDEM_CHECK(p.step >= 1, "adam step " + std::to_string(p.step) + " (1-based)");
  const int64_t n = w.numel();
  const AdamScalars s = adam_scalars(p);
  const float b1 = p.beta1, b2 = p.beta2, eps = p.eps;
  float* wp = w.data();
  float* mp = m.data();
  float* vp = v.data();
  const float* gp = grad.data();
  if (gate_skips(p.gate)) return;
  const float factor = gate_factor(p.gate);
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i)
    wp[i] = adam_element(wp[i], mp[i], vp[i], factor * gp[i], b1, b2, eps, s);
}

// Fixed chunks summed in order, each in double: the same sum whatever the thread count, so a
// resumed run clips exactly like an uninterrupted one.
void CpuBackend::gradient_norm(Tensor& norm, const Tensor& grads) {
  expect_shape(norm, Shape{1}, "gradient norm");
  constexpr int64_t kChunks = 64;
  const int64_t n = grads.numel(), chunk = (n + kChunks - 1) / kChunks;
  const float* gp = grads.data();
  double partial[kChunks] = {};
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t c = 0; c < kChunks; ++c) {
    double s = 0;
    for (int64_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i)
      s += static_cast<double>(gp[i]) * gp[i];
    partial[c] = s;
  }
  double sum = 0;
  for (double s : partial) sum += s;
  // Finite floats square to at most 1.2e77 in double: only a non-finite gradient makes it so.
  norm.data()[0] = std::isfinite(sum)
                       ? static_cast<float>(std::min(std::sqrt(sum), double{FLT_MAX}))
                       : static_cast<float>(sum);
}

void CpuBackend::update_gate(Tensor& gate, const Tensor& loss, const Tensor* grad_norm,
                             const GateParams& p) {
  expect_shape(gate, Shape{kGateSize}, "update gate");
  TANDEM_CHECK(loss.numel() == 1, "update gate loss " + loss.shape().str());
  TANDEM_CHECK(!grad_norm || grad_norm->numel() == 1, "update gate gradient norm");
  gate_step(gate.data(), loss.data()[0], grad_norm ? grad_norm->data()[0] : 0.f,
            grad_norm != nullptr, p);
}

}  // namespace tandem
