// fp32 activations in oneDNN's blocked order (nChw8c, nChw16c) on the CPU: every op that runs on
// them as they are gives what it gives on plain tensors (a whole model's steps:
// tests/engine/blocked_layout_training_test.cpp).
//
// Exact where the op computes the same sums in the same order (activations, add, pooling, the
// conversions); within 1e-5 of the largest value where the order of fp32 additions differs
// (convolution kernels for another layout, the per-sample sums of normalization and of the bias
// and scale gradients, which are added in double across samples either way).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/cpu/backend_test_util.h"

namespace tandem::testing {
namespace {

// Largest |a - b| over the largest |b| (1 if b is all zeros).
double relative_gap(const Floats& a, const Floats& b) {
  EXPECT_EQ(a.size(), b.size());
  double gap = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    if (std::isnan(b[i])) continue;
    gap = std::max(gap, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return gap / (scale > 0 ? scale : 1);
}

void expect_same_bits(const Floats& a, const Floats& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i])) {
      EXPECT_TRUE(std::isnan(a[i])) << what << " at " << i;
      continue;
    }
    ASSERT_EQ(a[i], b[i]) << what << " at " << i;
  }
}

// The suite's parameter: the blocked layout under test. Both run on any CPU: oneDNN takes either
// order as given (its kernels for the other vector width, or its reference ones, for a few
// small shapes).
class BlockedLayout : public BackendTest {
 protected:
  void SetUp() override {
    start("cpu");
    layout_ = GetParam() == "nChw8c" ? Layout::kBlocked8 : Layout::kBlocked16;
  }
  // A blocked copy of plain tensor t.
  Tensor blocked(const Tensor& t) {
    Tensor b(be(), t.shape(), DType::kF32, layout_);
    be().copy(b, t);
    return b;
  }
  Tensor blocked_output(const Shape& s) {
    Tensor b(be(), s, DType::kF32, layout_);
    be().fill(b, NAN);
    return b;
  }
  // A blocked tensor's values in the logical (plain) order.
  Floats plain_values(const Tensor& t) {
    Tensor p(be(), t.shape());
    be().copy(p, t);
    return download(p);
  }
  Layout layout_ = Layout::kBlocked16;
};

TEST_P(BlockedLayout, ConversionsKeepTheLogicalOrder) {
  const Shape s{3, 32, 5, 7};
  const Floats v = random(s.numel(), 1);
  Tensor b = blocked(upload(s, v));
  expect_same_bits(plain_values(b), v, "round trip");
  // The memory really is blocked: element (n=0, c=1, h=0, w=0) is the second value stored.
  const Floats raw = download(b);
  EXPECT_EQ(raw[1], v[static_cast<size_t>(1 * 5 * 7)]);
  EXPECT_EQ(raw[static_cast<size_t>(channel_block(layout_))], v[1]);
}

TEST_P(BlockedLayout, ElementwiseOpsMatchThePlainOnes) {
  const Shape s{3, 16, 7, 9};
  Tensor x = upload(s, random(s.numel(), 2)), z = upload(s, random(s.numel(), 3));
  Tensor xb = blocked(x), zb = blocked(z);
  for (Activation a : {Activation::kRelu, Activation::kSilu, Activation::kRelu6}) {
    Tensor y = output(s), yb = blocked_output(s), dx = output(s), dxb = blocked_output(s);
    be().activation_forward(y, x, a, 0.f);
    be().activation_forward(yb, xb, a, 0.f);
    expect_same_bits(plain_values(yb), download(y), "activation forward");
    be().activation_backward(dx, z, x, y, a, 0.f);
    be().activation_backward(dxb, zb, xb, yb, a, 0.f);
    expect_same_bits(plain_values(dxb), download(dx), "activation backward");
  }
  Tensor sum = output(s), sumb = blocked_output(s);
  be().add(sum, x, z);
  be().add(sumb, xb, zb);
  expect_same_bits(plain_values(sumb), download(sum), "add");
}

// drop_path's per-sample scale and squeeze-and-excitation's per-channel gate.
TEST_P(BlockedLayout, MultiplyMatchesThePlainOne) {
  const Shape s{3, 32, 5, 6};
  Tensor a = upload(s, random(s.numel(), 4)), dy = upload(s, random(s.numel(), 5));
  Tensor ab = blocked(a), dyb = blocked(dy);
  for (const Shape& gs : {Shape{3, 1, 1, 1}, Shape{3, 32, 1, 1}}) {
    Tensor g = upload(gs, random(gs.numel(), 6));
    Tensor y = output(s), yb = blocked_output(s);
    be().multiply(y, a, g);
    be().multiply(yb, ab, g);
    expect_same_bits(plain_values(yb), download(y), "multiply");
    Tensor da = output(s), dab = blocked_output(s), dg = output(gs), dgb = output(gs);
    be().multiply_backward(&da, &dg, dy, a, g);
    be().multiply_backward(&dab, &dgb, dyb, ab, g);
    expect_same_bits(plain_values(dab), download(da), "multiply backward: da");
    EXPECT_LE(relative_gap(download(dgb), download(dg)), 1e-6) << gs.str();
  }
}

TEST_P(BlockedLayout, ConvolutionsMatchThePlainOnes) {
  struct Case {
    Shape x, w;
    Conv2dParams p;
  };
  Conv2dParams s1, s2, dw5;
  s1.pad_h = s1.pad_w = 1;
  s2.pad_h = s2.pad_w = 1;
  s2.stride_h = s2.stride_w = 2;
  dw5.pad_h = dw5.pad_w = 2;
  dw5.groups = 16;  // 5x5 depthwise: the weight gradient runs tandem's loop on plain stand-ins
  for (const Case& c :
       {Case{{3, 16, 7, 9}, {32, 16, 3, 3}, s1}, Case{{3, 32, 8, 7}, {16, 32, 3, 3}, s2},
        Case{{3, 16, 6, 6}, {16, 1, 5, 5}, dw5}}) {
    const Shape y_shape{c.x[0], c.w[0], conv_out_size(c.x[2], c.w[2], c.p.stride_h, c.p.pad_h, 1),
                        conv_out_size(c.x[3], c.w[3], c.p.stride_w, c.p.pad_w, 1)};
    Tensor x = upload(c.x, random(c.x.numel(), 7)), w = upload(c.w, random(c.w.numel(), 8));
    Tensor bias = upload({c.w[0]}, random(c.w[0], 9));
    Tensor dy = upload(y_shape, random(y_shape.numel(), 10));
    Tensor xb = blocked(x), dyb = blocked(dy);
    Tensor y = output(y_shape), yb = blocked_output(y_shape);
    be().conv2d_forward(y, x, w, &bias, c.p);
    be().conv2d_forward(yb, xb, w, &bias, c.p);
    EXPECT_LE(relative_gap(plain_values(yb), download(y)), 1e-5) << c.x.str() << " forward";
    Tensor dx = output(c.x), dxb = blocked_output(c.x);
    be().conv2d_backward_data(dx, dy, w, c.p);
    be().conv2d_backward_data(dxb, dyb, w, c.p);
    EXPECT_LE(relative_gap(plain_values(dxb), download(dx)), 1e-5) << c.x.str() << " data";
    Tensor dw = output(c.w), dwb = output(c.w);
    be().conv2d_backward_filter(dw, dy, x, c.p);
    be().conv2d_backward_filter(dwb, dyb, xb, c.p);
    if (c.p.groups > 1)  // tandem's depthwise loop: the plain loop's sums in its order
      expect_same_bits(download(dwb), download(dw), "depthwise filter");
    else
      EXPECT_LE(relative_gap(download(dwb), download(dw)), 1e-5) << c.x.str() << " filter";
    Tensor db = output({c.w[0]}), dbb = output({c.w[0]});
    be().bias_backward(db, dy);
    be().bias_backward(dbb, dyb);
    EXPECT_LE(relative_gap(download(dbb), download(db)), 1e-6) << c.x.str() << " bias";
  }
}

TEST_P(BlockedLayout, BatchNormalizationMatchesThePlainOne) {
  const Shape s{4, 32, 5, 7};
  const Shape c{32};
  Tensor x = upload(s, random(s.numel(), 11, -2.f, 3.f)), dy = upload(s, random(s.numel(), 12));
  Tensor gamma = upload(c, random(32, 13, 0.5f, 1.5f)), beta = upload(c, random(32, 14));
  Tensor xb = blocked(x), dyb = blocked(dy);
  auto stats = [&] { return upload(c, Floats(32, 0.5f)); };
  Tensor mean = output(c), inv = output(c), rm = stats(), rv = stats();
  Tensor meanb = output(c), invb = output(c), rmb = stats(), rvb = stats();
  Tensor y = output(s), yb = blocked_output(s);
  be().batchnorm_forward_training(y, mean, inv, rm, rv, x, gamma, beta, 0.1f, 1e-5f);
  be().batchnorm_forward_training(yb, meanb, invb, rmb, rvb, xb, gamma, beta, 0.1f, 1e-5f);
  EXPECT_LE(relative_gap(plain_values(yb), download(y)), 1e-5);
  for (auto [b, p] : {std::pair{&meanb, &mean}, {&invb, &inv}, {&rmb, &rm}, {&rvb, &rv}})
    EXPECT_LE(relative_gap(download(*b), download(*p)), 1e-6);
  Tensor dx = output(s), dxb = blocked_output(s);
  Tensor dg = output(c), dbeta = output(c), dgb = output(c), dbetab = output(c);
  be().batchnorm_backward(&dx, dg, dbeta, dy, x, gamma, mean, inv);
  be().batchnorm_backward(&dxb, dgb, dbetab, dyb, xb, gamma, mean, inv);
  EXPECT_LE(relative_gap(plain_values(dxb), download(dx)), 1e-5);
  EXPECT_LE(relative_gap(download(dgb), download(dg)), 1e-5);
  EXPECT_LE(relative_gap(download(dbetab), download(dbeta)), 1e-6);
  Tensor yi = output(s), yib = blocked_output(s);
  be().batchnorm_forward_inference(yi, x, gamma, beta, rm, rv, 1e-5f);
  be().batchnorm_forward_inference(yib, xb, gamma, beta, rm, rv, 1e-5f);
  expect_same_bits(plain_values(yib), download(yi), "inference");
}

// Max pooling's rules hold in the blocked order: a NaN is a window's maximum, and a window's
// gradient goes to its first maximum (ties planted in every window of the first channel).
TEST_P(BlockedLayout, PoolingMatchesThePlainOne) {
  const Shape s{2, 16, 7, 9};
  Floats v = random(s.numel(), 15);
  for (int64_t i = 0; i < 7 * 9; ++i) v[static_cast<size_t>(i)] = 1.f;  // (0,0): all equal
  v[static_cast<size_t>(9 * 7 * 5 + 10)] = NAN;                         // (0,5): one NaN
  Tensor x = upload(s, v), xb = blocked(x);
  Pool2dParams two, three, avg, global;
  three.kernel_h = three.kernel_w = 3;
  three.pad_h = three.pad_w = 1;
  avg = three;
  avg.mode = PoolMode::kAverage;
  global.mode = PoolMode::kAverage;
  global.kernel_h = 7, global.kernel_w = 9;
  global.stride_h = global.stride_w = 1;
  for (const Pool2dParams& p : {two, three, avg, global}) {
    const Shape ys = pool_out_shape(s, p);
    Tensor y = output(ys), yb = blocked_output(ys);
    be().pool2d_forward(y, x, p);
    be().pool2d_forward(yb, xb, p);
    Tensor dy = upload(ys, random(ys.numel(), 16)), dyb = blocked(dy);
    Tensor dx = output(s), dxb = blocked_output(s);
    be().pool2d_backward(dx, dy, x, y, p);
    be().pool2d_backward(dxb, dyb, xb, yb, p);
    if (p.kernel_h == 7) {  // global: its own sum of each image (oneDNN's in the plain order): 1e-6
      EXPECT_LE(relative_gap(plain_values(yb), download(y)), 1e-6) << "global average";
      EXPECT_LE(relative_gap(plain_values(dxb), download(dx)), 1e-6) << "global average";
      continue;
    }
    expect_same_bits(plain_values(yb), download(y), "pool forward");
    expect_same_bits(plain_values(dxb), download(dx), "pool backward");
  }
}

// The relu fusions (Backend::fuses_relu) in one pass give the two ops' values bit for bit, in
// the blocked order and in the plain one: CpuBackend's against the Backend's composition of
// batchnorm, add and the relu. A NaN input stays NaN; gradients are checked on finite values.
TEST_P(BlockedLayout, FusedReluGivesTheTwoOpsValues) {
  ASSERT_TRUE(be().fuses_relu(Backend::ReluFusion::kBatchnorm, DType::kF32));
  ASSERT_TRUE(be().fuses_relu(Backend::ReluFusion::kAdd, DType::kF32));
  EXPECT_FALSE(be().fuses_relu(Backend::ReluFusion::kBatchnorm, DType::kBF16));
  const Shape s{4, 32, 5, 7};
  const Shape c{32};
  Floats xv = random(s.numel(), 21, -2.f, 3.f);
  Tensor gamma = upload(c, random(32, 23, -1.f, 1.5f)), beta = upload(c, random(32, 24));
  Tensor dy0 = upload(s, random(s.numel(), 22));
  for (const bool in_blocks : {true, false}) {
    SCOPED_TRACE(in_blocks ? "blocked" : "plain");
    auto order = [&](const Tensor& t) { return in_blocks ? blocked(t) : t; };
    auto out = [&] { return in_blocks ? blocked_output(s) : output(s); };
    auto stats = [&] { return upload(c, Floats(32, 0.5f)); };
    Tensor x = order(upload(s, xv)), dy = order(dy0),
           other = order(upload(s, random(s.numel(), 25)));
    Tensor mean = output(c), inv = output(c), rm = stats(), rv = stats();
    Tensor mean2 = output(c), inv2 = output(c), rm2 = stats(), rv2 = stats();
    Tensor y = out(), y2 = out();
    be().batchnorm_relu_forward_training(y, mean, inv, rm, rv, x, gamma, beta, 0.1f, 1e-5f);
    be().Backend::batchnorm_relu_forward_training(y2, mean2, inv2, rm2, rv2, x, gamma, beta, 0.1f,
                                                  1e-5f);
    expect_same_bits(plain_values(y), plain_values(y2), "batchnorm+relu training");
    const Floats yv = plain_values(y);
    EXPECT_GT(std::count(yv.begin(), yv.end(), 0.f), s.numel() / 10) << "the relu clipped some";
    Tensor dx = out(), dx2 = out(), dg = output(c), db = output(c), dg2 = output(c),
           db2 = output(c);
    be().batchnorm_relu_backward(&dx, dg, db, dy, y, x, gamma, mean, inv);
    be().Backend::batchnorm_relu_backward(&dx2, dg2, db2, dy, y, x, gamma, mean, inv);
    expect_same_bits(plain_values(dx), plain_values(dx2), "batchnorm+relu input gradient");
    expect_same_bits(download(dg), download(dg2), "batchnorm+relu scale gradient");
    expect_same_bits(download(db), download(db2), "batchnorm+relu shift gradient");

    Floats nan_x = xv;
    nan_x[5] = NAN;
    Tensor xn = order(upload(s, nan_x)), yi = out(), yi2 = out();
    be().batchnorm_relu_forward_inference(yi, xn, gamma, beta, rm, rv, 1e-5f);
    be().Backend::batchnorm_relu_forward_inference(yi2, xn, gamma, beta, rm, rv, 1e-5f);
    const Floats yiv = plain_values(yi);
    EXPECT_TRUE(std::isnan(yiv[5])) << "a NaN passes the fused relu";
    expect_same_bits(yiv, plain_values(yi2), "batchnorm+relu inference");

    Tensor sum = out(), sum2 = out();
    be().add_relu(sum, xn, other);
    be().Backend::add_relu(sum2, xn, other);
    expect_same_bits(plain_values(sum), plain_values(sum2), "add+relu");
    EXPECT_TRUE(std::isnan(plain_values(sum)[5]));
    Tensor s_ok = out(), da = out(), dbb = out(), da2 = out(), db3 = out();
    be().add_relu(s_ok, x, other);
    be().add_relu_backward({&da, &dbb}, dy, s_ok);
    be().Backend::add_relu_backward({&da2, &db3}, dy, s_ok);
    expect_same_bits(plain_values(da), plain_values(da2), "add+relu gradient, first input");
    expect_same_bits(plain_values(dbb), plain_values(db3), "add+relu gradient, second input");

    // A relu before max pooling: 2x2 windows and overlapping 3x3 ones; NaN forward only.
    Pool2dParams two, three;
    three.kernel_h = three.kernel_w = 3;
    three.stride_h = three.stride_w = 1;
    three.pad_h = three.pad_w = 1;
    for (const Pool2dParams& p : {two, three}) {
      const Shape ps = pool_out_shape(s, p);
      auto pout = [&] {
        Tensor t = in_blocks ? blocked_output(ps) : output(ps);
        be().fill(t, NAN);
        return t;
      };
      Tensor py = pout(), py2 = pout(), pyn = pout(), pyn2 = pout();
      be().relu_max_pool_forward(pyn, xn, p);
      be().Backend::relu_max_pool_forward(pyn2, xn, p);
      expect_same_bits(plain_values(pyn), plain_values(pyn2), "relu+maxpool with a NaN");
      be().relu_max_pool_forward(py, x, p);
      be().Backend::relu_max_pool_forward(py2, x, p);
      expect_same_bits(plain_values(py), plain_values(py2), "relu+maxpool");
      Tensor pdy = order(upload(ps, random(ps.numel(), 26))), pdx = out(), pdx2 = out();
      be().relu_max_pool_backward(pdx, pdy, x, py, p);
      be().Backend::relu_max_pool_backward(pdx2, pdy, x, py, p);
      expect_same_bits(plain_values(pdx), plain_values(pdx2), "relu+maxpool gradient");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, BlockedLayout, ::testing::Values("nChw8c", "nChw16c"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tandem::testing
