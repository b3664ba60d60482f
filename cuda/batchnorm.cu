// Batch normalization on the GPU: the per-channel statistics in one pass over x (mean and squared
// deviations merged as moments, cuda/moments.h, in two fixed-order stages), the backward's sums as
// fixed-order two-stage sums (channel_sum.cuh), the normalization and the input gradient as
// elementwise kernels. The training forward reads x twice: once for the statistics, once to
// normalize it.
//
// tandem's own kernels rather than cuDNN's batch-normalization calls, which cuDNN 9 deprecates:
// these are deterministic, as accurate as the CPU backend's two-pass variance, keep PyTorch's
// running-variance rule (unbiased), and need no workspace.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>

#include "cuda/channel_sum.cuh"
#include "cuda/cuda_backend_impl.h"
#include "cuda/kernel_math.h"
#include "cuda/moments.h"

namespace tandem {
namespace {

// Block (ch * parts + part) gathers the moments of the part-th slice of channel ch's N * inner
// values (channel_sum.cuh's walk over them), each thread's by shifted sums, then merges its
// threads' pairwise in a fixed order.
__global__ void channel_moments_kernel(Moments* partial, const float* x, int64_t c, int64_t inner,
                                       int64_t count, int64_t chunk, int parts) {
  __shared__ float n_buf[kThreads], mean_buf[kThreads], m2_buf[kThreads];
  const int64_t ch = blockIdx.x / parts;
  const int64_t begin = (blockIdx.x % parts) * chunk, end = min(begin + chunk, count);
  int64_t j = begin + threadIdx.x, n = j / inner, k = j % inner;
  const int64_t dn = blockDim.x / inner, dk = blockDim.x % inner;
  ShiftedSums sums;
  for (; j < end; j += blockDim.x) {
    sums.add(x[(n * c + ch) * inner + k]);
    n += dn, k += dk;
    if (k >= inner) k -= inner, ++n;
  }
  const Moments m = sums.moments();
  const unsigned t = threadIdx.x;
  n_buf[t] = m.n, mean_buf[t] = m.mean, m2_buf[t] = m.m2;
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride /= 2) {  // launched with kThreads
    if (t < stride)
      merge_moments(n_buf[t], mean_buf[t], m2_buf[t], n_buf[t + stride], mean_buf[t + stride],
                    m2_buf[t + stride]);
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = Moments{n_buf[0], mean_buf[0], m2_buf[0]};
}

// One thread per channel merges its parts in order, in double: the mean, inv_std and the running
// statistics (the variance biased for inv_std, unbiased for the running one, as PyTorch).
__global__ void moments_finish_kernel(float* save_mean, float* inv_std, float* running_mean,
                                      float* running_var, const Moments* partial, int64_t c,
                                      int parts, double momentum, double eps) {
  for (int64_t ch = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; ch < c;
       ch += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double n = 0, mean = 0, m2 = 0;
    for (int part = 0; part < parts; ++part) {
      const Moments& p = partial[ch * parts + part];
      merge_moments<double>(n, mean, m2, p.n, p.mean, p.m2);
    }
    const kernel::ChannelStats s =
        kernel::bn_channel_stats(n, mean, m2, running_mean[ch], running_var[ch], momentum, eps);
    save_mean[ch] = s.mean;
    inv_std[ch] = s.inv_std;
    running_mean[ch] = s.running_mean;
    running_var[ch] = s.running_var;
  }
}

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
    y[i] = kernel::bn_normalize(x[i], mean[ch], inv_std[ch], gamma[ch], beta[ch]);
  }
}

// The same with the running statistics.
__global__ void normalize_running_kernel(float* y, const float* x, const float* mean,
                                         const float* var, const float* gamma, const float* beta,
                                         float eps, int64_t n, int64_t c, int64_t inner) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = channel_of(i, inner, c, n);
    y[i] = kernel::bn_normalize_running(x[i], mean[ch], var[ch], gamma[ch], beta[ch], eps);
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
    dx[i] =
        kernel::bn_dx(dy[i], x[i], mean[ch], inv_std[ch], gamma[ch], dgamma[ch], dbeta[ch], inv_m);
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
  if (!plain_f32({&y, &x})) {  // statistics and normalization in fp32, on plain stand-ins
    StandIn sy(*this, y, false, true), sx(*this, x, true, false);
    batchnorm_forward_training(sy.get(), save_mean, save_inv_std, running_mean, running_var,
                               sx.get(), gamma, beta, momentum, eps);
    return sy.finish();
  }
  const Geometry g = geometry(x, gamma, "batchnorm_forward_training",
                              {&beta, &save_mean, &save_inv_std, &running_mean, &running_var});
  expect_numel(y, x.numel(), "batchnorm output");
  const double m = static_cast<double>(g.n * g.inner);
  TANDEM_CHECK(m > 1,
               "batch normalization needs more than one value per channel, got " + x.shape().str());
  // Parts as channel_sums': at least 16 values a thread, at most 64 per channel.
  const int64_t count = g.n * g.inner;
  const int parts = static_cast<int>(std::clamp<int64_t>(count / (16 * kThreads), 1, 64));
  const int64_t chunk = (count + parts - 1) / parts;
  auto partial = scratch(static_cast<size_t>(g.c * parts) * sizeof(Moments));
  auto* pp = static_cast<Moments*>(partial.get());
  channel_moments_kernel<<<static_cast<unsigned>(g.c * parts), kThreads, 0, stream_>>>(
      pp, x.data(), g.c, std::max<int64_t>(g.inner, 1), count, chunk, parts);
  CUDA_CHECK_LAUNCH();
  moments_finish_kernel<<<grid_for(g.c), kThreads, 0, stream_>>>(
      save_mean.data(), save_inv_std.data(), running_mean.data(), running_var.data(), pp, g.c,
      parts, momentum, eps);
  CUDA_CHECK_LAUNCH();
  normalize_kernel<<<grid_for(x.numel()), kThreads, 0, stream_>>>(
      y.data(), x.data(), save_mean.data(), save_inv_std.data(), gamma.data(), beta.data(),
      x.numel(), g.c, g.inner);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::batchnorm_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, const Tensor& running_mean,
                                              const Tensor& running_var, float eps) {
  if (!plain_f32({&y, &x})) {
    StandIn sy(*this, y, false, true), sx(*this, x, true, false);
    batchnorm_forward_inference(sy.get(), sx.get(), gamma, beta, running_mean, running_var, eps);
    return sy.finish();
  }
  const Geometry g =
      geometry(x, gamma, "batchnorm_forward_inference", {&beta, &running_mean, &running_var});
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
  if (!plain_f32({&dy, &x}) || (dx && !dx->is_f32_plain())) {
    StandIn sdy(*this, dy, true, false), sx(*this, x, true, false);
    std::optional<StandIn> sdx;
    if (dx) sdx.emplace(*this, *dx, false, true);
    batchnorm_backward(dx ? &sdx->get() : nullptr, dgamma, dbeta, sdy.get(), sx.get(), gamma,
                       save_mean, save_inv_std);
    if (sdx) sdx->finish();
    return;
  }
  const Geometry g =
      geometry(x, gamma, "batchnorm_backward", {&dgamma, &dbeta, &save_mean, &save_inv_std});
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
