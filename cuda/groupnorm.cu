// Group normalization on the GPU: one block per (sample, group), whose values are contiguous in x
// (C / G channels of `inner` positions), summed in double in two passes (the mean, then the
// squared deviations) by a fixed-order tree: deterministic, and the CPU backend's arithmetic.
// The backward's per-channel sums come from one block per (sample, channel), then one thread per
// channel adds the samples in order.
#include <cmath>
#include <optional>
#include <string>

#include "cuda/cuda_backend_impl.h"

namespace tandem {
namespace {

// The block's sum of v over its threads (launched with kThreads threads), in a fixed order;
// every thread gets it.
__device__ double block_sum(double v, double* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
    __syncthreads();
  }
  const double total = buf[0];
  __syncthreads();  // buf is reused by the next sum
  return total;
}

// Block b = (sample, group): its mean and inv_std, then y.
__global__ void groupnorm_forward_kernel(float* y, float* save_mean, float* save_inv_std,
                                         const float* x, const float* gamma, const float* beta,
                                         int groups, int64_t per_group, int64_t inner, double eps) {
  __shared__ double buf[kThreads];
  const int64_t ng = blockIdx.x, m = per_group * inner;
  const float* xs = x + ng * m;
  double s = 0;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) s += xs[k];
  const double mean = m ? block_sum(s, buf) / static_cast<double>(m) : 0.0;
  double q = 0;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) q += (xs[k] - mean) * (xs[k] - mean);
  const double m2 = block_sum(q, buf);
  const float mean_f = static_cast<float>(mean);
  const float inv = static_cast<float>(1.0 / sqrt((m ? m2 / static_cast<double>(m) : 0.0) + eps));
  if (threadIdx.x == 0) save_mean[ng] = mean_f, save_inv_std[ng] = inv;
  const int64_t c0 = (ng % groups) * per_group;
  float* ys = y + ng * m;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    const int64_t c = c0 + k / inner;
    ys[k] = (xs[k] - mean_f) * (gamma[c] * inv) + beta[c];
  }
}

// Block b = (sample, channel): sum of dy and of dy * xhat over the channel's positions.
__global__ void groupnorm_channel_sums_kernel(double* part_sum, double* part_dot, const float* dy,
                                              const float* x, const float* save_mean,
                                              const float* save_inv_std, int64_t c, int groups,
                                              int64_t per_group, int64_t inner) {
  __shared__ double buf[kThreads];
  const int64_t nc = blockIdx.x, n = nc / c, ng = n * groups + (nc % c) / per_group;
  const float mean = save_mean[ng], inv = save_inv_std[ng];
  const float* xs = x + nc * inner;
  const float* ds = dy + nc * inner;
  double s = 0, t = 0;
  for (int64_t k = threadIdx.x; k < inner; k += blockDim.x) {
    s += ds[k];
    t += static_cast<double>(ds[k]) * ((xs[k] - mean) * inv);
  }
  s = block_sum(s, buf);
  t = block_sum(t, buf);
  if (threadIdx.x == 0) part_sum[nc] = s, part_dot[nc] = t;
}

// Block b = (sample, group): dx = inv_std * (dy * gamma - mean(dxhat) - xhat * mean(dxhat *
// xhat)), the means from the channel sums weighted by gamma.
__global__ void groupnorm_dx_kernel(float* dx, const float* dy, const float* x, const float* gamma,
                                    const float* save_mean, const float* save_inv_std,
                                    const double* part_sum, const double* part_dot, int64_t c,
                                    int groups, int64_t per_group, int64_t inner) {
  const int64_t ng = blockIdx.x, m = per_group * inner;
  const int64_t n = ng / groups, c0 = (ng % groups) * per_group;
  // Every thread adds the group's channels in the same order: the CPU backend's sums.
  double sum_dxhat = 0, dot_dxhat = 0;
  for (int64_t j = 0; j < per_group; ++j) {
    sum_dxhat += part_sum[n * c + c0 + j] * gamma[c0 + j];
    dot_dxhat += part_dot[n * c + c0 + j] * gamma[c0 + j];
  }
  const float a = static_cast<float>(sum_dxhat / static_cast<double>(m));
  const float b = static_cast<float>(dot_dxhat / static_cast<double>(m));
  const float mean = save_mean[ng], inv = save_inv_std[ng];
  const float* xs = x + ng * m;
  const float* ds = dy + ng * m;
  float* out = dx + ng * m;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x)
    out[k] = inv * (ds[k] * gamma[c0 + k / inner] - a - (xs[k] - mean) * inv * b);
}

// One thread per channel: dgamma, dbeta as the samples' sums added in order.
__global__ void groupnorm_param_grads_kernel(float* dgamma, float* dbeta, const double* part_sum,
                                             const double* part_dot, int64_t n, int64_t c) {
  for (int64_t ch = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; ch < c;
       ch += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0, t = 0;
    for (int64_t i = 0; i < n; ++i) s += part_sum[i * c + ch], t += part_dot[i * c + ch];
    dbeta[ch] = static_cast<float>(s);
    dgamma[ch] = static_cast<float>(t);
  }
}

}  // namespace

void CudaBackend::groupnorm_forward(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                    const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    int groups, float eps) {
  if (!plain_f32({&y, &x})) {  // in the logical order, in fp32
    StandIn sy(*this, y, false, true), sx(*this, x, true, false);
    groupnorm_forward(sy.get(), save_mean, save_inv_std, sx.get(), gamma, beta, groups, eps);
    return sy.finish();
  }
  const GroupGeometry g = group_geometry(x, gamma, save_mean, groups, "groupnorm_forward");
  expect_shape(y, x.shape(), "groupnorm output");
  expect_numel(save_inv_std, save_mean.numel(), "groupnorm inv_std");
  expect_numel(beta, gamma.numel(), "groupnorm beta");
  if (x.numel() == 0) return;
  groupnorm_forward_kernel<<<static_cast<unsigned>(g.n * groups), kThreads, 0, stream_>>>(
      y.data(), save_mean.data(), save_inv_std.data(), x.data(), gamma.data(), beta.data(), groups,
      g.per_group, g.inner, static_cast<double>(eps));
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::groupnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                                     const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                     const Tensor& save_inv_std, int groups) {
  if (!plain_f32({&dy, &x}) || (dx && !plain_f32({dx}))) {
    StandIn sdy(*this, dy, true, false), sx(*this, x, true, false);
    std::optional<StandIn> sdx;
    if (dx) sdx.emplace(*this, *dx, false, true);
    groupnorm_backward(dx ? &sdx->get() : nullptr, dgamma, dbeta, sdy.get(), sx.get(), gamma,
                       save_mean, save_inv_std, groups);
    if (sdx) sdx->finish();
    return;
  }
  const GroupGeometry g = group_geometry(x, gamma, save_mean, groups, "groupnorm_backward");
  expect_shape(dy, x.shape(), "groupnorm dy");
  if (dx) expect_shape(*dx, x.shape(), "groupnorm dx");
  expect_numel(dgamma, g.c, "groupnorm dgamma");
  expect_numel(dbeta, g.c, "groupnorm dbeta");
  if (g.n * g.c == 0) {
    fill(dgamma, 0.f);
    fill(dbeta, 0.f);
    return;
  }
  auto parts = scratch(2 * static_cast<size_t>(g.n * g.c) * sizeof(double));
  double* part_sum = static_cast<double*>(parts.get());
  double* part_dot = part_sum + g.n * g.c;
  groupnorm_channel_sums_kernel<<<static_cast<unsigned>(g.n * g.c), kThreads, 0, stream_>>>(
      part_sum, part_dot, dy.data(), x.data(), save_mean.data(), save_inv_std.data(), g.c, groups,
      g.per_group, g.inner);
  CUDA_CHECK_LAUNCH();
  if (dx) {
    groupnorm_dx_kernel<<<static_cast<unsigned>(g.n * groups), kThreads, 0, stream_>>>(
        dx->data(), dy.data(), x.data(), gamma.data(), save_mean.data(), save_inv_std.data(),
        part_sum, part_dot, g.c, groups, g.per_group, g.inner);
    CUDA_CHECK_LAUNCH();
  }
  groupnorm_param_grads_kernel<<<grid_for(g.c), kThreads, 0, stream_>>>(
      dgamma.data(), dbeta.data(), part_sum, part_dot, g.n, g.c);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem
