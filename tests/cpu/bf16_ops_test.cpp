// Every op on 16-bit (bf16 and fp16, images channels-last) tensors against the double reference,
// on each backend that computes in that type (the CPU: bf16 only; its refusal of fp16 is tested).
//
// Inputs are rounded to the 16-bit type on the host first and the reference is fed those rounded
// values, so what is measured is the op's own arithmetic: products of two 16-bit values are exact
// in fp32, the accumulation is fp32, and a 16-bit output is rounded once. With p the type's
// significant bits (bf16 8, fp16 11: 7 and 10 stored, plus the implicit one) a rounding to nearest
// is off by at most half an ulp, 2^-p of the value. The tolerance, relative to the largest
// reference value (relative_error's scale), is therefore
//   16-bit output: 2^-p (bf16 2^-8, fp16 2^-11)
//   + L * 2^-23   (L fp32 additions of a reduction of length L, each off by at most 2^-24 of the
//                 running sum, with a factor 2 margin),
// with L the reduction length of the op (C*R*S for a convolution's output, N*P*Q for its weight
// gradient, K for a matrix product). fp32 outputs (weight gradients) drop the first term to 2^-16.
#include <bit>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cpu/bf16.h"
#include "tests/cpu/backend_test_util.h"
#include "tests/reference/reference.h"

namespace tandem::testing {
namespace {

// An fp16 value's bits as fp32, and fp32 rounded to fp16 (to nearest, ties to even): the
// compiler's IEEE half type, _Float16 (GCC 12 and Clang on x86-64).
float fp16_to_f32(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
float fp16_round(float f) { return static_cast<float>(static_cast<_Float16>(f)); }

// The suite's parameter: "<backend>_<dtype>", e.g. "gpu_fp16".
std::pair<std::string, DType> backend_and_dtype(const std::string& param) {
  const size_t cut = param.find('_');
  return {param.substr(0, cut), param.substr(cut + 1) == "fp16" ? DType::kF16 : DType::kBF16};
}

class Ops16Test : public BackendTest {
 protected:
  void SetUp() override {
    const auto [backend, dtype] = backend_and_dtype(GetParam());
    backend_name_ = backend;
    dtype_ = dtype;
    // "gpuconvfp32": the GPU with every 16-bit convolution pass on the path of a shape cuDNN has
    // no 16-bit algorithm for (fp32 on converted copies), forced so that any GPU checks it.
    BackendOptions options;
    options.conv16_in_fp32 = backend == "gpuconvfp32";
    start(options.conv16_in_fp32 ? "gpu" : backend, options);
    if (IsSkipped()) return;
    std::string why;
    if (!be().supports_dtype(dtype_, &why))
      GTEST_SKIP() << "no " << dtype_name(dtype_) << " on " << backend << ": " << why;
  }
  bool on_cpu() const { return backend_name_ == "cpu"; }
  bool conv_in_fp32() const { return backend_name_ == "gpuconvfp32"; }
  // The significant bits of the 16-bit type (bf16 8, fp16 11).
  int bits() const { return dtype_ == DType::kF16 ? 11 : 8; }
  // The bound of the file's top comment: 2^-p for a 16-bit output (2^-16 for an fp32 one), plus
  // the fp32 accumulation over `reduction` values.
  double tolerance(int64_t reduction, bool low_output = true) const {
    return (low_output ? std::ldexp(1.0, -bits()) : std::ldexp(1.0, -16)) +
           static_cast<double>(reduction) * std::ldexp(1.0, -23);
  }
  float round16(float x) const {
    return dtype_ == DType::kF16 ? fp16_round(x) : bf16_to_f32(f32_to_bf16(x));
  }
  Floats rounded(Floats v) const {
    for (float& x : v) x = round16(x);
    return v;
  }
  // A 16-bit tensor holding `host` (rounded), 4-D ones channels-last as a 16-bit run keeps them.
  Tensor upload16(const Shape& s, const Floats& host) {
    Tensor f = upload(s, host);
    Tensor t(be(), s, dtype_, s.rank() == 4 ? Layout::kChannelsLast : Layout::kPlain);
    be().copy(t, f);
    return t;
  }
  Tensor output16(const Shape& s) {
    Tensor t(be(), s, dtype_, s.rank() == 4 ? Layout::kChannelsLast : Layout::kPlain);
    be().fill(t, NAN);
    return t;
  }
  // The values of any tensor in logical order, as fp32.
  Floats values(const Tensor& t) {
    Tensor f(be(), t.shape());
    be().copy(f, t);
    return download(f);
  }

  std::string backend_name_;
  DType dtype_ = DType::kBF16;
};

// Round to nearest, ties to even, on values chosen to sit exactly on and beside the ties; and a
// channels-last tensor keeps (N,C,H,W) as its logical order while storing (N,H,W,C).
TEST_P(Ops16Test, ConversionRoundsToNearestEvenAndKeepsTheLogicalOrder) {
  const float one_ulp = std::ldexp(1.f, 1 - bits());  // the ulp at 1: bf16 2^-7, fp16 2^-10
  const Floats x = {1.f + one_ulp / 2,                // a tie: down to the even 1
                    1.f + 3 * one_ulp / 2,            // a tie: up to the even 1 + 2 ulp
                    1.f + one_ulp / 2 + 1e-6f,        // past the tie: up
                    -2.f - one_ulp,                   // a tie at 2 (whose ulp is 2 one_ulp): to -2
                    INFINITY,
                    3.f};
  Tensor t = upload16({1, 6, 1, 1}, x);
  const Floats back = values(t);
  EXPECT_EQ(back[0], 1.f);
  EXPECT_EQ(back[1], 1.f + 2 * one_ulp);
  EXPECT_EQ(back[2], 1.f + one_ulp);
  EXPECT_EQ(back[3], -2.f);
  EXPECT_EQ(back[4], INFINITY);
  EXPECT_EQ(back[5], 3.f);

  // (1,2,2,3) with value = its NCHW index: stored as (1,2,3,2), channel fastest.
  Floats seq(12);
  for (int i = 0; i < 12; ++i) seq[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor cl = upload16({1, 2, 2, 3}, seq);
  std::vector<uint16_t> raw(12);
  be().download(raw.data(), cl);
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 3; ++w)
      for (int c = 0; c < 2; ++c) {
        const uint16_t bits16 = raw[static_cast<size_t>((h * 3 + w) * 2 + c)];
        EXPECT_EQ(dtype_ == DType::kF16 ? fp16_to_f32(bits16) : bf16_to_f32(bits16),
                  static_cast<float>((c * 2 + h) * 3 + w));
      }
  // A flatten of it (plain (1, 12)) reads the NCHW order, as an fp32 model's flatten does.
  Tensor flat(be(), Shape{1, 12}, dtype_);
  be().copy(flat, cl);
  EXPECT_EQ(values(flat), seq);
}

struct ConvCase {
  std::string name;
  reference::ConvShape s;
  Conv2dParams p;
};

Conv2dParams params(int stride, int pad, int groups = 1) {
  Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.groups = groups;
  return p;
}

std::vector<ConvCase> conv_cases() {
  return {{"cifar_3x3_pad1", {4, 32, 8, 8, 32, 3, 3}, params(1, 1)},
          {"lenet_conv2", {3, 20, 12, 12, 50, 5, 5}, params(1, 0)},
          {"channel_tails_stride2", {2, 17, 9, 7, 33, 3, 3}, params(2, 1)},
          {"1x1", {2, 16, 5, 5, 8, 1, 1}, params(1, 0)},
          {"grouped_g4", {2, 16, 8, 8, 32, 3, 3}, params(1, 1, 4)},
          {"depthwise_stride2", {2, 32, 9, 9, 32, 3, 3}, params(2, 1, 32)},
          // EfficientNet's 5x5 depthwise, 20 channels (a 16-channel run and a tail of 4): on the
          // CPU its weight gradient is tandem's loop, oneDNN having no depthwise kernel for it.
          {"depthwise_5x5_tail", {3, 20, 7, 6, 20, 5, 5}, params(1, 2, 20)}};
}

// With a bias: the CPU adds it inside the convolution (one rounding); the GPU adds it to cuDNN's
// 16-bit output (as PyTorch's cuDNN convolutions do), a second rounding of 2^-p.
TEST_P(Ops16Test, ConvolutionForwardMatchesReference) {
  const double bias_rounding = on_cpu() ? 0.0 : std::ldexp(1.0, -bits());
  uint32_t seed = 10;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const auto& s = c.s;
    const Floats x = rounded(random(s.n * s.c * s.h * s.w, seed++));
    const int64_t cg = s.c / c.p.groups;
    const Floats w = random(s.k * cg * s.r * s.s, seed++), b = random(s.k, seed++);
    Tensor tw = upload({s.k, cg, s.r, s.s}, w), tb = upload({s.k}, b);  // fp32 master weights
    Tensor y = output16({s.n, s.k, s.p(c.p), s.q(c.p)});
    be().conv2d_forward(y, upload16({s.n, s.c, s.h, s.w}, x), tw, &tb, c.p);
    EXPECT_LT(relative_error(values(y), reference::conv2d_forward(x, rounded(w), b, s, c.p)),
              tolerance(cg * s.r * s.s) + bias_rounding);
  }
  if (conv_in_fp32()) {  // --log-placement names the fallback of every 16-bit shape
    const std::string form = std::string(" ") + dtype_name(dtype_) + " nhwc";
    int shapes = 0;
    for (const std::string& line : be().placement_log()) {
      if (line.rfind("conv2d", 0) != 0 || line.find(form) == std::string::npos) continue;
      ++shapes;
      EXPECT_NE(line.find(" fwd in fp32 (no " + std::string(dtype_name(dtype_)) + " algorithm)"),
                std::string::npos)
          << line;
    }
    EXPECT_GT(shapes, 0);
  }
}

// The model's first convolution reads the fp32 input and writes 16 bits. Both backends compute it
// in fp32 (cpu/conv.cpp: oneDNN has no fast 16-bit kernel for 1 or 3 channels; cuda/conv.cu:
// nor has cuDNN) and round the output once.
TEST_P(Ops16Test, ConvolutionOfAnFp32InputWrites16Bits) {
  const reference::ConvShape s{2, 3, 10, 10, 16, 3, 3};
  const Conv2dParams p = params(1, 1);
  const Floats x = random(s.n * s.c * s.h * s.w, 3), w = random(s.k * s.c * s.r * s.s, 4);
  Tensor y = output16({s.n, s.k, s.p(p), s.q(p)});
  be().conv2d_forward(y, upload({s.n, s.c, s.h, s.w}, x), upload({s.k, s.c, s.r, s.s}, w), nullptr,
                      p);
  EXPECT_LT(relative_error(values(y), reference::conv2d_forward(x, w, {}, s, p)),
            tolerance(s.c * s.r * s.s));
  // Its weight gradient, from the fp32 input and a 16-bit dy, is fp32 throughout: no 16-bit
  // rounding of dw on either backend.
  const Floats dy = rounded(random(s.n * s.k * s.p(p) * s.q(p), 5));
  Tensor dw = output({s.k, s.c, s.r, s.s});
  be().conv2d_backward_filter(dw, upload16({s.n, s.k, s.p(p), s.q(p)}, dy),
                              upload({s.n, s.c, s.h, s.w}, x), p);
  EXPECT_LT(relative_error(download(dw), reference::conv2d_backward_filter(dy, x, s, p)),
            tolerance(s.n * s.p(p) * s.q(p), /*low_output=*/false));
}

TEST_P(Ops16Test, ConvolutionBackwardDataMatchesReference) {
  uint32_t seed = 20;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const auto& s = c.s;
    const int64_t P = s.p(c.p), Q = s.q(c.p);
    const Floats dy = rounded(random(s.n * s.k * P * Q, seed++));
    const int64_t cg = s.c / c.p.groups;
    const Floats w = random(s.k * cg * s.r * s.s, seed++);
    Tensor dx = output16({s.n, s.c, s.h, s.w});
    be().conv2d_backward_data(dx, upload16({s.n, s.k, P, Q}, dy), upload({s.k, cg, s.r, s.s}, w),
                              c.p);
    EXPECT_LT(relative_error(values(dx), reference::conv2d_backward_data(dy, rounded(w), s, c.p)),
              tolerance(s.k / c.p.groups * s.r * s.s));
  }
}

// The weight gradient is fp32 (the optimizer's). The CPU writes it in fp32 directly; the GPU's
// cuDNN computes it in the 16-bit type of x and dy (fp32 accumulation) and converts it, so it is
// rounded to 16 bits once, as autocast's is: the 16-bit output tolerance there. That assumes the
// algorithm sums each weight in fp32 and rounds it once; a split-K algorithm that added its parts
// into the 16-bit output would round once per part and could exceed it, which is why the GPU
// tries the deterministic (single-pass) candidates first for 16-bit weight gradients
// (conv_candidate_order). Forced to fp32 (gpuconvfp32), dw is not rounded at all.
TEST_P(Ops16Test, ConvolutionWeightGradientIsFp32AndMatchesReference) {
  uint32_t seed = 30;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const auto& s = c.s;
    const int64_t P = s.p(c.p), Q = s.q(c.p);
    const Floats dy = rounded(random(s.n * s.k * P * Q, seed++));
    const Floats x = rounded(random(s.n * s.c * s.h * s.w, seed++));
    Tensor dw = output({s.k, s.c / c.p.groups, s.r, s.s});  // fp32: it goes to the fp32 optimizer
    be().conv2d_backward_filter(dw, upload16({s.n, s.k, P, Q}, dy),
                                upload16({s.n, s.c, s.h, s.w}, x), c.p);
    EXPECT_LT(relative_error(download(dw), reference::conv2d_backward_filter(dy, x, s, c.p)),
              tolerance(s.n * P * Q, /*low_output=*/!on_cpu() && !conv_in_fp32()));
  }
}

// A dense layer: 16-bit activations, fp32 weights; forward, both gradients, and the logits (fp32).
TEST_P(Ops16Test, MatrixProductsOfADenseLayerMatchReference) {
  const int64_t N = 6, F = 37, U = 19;
  const Floats x = rounded(random(N * F, 40)), w = random(U * F, 41);
  const Floats dy = rounded(random(N * U, 42));
  Tensor tx = upload16({N, F}, x), tw = upload({U, F}, w), tdy = upload16({N, U}, dy);
  Tensor y = output16({N, U});
  be().gemm(y, tx, tw, false, true, 1.f, 0.f);  // y = x W^T
  EXPECT_LT(
      relative_error(values(y), reference::gemm({}, x, rounded(w), N, U, F, false, true, 1, 0)),
      tolerance(F));
  Tensor logits = output({N, U});
  be().gemm(logits, tx, tw, false, true, 1.f, 0.f);
  EXPECT_LT(relative_error(download(logits),
                           reference::gemm({}, x, rounded(w), N, U, F, false, true, 1, 0)),
            tolerance(F, false));
  Tensor dw = output({U, F});
  be().gemm(dw, tdy, tx, true, false, 1.f, 0.f);  // dW = dy^T x, fp32
  EXPECT_LT(relative_error(download(dw), reference::gemm({}, dy, x, U, F, N, true, false, 1, 0)),
            tolerance(N, false));
  // dx = dy W from the fp32 logits' gradient: both operands rounded to 16 bits first.
  const Floats dlogits = random(N * U, 43);
  Tensor dx = output16({N, F});
  be().gemm(dx, upload({N, U}, dlogits), tw, false, false, 1.f, 0.f);
  EXPECT_LT(relative_error(values(dx), reference::gemm({}, rounded(dlogits), rounded(w), N, F, U,
                                                       false, false, 1, 0)),
            tolerance(U));
}

// Elementwise: no reduction, so the bound is the output's rounding alone.
TEST_P(Ops16Test, ActivationsMatchReference) {
  const Shape s{2, 5, 3, 4};
  const Floats x = rounded(random(s.numel(), 50, -3.f, 3.f)), dy = rounded(random(s.numel(), 51));
  for (Activation a : kActivations) {
    SCOPED_TRACE(static_cast<int>(a));
    Tensor tx = upload16(s, x), y = output16(s), dx = output16(s);
    be().activation_forward(y, tx, a, 0.1f);
    EXPECT_LT(relative_error(values(y), reference::activation_forward(x, a, 0.1)), tolerance(0));
    // sigmoid and tanh take their gradient from y, itself rounded: one more rounding of 2^-p.
    be().activation_backward(dx, upload16(s, dy), tx, y, a, 0.1f);
    EXPECT_LT(relative_error(values(dx), reference::activation_backward(dy, x, a, 0.1)),
              tolerance(0) + std::ldexp(1.0, -bits()));
  }
}

// A 16-bit (channels-last) input times a 16-bit gate (N,C,1,1): each product rounded once; the
// gate's gradient sums over the positions (a sum of H*W products).
TEST_P(Ops16Test, MultiplyByAGateMatchesReference) {
  const Shape s{2, 6, 5, 3}, g{2, 6, 1, 1};
  const Floats a = rounded(random(s.numel(), 70)), b = rounded(random(g.numel(), 71));
  const Floats dy = rounded(random(s.numel(), 72));
  Tensor ta = upload16(s, a), tb = upload16(g, b), y = output16(s);
  be().multiply(y, ta, tb);
  EXPECT_LT(relative_error(values(y), reference::multiply(a, b, 15)), tolerance(0));
  Tensor da = output16(s), db = output16(g);
  be().multiply_backward(&da, &db, upload16(s, dy), ta, tb);
  EXPECT_LT(relative_error(values(da), reference::multiply(dy, b, 15)), tolerance(0));
  EXPECT_LT(relative_error(values(db), reference::multiply_backward_b(dy, a, 15)), tolerance(15));
  // drop_path's fp32 scale per sample (0: the sample's branch dropped) and its backward.
  const Floats scale{0.f, 1.25f};
  Tensor ts = upload({2}, scale), ys = output16(s), das = output16(s);
  be().multiply(ys, ta, ts);
  EXPECT_LT(relative_error(values(ys), reference::multiply(a, scale, 90)), tolerance(0));
  be().multiply_backward(&das, nullptr, upload16(s, dy), ta, ts);
  EXPECT_LT(relative_error(values(das), reference::multiply(dy, scale, 90)), tolerance(0));
}

TEST_P(Ops16Test, ReluPassesNaNOn) {
  Tensor x = upload16({1, 4, 1, 1}, {NAN, -1.f, 2.f, 0.f}), y = output16({1, 4, 1, 1});
  be().activation_forward(y, x, Activation::kRelu, 0.f);
  const Floats v = values(y);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 0.f);
  EXPECT_EQ(v[2], 2.f);
  EXPECT_EQ(be().count_nonfinite(y), 1);
}

TEST_P(Ops16Test, MaxPoolingMatchesReferenceAndRoutesToTheFirstMaximum) {
  Pool2dParams two;  // 2x2 stride 2
  Pool2dParams overlapping;
  overlapping.kernel_h = overlapping.kernel_w = 3;
  overlapping.stride_h = overlapping.stride_w = 2;
  overlapping.pad_h = overlapping.pad_w = 1;
  for (const Pool2dParams& p : {two, overlapping}) {
    const int64_t N = 2, C = 19, H = 7, W = 6;
    const Shape xs{N, C, H, W};
    const Shape ys{N, C, conv_out_size(H, p.kernel_h, p.stride_h, p.pad_h),
                   conv_out_size(W, p.kernel_w, p.stride_w, p.pad_w)};
    // Values on a coarse grid, so that windows hold ties: the first maximum takes the gradient.
    Floats x = random(xs.numel(), 60);
    for (float& v : x) v = std::round(v * 4) / 4;
    const Floats dy = rounded(random(ys.numel(), 61));
    Tensor tx = upload16(xs, x), y = output16(ys), dx = output16(xs);
    be().pool2d_forward(y, tx, p);
    EXPECT_EQ(relative_error(values(y), reference::pool2d_forward(x, N, C, H, W, p)), 0.0);
    be().pool2d_backward(dx, upload16(ys, dy), tx, y, p);
    // Overlapping windows add up to 4 gradients in fp32, then round once.
    EXPECT_LT(relative_error(values(dx), reference::pool2d_backward(dy, x, N, C, H, W, p)),
              tolerance(4));
  }
}

TEST_P(Ops16Test, AveragePoolingComputesInFp32) {
  Pool2dParams p;
  p.mode = PoolMode::kAverage;
  p.kernel_h = p.kernel_w = 3;
  p.stride_h = p.stride_w = 1;
  p.pad_h = p.pad_w = 1;
  const int64_t N = 2, C = 3, H = 5, W = 4;
  const Floats x = rounded(random(N * C * H * W, 62)), dy = rounded(random(N * C * H * W, 63));
  Tensor tx = upload16({N, C, H, W}, x), y = output16({N, C, H, W}), dx = output16({N, C, H, W});
  be().pool2d_forward(y, tx, p);
  EXPECT_LT(relative_error(values(y), reference::pool2d_forward(x, N, C, H, W, p)), tolerance(9));
  be().pool2d_backward(dx, upload16({N, C, H, W}, dy), tx, y, p);
  EXPECT_LT(relative_error(values(dx), reference::pool2d_backward(dy, x, N, C, H, W, p)),
            tolerance(9));
  // One window over the whole image (squeeze-and-excitation's squeeze): the CPU's own loop.
  Pool2dParams global = p;
  global.kernel_h = H, global.kernel_w = W;
  global.pad_h = global.pad_w = 0;
  Tensor g = output16({N, C, 1, 1});
  be().pool2d_forward(g, tx, global);
  EXPECT_LT(relative_error(values(g), reference::pool2d_forward(x, N, C, H, W, global)),
            tolerance(H * W));
  const Floats dg = rounded(random(N * C, 64));
  be().pool2d_backward(dx, upload16({N, C, 1, 1}, dg), tx, g, global);
  EXPECT_LT(relative_error(values(dx), reference::pool2d_backward(dg, x, N, C, H, W, global)),
            tolerance(H * W));
}

// bias_add adds an fp32 bias to 16 bits (one rounding); bias_backward sums N*H*W values into fp32.
TEST_P(Ops16Test, BiasAndItsGradientMatchReference) {
  const int64_t N = 3, C = 21, H = 5, W = 7;
  const Floats y = rounded(random(N * C * H * W, 70)), b = random(C, 71);
  Tensor ty = upload16({N, C, H, W}, y);
  be().bias_add(ty, upload({C}, b));
  EXPECT_LT(relative_error(values(ty), reference::bias_add(y, b, N, C, H * W)), tolerance(0));
  Tensor db = output({C});
  be().bias_backward(db, upload16({N, C, H, W}, y));
  EXPECT_LT(relative_error(download(db), reference::bias_backward(y, N, C, H * W)),
            tolerance(N * H * W, false));
  Tensor flat = upload16({N, C}, rounded(random(N * C, 72)));  // a dense layer's
  Tensor db2 = output({C});
  be().bias_backward(db2, flat);
  EXPECT_LT(relative_error(download(db2), reference::bias_backward(values(flat), N, C, 1)),
            tolerance(N, false));
}

TEST_P(Ops16Test, AddMatchesReference) {
  const Shape s{2, 6, 3, 3};
  const Floats a = rounded(random(s.numel(), 80)), b = rounded(random(s.numel(), 81));
  Tensor y = output16(s);
  be().add(y, upload16(s, a), upload16(s, b));
  EXPECT_LT(relative_error(values(y), reference::add(a, b)), tolerance(1));
}

// Batch normalization computes its statistics in fp32, on an fp32 copy of the 16-bit input.
TEST_P(Ops16Test, BatchNormalizationMatchesReference) {
  const int64_t N = 4, C = 5, H = 3, W = 3;
  const Floats x = rounded(random(N * C * H * W, 90, 1.f, 3.f));
  const Floats gamma = random(C, 91), beta = random(C, 92);
  Tensor y = output16({N, C, H, W});
  Tensor mean = output({C}), inv_std = output({C}), rm = upload({C}, Floats(C, 0.f)),
         rv = upload({C}, Floats(C, 1.f));
  be().batchnorm_forward_training(y, mean, inv_std, rm, rv, upload16({N, C, H, W}, x),
                                  upload({C}, gamma), upload({C}, beta), 0.1f, 1e-5f);
  const reference::BatchNorm r = reference::batchnorm_training(x, gamma, beta, N, C, H * W, 1e-5);
  EXPECT_LT(relative_error(values(y), r.y), tolerance(N * H * W));
  EXPECT_LT(relative_error(download(mean), r.mean), tolerance(N * H * W, false));
  Doubles running_var(static_cast<size_t>(C));  // 0.9 * 1 + 0.1 * the unbiased variance
  for (size_t c = 0; c < running_var.size(); ++c)
    running_var[c] = 0.9 + 0.1 * r.var[c] * (N * H * W) / (N * H * W - 1.0);
  EXPECT_LT(relative_error(download(rv), running_var), tolerance(N * H * W, false));

  // The backward against the fp32 kernel's on the same (rounded) values: sums over N*H*W.
  const Floats dy = rounded(random(N * C * H * W, 93));
  Tensor dx = output16({N, C, H, W}), dgamma = output({C}), dbeta = output({C});
  Tensor tgamma = upload({C}, gamma);
  be().batchnorm_backward(&dx, dgamma, dbeta, upload16({N, C, H, W}, dy), upload16({N, C, H, W}, x),
                          tgamma, mean, inv_std);
  Tensor dx32 = output({N, C, H, W}), dgamma32 = output({C}), dbeta32 = output({C});
  be().batchnorm_backward(&dx32, dgamma32, dbeta32, upload({N, C, H, W}, dy),
                          upload({N, C, H, W}, x), tgamma, mean, inv_std);
  auto as_doubles = [](const Floats& f) { return Doubles(f.begin(), f.end()); };
  EXPECT_LT(relative_error(values(dx), as_doubles(download(dx32))), tolerance(N * H * W));
  EXPECT_LT(relative_error(download(dgamma), as_doubles(download(dgamma32))),
            tolerance(N * H * W, false));
  EXPECT_LT(relative_error(download(dbeta), as_doubles(download(dbeta32))),
            tolerance(N * H * W, false));
  // Inference with the running statistics.
  Tensor yi = output16({N, C, H, W});
  be().batchnorm_forward_inference(yi, upload16({N, C, H, W}, x), tgamma, upload({C}, beta), rm, rv,
                                   1e-5f);
  Floats rmh = download(rm), rvh = download(rv);
  EXPECT_LT(relative_error(values(yi), reference::batchnorm_inference(x, gamma, beta, rmh, rvh, N,
                                                                      C, H * W, 1e-5)),
            tolerance(1));
}

// Dropout keeps the fp32 mask of the logical index: the same mask as an fp32 run's.
TEST_P(Ops16Test, DropoutUsesTheMaskOfTheLogicalIndex) {
  const Shape s{2, 4, 3, 5};
  const Floats x = rounded(random(s.numel(), 95));
  Tensor y = output16(s), mask = output(s);
  be().dropout_forward(y, mask, upload16(s, x), 0.3f, 7, 11);
  const Doubles m = reference::dropout_mask(s.numel(), 0.3, 7, 11);
  EXPECT_LT(relative_error(download(mask), m), 1e-7);  // 1/(1-p) rounded to fp32
  Doubles expect(x.size());
  for (size_t i = 0; i < x.size(); ++i) expect[i] = x[i] * m[i];
  EXPECT_LT(relative_error(values(y), expect), tolerance(0));
}

// Concatenation along channels of channels-last tensors (copy_columns of the logical rows).
TEST_P(Ops16Test, ChannelConcatenationKeepsTheLogicalOrder) {
  const Floats a = rounded(random(2 * 3 * 2 * 2, 96)), b = rounded(random(2 * 5 * 2 * 2, 97));
  Tensor y = output16({2, 8, 2, 2});
  be().copy_columns(y, 0, upload16({2, 3, 2, 2}, a), 0, 12);
  be().copy_columns(y, 12, upload16({2, 5, 2, 2}, b), 0, 20);
  const Floats v = values(y);
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 12; ++i)
      EXPECT_EQ(v[static_cast<size_t>(n * 32 + i)], a[static_cast<size_t>(n * 12 + i)]);
    for (int i = 0; i < 20; ++i)
      EXPECT_EQ(v[static_cast<size_t>(n * 32 + 12 + i)], b[static_cast<size_t>(n * 20 + i)]);
  }
}

// Every pair a backend can compute in: bf16 on both, fp16 on the GPU. A pair the machine cannot
// run skips with the reason (bf16 on a CPU without AVX512-BF16, a GPU older than the type). The
// CPU never computes in fp16 (precision: fp16 is a GPU precision): that is asserted below, not
// instantiated to skip.
INSTANTIATE_TEST_SUITE_P(Backends, Ops16Test,
                         ::testing::Values("cpu_bf16", "gpu_bf16", "gpu_fp16", "gpuconvfp32_bf16",
                                           "gpuconvfp32_fp16"),
                         backend_param_name);

TEST(Ops16Support, TheCpuRefusesFp16AndNamesBf16Instead) {
  auto cpu = create_backend("cpu", {});
  std::string why;
  EXPECT_FALSE(cpu->supports_dtype(DType::kF16, &why));
  EXPECT_NE(why.find("fp16 is a GPU precision (use bf16)"), std::string::npos) << why;
  EXPECT_TRUE(cpu->supports_dtype(DType::kF32, nullptr));
}

}  // namespace
}  // namespace tandem::testing
