// The elementwise activations: their kinds, and each one's value and gradient in fp32, as PyTorch
// defines them. One definition for every place that computes them element by element: the GPU's
// kernels (cuda/mixed_precision.cu), the CPU's bf16 loops and its loops for the kinds oneDNN has
// no algorithm for (cpu/activation.cpp, cpu/mixed_precision.cpp). oneDNN's algorithms compute the
// others in fp32 on the CPU; the tests hold both to tests/reference/ in double precision.
#pragma once

#include <cmath>
#include <type_traits>

#if defined(__CUDACC__)
#define TANDEM_ACTIVATION_HD __host__ __device__ __forceinline__
#else
#define TANDEM_ACTIVATION_HD inline
#endif

namespace tandem {

enum class Activation {
  kRelu,
  kLeakyRelu,  // alpha: the negative slope
  kSigmoid,
  kTanh,
  kRelu6,        // min(max(x, 0), 6)
  kSilu,         // x * sigmoid(x) (swish)
  kHardSwish,    // x * relu6(x + 3) / 6
  kHardSigmoid,  // relu6(x + 3) / 6
  kGelu,         // x * Phi(x), the exact erf form
  kGeluTanh,     // GELU's tanh approximation (approximate: tanh)
  kElu,          // alpha: x > 0 ? x : alpha * (exp(x) - 1)
  kSoftplus,     // log(1 + exp(x)); x beyond 20: x (PyTorch's threshold)
  kMish,         // x * tanh(softplus(x))
};

// Every kind, for the tests that cover them all.
inline constexpr Activation kActivations[] = {
    Activation::kRelu,  Activation::kLeakyRelu, Activation::kSigmoid,   Activation::kTanh,
    Activation::kRelu6, Activation::kSilu,      Activation::kHardSwish, Activation::kHardSigmoid,
    Activation::kGelu,  Activation::kGeluTanh,  Activation::kElu,       Activation::kSoftplus,
    Activation::kMish};

// The config's name of a kind ("gelu" for both GELUs: the tanh one is gelu {approximate: tanh}).
inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return "relu";
    case Activation::kLeakyRelu:
      return "leaky_relu";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kTanh:
      return "tanh";
    case Activation::kRelu6:
      return "relu6";
    case Activation::kSilu:
      return "silu";
    case Activation::kHardSwish:
      return "hardswish";
    case Activation::kHardSigmoid:
      return "hardsigmoid";
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kElu:
      return "elu";
    case Activation::kSoftplus:
      return "softplus";
    case Activation::kMish:
      return "mish";
  }
  return "?";
}

// The backward pass of sigmoid and tanh reads the forward output y; every other kind's reads the
// forward input x.
TANDEM_ACTIVATION_HD bool activation_uses_output(Activation a) {
  return a == Activation::kSigmoid || a == Activation::kTanh;
}

namespace activation_detail {
TANDEM_ACTIVATION_HD float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }
TANDEM_ACTIVATION_HD float softplus(float v) { return v > 20.f ? v : log1pf(expf(v)); }
// g * 0 without the multiply: 0, or NaN where g is not finite (Inf * 0 and NaN * 0 are NaN), so
// that a non-finite gradient from above stays one where a unit is off. A compare and a select:
// no arithmetic on a subnormal g.
TANDEM_ACTIVATION_HD float off_grad(float g) { return fabsf(g) < INFINITY ? 0.f : NAN; }
constexpr float kSqrtHalf = 0.70710678118654752f;       // 1 / sqrt(2)
constexpr float kInvSqrtTwoPi = 0.39894228040143268f;   // 1 / sqrt(2 pi)
constexpr float kSqrtTwoOverPi = 0.79788456080286536f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;
}  // namespace activation_detail

// y of x. Where x is NaN, y is NaN: the comparisons are written so that a NaN fails them all.
TANDEM_ACTIVATION_HD float activation_value(Activation a, float v, float alpha) {
  using namespace activation_detail;
  switch (a) {
    case Activation::kRelu:
      return v <= 0.f ? 0.f : v;
    case Activation::kLeakyRelu:
      return v > 0.f ? v : alpha * v;
    case Activation::kSigmoid:
      return sigmoid(v);
    case Activation::kTanh:
      return tanhf(v);
    case Activation::kRelu6:
      return v <= 0.f ? 0.f : v >= 6.f ? 6.f : v;
    case Activation::kSilu:
      return v * sigmoid(v);
    case Activation::kHardSwish: {  // PyTorch's product: -inf gives NaN (-inf * 0) there too
      const float r = v + 3.f;      // relu6 of it by comparisons, which vectorise (fmaxf does not)
      return v * (r <= 0.f ? 0.f : r >= 6.f ? 6.f : r) / 6.f;
    }
    case Activation::kHardSigmoid:
      return v <= -3.f ? 0.f : v >= 3.f ? 1.f : v / 6.f + 0.5f;
    case Activation::kGelu:  // 1 + erf(x / sqrt 2) as erfc(-x / sqrt 2): no cancellation below 0
      return 0.5f * v * erfcf(-v * kSqrtHalf);
    case Activation::kGeluTanh:  // (1 + tanh u) / 2 as sigmoid(2u), for the same reason
      return v * sigmoid(2.f * kSqrtTwoOverPi * (v + kGeluCubic * v * v * v));
    case Activation::kElu:
      return v > 0.f ? v : alpha * expm1f(v);
    case Activation::kSoftplus:
      return softplus(v);
    case Activation::kMish:
      return v * tanhf(softplus(v));
  }
  return v;
}

// dx of dy = g, with d the forward output y where activation_uses_output, else the input x. The
// piecewise kinds multiply g by their slope, so a non-finite g stays one where the slope is 0; a
// NaN x fails every comparison and its gradient passes as PyTorch's does (relu: g; relu6: g).
TANDEM_ACTIVATION_HD float activation_grad(Activation a, float g, float d, float alpha) {
  using namespace activation_detail;
  switch (a) {
    // relu and relu6 select g, or g * 0 (off_grad), rather than multiply it by 1 or 0: a
    // gradient that has underflowed to a subnormal (common far from the loss) costs a multiply
    // about a hundred cycles without flush-to-zero, which made relu6's backward 15x slower than
    // its forward on the CPU.
    case Activation::kRelu:
      return d <= 0.f ? off_grad(g) : g;
    case Activation::kLeakyRelu:
      return d <= 0.f ? alpha * g : g;
    case Activation::kSigmoid:
      return g * d * (1.f - d);
    case Activation::kTanh:
      return g * (1.f - d * d);
    case Activation::kRelu6:  // | and & rather than || and &&: no branch, so the loop vectorises
      return (d <= 0.f) | (d >= 6.f) ? off_grad(g) : g;
    case Activation::kSilu: {
      const float s = sigmoid(d);
      return g * s * (1.f + d * (1.f - s));
    }
    case Activation::kHardSwish:
      return g * (d < -3.f ? 0.f : d <= 3.f ? d / 3.f + 0.5f : 1.f);
    case Activation::kHardSigmoid:
      return g * ((d > -3.f) & (d < 3.f) ? 1.f / 6.f : 0.f);
    case Activation::kGelu:
      return g * (0.5f * erfcf(-d * kSqrtHalf) + d * kInvSqrtTwoPi * expf(-0.5f * d * d));
    case Activation::kGeluTanh: {  // d/dx x s(2u) = s + x s (1 - s) 2u'
      const float s = sigmoid(2.f * kSqrtTwoOverPi * (d + kGeluCubic * d * d * d));
      const float du = kSqrtTwoOverPi * (1.f + 3.f * kGeluCubic * d * d);
      return g * (s + d * s * (1.f - s) * 2.f * du);
    }
    case Activation::kElu:
      return d > 0.f ? g : g * alpha * expf(d);
    case Activation::kSoftplus:
      return d > 20.f ? g : g * sigmoid(d);
    case Activation::kMish: {
      const float t = tanhf(softplus(d));
      return g * (t + d * (1.f - t * t) * sigmoid(d));
    }
  }
  return g;
}

// Calls f(std::integral_constant<Activation, a>{}): a loop over elements written once for every
// kind, with the kind a constant inside it, so that the compiler drops the other kinds' branches
// and vectorises each loop (a switch on a variable kind in the loop's body keeps it scalar).
template <typename F>
decltype(auto) with_activation(Activation a, F&& f) {
  using A = Activation;
  switch (a) {
    case A::kRelu:
      return f(std::integral_constant<A, A::kRelu>{});
    case A::kLeakyRelu:
      return f(std::integral_constant<A, A::kLeakyRelu>{});
    case A::kSigmoid:
      return f(std::integral_constant<A, A::kSigmoid>{});
    case A::kTanh:
      return f(std::integral_constant<A, A::kTanh>{});
    case A::kRelu6:
      return f(std::integral_constant<A, A::kRelu6>{});
    case A::kSilu:
      return f(std::integral_constant<A, A::kSilu>{});
    case A::kHardSwish:
      return f(std::integral_constant<A, A::kHardSwish>{});
    case A::kHardSigmoid:
      return f(std::integral_constant<A, A::kHardSigmoid>{});
    case A::kGelu:
      return f(std::integral_constant<A, A::kGelu>{});
    case A::kGeluTanh:
      return f(std::integral_constant<A, A::kGeluTanh>{});
    case A::kElu:
      return f(std::integral_constant<A, A::kElu>{});
    case A::kSoftplus:
      return f(std::integral_constant<A, A::kSoftplus>{});
    case A::kMish:
      break;
  }
  return f(std::integral_constant<A, A::kMish>{});
}

}  // namespace tandem
