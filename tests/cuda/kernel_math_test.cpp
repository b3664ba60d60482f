// The arithmetic of tandem's CUDA kernels (cuda/kernel_math.h), run on the host against the CPU
// backend's ops over odd shapes, in every dtype the kernels compute in: what a GPU run would
// compute, index by index, checked on any machine. What stays for a GPU is the launches and the
// library calls (tests/cuda/parity_test.cpp and the op tests' GPU cases).
#include "cuda/kernel_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/bf16.h"
#include "cuda/moments.h"
#include "tests/cpu/backend_test_util.h"

namespace tandem::testing {
namespace {

using kernel::PoolGeom;

// The rounding a 16-bit kernel applies to its fp32 result (from_float): to nearest even.
enum class Kind { kF32, kBF16, kF16 };
float round_to(Kind k, float v) {
  switch (k) {
    case Kind::kBF16:
      return bf16_to_f32(f32_to_bf16(v));
    case Kind::kF16:
      return static_cast<float>(static_cast<_Float16>(v));
    default:
      return v;
  }
}
const char* kind_name(Kind k) {
  return k == Kind::kBF16 ? "bf16" : k == Kind::kF16 ? "fp16" : "fp32";
}

// One unit in the last place of v in the type (fp32: 2^-23 of its binade).
double ulp(Kind k, float v) {
  const int bits = k == Kind::kBF16 ? 8 : k == Kind::kF16 ? 11 : 24;
  int e = 0;
  std::frexp(std::max(std::fabs(v), 1e-30f), &e);
  return std::ldexp(1.0, e - bits);
}

// a and b agree to within `ulps` units of the type (NaN with NaN, infinities exactly).
::testing::AssertionResult within_ulps(Kind k, float a, float b, double ulps) {
  if (std::isnan(a) || std::isnan(b)) {
    if (std::isnan(a) && std::isnan(b)) return ::testing::AssertionSuccess();
  } else if (std::isinf(a) || std::isinf(b)) {
    if (a == b) return ::testing::AssertionSuccess();
  } else if (std::fabs(static_cast<double>(a) - b) <=
             ulps * ulp(k, std::max(std::fabs(a), std::fabs(b)))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << a << " vs " << b << " (" << kind_name(k) << ")";
}

class KernelMath : public BackendTest {
 protected:
  void SetUp() override { start("cpu"); }
  // Values over the activations' interesting range, with zeros and a NaN among them.
  static Floats activation_inputs(int64_t n, uint32_t seed) {
    Floats v = random(n, seed, -6.f, 6.f);
    v[0] = 0.f;
    v[1] = -0.f;
    v[2] = NAN;
    v[3] = 1e-30f;
    return v;
  }
};

TEST_F(KernelMath, ActivationsAndTheirGradientsMatchTheCpuInEveryDtype) {
  const int64_t n = 1031;  // odd, not a multiple of any vector width
  const Floats x0 = activation_inputs(n, 1), g0 = random(n, 2, -2.f, 2.f);
  const float alpha = 0.1f;  // leaky relu's slope, elu's alpha
  for (Kind k : {Kind::kF32, Kind::kBF16, Kind::kF16}) {
    Floats x(x0), g(g0);
    for (float& v : x) v = round_to(k, v);  // the kernel reads T values
    for (float& v : g) v = round_to(k, v);
    for (Activation a : kActivations) {
      SCOPED_TRACE(std::string(kind_name(k)) + " activation " + activation_name(a));
      // The CPU's fp32 op on the same T values, rounded to T once, as the kernel writes.
      Tensor tx = upload({n}, x), ty = output({n});
      be().activation_forward(ty, tx, a, alpha);
      Floats y = download(ty);
      for (float& v : y) v = round_to(k, v);
      int bad = 0;
      // The CPU runs oneDNN's approximations of these (its erf, exp and log1p in the tails are
      // good to about 1e-6 of the input's scale, not to a few units): that much apart passes.
      const bool approximated = a == Activation::kSilu || a == Activation::kGelu ||
                                a == Activation::kGeluTanh || a == Activation::kSoftplus ||
                                a == Activation::kMish;
      auto close = [&](float host, float cpu, float x_i, float scale) {
        return approximated && std::fabs(static_cast<double>(host) - cpu) <=
                                   2e-6 * (1 + std::fabs(x_i)) * scale + ulp(k, cpu);
      };
      for (int64_t i = 0; i < n; ++i) {
        const float host = round_to(k, activation_value(a, x[i], alpha));
        // fp32: libm's and oneDNN's exp and tanh may differ in the last bits; a 16-bit result
        // can then round either way: one unit of T.
        if (!within_ulps(k, host, y[i], k == Kind::kF32 ? 8 : 1) && !close(host, y[i], x[i], 1.f) &&
            ++bad <= 3)
          ADD_FAILURE() << "forward at " << i << " (x " << x[i]
                        << "): " << within_ulps(k, host, y[i], 1).message();
      }
      // The gradient reads x (relu family) or y (sigmoid, tanh): both given as the kernel sees
      // them.
      Tensor tdy = upload({n}, g), tyr = upload({n}, y), tdx = output({n});
      be().activation_backward(tdx, tdy, tx, tyr, a, alpha);
      Floats dx = download(tdx);
      const bool reads_y = activation_uses_output(a);
      for (int64_t i = 0; i < n; ++i) {
        // At a NaN x those formulas give NaN or g: PyTorch's and oneDNN's differ there too.
        if (approximated && std::isnan(x[i])) continue;
        const float host = round_to(k, activation_grad(a, g[i], reads_y ? y[i] : x[i], alpha));
        const float cpu = round_to(k, dx[i]);
        // sigmoid's y (1 - y) and tanh's 1 - y^2 cancel where y nears 1: a formula of the same
        // y in another order (oneDNN's) differs by about |g| * ulp(1) there.
        const double cancel = reads_y ? 4 * std::fabs(g[i]) * ulp(Kind::kF32, 1.f) : 0.0;
        const bool ok = within_ulps(k, host, cpu, k == Kind::kF32 ? 4 : 1) ||
                        std::fabs(static_cast<double>(host) - cpu) <= cancel + ulp(k, cpu) ||
                        close(host, cpu, x[i], std::max(1.f, std::fabs(g[i])));
        if (!ok && ++bad <= 3)
          ADD_FAILURE() << "backward at " << i << " (x " << x[i] << ", g " << g[i]
                        << "): " << within_ulps(k, host, cpu, 1).message();
      }
      EXPECT_EQ(bad, 0);
    }
  }
  // A NaN input: relu passes it forward and passes its gradient back, as the CPU does.
  EXPECT_TRUE(std::isnan(activation_value(Activation::kRelu, NAN, 0.f)));
  EXPECT_EQ(activation_grad(Activation::kRelu, 0.5f, NAN, 0.f), 0.5f);
  EXPECT_EQ(activation_grad(Activation::kLeakyRelu, 0.5f, NAN, 0.1f), 0.5f);
  EXPECT_TRUE(std::isnan(activation_grad(Activation::kRelu, NAN, -1.f, 0.f)));  // 0 * NaN
}

// Conversions place element i (logical NCHW order) at element_offset in a channels-last tensor:
// the CPU's copy into channels-last memory, fp32 and bf16, byte for byte.
TEST_F(KernelMath, ChannelsLastOffsetsPlaceEveryElementAsTheCpusCopyDoes) {
  const Shape s{3, 5, 3, 7};  // odd channels, odd H * W
  const int64_t n = s.numel();
  const Floats plain = random(n, 3);
  const kernel::Order cl{true, s[1], s[2] * s[3]}, flat{false, 1, 1};
  Tensor src = upload(s, plain);
  Tensor f32(be(), s, DType::kF32, Layout::kChannelsLast);
  be().copy(f32, src);
  be().synchronize();
  Floats mem(static_cast<size_t>(n));
  be().download(mem.data(), f32);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(kernel::element_offset(i, flat, n), i);
    EXPECT_EQ(mem[static_cast<size_t>(kernel::element_offset(i, cl, n))],
              plain[static_cast<size_t>(i)])
        << "element " << i;
  }
  std::string why;
  if (!be().supports_dtype(DType::kBF16, &why)) return;  // the fp32 half has run
  Tensor b16(be(), s, DType::kBF16, Layout::kChannelsLast);
  be().copy(b16, src);
  be().synchronize();
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  be().download(bits.data(), b16);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(bits[static_cast<size_t>(kernel::element_offset(i, cl, n))],
              f32_to_bf16(plain[static_cast<size_t>(i)]))
        << "element " << i;
}

TEST_F(KernelMath, SgdElementUpdatesMatchTheCpuInEveryVariant) {
  const int64_t n = 1031;
  const Floats w0 = random(n, 4), v0 = random(n, 5, -0.1f, 0.1f), g = random(n, 6);
  const struct {
    float momentum, wd;
    bool nesterov;
  } variants[] = {{0.f, 0.f, false}, {0.9f, 0.f, false}, {0.9f, 1e-2f, true}, {0.f, 5e-4f, false}};
  for (const auto& c : variants) {
    SCOPED_TRACE("momentum " + std::to_string(c.momentum) + " wd " + std::to_string(c.wd) +
                 (c.nesterov ? " nesterov" : ""));
    SgdParams p;
    p.lr = 0.05f, p.momentum = c.momentum, p.weight_decay = c.wd, p.nesterov = c.nesterov;
    Tensor tw = upload({n}, w0), tv = upload({n}, v0), tg = upload({n}, g);
    be().sgd_update(tw, tv, tg, p);
    const Floats w = download(tw), v = download(tv);
    for (int64_t i = 0; i < n; ++i) {
      float hw = w0[i], hv = v0[i];
      kernel::sgd_element(hw, c.momentum != 0.f ? &hv : nullptr, g[i], p.lr, p.momentum,
                          p.weight_decay, p.nesterov);
      EXPECT_FLOAT_EQ(hw, w[i]) << "w at " << i;
      if (c.momentum != 0.f) {
        EXPECT_FLOAT_EQ(hv, v[i]) << "velocity at " << i;
      }
    }
  }
}

// Each element's mask comes from the Philox word the CPU uses: the same masks, bit for bit, on a
// length that ends inside a Philox block.
TEST_F(KernelMath, DropoutMasksAreTheCpusBitForBit) {
  const int64_t n = 1031;
  const float p = 0.3f, scale = 1.f / (1.f - p);
  Tensor x = upload({n}, Floats(static_cast<size_t>(n), 1.f)), y = output({n}), mask = output({n});
  be().dropout_forward(y, mask, x, p, 7, 3);
  const Floats m = download(mask);
  int kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float host = kernel::dropout_mask(7, 3, i, p, scale);
    EXPECT_EQ(host, m[i]) << "element " << i;
    kept += host != 0.f;
  }
  EXPECT_GT(kept, n / 2);  // about 70%
  EXPECT_LT(kept, n * 9 / 10);
}

// Rows of an odd class count, with ties (the first maximum wins) and a large logit.
TEST_F(KernelMath, LossAndAccuracyRowsMatchTheCpu) {
  const int64_t n = 5, c = 7;
  Floats z = random(n * c, 7, -3.f, 3.f);
  for (int64_t j = 0; j < c; ++j) z[static_cast<size_t>(c + j)] = 0.5f;  // row 1: all tied
  z[static_cast<size_t>(2 * c + 4)] = 80.f;  // row 2: exp overflows fp32
  z[static_cast<size_t>(3 * c + 1)] = z[static_cast<size_t>(3 * c + 5)] =
      9.f;  // row 3: a tie at the top
  const std::vector<int32_t> labels{3, 0, 4, 5, 6};
  Tensor tz = upload({n, c}, z), ty = upload_labels(labels);
  Tensor loss = output({1}), probs = output({n, c}), correct = output({1}), mse = output({1});
  be().softmax_cross_entropy_forward(loss, probs, tz, ty, 0.f);
  be().accuracy(correct, tz, ty);
  be().mse_forward(mse, tz, ty);
  const Floats p = download(probs);
  Floats hp(static_cast<size_t>(n * c));
  double sum_ce = 0, sum_mse = 0, hits = 0;
  for (int64_t r = 0; r < n; ++r) {
    const size_t at = static_cast<size_t>(r * c);
    sum_ce += kernel::softmax_ce_row(hp.data() + at, z.data() + at, c, labels[r], 0.f);
    sum_mse += kernel::mse_row(z.data() + at, c, labels[r]);
    hits += kernel::accuracy_row(z.data() + at, c, labels[r]);
  }
  for (size_t i = 0; i < hp.size(); ++i)
    EXPECT_NEAR(hp[i], p[i], 1e-6 * std::max(1.f, std::fabs(p[i]))) << "prob " << i;
  EXPECT_NEAR(sum_ce / n, download(loss)[0], 1e-5);
  EXPECT_NEAR(sum_mse / (n * c), download(mse)[0], 1e-5 * (sum_mse / (n * c)));
  EXPECT_EQ(hits, download(correct)[0]);
  EXPECT_EQ(kernel::accuracy_row(z.data() + 3 * c, c, 1), 1.f);  // the first of the tied maxima
  EXPECT_EQ(kernel::accuracy_row(z.data() + 3 * c, c, 5), 0.f);
  EXPECT_EQ(kernel::softmax_ce_row(hp.data(), z.data(), c, 7, 0.f),
            0.f);  // out of range: reported apart
}

// Each dx element gathers from the windows that cover it, the first maximum of a window taking its
// gradient (ties after a relu are common) and a NaN being a window's maximum; average pooling
// leaves padding out of the divisor. Overlapping, padded, non-square windows, and ceil mode's last,
// partial window, whose forward value (the GPU's own kernel there) is checked too.
TEST_F(KernelMath, PoolingGradientsMatchTheCpu) {
  const Shape xs{2, 3, 7, 6};
  Floats x = random(xs.numel(), 8);
  for (float& v : x) v = std::max(0.f, std::round(v * 2.f) / 2.f);  // many ties, many zeros
  x[17] = NAN;
  struct Case {
    PoolMode mode;
    int kh, kw, sh, sw, ph, pw;
    bool ceil = false;
  };
  for (const Case& c :
       {Case{PoolMode::kMax, 3, 3, 2, 2, 1, 1}, Case{PoolMode::kMax, 2, 2, 2, 2, 0, 0},
        Case{PoolMode::kMax, 3, 2, 1, 2, 1, 0}, Case{PoolMode::kAverage, 3, 3, 2, 2, 1, 1},
        Case{PoolMode::kAverage, 2, 3, 1, 1, 0, 1}, Case{PoolMode::kMax, 3, 3, 2, 2, 0, 0, true},
        Case{PoolMode::kAverage, 2, 2, 2, 2, 1, 1, true},
        Case{PoolMode::kAverage, 3, 2, 2, 2, 0, 0, true}}) {
    SCOPED_TRACE("kernel " + std::to_string(c.kh) + "x" + std::to_string(c.kw) + " stride " +
                 std::to_string(c.sh) + "x" + std::to_string(c.sw) + " pad " +
                 std::to_string(c.ph) + "x" + std::to_string(c.pw) + (c.ceil ? " ceil" : ""));
    Pool2dParams p;
    p.mode = c.mode, p.kernel_h = c.kh, p.kernel_w = c.kw, p.stride_h = c.sh, p.stride_w = c.sw;
    p.pad_h = c.ph, p.pad_w = c.pw, p.ceil_mode = c.ceil;
    const int P = static_cast<int>(pool_out_size(xs[2], c.kh, c.sh, c.ph, c.ceil)),
              Q = static_cast<int>(pool_out_size(xs[3], c.kw, c.sw, c.pw, c.ceil));
    const Shape ys{xs[0], xs[1], P, Q};
    const Floats dy = random(ys.numel(), 9);
    Tensor tx = upload(xs, x), ty = output(ys), tdy = upload(ys, dy), tdx = output(xs);
    be().pool2d_forward(ty, tx, p);
    be().pool2d_backward(tdx, tdy, tx, ty, p);
    const Floats dx = download(tdx);
    const PoolGeom g{2, 3, 7, 6, P, Q, c.kh, c.kw, c.sh, c.sw, c.ph, c.pw};
    for (int64_t i = 0; i < xs.numel(); ++i) {
      const PlanePos at = plane_pos(i, 7, 6, xs.numel());
      const float host = c.mode == PoolMode::kMax
                             ? kernel::max_pool_dx(x.data() + at.plane * 42,
                                                   dy.data() + at.plane * P * Q, at.h, at.w, g)
                             : kernel::avg_pool_dx(dy.data() + at.plane * P * Q, at.h, at.w, g);
      EXPECT_NEAR(host, dx[static_cast<size_t>(i)], 1e-6f) << "dx element " << i;
    }
    const Floats y = download(ty);
    for (int64_t i = 0; i < ys.numel(); ++i) {
      const PlanePos at = plane_pos(i, P, Q, ys.numel());
      const float host = kernel::pool_window_value(x.data() + at.plane * 42, at.h, at.w,
                                                   c.mode == PoolMode::kMax, g);
      const float cpu = y[static_cast<size_t>(i)];
      EXPECT_TRUE(host == cpu || std::abs(host - cpu) <= 1e-6f || (host != host && cpu != cpu))
          << "y element " << i << ": " << host << " vs " << cpu;
    }
  }
}

// Batch normalization over an odd shape whose values sit far from zero (a shifted one-pass sum
// must not cancel): the statistics from moments.h's one-pass sums, then the per-channel finish,
// the normalization in training and inference, and the input gradient, against the CPU.
TEST_F(KernelMath, BatchNormalizationMatchesTheCpu) {
  const int64_t N = 3, C = 5, H = 3, W = 7, inner = H * W, M = N * inner;
  const Shape xs{N, C, H, W};
  Floats x = random(xs.numel(), 10);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 100.f + 3.f * x[i];
  const Floats gamma = random(C, 11, 0.5f, 1.5f), beta = random(C, 12), dy = random(xs.numel(), 13);
  const Floats rm0 = random(C, 14), rv0 = random(C, 15, 0.5f, 2.f);
  const float momentum = 0.1f, eps = 1e-5f;
  Tensor tx = upload(xs, x), tg = upload({C}, gamma), tb = upload({C}, beta), ty = output(xs);
  Tensor mean = output({C}), inv_std = output({C}), rm = upload({C}, rm0), rv = upload({C}, rv0);
  be().batchnorm_forward_training(ty, mean, inv_std, rm, rv, tx, tg, tb, momentum, eps);
  Tensor tdy = upload(xs, dy), tdx = output(xs), dgamma = output({C}), dbeta = output({C});
  be().batchnorm_backward(&tdx, dgamma, dbeta, tdy, tx, tg, mean, inv_std);
  Tensor yi = output(xs);
  be().batchnorm_forward_inference(yi, tx, tg, tb, rm, rv, eps);
  const Floats y = download(ty), cm = download(mean), cs = download(inv_std), crm = download(rm),
               crv = download(rv), dx = download(tdx), cdg = download(dgamma),
               cdb = download(dbeta), cyi = download(yi);
  auto at = [&](int64_t n, int64_t c, int64_t k) {
    return static_cast<size_t>((n * C + c) * inner + k);
  };
  for (int64_t c = 0; c < C; ++c) {
    SCOPED_TRACE("channel " + std::to_string(c));
    ShiftedSums sums;  // one thread's share: the whole channel
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < inner; ++k) sums.add(x[at(n, c, k)]);
    const Moments m = sums.moments();
    const kernel::ChannelStats s =
        kernel::bn_channel_stats(m.n, m.mean, m.m2, rm0[c], rv0[c], momentum, eps);
    EXPECT_NEAR(s.mean, cm[c], 1e-6 * 100);
    EXPECT_NEAR(s.inv_std, cs[c], 1e-4 * cs[c]);  // fp32 sums of values near 100
    EXPECT_NEAR(s.running_mean, crm[c], 1e-5 * 10);
    EXPECT_NEAR(s.running_var, crv[c], 1e-4 * crv[c]);
    double dg = 0, db = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < inner; ++k) {
        db += dy[at(n, c, k)];
        dg += dy[at(n, c, k)] * (x[at(n, c, k)] - cm[c]) * cs[c];
      }
    EXPECT_NEAR(dg, cdg[c], 1e-4 * std::max(1.0, std::fabs(dg)));
    EXPECT_NEAR(db, cdb[c], 1e-5 * std::max(1.0, std::fabs(db)));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < inner; ++k) {
        const size_t i = at(n, c, k);
        EXPECT_NEAR(kernel::bn_normalize(x[i], cm[c], cs[c], gamma[c], beta[c]), y[i], 1e-4)
            << "y " << i;
        EXPECT_NEAR(kernel::bn_normalize_running(x[i], crm[c], crv[c], gamma[c], beta[c], eps),
                    cyi[i], 1e-5 * std::max(1.f, std::fabs(cyi[i])))
            << "inference y " << i;
        EXPECT_NEAR(kernel::bn_dx(dy[i], x[i], cm[c], cs[c], gamma[c], cdg[c], cdb[c],
                                  1.f / static_cast<float>(M)),
                    dx[i], 1e-4 * std::max(1.f, std::fabs(dx[i])))
            << "dx " << i;
      }
  }
}

}  // namespace
}  // namespace tandem::testing
