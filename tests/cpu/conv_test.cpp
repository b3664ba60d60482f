// Convolution forward, backward-data and backward-filter of every backend against the reference.
#include <memory>
#include <string>
#include <vector>

#include "tests/cpu/backend_test_util.h"
#include "tests/reference/reference.h"

namespace tandem::testing {
namespace {

struct ConvCase {
  std::string name;
  reference::ConvShape s;
  Conv2dParams p;
};

Conv2dParams params(int sh, int sw, int ph, int pw, int dh = 1, int dw = 1, int groups = 1) {
  Conv2dParams p;
  p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw, p.dilation_h = dh,
  p.dilation_w = dw, p.groups = groups;
  return p;
}

// Odd and edge shapes: batch 1, C=3, K=7, 1x1 kernels, stride 2, padding, dilation 2,
// non-square images and kernels, channel counts off oneDNN's 16-blocks; grouped and depthwise.
std::vector<ConvCase> conv_cases() {
  return {
      {"3x3_pad1", {2, 3, 8, 8, 4, 3, 3}, params(1, 1, 1, 1)},
      {"lenet_conv1_batch1", {1, 1, 28, 28, 20, 5, 5}, params(1, 1, 0, 0)},
      {"odd_nonsquare_stride2_k7", {3, 5, 7, 9, 7, 3, 2}, params(2, 2, 1, 1)},
      {"1x1", {2, 16, 5, 5, 8, 1, 1}, params(1, 1, 0, 0)},
      {"1x1_stride2", {2, 6, 7, 6, 7, 1, 1}, params(2, 2, 0, 0)},
      {"dilation2", {2, 3, 11, 10, 4, 3, 3}, params(1, 1, 2, 2, 2, 2)},
      {"mixed_strides_pads", {2, 4, 9, 8, 5, 3, 3}, params(2, 1, 0, 1, 1, 2)},
      {"channel_tails", {2, 17, 6, 6, 33, 3, 3}, params(1, 1, 1, 1)},
      {"batch1_C3_K7_5x5_pad2", {1, 3, 12, 10, 7, 5, 5}, params(1, 1, 2, 2)},
      // Grouped and depthwise (groups = C), with a channel multiplier, strided, dilated, 1x1.
      {"grouped_g2", {2, 6, 7, 7, 4, 3, 3}, params(1, 1, 1, 1, 1, 1, 2)},
      {"grouped_1x1_g4", {2, 12, 5, 5, 8, 1, 1}, params(1, 1, 0, 0, 1, 1, 4)},
      {"depthwise_3x3", {2, 8, 9, 9, 8, 3, 3}, params(1, 1, 1, 1, 1, 1, 8)},
      {"depthwise_odd_stride2", {3, 17, 10, 9, 17, 3, 3}, params(2, 2, 1, 1, 1, 1, 17)},
      {"depthwise_5x5_multiplier2_dilated", {2, 5, 11, 8, 10, 5, 5}, params(1, 1, 4, 4, 2, 2, 5)},
      // Depthwise shapes oneDNN's depthwise kernels leave to gemm (the CPU's own weight-gradient
      // loop): 5x5, strided; a 3x3 window over a 2x2 image; dilated 5x5 on a non-square image.
      {"depthwise_5x5_stride2", {2, 20, 11, 9, 20, 5, 5}, params(2, 2, 2, 2, 1, 1, 20)},
      {"depthwise_3x3_on_2x2", {3, 24, 2, 2, 24, 3, 3}, params(1, 1, 1, 1, 1, 1, 24)},
      {"depthwise_5x5_dilated_stride21", {2, 7, 12, 10, 7, 5, 5}, params(2, 1, 4, 3, 2, 2, 7)},
      // 3x3 at stride 1 between whole blocks of 16 channels: the CPU's Winograd kernel where the
      // CPU has AVX-512 (odd images that end in partial 4x4 tiles; no padding).
      {"winograd_odd_image", {3, 16, 7, 9, 32, 3, 3}, params(1, 1, 1, 1)},
      {"winograd_no_padding", {2, 32, 10, 6, 16, 3, 3}, params(1, 1, 0, 0)},
  };
}

class ConvTest : public BackendTest {};

TEST_P(ConvTest, ForwardMatchesReference) {
  uint32_t seed = 1;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const auto& s = c.s;
    const int64_t P = s.p(c.p), Q = s.q(c.p);
    Floats x = random(s.n * s.c * s.h * s.w, seed++),
           w = random(s.k * (s.c / c.p.groups) * s.r * s.s, seed++);
    Floats b = random(s.k, seed++);
    Tensor tx = upload({s.n, s.c, s.h, s.w}, x), tw = upload({s.k, s.c / c.p.groups, s.r, s.s}, w);
    Tensor tb = upload({s.k}, b);
    Tensor y = output({s.n, s.k, P, Q});
    be().conv2d_forward(y, tx, tw, &tb, c.p);
    EXPECT_CONV_CLOSE(download(y), reference::conv2d_forward(x, w, b, s, c.p));
    Tensor y_nobias = output({s.n, s.k, P, Q});
    be().conv2d_forward(y_nobias, tx, tw, nullptr, c.p);
    EXPECT_CONV_CLOSE(download(y_nobias), reference::conv2d_forward(x, w, {}, s, c.p));
  }
}

TEST_P(ConvTest, BackwardDataMatchesReference) {
  uint32_t seed = 100;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const auto& s = c.s;
    const int64_t P = s.p(c.p), Q = s.q(c.p);
    Floats dy = random(s.n * s.k * P * Q, seed++),
           w = random(s.k * (s.c / c.p.groups) * s.r * s.s, seed++);
    Tensor tdy = upload({s.n, s.k, P, Q}, dy), tw = upload({s.k, s.c / c.p.groups, s.r, s.s}, w);
    Tensor dx = output({s.n, s.c, s.h, s.w});
    be().conv2d_backward_data(dx, tdy, tw, c.p);
    EXPECT_CONV_CLOSE(download(dx), reference::conv2d_backward_data(dy, w, s, c.p));
  }
}

TEST_P(ConvTest, BackwardFilterMatchesReference) {
  uint32_t seed = 200;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const auto& s = c.s;
    const int64_t P = s.p(c.p), Q = s.q(c.p);
    Floats dy = random(s.n * s.k * P * Q, seed++), x = random(s.n * s.c * s.h * s.w, seed++);
    Tensor tdy = upload({s.n, s.k, P, Q}, dy), tx = upload({s.n, s.c, s.h, s.w}, x);
    Tensor dw = output({s.k, s.c / c.p.groups, s.r, s.s});
    be().conv2d_backward_filter(dw, tdy, tx, c.p);
    EXPECT_CONV_CLOSE(download(dw), reference::conv2d_backward_filter(dy, x, s, c.p));
  }
}

TEST_P(ConvTest, RepeatedCallsGiveTheSameResultAndSmallerBatchWorks) {
  const reference::ConvShape s{4, 3, 9, 9, 5, 3, 3};
  const Conv2dParams p = params(1, 1, 1, 1);
  Floats x = random(s.n * s.c * s.h * s.w, 7), w = random(s.k * s.c * 9, 8);
  Tensor tx = upload({s.n, s.c, s.h, s.w}, x), tw = upload({s.k, s.c, 3, 3}, w);
  Tensor y = output({s.n, s.k, 9, 9});
  be().conv2d_forward(y, tx, tw, nullptr, p);
  Floats first = download(y);
  be().conv2d_forward(y, tx, tw, nullptr, p);
  EXPECT_EQ(download(y), first);
  // A smaller last batch through prefix views of the same buffers.
  Tensor y2 = y.prefix(2);
  be().conv2d_forward(y2, tx.prefix(2), tw, nullptr, p);
  reference::ConvShape s2 = s;
  s2.n = 2;
  Floats x2(x.begin(), x.begin() + 2 * s.c * s.h * s.w);
  EXPECT_CONV_CLOSE(download(y2), reference::conv2d_forward(x2, w, {}, s2, p));
}

TEST_P(ConvTest, PlacementLogNamesEachCachedPrimitiveOnce) {
  const Conv2dParams p = params(1, 1, 0, 0);
  Tensor x = upload({2, 3, 6, 6}, random(2 * 3 * 36, 3)), w = upload({4, 3, 3, 3}, random(108, 4));
  Tensor y = output({2, 4, 4, 4});
  const size_t before = be().placement_log().size();
  be().conv2d_forward(y, x, w, nullptr, p);
  be().conv2d_forward(y, x, w, nullptr, p);
  std::vector<std::string> log = be().placement_log();
  ASSERT_EQ(log.size(), before + 1);
  // A backend may list lines of its own kernels after the cached ones ("gemm: cuBLAS ..."), so
  // the new line is looked for by its start, not at the end.
  int conv_lines = 0;
  for (const std::string& line : log) conv_lines += line.rfind("conv2d", 0) == 0 ? 1 : 0;
  EXPECT_EQ(conv_lines, 1);
}

TANDEM_INSTANTIATE_BACKEND_SUITE(ConvTest);

// The three passes of a 16 -> 32 channel convolution on a CPU backend with cpu_winograd as given,
// the placement lines they added and the results (y, dx, dw).
struct CpuConvRun {
  std::vector<std::string> lines;
  Floats y, dx, dw;
};

CpuConvRun run_cpu_conv(bool winograd, const reference::ConvShape& s, const Conv2dParams& p,
                        int threads = 0) {
  BackendOptions o;
  o.cpu_winograd = winograd;
  o.threads = threads;
  std::unique_ptr<Backend> be = create_backend("cpu", o);
  const int64_t P = s.p(p), Q = s.q(p);
  auto tensor = [&](const Shape& shape, uint32_t seed) {
    Tensor t(*be, shape);
    be->upload(t, random_floats(t.numel(), seed).data());
    return t;
  };
  Tensor x = tensor({s.n, s.c, s.h, s.w}, 1), w = tensor({s.k, s.c, s.r, s.s}, 2);
  Tensor dy = tensor({s.n, s.k, P, Q}, 3);
  Tensor y(*be, {s.n, s.k, P, Q}), dx(*be, x.shape()), dw(*be, w.shape());
  be->conv2d_forward(y, x, w, nullptr, p);
  be->conv2d_backward_data(dx, dy, w, p);
  be->conv2d_backward_filter(dw, dy, x, p);
  auto host = [&](const Tensor& t) {
    Floats v(static_cast<size_t>(t.numel()));
    be->download(v.data(), t);
    return v;
  };
  return {be->placement_log(), host(y), host(dx), host(dw)};
}

// Whether oneDNN runs its AVX-512 kernels here: the only ones it has a Winograd kernel for.
bool onednn_has_winograd() {
  return create_backend("cpu", {})->activation_layout(DType::kF32, Shape{1, 16, 1, 1}) ==
         Layout::kBlocked16;
}
constexpr const char* kNoWinograd =
    "oneDNN has Winograd kernels only for CPUs with AVX-512, which this one lacks (or "
    "DNNL_MAX_CPU_ISA holds back)";

int winograd_lines(const std::vector<std::string>& lines) {
  int n = 0;
  for (const std::string& line : lines) n += line.find("jit_wino") != std::string::npos;
  return n;
}

// cpu.conv_algo: auto takes oneDNN's Winograd kernel for each pass of a 3x3 stride-1 convolution
// between whole blocks of 16 channels (on a CPU with AVX-512: the only ones oneDNN has it for),
// and not for 3 input channels, stride 2 or a 5x5 window; direct never does. The two agree, and
// Winograd gives the same bits from run to run.
TEST(CpuWinograd, TakenForWholeBlock3x3StrideOneOnlyAndAgreesWithDirect) {
  const reference::ConvShape s{3, 16, 7, 9, 32, 3, 3};
  const CpuConvRun wino = run_cpu_conv(true, s, params(1, 1, 1, 1));
  const CpuConvRun direct = run_cpu_conv(false, s, params(1, 1, 1, 1));
  EXPECT_EQ(winograd_lines(direct.lines), 0);
  EXPECT_LT(relative_error(wino.y, Doubles(direct.y.begin(), direct.y.end())), 1e-5);
  EXPECT_LT(relative_error(wino.dx, Doubles(direct.dx.begin(), direct.dx.end())), 1e-5);
  EXPECT_LT(relative_error(wino.dw, Doubles(direct.dw.begin(), direct.dw.end())), 1e-5);
  if (!onednn_has_winograd()) GTEST_SKIP() << kNoWinograd << ": the direct kernels ran both";
  EXPECT_EQ(winograd_lines(wino.lines), 3) << ::testing::PrintToString(wino.lines);
  const CpuConvRun again = run_cpu_conv(true, s, params(1, 1, 1, 1));  // run to run: the same bits
  EXPECT_EQ(again.y, wino.y);
  EXPECT_EQ(again.dx, wino.dx);
  EXPECT_EQ(again.dw, wino.dw);
  EXPECT_EQ(winograd_lines(run_cpu_conv(true, {2, 3, 8, 8, 16, 3, 3}, params(1, 1, 1, 1)).lines),
            0);
  EXPECT_EQ(winograd_lines(run_cpu_conv(true, {2, 16, 8, 8, 16, 3, 3}, params(2, 2, 1, 1)).lines),
            0);
  EXPECT_EQ(winograd_lines(run_cpu_conv(true, {2, 16, 8, 8, 16, 5, 5}, params(1, 1, 2, 2)).lines),
            0);
}

// A Winograd pass whose scratchpad would pass 256 MiB runs the direct kernel instead: the weight
// gradient of 512 channels keeps a transformed copy of the weights per thread (2.5 GB at 64
// threads), the forward pass and the input gradient do not (54 MB).
TEST(CpuWinograd, NotWhereItsScratchpadWouldPass256MiB) {
  if (!onednn_has_winograd()) GTEST_SKIP() << kNoWinograd;
  const reference::ConvShape s{1, 512, 4, 4, 512, 3, 3};
  const CpuConvRun many = run_cpu_conv(true, s, params(1, 1, 1, 1), 64);
  ASSERT_EQ(many.lines.size(), 3u);
  EXPECT_NE(many.lines[0].find("jit_wino"), std::string::npos) << many.lines[0];
  EXPECT_NE(many.lines[1].find("jit_wino"), std::string::npos) << many.lines[1];
  EXPECT_EQ(many.lines[2].find("jit_wino"), std::string::npos) << many.lines[2];
  EXPECT_EQ(winograd_lines(run_cpu_conv(true, s, params(1, 1, 1, 1), 2).lines), 3);
}

}  // namespace
}  // namespace tandem::testing
