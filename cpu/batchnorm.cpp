// Batch normalization on the CPU as OpenMP loops, one channel per iteration.
//
// Written by hand rather than with oneDNN's batch_normalization primitive: it keeps no running
// statistics (those would be one more pass here anyway), and each op is a few memory-bound passes
// over x: each plane summed in fp32 vector lanes, the planes added in double.
#include <cmath>
#include <initializer_list>
#include <optional>

#include "cpu/cpu_backend_impl.h"

namespace tandem {
namespace {

// (N, C, inner) geometry of x, and the number M = N * inner of values per channel.
struct BatchGeometry {
  int64_t n, c, inner, m;
};

// Checks x against gamma's channel count and that every per-channel tensor has one value each.
BatchGeometry batch_geometry(const Tensor& x, const Tensor& gamma, const char* what,
                             std::initializer_list<const Tensor*> per_channel) {
  TANDEM_CHECK(x.shape().rank() >= 2 && x.dim(1) == gamma.numel(),
               std::string(what) + ": " + x.shape().str() + " with " +
                   std::to_string(gamma.numel()) + " channels");
  for (const Tensor* t : per_channel)
    TANDEM_CHECK(t->numel() == gamma.numel(), std::string(what) + ": a per-channel tensor of " +
                                                  t->shape().str() + " for " +
                                                  std::to_string(gamma.numel()) + " channels");
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
  return {n, c, inner, n * inner};
}

// Sums over one plane of a channel (inner contiguous values), vectorised in fp32 lanes; the
// caller adds the planes in double. sum: of p[k]; squares: of (p[k] - shift)^2; sum_and_dot:
// of d[k], and of d[k] * (p[k] - shift), in one pass.
double plane_sum(const float* p, int64_t inner) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < inner; ++k) s += p[k];
  return s;
}
double plane_squares(const float* p, int64_t inner, float shift) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < inner; ++k) s += (p[k] - shift) * (p[k] - shift);
  return s;
}
void plane_sum_and_dot(const float* d, const float* p, int64_t inner, float shift, double* sum,
                       double* dot) {
  float s = 0.f, t = 0.f;
#pragma omp simd reduction(+ : s, t)
  for (int64_t k = 0; k < inner; ++k) {
    s += d[k];
    t += d[k] * (p[k] - shift);
  }
  *sum += s;
  *dot += t;
}

// y = (x - mean) * a + b over channel ch's values (every n, every inner position); centred first,
// so that a mean far from zero costs no precision.
void normalize(float* y, const float* x, const BatchGeometry& g, int64_t ch, float mean, float a,
               float b) {
  for (int64_t i = 0; i < g.n; ++i) {
    const int64_t base = (i * g.c + ch) * g.inner;
#pragma omp simd
    for (int64_t k = 0; k < g.inner; ++k) y[base + k] = (x[base + k] - mean) * a + b;
  }
}

}  // namespace

void CpuBackend::batchnorm_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                            Tensor& running_mean, Tensor& running_var,
                                            const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, float momentum, float eps) {
  if (!all_f32_plain({&y, &x})) {  // bf16: its own loops; else fp32 stand-ins
    if (mixed::batchnorm_forward_training(y, save_mean, save_inv_std, running_mean, running_var, x,
                                          gamma, beta, momentum, eps))
      return;
    F32Stage sy(*this, y, false, true), sx(*this, x, true, false);
    batchnorm_forward_training(sy.f32(), save_mean, save_inv_std, running_mean, running_var,
                               sx.f32(), gamma, beta, momentum, eps);
    return sy.finish();
  }
  const BatchGeometry g = batch_geometry(x, gamma, "batchnorm_forward_training",
                                         {&beta, &save_mean, &save_inv_std, &running_mean, &running_var});
  TANDEM_CHECK(g.m > 1, "batch normalization needs more than one value per channel, got " +
                            x.shape().str());
  expect_shape(y, x.shape(), "batchnorm output");
  const float* xp = x.data();
  float* yp = y.data();
#pragma omp parallel for schedule(static) if (x.numel() > 16384)
  for (int64_t ch = 0; ch < g.c; ++ch) {
    double sum = 0;
    for (int64_t i = 0; i < g.n; ++i) sum += plane_sum(xp + (i * g.c + ch) * g.inner, g.inner);
    const double mean = sum / static_cast<double>(g.m);
    double squares = 0;  // two passes: no cancellation of a large mean
    for (int64_t i = 0; i < g.n; ++i)
      squares += plane_squares(xp + (i * g.c + ch) * g.inner, g.inner, static_cast<float>(mean));
    const double var = squares / static_cast<double>(g.m);
    const double inv_std = 1.0 / std::sqrt(var + static_cast<double>(eps));
    save_mean.data()[ch] = static_cast<float>(mean);
    save_inv_std.data()[ch] = static_cast<float>(inv_std);
    float& rm = running_mean.data()[ch];
    float& rv = running_var.data()[ch];
    const double unbiased = squares / static_cast<double>(g.m - 1);
    rm = static_cast<float>((1.0 - momentum) * rm + momentum * mean);
    rv = static_cast<float>((1.0 - momentum) * rv + momentum * unbiased);
    normalize(yp, xp, g, ch, static_cast<float>(mean), static_cast<float>(gamma.data()[ch] * inv_std),
              beta.data()[ch]);
  }
}

