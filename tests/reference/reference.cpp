// Naive double-precision reference implementations of the Backend ops (see reference.h).
#include "tests/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/rng.h"

namespace tandem::reference {

Doubles gemm(const Floats& c, const Floats& a, const Floats& b, int64_t m, int64_t n, int64_t k,
             bool trans_a, bool trans_b, double alpha, double beta) {
  Doubles out(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) {
        double av = trans_a ? a[l * m + i] : a[i * k + l];
        double bv = trans_b ? b[j * k + l] : b[l * n + j];
        s += av * bv;
      }
      out[i * n + j] = alpha * s + (beta != 0 ? beta * c[i * n + j] : 0.0);
    }
  }
  return out;
}

// Visits every (n, k, p, q, c, r, s) with its input position (h, w) inside the image; c runs
// over filter k's group of input channels (all of them in a convolution of one group).
template <typename F>
void for_each_tap(const ConvShape& s, const Conv2dParams& cp, F&& f) {
  const int64_t P = s.p(cp), Q = s.q(cp);
  const int64_t groups = cp.groups, cg = s.c / groups, kg = s.k / groups;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t k = 0; k < s.k; ++k)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q)
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t r = 0; r < s.r; ++r)
              for (int64_t t = 0; t < s.s; ++t) {
                int64_t h = p * cp.stride_h - cp.pad_h + r * cp.dilation_h;
                int64_t w = q * cp.stride_w - cp.pad_w + t * cp.dilation_w;
                if (h < 0 || h >= s.h || w < 0 || w >= s.w) continue;
                const int64_t channel = (k / kg) * cg + c;  // of the input
                int64_t yi = ((n * s.k + k) * P + p) * Q + q;
                int64_t xi = ((n * s.c + channel) * s.h + h) * s.w + w;
                int64_t wi = ((k * cg + c) * s.r + r) * s.s + t;
                f(yi, xi, wi);
              }
}

Doubles conv2d_forward(const Floats& x, const Floats& w, const Floats& b, const ConvShape& s,
                       const Conv2dParams& p) {
  const int64_t P = s.p(p), Q = s.q(p);
  Doubles y(s.n * s.k * P * Q, 0.0);
  for_each_tap(s, p, [&](int64_t yi, int64_t xi, int64_t wi) {
    y[yi] += static_cast<double>(x[xi]) * w[wi];
  });
  if (!b.empty()) {
    for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) y[i] += b[(i / (P * Q)) % s.k];
  }
  return y;
}

Doubles conv2d_backward_data(const Floats& dy, const Floats& w, const ConvShape& s,
                             const Conv2dParams& p) {
  Doubles dx(s.n * s.c * s.h * s.w, 0.0);
  for_each_tap(s, p, [&](int64_t yi, int64_t xi, int64_t wi) {
    dx[xi] += static_cast<double>(dy[yi]) * w[wi];
  });
  return dx;
}

Doubles conv2d_backward_filter(const Floats& dy, const Floats& x, const ConvShape& s,
                               const Conv2dParams& p) {
  Doubles dw(s.k * (s.c / p.groups) * s.r * s.s, 0.0);
  for_each_tap(s, p, [&](int64_t yi, int64_t xi, int64_t wi) {
    dw[wi] += static_cast<double>(dy[yi]) * x[xi];
  });
  return dw;
}

namespace {

// Window of output (op, oq) clipped to the image: rows [h0, h1), columns [w0, w1).
struct Window {
  int64_t h0, h1, w0, w1;
};

Window window(int64_t op, int64_t oq, int64_t h, int64_t w, const Pool2dParams& p) {
  int64_t hs = op * p.stride_h - p.pad_h, ws = oq * p.stride_w - p.pad_w;
  return {std::max<int64_t>(hs, 0), std::min<int64_t>(hs + p.kernel_h, h), std::max<int64_t>(ws, 0),
          std::min<int64_t>(ws + p.kernel_w, w)};
}

}  // namespace

