// Group normalization on the CPU as OpenMP loops, one (sample, group) per iteration: its values
// are contiguous in x (C / G channels of `inner` positions each), summed in double in two passes
// (the mean, then the squared deviations), as the batch normalization's variance is.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "cpu/cpu_backend_impl.h"

// clang-format off: last, so that only what follows is compiled for AVX2 with FMA
#include "cpu/isa.h"
// clang-format on

namespace tandem {

void CpuBackend::groupnorm_forward(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                   const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   int groups, float eps) {
  if (!all_f32_plain({&y, &x})) {  // in the logical order, in fp32
    F32Stage sy(*this, y, false, true), sx(*this, x, true, false);
    groupnorm_forward(sy.f32(), save_mean, save_inv_std, sx.f32(), gamma, beta, groups, eps);
    return sy.finish();
  }
  const GroupGeometry g = group_geometry(x, gamma, save_mean, groups, "groupnorm_forward");
  expect_shape(y, x.shape(), "groupnorm output");
  TANDEM_CHECK(save_inv_std.numel() == save_mean.numel() && beta.numel() == gamma.numel(),
               "groupnorm_forward: statistics or beta of the wrong size");
  const int64_t m = g.per_group * g.inner;
  const float* xp = x.data();
  const float* gp = gamma.data();
  const float* bp = beta.data();
  float* yp = y.data();
  float* mp = save_mean.data();
  float* ip = save_inv_std.data();
#pragma omp parallel for schedule(static) if (x.numel() > 16384)
  for (int64_t ng = 0; ng < g.n * g.groups; ++ng) {
    const float* xs = xp + ng * m;
    double sum = 0;
    for (int64_t k = 0; k < m; ++k) sum += xs[k];
    const double mean = m ? sum / static_cast<double>(m) : 0.0;
    double m2 = 0;
    for (int64_t k = 0; k < m; ++k) m2 += (xs[k] - mean) * (xs[k] - mean);
    const float mean_f = static_cast<float>(mean);
    const float inv = static_cast<float>(
        1.0 / std::sqrt((m ? m2 / static_cast<double>(m) : 0.0) + static_cast<double>(eps)));
    mp[ng] = mean_f;
    ip[ng] = inv;
    const int64_t c0 = (ng % g.groups) * g.per_group;
    float* ys = yp + ng * m;
    for (int64_t j = 0; j < g.per_group; ++j) {
      const float scale = gp[c0 + j] * inv, shift = bp[c0 + j];
      const float* xc = xs + j * g.inner;
      float* yc = ys + j * g.inner;
#pragma omp simd
      for (int64_t k = 0; k < g.inner; ++k) yc[k] = (xc[k] - mean_f) * scale + shift;
    }
  }
}

// With xhat = (x - mean) * inv_std and dxhat = dy * gamma: dbeta[c] = sum of dy, dgamma[c] = sum
// of dy * xhat over the samples and positions; dx = inv_std * (dxhat - mean(dxhat) - xhat *
// mean(dxhat * xhat)), the means over the (sample, group)'s values.
void CpuBackend::groupnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                                    const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                    const Tensor& save_inv_std, int groups) {
  if (!all_f32_plain({&dy, &x}) || (dx && !dx->is_f32_plain())) {
    F32Stage sdy(*this, dy, true, false), sx(*this, x, true, false);
    std::optional<F32Stage> sdx;
    if (dx) sdx.emplace(*this, *dx, false, true);
    groupnorm_backward(dx ? &sdx->f32() : nullptr, dgamma, dbeta, sdy.f32(), sx.f32(), gamma,
                       save_mean, save_inv_std, groups);
    if (sdx) sdx->finish();
    return;
  }
  const GroupGeometry g = group_geometry(x, gamma, save_mean, groups, "groupnorm_backward");
  expect_shape(dy, x.shape(), "groupnorm dy");
  if (dx) expect_shape(*dx, x.shape(), "groupnorm dx");
  TANDEM_CHECK(dgamma.numel() == g.c && dbeta.numel() == g.c,
               "groupnorm_backward: dgamma or dbeta of the wrong size");
  const int64_t m = g.per_group * g.inner;
  const float* xp = x.data();
  const float* dyp = dy.data();
  const float* gp = gamma.data();
  const float* mp = save_mean.data();
  const float* ip = save_inv_std.data();
  float* dxp = dx ? dx->data() : nullptr;
  // Each sample's per-channel sums, added over the samples in order afterwards: deterministic.
  std::vector<double> part_dot(static_cast<size_t>(g.n * g.c)), part_sum(part_dot.size());
#pragma omp parallel for schedule(static) if (x.numel() > 16384)
  for (int64_t ng = 0; ng < g.n * g.groups; ++ng) {
    const float* xs = xp + ng * m;
    const float* dys = dyp + ng * m;
    const float mean = mp[ng], inv = ip[ng];
    const int64_t n = ng / g.groups, c0 = (ng % g.groups) * g.per_group;
    double sum_dxhat = 0, dot_dxhat = 0;
    for (int64_t j = 0; j < g.per_group; ++j) {
      const float* xc = xs + j * g.inner;
      const float* dc = dys + j * g.inner;
      double s = 0, t = 0;
      for (int64_t k = 0; k < g.inner; ++k) {
        s += dc[k];
        t += static_cast<double>(dc[k]) * ((xc[k] - mean) * inv);
      }
      part_sum[static_cast<size_t>(n * g.c + c0 + j)] = s;
      part_dot[static_cast<size_t>(n * g.c + c0 + j)] = t;
      sum_dxhat += s * gp[c0 + j];
      dot_dxhat += t * gp[c0 + j];
    }
    if (!dxp) continue;
    const float a = static_cast<float>(sum_dxhat / static_cast<double>(m));
    const float b = static_cast<float>(dot_dxhat / static_cast<double>(m));
    float* dxs = dxp + ng * m;
    for (int64_t j = 0; j < g.per_group; ++j) {
      const float gamma_c = gp[c0 + j];
      const float* xc = xs + j * g.inner;
      const float* dc = dys + j * g.inner;
      float* out = dxs + j * g.inner;
#pragma omp simd
      for (int64_t k = 0; k < g.inner; ++k)
        out[k] = inv * (dc[k] * gamma_c - a - (xc[k] - mean) * inv * b);
    }
  }
  float* dgp = dgamma.data();
  float* dbp = dbeta.data();
  for (int64_t c = 0; c < g.c; ++c) {
    double s = 0, t = 0;
    for (int64_t n = 0; n < g.n; ++n) {
      s += part_sum[static_cast<size_t>(n * g.c + c)];
      t += part_dot[static_cast<size_t>(n * g.c + c)];
    }
    dbp[c] = static_cast<float>(s);
    dgp[c] = static_cast<float>(t);
  }
}

}  // namespace tandem
