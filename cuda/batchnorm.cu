// Batch normalization on the GPU: the per-channel statistics as fixed-order two-stage sums
// (channel_sum.cuh), the normalization and the input gradient as elementwise kernels.
//
// tandem's own kernels rather than cuDNN's batch-normalization calls, which cuDNN 9 deprecates:
// these are deterministic, keep the CPU backend's two-pass variance and PyTorch's running-variance
// rule (unbiased), and need no workspace.
#include <cmath>
#include <initializer_list>

#include "cuda/channel_sum.cuh"
#include "cuda/cuda_backend_impl.h"

namespace tandem {
namespace {

// Channel sums of x, then the mean.
struct XValue {
  const float* x;
  __device__ float2 operator()(int64_t i, int64_t) const { return make_float2(x[i], 0.f); }
};
struct MeanFinish {
  float* mean;
  double m;
  __device__ void operator()(int64_t ch, float2 s) const {
    mean[ch] = static_cast<float>(s.x / m);
  }
};

// Channel sums of (x - mean)^2 (two passes: no cancellation of a large mean), then inv_std and
// the running statistics.
struct CentredSquare {
  const float* x;
  const float* mean;
  __device__ float2 operator()(int64_t i, int64_t ch) const {
    const float d = x[i] - mean[ch];
    return make_float2(d * d, 0.f);
  }
};
struct VarianceFinish {
  float* inv_std;
  float* running_mean;
  float* running_var;
  const float* mean;
  double m, momentum, eps;
  __device__ void operator()(int64_t ch, float2 s) const {
    inv_std[ch] = static_cast<float>(1.0 / sqrt(s.x / m + eps));
    running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean[ch]);
    running_var[ch] =
        static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * (s.x / (m - 1.0)));
  }
};

// Channel sums of dy and dy * (x - mean): the bias and scale gradients.
struct GradValue {
  const float* dy;
  const float* x;
  const float* mean;
  __device__ float2 operator()(int64_t i, int64_t ch) const {
    return make_float2(dy[i], dy[i] * (x[i] - mean[ch]));
  }
};
struct GradFinish {
  float* dgamma;
  float* dbeta;
  const float* inv_std;
  __device__ void operator()(int64_t ch, float2 s) const {
    dbeta[ch] = s.x;
    dgamma[ch] = s.y * inv_std[ch];
  }
};

// y = (x - mean) * gamma * inv_std + beta, over (N, C, inner).
__global__ void normalize_kernel(float* y, const float* x, const float* mean, const float* inv_std,
                                 const float* gamma, const float* beta, int64_t n, int64_t c,
                                 int64_t inner) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = channel_of(i, inner, c, n);
    y[i] = (x[i] - mean[ch]) * (gamma[ch] * inv_std[ch]) + beta[ch];
  }
}

// The same with the running statistics.
__global__ void normalize_running_kernel(float* y, const float* x, const float* mean,
                                         const float* var, const float* gamma, const float* beta,
                                         float eps, int64_t n, int64_t c, int64_t inner) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = channel_of(i, inner, c, n);
    y[i] = (x[i] - mean[ch]) * (gamma[ch] / sqrtf(var[ch] + eps)) + beta[ch];
  }
}

// dx = (dy - mean(dy)) * a + (x - mean) * b with a = gamma * inv_std and
// b = -a * inv_std * dgamma / M (dgamma = inv_std * sum(dy * (x - mean))), dbeta = sum(dy).
__global__ void batchnorm_dx_kernel(float* dx, const float* dy, const float* x, const float* mean,
                                    const float* inv_std, const float* gamma, const float* dgamma,
                                    const float* dbeta, float inv_m, int64_t n, int64_t c,
                                    int64_t inner) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = channel_of(i, inner, c, n);
    const float a = gamma[ch] * inv_std[ch];
    const float b = -a * inv_std[ch] * dgamma[ch] * inv_m;
    dx[i] = (dy[i] - dbeta[ch] * inv_m) * a + (x[i] - mean[ch]) * b;
  }
}

struct Geometry {
  int64_t n, c, inner;
};

Geometry geometry(const Tensor& x, const Tensor& gamma, const char* what,
                  std::initializer_list<const Tensor*> per_channel) {
  TANDEM_CHECK(x.shape().rank() >= 2 && x.dim(1) == gamma.numel(),
               std::string(what) + ": " + x.shape().str() + " with " +
                   std::to_string(gamma.numel()) + " channels");
  for (const Tensor* t : per_channel) expect_numel(*t, gamma.numel(), what);
  const int64_t n = x.dim(0), c = x.dim(1);
  // 0 for an empty plane (N, C, 0, W): then the sums are of no values, as on the CPU.
  return {n, c, n * c == 0 ? 0 : x.numel() / (n * c)};
}

}  // namespace

void CudaBackend::batchnorm_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                             Tensor& running_mean, Tensor& running_var,
                                             const Tensor& x, const Tensor& gamma,
                                             const Tensor& beta, float momentum, float eps) {
  const Geometry g = geometry(x, gamma, "batchnorm_forward_training",
                              {&beta, &save_mean, &save_inv_std, &running_mean, &running_var});
  expect_numel(y, x.numel(), "batchnorm output");
  const double m = static_cast<double>(g.n * g.inner);
  TANDEM_CHECK(m > 1, "batch normalization needs more than one value per channel, got " +
                          x.shape().str());
  channel_sums(*this, g.n, g.c, g.inner, XValue{x.data()}, MeanFinish{save_mean.data(), m});
  channel_sums(*this, g.n, g.c, g.inner, CentredSquare{x.data(), save_mean.data()},
               VarianceFinish{save_inv_std.data(), running_mean.data(), running_var.data(),
                              save_mean.data(), m, momentum, eps});
  normalize_kernel<<<grid_for(x.numel()), kThreads, 0, stream_>>>(
      y.data(), x.data(), save_mean.data(), save_inv_std.data(), gamma.data(), beta.data(),
      x.numel(), g.c, g.inner);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::batchnorm_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, const Tensor& running_mean,
                                              const Tensor& running_var, float eps) {
  const Geometry g = geometry(x, gamma, "batchnorm_forward_inference",
                              {&beta, &running_mean, &running_var});
  expect_numel(y, x.numel(), "batchnorm output");
  if (x.numel() == 0) return;
  normalize_running_kernel<<<grid_for(x.numel()), kThreads, 0, stream_>>>(
      y.data(), x.data(), running_mean.data(), running_var.data(), gamma.data(), beta.data(), eps,
      x.numel(), g.c, g.inner);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::batchnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                                     const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                     const Tensor& save_inv_std) {
  const Geometry g = geometry(x, gamma, "batchnorm_backward",
                              {&dgamma, &dbeta, &save_mean, &save_inv_std});
  expect_numel(dy, x.numel(), "batchnorm output gradient");
  channel_sums(*this, g.n, g.c, g.inner, GradValue{dy.data(), x.data(), save_mean.data()},
               GradFinish{dgamma.data(), dbeta.data(), save_inv_std.data()});
  if (!dx || x.numel() == 0) return;
  expect_numel(*dx, x.numel(), "batchnorm input gradient");
  batchnorm_dx_kernel<<<grid_for(x.numel()), kThreads, 0, stream_>>>(
      dx->data(), dy.data(), x.data(), save_mean.data(), save_inv_std.data(), gamma.data(),
      dgamma.data(), dbeta.data(), static_cast<float>(1.0 / static_cast<double>(g.n * g.inner)),
      x.numel(), g.c, g.inner);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem
