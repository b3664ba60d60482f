// Fused optimizer updates on the GPU: one kernel per parameter, PyTorch semantics (see backend.h).
#include <cmath>

#include "cuda/cuda_backend_impl.h"
#include "engine/optimizer_math.h"

namespace tandem {
namespace {

// g += wd*w; v = momentum*v + g; step = nesterov ? g + momentum*v : v; w -= lr*step.
__global__ void sgd_kernel(float* w, float* v, const float* grad, int64_t n, SgdParams p) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float g = grad[i] + p.weight_decay * w[i];
    if (p.momentum != 0.f) {
      const float vel = p.momentum * v[i] + g;
      v[i] = vel;
      g = p.nesterov ? g + p.momentum * vel : vel;
    }
    w[i] -= p.lr * g;
  }
}

// engine/optimizer_math.h's element update, as the CPU backend's loop.
__global__ void adam_kernel(float* w, float* m, float* v, const float* grad, int64_t n, float b1,
                            float b2, float eps, AdamScalars s) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    w[i] = adam_element(w[i], m[i], v[i], grad[i], b1, b2, eps, s);
}

}  // namespace

void CudaBackend::sgd_update(Tensor& w, Tensor& velocity, const Tensor& grad, const SgdParams& p) {
  expect_numel(grad, w.numel(), "sgd gradient");
  if (p.momentum != 0.f) expect_numel(velocity, w.numel(), "sgd velocity");
  if (w.numel() == 0) return;
  sgd_kernel<<<grid_for(w.numel()), kThreads, 0, stream_>>>(
      w.data(), p.momentum != 0.f ? velocity.data() : nullptr, grad.data(), w.numel(), p);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::adam_update(Tensor& w, Tensor& m, Tensor& v, const Tensor& grad,
                              const AdamParams& p) {
  expect_numel(grad, w.numel(), "adam gradient");
  expect_numel(m, w.numel(), "adam first moment");
  expect_numel(v, w.numel(), "adam second moment");
  if (w.numel() == 0) return;
  TANDEM_CHECK(p.step >= 1, "adam step " + std::to_string(p.step) + " (1-based)");
  adam_kernel<<<grid_for(w.numel()), kThreads, 0, stream_>>>(w.data(), m.data(), v.data(),
                                                             grad.data(), w.numel(), p.beta1,
                                                             p.beta2, p.eps, adam_scalars(p));
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem
