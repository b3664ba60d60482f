// Batch normalization on the CPU as OpenMP loops, one channel per iteration (one block of 8 or 16
// channels in oneDNN's blocked order).
//
// Written by hand rather than with oneDNN's batch_normalization primitive: it keeps no running
// statistics (those would be one more pass here anyway), and each op is a few memory-bound passes
// over x: each plane summed in fp32 vector lanes, the planes added in double.
#include <cmath>
#include <initializer_list>
#include <optional>

#include "cpu/cpu_backend_impl.h"

// clang-format off: last, so that only what follows is compiled for AVX2 with FMA
#include "cpu/isa.h"
// clang-format on

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
template <bool Relu>
void plane_sum_and_dot(const float* d, const float* y, const float* p, int64_t inner, float shift,
                       double* sum, double* dot) {
  float s = 0.f, t = 0.f;
#pragma omp simd reduction(+ : s, t)
  for (int64_t k = 0; k < inner; ++k) {
    const float dk = relu_grad_if<Relu>(d[k], y, k);
    s += dk;
    t += dk * (p[k] - shift);
  }
  *sum += s;
  *dot += t;
}

// y = (x - mean) * a + b over channel ch's values (every n, every inner position); centred first,
// so that a mean far from zero costs no precision.
template <bool Relu>
void normalize(float* y, const float* x, const BatchGeometry& g, int64_t ch, float mean, float a,
               float b) {
  for (int64_t i = 0; i < g.n; ++i) {
    const int64_t base = (i * g.c + ch) * g.inner;
#pragma omp simd
    for (int64_t k = 0; k < g.inner; ++k) y[base + k] = relu_if<Relu>((x[base + k] - mean) * a + b);
  }
}

// --- the blocked order (N, C/B, inner, B): B channels at a time, vectorised along the block ---
// The same sums as the plain loops (each sample's in fp32, the samples added in double) and the
// same formulas; only the order of the fp32 additions within a sample differs.

// y = (x - mean) * scale + shift over channel block cb's values, as normalize() per channel.
template <int B, bool Relu>
void normalize_block(float* y, const float* x, const BatchGeometry& g, int64_t cb,
                     const float* mean, const float* scale, const float* shift) {
  const int64_t blocks = g.c / B;
  for (int64_t i = 0; i < g.n; ++i) {
    const int64_t base = (i * blocks + cb) * g.inner * B;
    for (int64_t k = 0; k < g.inner; ++k)
#pragma omp simd
      for (int j = 0; j < B; ++j)
        y[base + k * B + j] = relu_if<Relu>((x[base + k * B + j] - mean[j]) * scale[j] + shift[j]);
  }
}

template <int B, bool Relu>
void blocked_forward_training(float* y, const float* x, const BatchGeometry& g, float* save_mean,
                              float* save_inv_std, float* running_mean, float* running_var,
                              const float* gamma, const float* beta, float momentum, float eps) {
  const int64_t blocks = g.c / B, inner = g.inner;
#pragma omp parallel for schedule(static) if (g.n * g.c * inner > 16384)
  for (int64_t cb = 0; cb < blocks; ++cb) {
    double sum[B] = {}, squares[B] = {};
    float meanf[B], scale[B], shift[B];
    for (int64_t i = 0; i < g.n; ++i) {
      const float* xs = x + (i * blocks + cb) * inner * B;
      float s[B] = {};
      for (int64_t k = 0; k < inner; ++k)
#pragma omp simd
        for (int j = 0; j < B; ++j) s[j] += xs[k * B + j];
      for (int j = 0; j < B; ++j) sum[j] += s[j];
    }
    for (int j = 0; j < B; ++j) meanf[j] = static_cast<float>(sum[j] / static_cast<double>(g.m));
    for (int64_t i = 0; i < g.n; ++i) {  // two passes: no cancellation of a large mean
      const float* xs = x + (i * blocks + cb) * inner * B;
      float q[B] = {};
      for (int64_t k = 0; k < inner; ++k)
#pragma omp simd
        for (int j = 0; j < B; ++j) q[j] += (xs[k * B + j] - meanf[j]) * (xs[k * B + j] - meanf[j]);
      for (int j = 0; j < B; ++j) squares[j] += q[j];
    }
    for (int j = 0; j < B; ++j) {
      const int64_t ch = cb * B + j;
      const double mean = sum[j] / static_cast<double>(g.m);
      const double var = squares[j] / static_cast<double>(g.m);
      const double inv_std = 1.0 / std::sqrt(var + static_cast<double>(eps));
      save_mean[ch] = static_cast<float>(mean);
      save_inv_std[ch] = static_cast<float>(inv_std);
      const double unbiased = squares[j] / static_cast<double>(g.m - 1);
      running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean);
      running_var[ch] =
          static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * unbiased);
      meanf[j] = static_cast<float>(mean);
      scale[j] = static_cast<float>(gamma[ch] * inv_std);
      shift[j] = beta[ch];
    }
    normalize_block<B, Relu>(y, x, g, cb, meanf, scale, shift);
  }
}

