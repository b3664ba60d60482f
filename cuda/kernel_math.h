// The arithmetic of tandem's own CUDA kernels, element by element (or row by row), as functions of
// their indices and values that both the kernels and plain host code call. A kernel's launch only
// maps threads to indices; what each index computes is here, so the host tests it against the CPU
// backend on machines without a GPU (tests/cuda/kernel_math_test.cpp), and the first GPU run can
// tell a wrong index or formula (caught here) from a wrong launch or library call.
//
// The 16-bit kernels load their values as fp32, compute with these functions in fp32 and round the
// result once (to_float / from_float in cuda/mixed_precision.cu); the host tests round the same
// way (cpu/bf16.h, and _Float16 for fp16).
//
// The index math (channel_of, plane_pos, channels_last_offset) is in cuda/index_math.h, the
// pooling windows in cuda/pool_windows.h, batch normalization's moments in cuda/moments.h, and
// Adam's element update and the update gate in engine/optimizer_math.h, shared with the CPU.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/index_math.h"
#include "cuda/pool_windows.h"
#include "engine/activation_math.h"
#include "engine/rng.h"

#if defined(__CUDACC__)
#define TANDEM_KERNEL_HD __host__ __device__ __forceinline__
#else
#define TANDEM_KERNEL_HD inline
#endif