void CpuBackend::batchnorm_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                             const Tensor& beta, const Tensor& running_mean,
                                             const Tensor& running_var, float eps) {
  if (!all_f32_plain({&y, &x})) {
    if (mixed::batchnorm_forward_inference(y, x, gamma, beta, running_mean, running_var, eps))
      return;
    F32Stage sy(*this, y, false, true), sx(*this, x, true, false);
    batchnorm_forward_inference(sy.f32(), sx.f32(), gamma, beta, running_mean, running_var, eps);
    return sy.finish();
  }
  const BatchGeometry g = batch_geometry(x, gamma, "batchnorm_forward_inference",
                                         {&beta, &running_mean, &running_var});
  expect_shape(y, x.shape(), "batchnorm output");
  const float* xp = x.data();
  float* yp = y.data();
#pragma omp parallel for schedule(static) if (x.numel() > 16384)
  for (int64_t ch = 0; ch < g.c; ++ch) {
    const double a = gamma.data()[ch] /
                     std::sqrt(static_cast<double>(running_var.data()[ch]) + static_cast<double>(eps));
    normalize(yp, xp, g, ch, running_mean.data()[ch], static_cast<float>(a), beta.data()[ch]);
  }
}

void CpuBackend::batchnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                                    const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                    const Tensor& save_inv_std) {
  if (!all_f32_plain({&dy, &x}) || (dx && !dx->is_f32_plain())) {
    if (mixed::batchnorm_backward(dx, dgamma, dbeta, dy, x, gamma, save_mean, save_inv_std)) return;
    F32Stage sdy(*this, dy, true, false), sx(*this, x, true, false);
    std::optional<F32Stage> sdx;
    if (dx) sdx.emplace(*this, *dx, false, true);
    batchnorm_backward(dx ? &sdx->f32() : nullptr, dgamma, dbeta, sdy.f32(), sx.f32(), gamma,
                       save_mean, save_inv_std);
    if (sdx) sdx->finish();
    return;
  }
  const BatchGeometry g = batch_geometry(x, gamma, "batchnorm_backward",
                                         {&dgamma, &dbeta, &save_mean, &save_inv_std});
  expect_shape(dy, x.shape(), "batchnorm output gradient");
  if (dx) expect_shape(*dx, x.shape(), "batchnorm input gradient");
  const float *xp = x.data(), *dyp = dy.data();
  float* dxp = dx ? dx->data() : nullptr;
#pragma omp parallel for schedule(static) if (x.numel() > 16384)
  for (int64_t ch = 0; ch < g.c; ++ch) {
    const double mean = save_mean.data()[ch], inv_std = save_inv_std.data()[ch];
    double sum_dy = 0, sum_dy_xc = 0;  // sums of dy and of dy * (x - mean)
    for (int64_t i = 0; i < g.n; ++i) {
      const int64_t base = (i * g.c + ch) * g.inner;
      plane_sum_and_dot(dyp + base, xp + base, g.inner, static_cast<float>(mean), &sum_dy, &sum_dy_xc);
    }
    dbeta.data()[ch] = static_cast<float>(sum_dy);
    dgamma.data()[ch] = static_cast<float>(sum_dy_xc * inv_std);
    if (!dxp) continue;
    // dx = gamma * inv_std * (dy - mean(dy) - (x - mean) * inv_std^2 * mean(dy * (x - mean))),
    // as dx = (dy - mean(dy)) * a + (x - mean) * b per channel.
    const double m = static_cast<double>(g.m);
    const double a = gamma.data()[ch] * inv_std;
    const float af = static_cast<float>(a), bf = static_cast<float>(-a * inv_std * inv_std * sum_dy_xc / m);
    const float mean_dy = static_cast<float>(sum_dy / m), meanf = static_cast<float>(mean);
    for (int64_t i = 0; i < g.n; ++i) {
      const int64_t base = (i * g.c + ch) * g.inner;
#pragma omp simd
      for (int64_t k = 0; k < g.inner; ++k)
        dxp[base + k] = (dyp[base + k] - mean_dy) * af + (xp[base + k] - meanf) * bf;
    }
  }
}

}  // namespace tandem