template <int B, bool Relu>
void blocked_forward_inference(float* y, const float* x, const BatchGeometry& g, const float* gamma,
                               const float* beta, const float* running_mean,
                               const float* running_var, float eps) {
  const int64_t blocks = g.c / B, inner = g.inner;
#pragma omp parallel for schedule(static) if (g.n * g.c * inner > 16384)
  for (int64_t cb = 0; cb < blocks; ++cb) {
    float meanf[B], scale[B], shift[B];
    for (int j = 0; j < B; ++j) {
      const int64_t ch = cb * B + j;
      meanf[j] = running_mean[ch];
      scale[j] = static_cast<float>(
          gamma[ch] / std::sqrt(static_cast<double>(running_var[ch]) + static_cast<double>(eps)));
      shift[j] = beta[ch];
    }
    normalize_block<B, Relu>(y, x, g, cb, meanf, scale, shift);
  }
}

// Relu: dy is the gradient of relu(bn(x)) = yr.
template <int B, bool Relu>
void blocked_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* yr,
                      const float* x, const BatchGeometry& g, const float* gamma,
                      const float* save_mean, const float* save_inv_std) {
  const int64_t blocks = g.c / B, inner = g.inner;
#pragma omp parallel for schedule(static) if (g.n * g.c * inner > 16384)
  for (int64_t cb = 0; cb < blocks; ++cb) {
    double sum_dy[B] = {}, sum_dy_xc[B] = {};  // sums of dy and of dy * (x - mean)
    float meanf[B], a[B], b[B], mean_dy[B];
    for (int j = 0; j < B; ++j) meanf[j] = save_mean[cb * B + j];
    for (int64_t i = 0; i < g.n; ++i) {
      const int64_t base = (i * blocks + cb) * inner * B;
      float s[B] = {}, t[B] = {};
      for (int64_t k = 0; k < inner; ++k)
#pragma omp simd
        for (int j = 0; j < B; ++j) {
          const float d = relu_grad_if<Relu>(dy[base + k * B + j], yr, base + k * B + j);
          s[j] += d;
          t[j] += d * (x[base + k * B + j] - meanf[j]);
        }
      for (int j = 0; j < B; ++j) {
        sum_dy[j] += s[j];
        sum_dy_xc[j] += t[j];
      }
    }
    const double m = static_cast<double>(g.m);
    for (int j = 0; j < B; ++j) {
      const int64_t ch = cb * B + j;
      const double inv_std = save_inv_std[ch];
      dbeta[ch] = static_cast<float>(sum_dy[j]);
      dgamma[ch] = static_cast<float>(sum_dy_xc[j] * inv_std);
      const double aj = gamma[ch] * inv_std;
      a[j] = static_cast<float>(aj);
      b[j] = static_cast<float>(-aj * inv_std * inv_std * sum_dy_xc[j] / m);
      mean_dy[j] = static_cast<float>(sum_dy[j] / m);
    }
    if (!dx) continue;
    for (int64_t i = 0; i < g.n; ++i) {
      const int64_t base = (i * blocks + cb) * inner * B;
      for (int64_t k = 0; k < inner; ++k)
#pragma omp simd
        for (int j = 0; j < B; ++j) {
          const int64_t e = base + k * B + j;
          dx[e] = (relu_grad_if<Relu>(dy[e], yr, e) - mean_dy[j]) * a[j] + (x[e] - meanf[j]) * b[j];
        }
    }
  }
}

// The fp32 ops, blocked or plain, with or without the relu after them; false where a tensor is in
// another dtype or order (the caller's fallbacks).
template <bool Relu>
bool f32_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std, Tensor& running_mean,
                          Tensor& running_var, const Tensor& x, const Tensor& gamma,
                          const Tensor& beta, float momentum, float eps) {
  const int block = blocked_f32({&y, &x});
  if (!block && !all_f32_plain({&y, &x})) return false;
  const BatchGeometry g =
      batch_geometry(x, gamma, "batchnorm_forward_training",
                     {&beta, &save_mean, &save_inv_std, &running_mean, &running_var});
  TANDEM_CHECK(g.m > 1,
               "batch normalization needs more than one value per channel, got " + x.shape().str());
  expect_shape(y, x.shape(), "batchnorm output");
  if (block) {
    auto run = [&](auto kernel) {
      kernel(y.data(), x.data(), g, save_mean.data(), save_inv_std.data(), running_mean.data(),
             running_var.data(), gamma.data(), beta.data(), momentum, eps);
    };
    block == 16 ? run(blocked_forward_training<16, Relu>) : run(blocked_forward_training<8, Relu>);
    return true;
  }
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
    normalize<Relu>(yp, xp, g, ch, static_cast<float>(mean),
                    static_cast<float>(gamma.data()[ch] * inv_std), beta.data()[ch]);
  }
  return true;
}