namespace tandem::kernel {

// --- activations: engine/activation_math.h (activation_value, activation_grad), shared with the
// CPU ---

// --- memory orders: where element i (logical order) of a tensor lies ---

// A tensor's memory order: plain (element i at i), or channels-last (N,C,H,W) stored as (N,H,W,C).
struct Order {
  bool channels_last;
  int64_t c, hw;  // a channels-last tensor's channels and H * W
};

TANDEM_KERNEL_HD int64_t element_offset(int64_t i, const Order& o, int64_t numel) {
  return o.channels_last ? channels_last_offset(i, o.c, o.hw, numel) : i;
}

// --- SGD (PyTorch's semantics), one element; Adam's is engine/optimizer_math.h's ---

// g += wd * w; v = momentum * v + g; step = nesterov ? g + momentum * v : v; w -= lr * step.
// v is null without momentum. `g` is the gradient as the gate scaled it.
TANDEM_KERNEL_HD void sgd_element(float& w, float* v, float g, float lr, float momentum,
                                  float weight_decay, bool nesterov) {
  g += weight_decay * w;
  if (momentum != 0.f) {
    const float vel = momentum * *v + g;
    *v = vel;
    g = nesterov ? g + momentum * vel : vel;
  }
  w -= lr * g;
}

// --- dropout: the mask of element i, from the Philox words the CPU backend uses ---

// The mask of one Philox word: kept (scale) where its uniform is at least p. Element i takes word
// i % 4 of block i / 4 (philox_uniform), so a kernel thread can mask four elements per block.
TANDEM_KERNEL_HD float dropout_mask_of_word(uint32_t word, float p, float scale) {
  return philox_to_unit(word) >= p ? scale : 0.f;
}

TANDEM_KERNEL_HD float dropout_mask(uint64_t seed, uint64_t offset, int64_t i, float p,
                                    float scale) {
  const uint64_t u = static_cast<uint64_t>(i);
  return dropout_mask_of_word(philox_block(seed, offset, u >> 2).v[u & 3], p, scale);
}

// --- losses and accuracy, one row of c classes ---

// probs (c) = softmax(z); returns the row's loss against (1 - e) onehot(label) + e / c,
// log(sum exp(z - max)) - (1 - e) (z[label] - max) - e mean(z - max), or 0 when the label is out
// of range (reported apart). Sums in double.
TANDEM_KERNEL_HD float softmax_ce_row(float* probs, const float* z, int64_t c, int32_t label,
                                      float smoothing) {
  float m = z[0];
  for (int64_t j = 1; j < c; ++j) m = fmaxf(m, z[j]);
  double sum = 0, shifted = 0;
  for (int64_t j = 0; j < c; ++j) {
    sum += exp(static_cast<double>(z[j] - m));
    shifted += static_cast<double>(z[j]) - m;
  }
  for (int64_t j = 0; j < c; ++j)
    probs[j] = static_cast<float>(exp(static_cast<double>(z[j] - m)) / sum);
  if (label < 0 || label >= c) return 0.f;
  return static_cast<float>(log(sum) - (1.0 - smoothing) * (z[label] - m) -
                            smoothing * shifted / static_cast<double>(c));
}

// sum_j (pred - onehot(label))^2 over the row; an out-of-range label has no one.
TANDEM_KERNEL_HD float mse_row(const float* pred, int64_t c, int32_t label) {
  double s = 0;
  for (int64_t j = 0; j < c; ++j) {
    const double d = pred[j] - (j == label ? 1.0 : 0.0);
    s += d * d;
  }
  return static_cast<float>(s);
}

// 1 where the first maximum of the row is at the label, else 0.
TANDEM_KERNEL_HD float accuracy_row(const float* scores, int64_t c, int32_t label) {
  int64_t best = 0;
  for (int64_t j = 1; j < c; ++j)
    if (scores[j] > scores[best]) best = j;
  return label >= 0 && label < c && best == label ? 1.f : 0.f;
}

// --- pooling backward: one dx element gathers from the windows that cover it ---

struct PoolGeom {
  int N, C, H, W, P, Q, kh, kw, sh, sw, ph, pw;
};

// Max pooling's order: a NaN is above every number (the forward propagates it), and the first of
// equal maxima wins.
TANDEM_KERNEL_HD bool pool_above(float v, float m) { return v > m || (v != v && m == m); }

// The sum, over the windows (p, q) that cover input element (h, w), of term(p, q, rows, cols),
// rows and cols being the window's input span without padding: the gather both pooling
// gradients make.
template <typename Term>
TANDEM_KERNEL_HD float gather_windows(int h, int w, const PoolGeom& g, const Term& term) {
  const WindowRange rows = covering_windows(h, g.kh, g.sh, g.ph, g.P);
  const WindowRange cols = covering_windows(w, g.kw, g.sw, g.pw, g.Q);
  float sum = 0.f;
  for (int p = rows.first; p <= rows.last; ++p) {
    const WindowSpan r_span = window_span(p, g.kh, g.sh, g.ph, g.H);
    for (int q = cols.first; q <= cols.last; ++q)
      sum += term(p, q, r_span, window_span(q, g.kw, g.sw, g.pw, g.W));
  }
  return sum;
}

// Max pooling: window (p, q)'s gradient where (h, w) is its first maximum, else 0.
struct MaxPoolTerm {
  const float* xp;   // the plane's x (H, W)
  const float* dyp;  // and dy (P, Q)
  int at;            // h * W + w
  const PoolGeom& g;
  TANDEM_KERNEL_HD float operator()(int p, int q, WindowSpan r_span, WindowSpan s_span) const {
    int best = r_span.begin * g.W + s_span.begin;
    float bv = xp[best];
    for (int r = r_span.begin; r < r_span.end; ++r)
      for (int s = s_span.begin; s < s_span.end; ++s)
        if (pool_above(xp[r * g.W + s], bv)) bv = xp[r * g.W + s], best = r * g.W + s;
    return best == at ? dyp[p * g.Q + q] : 0.f;
  }
};

// Average pooling: window (p, q)'s gradient over its count, padding left out of the divisor.
struct AvgPoolTerm {
  const float* dyp;  // the plane's dy (P, Q)
  const PoolGeom& g;
  TANDEM_KERNEL_HD float operator()(int p, int q, WindowSpan r_span, WindowSpan s_span) const {
    const int count = (r_span.end - r_span.begin) * (s_span.end - s_span.begin);
    return dyp[p * g.Q + q] / static_cast<float>(count);
  }
};

// y of window (p, q) of one plane xp (H, W): its first maximum (a NaN above every number), or its
// mean over the elements that are not padding. Ceil mode's last window is clipped at the end.
TANDEM_KERNEL_HD float pool_window_value(const float* xp, int p, int q, bool is_max,
                                         const PoolGeom& g) {
  const WindowSpan r = window_span(p, g.kh, g.sh, g.ph, g.H);
  const WindowSpan s = window_span(q, g.kw, g.sw, g.pw, g.W);
  float best = xp[r.begin * g.W + s.begin], sum = 0.f;
  for (int h = r.begin; h < r.end; ++h)
    for (int w = s.begin; w < s.end; ++w) {
      const float v = xp[h * g.W + w];
      if (pool_above(v, best)) best = v;
      sum += v;
    }
  return is_max ? best : sum / static_cast<float>((r.end - r.begin) * (s.end - s.begin));
}

// dx at (h, w) of one plane: the sum of dy over the windows whose first maximum it is. xp and dyp
// are the plane's x (H, W) and dy (P, Q).
TANDEM_KERNEL_HD float max_pool_dx(const float* xp, const float* dyp, int h, int w,
                                   const PoolGeom& g) {
  return gather_windows(h, w, g, MaxPoolTerm{xp, dyp, h * g.W + w, g});
}

// dx at (h, w) of one plane for average pooling, padding left out of each window's divisor.
TANDEM_KERNEL_HD float avg_pool_dx(const float* dyp, int h, int w, const PoolGeom& g) {
  return gather_windows(h, w, g, AvgPoolTerm{dyp, g});
}

// --- batch normalization, one channel's statistics and one element (moments.h sums them) ---

struct ChannelStats {
  float mean, inv_std, running_mean, running_var;
};

// A channel's statistics from the moments of its m values (n, mean, m2: the sum of squared
// deviations), in double: the batch's mean and 1 / sqrt(biased variance + eps), and the running
// statistics moved by `momentum` toward the batch's mean and unbiased variance.
TANDEM_KERNEL_HD ChannelStats bn_channel_stats(double n, double mean, double m2, float running_mean,
                                               float running_var, double momentum, double eps) {
  return {static_cast<float>(mean), static_cast<float>(1.0 / sqrt(m2 / n + eps)),
          static_cast<float>((1.0 - momentum) * running_mean + momentum * mean),
          static_cast<float>((1.0 - momentum) * running_var + momentum * (m2 / (n - 1.0)))};
}

// y of x in training, with the batch's mean and inv_std.
TANDEM_KERNEL_HD float bn_normalize(float x, float mean, float inv_std, float gamma, float beta) {
  return (x - mean) * (gamma * inv_std) + beta;
}

// y of x in inference, with the running statistics.
TANDEM_KERNEL_HD float bn_normalize_running(float x, float mean, float var, float gamma, float beta,
                                            float eps) {
  return (x - mean) * (gamma / sqrtf(var + eps)) + beta;
}

// dx = (dy - dbeta / M) * a + (x - mean) * b with a = gamma * inv_std and
// b = -a * inv_std * dgamma / M, where dgamma = inv_std * sum(dy * (x - mean)) and dbeta = sum(dy)
// over the channel's M values (inv_m = 1 / M).
TANDEM_KERNEL_HD float bn_dx(float dy, float x, float mean, float inv_std, float gamma,
                             float dgamma, float dbeta, float inv_m) {
  const float a = gamma * inv_std;
  const float b = -a * inv_std * dgamma * inv_m;
  return (dy - dbeta * inv_m) * a + (x - mean) * b;
}

}  // namespace tandem::kernel