Doubles pool2d_forward(const Floats& x, int64_t n, int64_t c, int64_t h, int64_t w,
                       const Pool2dParams& p) {
  const int64_t P = pool_out_size(h, p.kernel_h, p.stride_h, p.pad_h, p.ceil_mode);
  const int64_t Q = pool_out_size(w, p.kernel_w, p.stride_w, p.pad_w, p.ceil_mode);
  Doubles y(n * c * P * Q);
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t op = 0; op < P; ++op)
      for (int64_t oq = 0; oq < Q; ++oq) {
        Window win = window(op, oq, h, w, p);
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t i = win.h0; i < win.h1; ++i)
          for (int64_t j = win.w0; j < win.w1; ++j) {
            double v = x[(plane * h + i) * w + j];
            if (std::isnan(v) || v > best) best = v;  // a NaN stays: max pooling passes it on
            sum += v;
          }
        double count = static_cast<double>((win.h1 - win.h0) * (win.w1 - win.w0));
        y[(plane * P + op) * Q + oq] = p.mode == PoolMode::kMax ? best : sum / count;
      }
  return y;
}

Doubles pool2d_backward(const Floats& dy, const Floats& x, int64_t n, int64_t c, int64_t h,
                        int64_t w, const Pool2dParams& p) {
  const int64_t P = pool_out_size(h, p.kernel_h, p.stride_h, p.pad_h, p.ceil_mode);
  const int64_t Q = pool_out_size(w, p.kernel_w, p.stride_w, p.pad_w, p.ceil_mode);
  Doubles dx(n * c * h * w, 0.0);
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t op = 0; op < P; ++op)
      for (int64_t oq = 0; oq < Q; ++oq) {
        Window win = window(op, oq, h, w, p);
        double g = dy[(plane * P + op) * Q + oq];
        if (p.mode == PoolMode::kMax) {
          int64_t arg = -1;
          for (int64_t i = win.h0; i < win.h1; ++i)
            for (int64_t j = win.w0; j < win.w1; ++j) {
              int64_t idx = (plane * h + i) * w + j;
              // strict: the first maximum wins; a NaN is above every number
              if (arg < 0 || x[idx] > x[arg] || (std::isnan(x[idx]) && !std::isnan(x[arg])))
                arg = idx;
            }
          dx[arg] += g;
        } else {
          double count = static_cast<double>((win.h1 - win.h0) * (win.w1 - win.w0));
          for (int64_t i = win.h0; i < win.h1; ++i)
            for (int64_t j = win.w0; j < win.w1; ++j) dx[(plane * h + i) * w + j] += g / count;
        }
      }
  return dx;
}

namespace {

const double kPi = 3.14159265358979323846;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

double act(double x, Activation a, double alpha) {
  switch (a) {
    case Activation::kRelu:  // a NaN passes on (x <= 0 is false for it), as in PyTorch
      return x <= 0 ? 0.0 : x;
    case Activation::kLeakyRelu:
      return x <= 0 ? alpha * x : x;
    case Activation::kSigmoid:
      return sigmoid(x);
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kRelu6:
      return std::min(std::max(x, 0.0), 6.0);
    case Activation::kSilu:
      return x * sigmoid(x);
    case Activation::kHardSwish:
      return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case Activation::kHardSigmoid:
      return std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case Activation::kGelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
    case Activation::kElu:
      return x > 0 ? x : alpha * std::expm1(x);
    case Activation::kSoftplus:
      return softplus(x);
    case Activation::kMish:
      return x * std::tanh(softplus(x));
  }
  return 0;
}

// The derivative at x (PyTorch's at the kinks: relu6 and hardsigmoid 0 at their ends, hardswish
// the middle piece's at -3 and 3).
double act_slope(double x, Activation a, double alpha) {
  const double y = act(x, a, alpha);
  switch (a) {
    case Activation::kRelu:
      return x > 0 ? 1.0 : 0.0;
    case Activation::kLeakyRelu:
      return x > 0 ? 1.0 : alpha;
    case Activation::kSigmoid:
      return y * (1 - y);
    case Activation::kTanh:
      return 1 - y * y;
    case Activation::kRelu6:
      return x > 0 && x < 6 ? 1.0 : 0.0;
    case Activation::kSilu:
      return sigmoid(x) * (1 + x * (1 - sigmoid(x)));
    case Activation::kHardSwish:
      return x < -3 ? 0.0 : x <= 3 ? x / 3 + 0.5 : 1.0;
    case Activation::kHardSigmoid:
      return x > -3 && x < 3 ? 1.0 / 6 : 0.0;
    case Activation::kGelu:
      return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
             x * std::exp(-0.5 * x * x) / std::sqrt(2 * kPi);
    case Activation::kGeluTanh: {
      const double k = std::sqrt(2 / kPi), t = std::tanh(k * (x + 0.044715 * x * x * x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
    }
    case Activation::kElu:
      return x > 0 ? 1.0 : alpha * std::exp(x);
    case Activation::kSoftplus:
      return x > 20 ? 1.0 : sigmoid(x);
    case Activation::kMish: {
      const double t = std::tanh(softplus(x));
      return t + x * (1 - t * t) * sigmoid(x);
    }
  }
  return 0;
}

}  // namespace

Doubles activation_forward(const Floats& x, Activation a, double alpha) {
  Doubles y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = act(x[i], a, alpha);
  return y;
}

Doubles activation_backward(const Floats& dy, const Floats& x, Activation a, double alpha) {
  Doubles dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) dx[i] = dy[i] * act_slope(x[i], a, alpha);
  return dx;
}

Doubles multiply(const Floats& a, const Floats& b, int64_t inner) {
  Doubles y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = static_cast<double>(a[i]) * b[i / inner];
  return y;
}

Doubles multiply_backward_b(const Floats& dy, const Floats& a, int64_t inner) {
  Doubles db(a.size() / inner, 0.0);
  for (size_t i = 0; i < a.size(); ++i) db[i / inner] += static_cast<double>(dy[i]) * a[i];
  return db;
}

Doubles bias_add(const Floats& y, const Floats& b, int64_t n, int64_t c, int64_t inner) {
  Doubles out(y.begin(), y.end());
  for (int64_t i = 0; i < n * c * inner; ++i) out[i] += b[(i / inner) % c];
  return out;
}

Doubles bias_backward(const Floats& dy, int64_t n, int64_t c, int64_t inner) {
  Doubles db(c, 0.0);
  for (int64_t i = 0; i < n * c * inner; ++i) db[(i / inner) % c] += dy[i];
  return db;
}

Doubles add(const Floats& a, const Floats& b) {
  Doubles y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = static_cast<double>(a[i]) + b[i];
  return y;
}

BatchNorm batchnorm_training(const Floats& x, const Floats& gamma, const Floats& beta, int64_t n,
                             int64_t c, int64_t inner, double eps) {
  BatchNorm r{Doubles(x.size()), Doubles(c, 0.0), Doubles(c, 0.0)};
  const double m = static_cast<double>(n * inner);
  for (int64_t i = 0; i < n * c * inner; ++i) r.mean[(i / inner) % c] += x[i] / m;
  for (int64_t i = 0; i < n * c * inner; ++i) {
    const double d = x[i] - r.mean[(i / inner) % c];
    r.var[(i / inner) % c] += d * d / m;
  }
  for (int64_t i = 0; i < n * c * inner; ++i) {
    const int64_t ch = (i / inner) % c;
    r.y[i] = (x[i] - r.mean[ch]) / std::sqrt(r.var[ch] + eps) * gamma[ch] + beta[ch];
  }
  return r;
}

Doubles batchnorm_inference(const Floats& x, const Floats& gamma, const Floats& beta,
                            const Floats& mean, const Floats& var, int64_t n, int64_t c,
                            int64_t inner, double eps) {
  Doubles y(x.size());
  for (int64_t i = 0; i < n * c * inner; ++i) {
    const int64_t ch = (i / inner) % c;
    y[i] = (x[i] - static_cast<double>(mean[ch])) / std::sqrt(var[ch] + eps) * gamma[ch] + beta[ch];
  }
  return y;
}

Doubles softmax(const Floats& logits, int64_t n, int64_t c) {
  Doubles p(n * c);
  for (int64_t i = 0; i < n; ++i) {
    double m = *std::max_element(logits.begin() + i * c, logits.begin() + (i + 1) * c), s = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(logits[i * c + j] - m);
    for (int64_t j = 0; j < c; ++j) p[i * c + j] = std::exp(logits[i * c + j] - m) / s;
  }
  return p;
}

Doubles groupnorm(const Floats& x, const Floats& gamma, const Floats& beta, int64_t n, int64_t c,
                  int64_t inner, int64_t groups, double eps) {
  Doubles y(x.size());
  const int64_t per = c / groups, m = per * inner;
  for (int64_t s = 0; s < n; ++s)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t base = (s * c + g * per) * inner;
      double mean = 0, var = 0;
      for (int64_t k = 0; k < m; ++k) mean += x[base + k];
      mean /= static_cast<double>(m);
      for (int64_t k = 0; k < m; ++k) var += (x[base + k] - mean) * (x[base + k] - mean);
      var /= static_cast<double>(m);
      for (int64_t k = 0; k < m; ++k) {
        const int64_t ch = g * per + k / inner;
        y[base + k] = gamma[ch] * (x[base + k] - mean) / std::sqrt(var + eps) + beta[ch];
      }
    }
  return y;
}

// The smoothed target of class j for label l: (1 - e) [j == l] + e / C.
static double target(int64_t j, int32_t label, int64_t c, double smoothing) {
  return (1.0 - smoothing) * (j == label ? 1.0 : 0.0) + smoothing / static_cast<double>(c);
}

double softmax_cross_entropy(const Floats& logits, const Labels& labels, int64_t n, int64_t c,
                             double smoothing) {
  Doubles p = softmax(logits, n, c);
  double loss = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      loss -= target(j, labels[i], c, smoothing) * std::log(p[i * c + j]);
  return loss / n;
}

Doubles softmax_cross_entropy_backward(const Floats& probs, const Labels& labels, int64_t n,
                                       int64_t c, double smoothing) {
  Doubles d(n * c);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      d[i * c + j] = (probs[i * c + j] - target(j, labels[i], c, smoothing)) / n;
  return d;
}

double mse(const Floats& pred, const Labels& labels, int64_t n, int64_t c) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) {
      double e = pred[i * c + j] - (j == labels[i] ? 1.0 : 0.0);
      s += e * e;
    }
  return s / (n * c);
}

Doubles mse_backward(const Floats& pred, const Labels& labels, int64_t n, int64_t c) {
  Doubles d(n * c);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      d[i * c + j] = 2.0 * (pred[i * c + j] - (j == labels[i] ? 1.0 : 0.0)) / (n * c);
  return d;
}

int64_t accuracy(const Floats& scores, const Labels& labels, int64_t n, int64_t c) {
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (scores[i * c + j] > scores[i * c + best]) best = j;
    hits += best == labels[i];
  }
  return hits;
}

Doubles dropout_mask(int64_t numel, double p, uint64_t seed, uint64_t offset) {
  Doubles m(numel);
  for (int64_t i = 0; i < numel; ++i) {
    m[i] = philox_uniform(seed, offset, static_cast<uint64_t>(i)) >= p ? 1.0 / (1.0 - p) : 0.0;
  }
  return m;
}

void sgd_update(Doubles& w, Doubles& velocity, const Doubles& grad, const SgdParams& p) {
  for (size_t i = 0; i < w.size(); ++i) {
    double g = grad[i] + static_cast<double>(p.weight_decay) * w[i];
    if (p.momentum != 0) {
      velocity[i] = p.momentum * velocity[i] + g;
      g = p.nesterov ? g + p.momentum * velocity[i] : velocity[i];
    }
    w[i] -= p.lr * g;
  }
}

void adam_update(Doubles& w, Doubles& m, Doubles& v, const Doubles& grad, const AdamParams& p) {
  const double b1 = p.beta1, b2 = p.beta2, t = static_cast<double>(p.step);
  for (size_t i = 0; i < w.size(); ++i) {
    double g = grad[i];
    if (p.decoupled) {
      w[i] *= 1.0 - static_cast<double>(p.lr) * p.weight_decay;
    } else {
      g += static_cast<double>(p.weight_decay) * w[i];
    }
    m[i] = b1 * m[i] + (1 - b1) * g;
    v[i] = b2 * v[i] + (1 - b2) * g * g;
    double m_hat = m[i] / (1 - std::pow(b1, t));
    double v_hat = v[i] / (1 - std::pow(b2, t));
    w[i] -= p.lr * m_hat / (std::sqrt(v_hat) + p.eps);
  }
}

}  // namespace tandem::reference