template <bool Relu>
bool f32_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           const Tensor& running_mean, const Tensor& running_var, float eps) {
  const int block = blocked_f32({&y, &x});
  if (!block && !all_f32_plain({&y, &x})) return false;
  const BatchGeometry g =
      batch_geometry(x, gamma, "batchnorm_forward_inference", {&beta, &running_mean, &running_var});
  expect_shape(y, x.shape(), "batchnorm output");
  if (block) {
    auto run = [&](auto kernel) {
      kernel(y.data(), x.data(), g, gamma.data(), beta.data(), running_mean.data(),
             running_var.data(), eps);
    };
    block == 16 ? run(blocked_forward_inference<16, Relu>)
                : run(blocked_forward_inference<8, Relu>);
    return true;
  }
  const float* xp = x.data();
  float* yp = y.data();
#pragma omp parallel for schedule(static) if (x.numel() > 16384)
  for (int64_t ch = 0; ch < g.c; ++ch) {
    const double a = gamma.data()[ch] / std::sqrt(static_cast<double>(running_var.data()[ch]) +
                                                  static_cast<double>(eps));
    normalize<Relu>(yp, xp, g, ch, running_mean.data()[ch], static_cast<float>(a), beta.data()[ch]);
  }
  return true;
}

// Relu: dy is the gradient of yr = relu(bn(x)) (null without).
template <bool Relu>
bool f32_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy, const Tensor* yr,
                  const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                  const Tensor& save_inv_std) {
  // dx and yr, where given, in x's dtype and order too.
  auto like_x = [&](const Tensor* t) {
    return !t || (t->dtype() == x.dtype() && t->layout() == x.layout());
  };
  const int block = blocked_f32({&dy, &x});
  if ((!block && !all_f32_plain({&dy, &x})) || !like_x(dx) || !like_x(Relu ? yr : nullptr))
    return false;
  const BatchGeometry g =
      batch_geometry(x, gamma, "batchnorm_backward", {&dgamma, &dbeta, &save_mean, &save_inv_std});
  expect_shape(dy, x.shape(), "batchnorm output gradient");
  if (dx) expect_shape(*dx, x.shape(), "batchnorm input gradient");
  if (Relu) expect_shape(*yr, x.shape(), "batchnorm relu output");
  const float* yp = Relu ? yr->data() : nullptr;
  if (block) {
    auto run = [&](auto kernel) {
      kernel(dx ? dx->data() : nullptr, dgamma.data(), dbeta.data(), dy.data(), yp, x.data(), g,
             gamma.data(), save_mean.data(), save_inv_std.data());
    };
    block == 16 ? run(blocked_backward<16, Relu>) : run(blocked_backward<8, Relu>);
    return true;
  }
  const float *xp = x.data(), *dyp = dy.data();
  float* dxp = dx ? dx->data() : nullptr;
#pragma omp parallel for schedule(static) if (x.numel() > 16384)
  for (int64_t ch = 0; ch < g.c; ++ch) {
    const double mean = save_mean.data()[ch], inv_std = save_inv_std.data()[ch];
    double sum_dy = 0, sum_dy_xc = 0;  // sums of dy and of dy * (x - mean)
    for (int64_t i = 0; i < g.n; ++i) {
      const int64_t base = (i * g.c + ch) * g.inner;
      plane_sum_and_dot<Relu>(dyp + base, Relu ? yp + base : nullptr, xp + base, g.inner,
                              static_cast<float>(mean), &sum_dy, &sum_dy_xc);
    }
    dbeta.data()[ch] = static_cast<float>(sum_dy);
    dgamma.data()[ch] = static_cast<float>(sum_dy_xc * inv_std);
    if (!dxp) continue;
    // dx = gamma * inv_std * (dy - mean(dy) - (x - mean) * inv_std^2 * mean(dy * (x - mean))),
    // as dx = (dy - mean(dy)) * a + (x - mean) * b per channel.
    const double m = static_cast<double>(g.m);
    const double a = gamma.data()[ch] * inv_std;
    const float af = static_cast<float>(a),
                bf = static_cast<float>(-a * inv_std * inv_std * sum_dy_xc / m);
    const float mean_dy = static_cast<float>(sum_dy / m), meanf = static_cast<float>(mean);
    for (int64_t i = 0; i < g.n; ++i) {
      const int64_t base = (i * g.c + ch) * g.inner;
#pragma omp simd
      for (int64_t k = 0; k < g.inner; ++k)
        dxp[base + k] = (relu_grad_if<Relu>(dyp[base + k], yp, base + k) - mean_dy) * af +
                        (xp[base + k] - meanf) * bf;
    }
  }
  return true;
}

}  // namespace

