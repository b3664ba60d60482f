// Fused optimizer updates on the GPU: one kernel per parameter, PyTorch semantics (see backend.h);
// and the update gate, so that a step's update is decided on the device.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "cuda/cuda_backend_impl.h"
#include "cuda/kernel_math.h"
#include "engine/optimizer_math.h"

namespace tandem {
namespace {

// The gate's word for every thread of an update: skip it, or the gradient's multiplier (null
// gate: 1). __fmul_rn keeps the product out of any fused multiply-add, so a factor of 1 leaves
// the update's arithmetic exactly what it is without a gate.
struct GateView {
  const float* gate;
  __device__ bool skips() const { return gate && gate[kGateSkip] != 0.f; }
  __device__ float scaled(float g) const { return gate ? __fmul_rn(gate[kGateFactor], g) : g; }
};

// g += wd*w; v = momentum*v + g; step = nesterov ? g + momentum*v : v; w -= lr*step
// (kernel::sgd_element).
__global__ void sgd_kernel(float* w, float* v, const float* grad, int64_t n, SgdParams p,
                           GateView gate) {
  if (gate.skips()) return;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    kernel::sgd_element(w[i], v ? v + i : nullptr, gate.scaled(grad[i]), p.lr, p.momentum,
                        p.weight_decay, p.nesterov);
  }
}

// engine/optimizer_math.h's element update, as the CPU backend's loop.
__global__ void adam_kernel(float* w, float* m, float* v, const float* grad, int64_t n, float b1,
                            float b2, float eps, AdamScalars s, GateView gate) {
  if (gate.skips()) return;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    w[i] = adam_element(w[i], m[i], v[i], gate.scaled(grad[i]), b1, b2, eps, s);
}

// The gradient norm in two fixed-order stages (deterministic, no atomics): block b sums the
// squares of its grid-stride share in double, then one block adds the partials in order.
constexpr int kNormBlocks = 256;

__global__ void square_sum_kernel(double* partial, const float* g, int64_t n) {
  __shared__ double buf[kThreads];
  double s = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    s += static_cast<double>(g[i]) * g[i];
  buf[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {  // launched with kThreads threads
    if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = buf[0];
}

// As the CPU's: finite floats square to at most 1.2e77 in double, so only a non-finite gradient
// makes the sum so; a finite norm past the float range is clamped to stay finite.
__global__ void norm_finish_kernel(float* norm, const double* partial, int parts) {
  double sum = 0;
  for (int b = 0; b < parts; ++b) sum += partial[b];
  *norm = isfinite(sum) ? static_cast<float>(fmin(sqrt(sum), double{FLT_MAX}))
                        : static_cast<float>(sum);
}

__global__ void gate_kernel(float* gate, const float* loss, const float* grad_norm, GateParams p) {
  gate_step(gate, *loss, grad_norm ? *grad_norm : 0.f, grad_norm != nullptr, p);
}

}  // namespace

void CudaBackend::sgd_update(Tensor& w, Tensor& velocity, const Tensor& grad, const SgdParams& p) {
  expect_numel(grad, w.numel(), "sgd gradient");
  if (p.momentum != 0.f) expect_numel(velocity, w.numel(), "sgd velocity");
  if (p.gate) expect_numel(*p.gate, kGateSize, "update gate");
  if (w.numel() == 0) return;
  sgd_kernel<<<grid_for(w.numel()), kThreads, 0, stream_>>>(
      w.data(), p.momentum != 0.f ? velocity.data() : nullptr, grad.data(), w.numel(), p,
      GateView{p.gate ? p.gate->data() : nullptr});
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::adam_update(Tensor& w, Tensor& m, Tensor& v, const Tensor& grad,
                              const AdamParams& p) {
  expect_numel(grad, w.numel(), "adam gradient");
  expect_numel(m, w.numel(), "adam first moment");
  expect_numel(v, w.numel(), "adam second moment");
  if (p.gate) expect_numel(*p.gate, kGateSize, "update gate");
  if (w.numel() == 0) return;
  TANDEM_CHECK(p.step >= 1, "adam step " + std::to_string(p.step) + " (1-based)");
  adam_kernel<<<grid_for(w.numel()), kThreads, 0, stream_>>>(
      w.data(), m.data(), v.data(), grad.data(), w.numel(), p.beta1, p.beta2, p.eps,
      adam_scalars(p), GateView{p.gate ? p.gate->data() : nullptr});
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::gradient_norm(Tensor& norm, const Tensor& grads) {
  expect_numel(norm, 1, "gradient norm");
  const int64_t n = grads.numel();
  const int parts = static_cast<int>(std::min<int64_t>(kNormBlocks, grid_for(n)));
  auto partial = scratch(static_cast<size_t>(parts) * sizeof(double));
  auto* pp = static_cast<double*>(partial.get());
  square_sum_kernel<<<static_cast<unsigned>(parts), kThreads, 0, stream_>>>(pp, grads.data(), n);
  CUDA_CHECK_LAUNCH();
  norm_finish_kernel<<<1, 1, 0, stream_>>>(norm.data(), pp, parts);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::update_gate(Tensor& gate, const Tensor& loss, const Tensor* grad_norm,
                              const GateParams& p) {
  expect_numel(gate, kGateSize, "update gate");
  expect_numel(loss, 1, "update gate loss");
  if (grad_norm) expect_numel(*grad_norm, 1, "update gate gradient norm");
  gate_kernel<<<1, 1, 0, stream_>>>(gate.data(), loss.data(),
                                    grad_norm ? grad_norm->data() : nullptr, p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem
