// Optimizer updates on the CPU, in place: SGD (momentum, Nesterov, weight decay) and Adam/AdamW,
// with PyTorch's semantics so that runs can be checked against it.
#include <cmath>

#include "cpu/cpu_backend_impl.h"
#include "engine/optimizer_math.h"

namespace tandem {

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
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float g = gp[i] + wd * wp[i];
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
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) wp[i] = adam_element(wp[i], mp[i], vp[i], gp[i], b1, b2, eps, s);
}

}  // namespace tandem