void CpuBackend::batchnorm_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                            Tensor& running_mean, Tensor& running_var,
                                            const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, float momentum, float eps) {
  if (f32_forward_training<false>(y, save_mean, save_inv_std, running_mean, running_var, x, gamma,
                                  beta, momentum, eps))
    return;
  // bf16: its own loops; else fp32 stand-ins
  if (mixed::batchnorm_forward_training(y, save_mean, save_inv_std, running_mean, running_var, x,
                                        gamma, beta, momentum, eps))
    return;
  F32Stage sy(*this, y, false, true), sx(*this, x, true, false);
  batchnorm_forward_training(sy.f32(), save_mean, save_inv_std, running_mean, running_var, sx.f32(),
                             gamma, beta, momentum, eps);
  sy.finish();
}

void CpuBackend::batchnorm_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                             const Tensor& beta, const Tensor& running_mean,
                                             const Tensor& running_var, float eps) {
  if (f32_forward_inference<false>(y, x, gamma, beta, running_mean, running_var, eps)) return;
  if (mixed::batchnorm_forward_inference(y, x, gamma, beta, running_mean, running_var, eps)) return;
  F32Stage sy(*this, y, false, true), sx(*this, x, true, false);
  batchnorm_forward_inference(sy.f32(), sx.f32(), gamma, beta, running_mean, running_var, eps);
  sy.finish();
}

void CpuBackend::batchnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                                    const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                    const Tensor& save_inv_std) {
  if (f32_backward<false>(dx, dgamma, dbeta, dy, nullptr, x, gamma, save_mean, save_inv_std))
    return;
  if (mixed::batchnorm_backward(dx, dgamma, dbeta, dy, x, gamma, save_mean, save_inv_std)) return;
  F32Stage sdy(*this, dy, true, false), sx(*this, x, true, false);
  std::optional<F32Stage> sdx;
  if (dx) sdx.emplace(*this, *dx, false, true);
  batchnorm_backward(dx ? &sdx->f32() : nullptr, dgamma, dbeta, sdy.f32(), sx.f32(), gamma,
                     save_mean, save_inv_std);
  if (sdx) sdx->finish();
}

// The fused relu in the fp32 loops (batchnorm here, add in elementwise.cpp, max pooling in
// pool.cpp); the two ops in 16 bits.
bool CpuBackend::fuses_relu(ReluFusion op, DType d) const {
  (void)op;
  return d == DType::kF32;
}

void CpuBackend::batchnorm_relu_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                                 Tensor& running_mean, Tensor& running_var,
                                                 const Tensor& x, const Tensor& gamma,
                                                 const Tensor& beta, float momentum, float eps) {
  if (!f32_forward_training<true>(y, save_mean, save_inv_std, running_mean, running_var, x, gamma,
                                  beta, momentum, eps))
    Backend::batchnorm_relu_forward_training(y, save_mean, save_inv_std, running_mean, running_var,
                                             x, gamma, beta, momentum, eps);
}

void CpuBackend::batchnorm_relu_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                                  const Tensor& beta, const Tensor& running_mean,
                                                  const Tensor& running_var, float eps) {
  if (!f32_forward_inference<true>(y, x, gamma, beta, running_mean, running_var, eps))
    Backend::batchnorm_relu_forward_inference(y, x, gamma, beta, running_mean, running_var, eps);
}

void CpuBackend::batchnorm_relu_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta,
                                         const Tensor& dy, const Tensor& y, const Tensor& x,
                                         const Tensor& gamma, const Tensor& save_mean,
                                         const Tensor& save_inv_std) {
  if (!f32_backward<true>(dx, dgamma, dbeta, dy, &y, x, gamma, save_mean, save_inv_std))
    Backend::batchnorm_relu_backward(dx, dgamma, dbeta, dy, y, x, gamma, save_mean, save_inv_std);
}

}  // namespace tandem
