// CPU/GPU parity of every Backend op: the same random inputs on "cpu" and "gpu" give the same
// outputs.
//
// Uses the Backend interface and the registry only, so it compiles in a CPU-only build too; there,
// and on a machine without a usable GPU, every test is skipped with the DeviceError's cause.
// Error measure: max |gpu - cpu| / max |cpu| over a tensor (one scale per tensor, so entries near
// zero after cancellation are judged against the tensor's typical size), at most 1e-4 unless a test
// says why it allows more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/error.h"
#include "tests/cpu/backend_test_util.h"

namespace tandem {
namespace {

using Floats = std::vector<float>;
constexpr double kTol = testing::kTolerance;
// cuDNN may take FFT or Winograd algorithms: the tolerance of the convolution op tests, for the
// same reason (backend_test_util.h).
constexpr double kConvTol = testing::kConvTolerance;
using testing::random_floats;

double rel_error(const Floats& gpu, const Floats& cpu) {
  if (gpu.size() != cpu.size()) return INFINITY;
  double diff = 0, scale = 1e-6;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (std::isnan(gpu[i]) != std::isnan(cpu[i])) return INFINITY;
    diff = std::max(diff, std::fabs(static_cast<double>(gpu[i]) - cpu[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(cpu[i])));
  }
  return diff / scale;
}

// Values on a coarse grid with many zeros, as after a relu: pooling windows with ties.
Floats tied(int64_t n, uint32_t seed) {
  Floats v = random_floats(n, seed, -1.f, 1.f);
  for (float& x : v) x = std::max(0.f, std::round(x * 2.f) / 2.f);
  return v;
}

class Parity : public ::testing::Test {
 protected:
  void SetUp() override {
    cpu_ = create_backend("cpu", {});
    try {
      gpu_ = create_backend("gpu", gpu_options());
    } catch (const DeviceError& e) {
      GTEST_SKIP() << "no usable GPU: " << e.cause() << " (" << e.hint() << ")";
    }
  }
  virtual BackendOptions gpu_options() const { return {}; }
  void check_convolutions();

  // The same host data as a tensor on each backend.
  struct Pair {
    Tensor c, g;
  };
  Pair make(const Shape& s, const Floats& host) {
    Pair p{Tensor(*cpu_, s), Tensor(*gpu_, s)};
    cpu_->upload(p.c, host.data());
    gpu_->upload(p.g, host.data());
    return p;
  }
  Pair make(const Shape& s, uint32_t seed) { return make(s, random_floats(s.numel(), seed)); }
  Pair labels(const std::vector<int32_t>& host) {
    Shape s{static_cast<int64_t>(host.size())};
    Pair p{Tensor(*cpu_, s, DType::kI32), Tensor(*gpu_, s, DType::kI32)};
    cpu_->upload(p.c, host.data());
    gpu_->upload(p.g, host.data());
    return p;
  }
  static Floats get(Backend& b, const Tensor& t) {
    Floats v(static_cast<size_t>(t.numel()));
    b.synchronize();
    b.download(v.data(), t);
    return v;
  }
  double error(const Pair& p) { return rel_error(get(*gpu_, p.g), get(*cpu_, p.c)); }
  std::vector<int32_t> random_labels(int64_t n, int c, uint32_t seed) {
    std::mt19937 gen(seed);
    std::vector<int32_t> l(static_cast<size_t>(n));
    for (auto& x : l) x = static_cast<int32_t>(gen() % static_cast<uint32_t>(c));
    return l;
  }

  std::unique_ptr<Backend> cpu_, gpu_;
};

TEST_F(Parity, GemmEveryTransposeWithOddShapesAlphaAndBeta) {
  const int64_t m = 37, n = 19, k = 53;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      Pair a = make(ta ? Shape{k, m} : Shape{m, k}, 1 + ta);
      Pair b = make(tb ? Shape{n, k} : Shape{k, n}, 3 + tb);
      Pair c = make(Shape{m, n}, 5);
      cpu_->gemm(c.c, a.c, b.c, ta, tb, 0.7f, 0.3f);
      gpu_->gemm(c.g, a.g, b.g, ta, tb, 0.7f, 0.3f);
      EXPECT_LT(error(c), kTol) << "trans_a " << ta << " trans_b " << tb;
    }
  }
}

// The larger shapes split each channel's sum over several blocks (a slice boundary inside an
// image, a plane size that does not divide the block, a dense layer's inner size of 1).
TEST_F(Parity, BiasAddAndBiasBackwardOnFourAndTwoDimensions) {
  for (const Shape& s : {Shape{3, 5, 7, 6}, Shape{17, 9}, Shape{64, 3, 32, 32},
                         Shape{40, 2, 37, 41}, Shape{9000, 3}}) {
    Pair y = make(s, 11), b = make(Shape{s[1]}, 12);
    cpu_->bias_add(y.c, b.c);
    gpu_->bias_add(y.g, b.g);
    EXPECT_LT(error(y), kTol) << s.str();
    Pair db = make(Shape{s[1]}, 13);
    cpu_->bias_backward(db.c, y.c);
    gpu_->bias_backward(db.g, y.g);
    EXPECT_LT(error(db), kTol) << s.str();
  }
}

TEST_F(Parity, AddAlsoInPlace) {
  Pair a = make(Shape{4, 3, 5, 5}, 21), b = make(Shape{4, 3, 5, 5}, 22),
       y = make(Shape{4, 3, 5, 5}, 23);
  cpu_->add(y.c, a.c, b.c);
  gpu_->add(y.g, a.g, b.g);
  EXPECT_LT(error(y), kTol);
  cpu_->add(a.c, a.c, b.c);
  gpu_->add(a.g, a.g, b.g);
  EXPECT_LT(error(a), kTol);
}

// concat's forward and backward copies: bit for bit (a copy rounds nothing).
TEST_F(Parity, CopyColumnsOfConcatAndItsBackward) {
  Pair y = make(Shape{64, 48, 7, 7}, 31), a = make(Shape{64, 32, 7, 7}, 32),
       b = make(Shape{64, 16, 7, 7}, 33);
  cpu_->copy_columns(y.c, 0, a.c, 0, 32 * 49);
  gpu_->copy_columns(y.g, 0, a.g, 0, 32 * 49);
  cpu_->copy_columns(y.c, 32 * 49, b.c, 0, 16 * 49);
  gpu_->copy_columns(y.g, 32 * 49, b.g, 0, 16 * 49);
  EXPECT_EQ(error(y), 0.0);
  Pair db = make(Shape{64, 16, 7, 7}, 34);
  cpu_->copy_columns(db.c, 0, y.c, 32 * 49, 16 * 49);
  gpu_->copy_columns(db.g, 0, y.g, 32 * 49, 16 * 49);
  EXPECT_EQ(error(db), 0.0);
}

// Training forward (output, saved statistics, running averages), inference and backward; the
// sums run in another order on each device (double on the CPU, float blocks on the GPU).
TEST_F(Parity, BatchNormTrainingInferenceAndBackward) {
  uint32_t seed = 40;
  for (const Shape& s :
       {Shape{8, 16, 12, 12}, Shape{128, 32, 16, 16}, Shape{128, 512}, Shape{3, 5}}) {
    SCOPED_TRACE(s.str());
    const Shape c{s[1]};
    Pair x = make(s, random_floats(s.numel(), seed++, -2.f, 6.f)), gamma = make(c, seed++),
         beta = make(c, seed++);
    Pair rm = make(c, seed++), rv = make(c, random_floats(c.numel(), seed++, 0.5f, 2.f));
    Pair y = make(s, seed++), mean = make(c, seed++), inv_std = make(c, seed++);
    cpu_->batchnorm_forward_training(y.c, mean.c, inv_std.c, rm.c, rv.c, x.c, gamma.c, beta.c, 0.1f,
                                     1e-5f);
    gpu_->batchnorm_forward_training(y.g, mean.g, inv_std.g, rm.g, rv.g, x.g, gamma.g, beta.g, 0.1f,
                                     1e-5f);
    EXPECT_LT(error(y), kTol);
    EXPECT_LT(error(mean), kTol);
    EXPECT_LT(error(inv_std), kTol);
    EXPECT_LT(error(rm), kTol);
    EXPECT_LT(error(rv), kTol);
    Pair dy = make(s, seed++), dx = make(s, seed++), dgamma = make(c, seed++),
         dbeta = make(c, seed++);
    cpu_->batchnorm_backward(&dx.c, dgamma.c, dbeta.c, dy.c, x.c, gamma.c, mean.c, inv_std.c);
    gpu_->batchnorm_backward(&dx.g, dgamma.g, dbeta.g, dy.g, x.g, gamma.g, mean.g, inv_std.g);
    EXPECT_LT(error(dx), kTol);
    EXPECT_LT(error(dgamma), kTol);
    EXPECT_LT(error(dbeta), kTol);
    cpu_->batchnorm_forward_inference(y.c, x.c, gamma.c, beta.c, rm.c, rv.c, 1e-5f);
    gpu_->batchnorm_forward_inference(y.g, x.g, gamma.g, beta.g, rm.g, rv.g, 1e-5f);
    EXPECT_LT(error(y), kTol);
  }
}

// Parity with one option of the GPU backend turned on.
template <bool BackendOptions::*Option>
class ParityWith : public Parity {
 protected:
  BackendOptions gpu_options() const override {
    BackendOptions o;
    o.*Option = true;
    return o;
  }
};

struct ConvCase {
  int64_t n, c, h, w, k, r, s;
  Conv2dParams p;
};

// Every convolution pass on the CPU and the GPU, over shapes that exercise padding, stride,
// dilation, groups (depthwise too) and LeNet's layers.
void Parity::check_convolutions() {
  const std::vector<ConvCase> cases = {
      {2, 3, 9, 7, 4, 3, 3, {1, 1, 1, 1, 1, 1}},         // padding, non-square
      {1, 5, 8, 8, 6, 1, 1, {2, 2, 0, 0, 1, 1}},         // 1x1, stride 2, batch 1
      {3, 2, 11, 10, 3, 5, 5, {2, 1, 2, 1, 1, 1}},       // 5x5, mixed stride and padding
      {2, 4, 12, 12, 5, 3, 3, {1, 1, 2, 2, 2, 2}},       // dilation 2
      {16, 1, 28, 28, 20, 5, 5, {}},                     // LeNet's first layer
      {8, 20, 12, 12, 50, 5, 5, {}},                     // LeNet's second layer
      {2, 6, 7, 7, 4, 3, 3, {1, 1, 1, 1, 1, 1, 2}},      // grouped
      {3, 17, 10, 9, 17, 3, 3, {2, 2, 1, 1, 1, 1, 17}},  // depthwise, odd, stride 2
      {2, 5, 11, 8, 10, 5, 5, {1, 1, 4, 4, 2, 2, 5}},    // depthwise x2, dilated
  };
  uint32_t seed = 100;
  for (const ConvCase& t : cases) {
    const int64_t P =
        conv_out_size(t.h, static_cast<int>(t.r), t.p.stride_h, t.p.pad_h, t.p.dilation_h);
    const int64_t Q =
        conv_out_size(t.w, static_cast<int>(t.s), t.p.stride_w, t.p.pad_w, t.p.dilation_w);
    const Shape xs{t.n, t.c, t.h, t.w}, ws{t.k, t.c / t.p.groups, t.r, t.s}, ys{t.n, t.k, P, Q};
    Pair x = make(xs, ++seed), w = make(ws, ++seed), b = make(Shape{t.k}, ++seed);
    Pair y = make(ys, ++seed), dy = make(ys, ++seed), dx = make(xs, ++seed), dw = make(ws, ++seed);
    cpu_->conv2d_forward(y.c, x.c, w.c, &b.c, t.p);
    gpu_->conv2d_forward(y.g, x.g, w.g, &b.g, t.p);
    EXPECT_LT(error(y), kConvTol) << "forward x" << xs.str() << " w" << ws.str();
    cpu_->conv2d_forward(y.c, x.c, w.c, nullptr, t.p);
    gpu_->conv2d_forward(y.g, x.g, w.g, nullptr, t.p);
    EXPECT_LT(error(y), kConvTol) << "forward without bias x" << xs.str();
    cpu_->conv2d_backward_data(dx.c, dy.c, w.c, t.p);
    gpu_->conv2d_backward_data(dx.g, dy.g, w.g, t.p);
    EXPECT_LT(error(dx), kConvTol) << "backward data x" << xs.str() << " w" << ws.str();
    cpu_->conv2d_backward_filter(dw.c, dy.c, x.c, t.p);
    gpu_->conv2d_backward_filter(dw.g, dy.g, x.g, t.p);
    EXPECT_LT(error(dw), kConvTol) << "backward filter x" << xs.str() << " w" << ws.str();
  }
}

TEST_F(Parity, ConvolutionForwardBackwardDataAndFilter) {
  check_convolutions();
  bool logged = false;
  for (const std::string& line : gpu_->placement_log()) {
    logged |= line.find("conv2d") == 0;
    EXPECT_EQ(line.find("(timed"), std::string::npos) << "heuristic choice asked: " << line;
  }
  EXPECT_TRUE(logged) << "placement_log names no convolution";
}

// gpu.conv_algo: find. The timed search runs each candidate on the call's own buffers; the result
// must still be the convolution, and every pass says it was timed.
using TimedSearchGpu = ParityWith<&BackendOptions::find_conv_algorithms>;

TEST_F(TimedSearchGpu, ConvolutionsAgreeWithTheCpuAndEveryPassIsTimed) {
  check_convolutions();
  int convs = 0;
  for (const std::string& line : gpu_->placement_log()) {
    if (line.find("conv2d") != 0) continue;
    ++convs;
    for (const char* pass : {" fwd ", ", bwd_data ", ", bwd_filter "}) {
      const size_t at = line.find(pass);
      ASSERT_NE(at, std::string::npos) << line;
      EXPECT_EQ(line.find(" (timed", at), line.find(" (", at + std::string(pass).size()))
          << pass << "not timed: " << line;
    }
  }
  EXPECT_EQ(convs, 6);
}

TEST_F(Parity, PoolingForwardAndBackwardWithTies) {
  struct PoolCase {
    Shape x;
    Pool2dParams p;
  };
  const std::vector<PoolCase> cases = {
      {Shape{2, 3, 8, 8}, {PoolMode::kMax, 2, 2, 2, 2, 0, 0}},
      {Shape{2, 3, 9, 7}, {PoolMode::kMax, 3, 3, 2, 2, 1, 1}},  // overlapping, padded
      {Shape{2, 3, 8, 8}, {PoolMode::kAverage, 2, 2, 2, 2, 0, 0}},
      {Shape{1, 4, 9, 7}, {PoolMode::kAverage, 3, 3, 2, 2, 1, 1}},  // divisor excludes padding
  };
  uint32_t seed = 200;
  for (const PoolCase& t : cases) {
    const Shape ys{t.x[0], t.x[1], conv_out_size(t.x[2], t.p.kernel_h, t.p.stride_h, t.p.pad_h),
                   conv_out_size(t.x[3], t.p.kernel_w, t.p.stride_w, t.p.pad_w)};
    Pair x = make(t.x, tied(t.x.numel(), ++seed)), y = make(ys, ++seed), dy = make(ys, ++seed);
    Pair dx = make(t.x, ++seed);
    cpu_->pool2d_forward(y.c, x.c, t.p);
    gpu_->pool2d_forward(y.g, x.g, t.p);
    EXPECT_LT(error(y), kTol) << "forward " << t.x.str();
    // A gradient routed to another tied element than the first maximum gives an error of O(1).
    cpu_->pool2d_backward(dx.c, dy.c, x.c, y.c, t.p);
    gpu_->pool2d_backward(dx.g, dy.g, x.g, y.g, t.p);
    EXPECT_LT(error(dx), kTol) << "backward " << t.x.str();
  }
}

TEST_F(Parity, ActivationsForwardAndBackward) {
  const Shape s{4, 6, 5, 5};
  for (Activation a : kActivations) {
    Pair x = make(s, random_floats(s.numel(), 31, -4.f, 4.f)), y = make(s, 32), dy = make(s, 33);
    Pair dx = make(s, 34);
    cpu_->activation_forward(y.c, x.c, a, 0.1f);
    gpu_->activation_forward(y.g, x.g, a, 0.1f);
    EXPECT_LT(error(y), kTol) << "activation " << static_cast<int>(a);
    cpu_->activation_backward(dx.c, dy.c, x.c, y.c, a, 0.1f);
    gpu_->activation_backward(dx.g, dy.g, x.g, y.g, a, 0.1f);
    EXPECT_LT(error(dx), kTol) << "activation backward " << static_cast<int>(a);
  }
}

TEST_F(Parity, MultiplyByAGateAndItsGradients) {
  const Shape s{4, 6, 5, 5}, g{4, 6, 1, 1};
  Pair a = make(s, 61), b = make(g, 62), y = make(s, 63), dy = make(s, 64), da = make(s, 65),
       db = make(g, 66);
  cpu_->multiply(y.c, a.c, b.c);
  gpu_->multiply(y.g, a.g, b.g);
  EXPECT_LT(error(y), kTol);
  cpu_->multiply_backward(&da.c, &db.c, dy.c, a.c, b.c);
  gpu_->multiply_backward(&da.g, &db.g, dy.g, a.g, b.g);
  EXPECT_LT(error(da), kTol);
  EXPECT_LT(error(db), kTol);
}

TEST_F(Parity, SoftmaxCrossEntropyMseAndAccuracy) {
  const int64_t n = 33;
  const int c = 10;
  Pair logits = make(Shape{n, c}, random_floats(n * c, 41, -6.f, 6.f));
  Pair lab = labels(random_labels(n, c, 42));
  Pair loss = make(Shape{1}, 43), probs = make(Shape{n, c}, 44), d = make(Shape{n, c}, 45);
  cpu_->softmax_cross_entropy_forward(loss.c, probs.c, logits.c, lab.c, 0.f);
  gpu_->softmax_cross_entropy_forward(loss.g, probs.g, logits.g, lab.g, 0.f);
  EXPECT_LT(error(loss), kTol);
  EXPECT_LT(error(probs), kTol);
  cpu_->softmax_cross_entropy_backward(d.c, probs.c, lab.c, 0.f);
  gpu_->softmax_cross_entropy_backward(d.g, probs.g, lab.g, 0.f);
  EXPECT_LT(error(d), kTol);
  cpu_->mse_forward(loss.c, logits.c, lab.c);
  gpu_->mse_forward(loss.g, logits.g, lab.g);
  EXPECT_LT(error(loss), kTol);
  cpu_->mse_backward(d.c, logits.c, lab.c);
  gpu_->mse_backward(d.g, logits.g, lab.g);
  EXPECT_LT(error(d), kTol);
  // Scores with ties: the first maximum decides on both devices.
  Floats tiedscores = tied(n * c, 46);
  Pair scores = make(Shape{n, c}, tiedscores);
  cpu_->accuracy(loss.c, scores.c, lab.c);
  gpu_->accuracy(loss.g, scores.g, lab.g);
  EXPECT_EQ(get(*gpu_, loss.g), get(*cpu_, loss.c));
}

TEST_F(Parity, LabelOutOfRangeGivesTheSameDataError) {
  std::vector<int32_t> l = {1, 2, 0, 7, 3, -1, 12};
  Pair logits = make(Shape{7, 5}, 51), lab = labels(l);
  Pair loss = make(Shape{1}, 52), probs = make(Shape{7, 5}, 53);
  std::string cpu_msg, gpu_msg;
  try {
    cpu_->softmax_cross_entropy_forward(loss.c, probs.c, logits.c, lab.c, 0.f);
  } catch (const DataError& e) {
    cpu_msg = e.cause();
  }
  try {
    gpu_->softmax_cross_entropy_forward(loss.g, probs.g, logits.g, lab.g, 0.f);
    gpu_->synchronize();  // where a queued check reports
  } catch (const DataError& e) {
    gpu_msg = e.cause();
  }
  EXPECT_NE(gpu_msg.find("label 7 of sample 3 is outside [0, 5)"), std::string::npos) << gpu_msg;
  EXPECT_EQ(gpu_msg, cpu_msg);
}

TEST_F(Parity, DropoutMasksAreBitIdentical) {
  const Shape s{8, 3, 7, 5};
  Pair x = make(s, 61), y = make(s, 62), mask = make(s, 63), dx = make(s, 64);
  cpu_->dropout_forward(y.c, mask.c, x.c, 0.3f, 1234, 77);
  gpu_->dropout_forward(y.g, mask.g, x.g, 0.3f, 1234, 77);
  Floats mc = get(*cpu_, mask.c), mg = get(*gpu_, mask.g);
  ASSERT_EQ(mc.size(), mg.size());
  EXPECT_EQ(std::memcmp(mc.data(), mg.data(), mc.size() * sizeof(float)), 0);
  EXPECT_EQ(get(*gpu_, y.g), get(*cpu_, y.c));
  cpu_->dropout_backward(dx.c, x.c, mask.c);
  gpu_->dropout_backward(dx.g, x.g, mask.g);
  EXPECT_EQ(get(*gpu_, dx.g), get(*cpu_, dx.c));
}

TEST_F(Parity, SgdVariantsOverThreeSteps) {
  const std::vector<SgdParams> variants = {{0.1f, 0.f, 0.f, false},
                                           {0.1f, 0.9f, 0.f, false},
                                           {0.05f, 0.9f, 5e-4f, true},
                                           {0.01f, 0.5f, 1e-2f, false}};
  const Shape s{7, 13};
  for (const SgdParams& p : variants) {
    Pair w = make(s, 71), v = make(s, Floats(s.numel(), 0.f));
    for (int step = 0; step < 3; ++step) {
      Pair g = make(s, 72 + step);
      cpu_->sgd_update(w.c, v.c, g.c, p);
      gpu_->sgd_update(w.g, v.g, g.g, p);
    }
    EXPECT_LT(error(w), kTol) << "momentum " << p.momentum << " nesterov " << p.nesterov;
    if (p.momentum != 0.f) {
      EXPECT_LT(error(v), kTol);
    }
  }
}

TEST_F(Parity, AdamAndAdamWOverThreeSteps) {
  const Shape s{5, 11};
  for (bool decoupled : {false, true}) {
    AdamParams p;
    p.lr = 1e-2f;
    p.weight_decay = 1e-2f;
    p.decoupled = decoupled;
    Pair w = make(s, 81), m = make(s, Floats(s.numel(), 0.f)), v = make(s, Floats(s.numel(), 0.f));
    for (int step = 1; step <= 3; ++step) {
      p.step = step;
      Pair g = make(s, 82 + step);
      cpu_->adam_update(w.c, m.c, v.c, g.c, p);
      gpu_->adam_update(w.g, m.g, v.g, g.g, p);
    }
    EXPECT_LT(error(w), kTol) << "decoupled " << decoupled;
    EXPECT_LT(error(m), kTol);
    EXPECT_LT(error(v), kTol);
  }
}

TEST_F(Parity, FillCopyAndCountNonfinite) {
  Floats h = random_floats(1000, 91);
  h[3] = NAN, h[500] = INFINITY, h[999] = -INFINITY;
  Pair t = make(Shape{10, 100}, h), u = make(Shape{1000}, 92);
  EXPECT_EQ(gpu_->count_nonfinite(t.g), 3);
  EXPECT_EQ(gpu_->count_nonfinite(t.g), cpu_->count_nonfinite(t.c));
  cpu_->copy(u.c, t.c);
  gpu_->copy(u.g, t.g);
  Floats gu = get(*gpu_, u.g);  // bit-exact, NaN and infinities included
  EXPECT_EQ(std::memcmp(gu.data(), h.data(), h.size() * sizeof(float)), 0);
  cpu_->fill(u.c, 2.5f);
  gpu_->fill(u.g, 2.5f);
  EXPECT_EQ(get(*gpu_, u.g), get(*cpu_, u.c));
}

// 1 + 2^-12 is a float but not a TF32 value (10 mantissa bits): TF32 tensor cores round it to 1.
// Every product and partial sum below is exact in fp32, so an fp32 result is 1 + 2^-12 up to an
// FFT's rounding (~1e-6), and one computed from TF32-rounded inputs is 1: off by 2^-12. cuDNN's
// DEFAULT_MATH permits TF32 on Ampere and later, so this fails unless FP32 really is FMA math.
TEST_F(Parity, Fp32ConvolutionAndGemmDoNotRoundInputsToTf32) {
  const float kNotTf32 = 1.f + 1.f / 4096.f;
  const double kTf32Error = 1.0 / 16384.0;  // a quarter of TF32's error here
  auto expect_exact = [&](const Pair& t, const char* what) {
    for (float v : get(*gpu_, t.g)) {
      ASSERT_NEAR(v, kNotTf32, kTf32Error) << what;
    }
  };
  const Shape xs{32, 64, 8, 8}, ws{64, 64, 1, 1};
  const Conv2dParams p;
  Pair x = make(xs, Floats(xs.numel(), kNotTf32)), w = make(ws, Floats(ws.numel(), 1.f / 64.f));
  Pair y = make(xs, 1);
  gpu_->conv2d_forward(y.g, x.g, w.g, nullptr, p);
  expect_exact(y, "conv2d forward");
  Pair dx = make(xs, 2);
  gpu_->conv2d_backward_data(dx.g, x.g, w.g, p);  // dy = x: 64 terms of (1 + 2^-12) / 64
  expect_exact(dx, "conv2d backward data");
  // dw sums N*P*Q = 2048 terms of (1 + 2^-12) * 2^-11.
  Pair x2 = make(xs, Floats(xs.numel(), 1.f / 2048.f)), dw = make(ws, 3);
  gpu_->conv2d_backward_filter(dw.g, x.g, x2.g, p);
  expect_exact(dw, "conv2d backward filter");
  Pair a = make(Shape{96, 64}, Floats(96 * 64, kNotTf32));
  Pair b = make(Shape{64, 80}, Floats(64 * 80, 1.f / 64.f)), c = make(Shape{96, 80}, 4);
  gpu_->gemm(c.g, a.g, b.g, false, false, 1.f, 0.f);
  expect_exact(c, "gemm");
}

// precision: tf32 runs every convolution pass and gemm with tensor-core math: results within
// TF32's rounding. Emulated on the host for exactly these shapes and seeds (inputs rounded to 10
// mantissa bits, exact products, fp32 sums; rel_error's max |difference| / max |value|), that is
// 2.2e-4 to 2.7e-4 when the inputs round to nearest and 5.9e-4 to 6.5e-4 when they are truncated,
// as some tensor-core paths do. The bound, 2e-3, is 3x the truncated case and 8x the nearest.
using Tf32Gpu = ParityWith<&BackendOptions::tf32>;

TEST_F(Tf32Gpu, ConvolutionAndGemmAgreeWithTheCpuWithinTf32Rounding) {
  constexpr double kTf32Tol = 2e-3;
  const Conv2dParams p{1, 1, 1, 1, 1, 1};
  const Shape xs{16, 32, 16, 16}, ws{32, 32, 3, 3};
  Pair x = make(xs, 111), w = make(ws, 112), dy = make(xs, 113);
  Pair y = make(xs, 114), dx = make(xs, 115), dw = make(ws, 116);
  cpu_->conv2d_forward(y.c, x.c, w.c, nullptr, p);
  gpu_->conv2d_forward(y.g, x.g, w.g, nullptr, p);
  EXPECT_LT(error(y), kTf32Tol);
  cpu_->conv2d_backward_data(dx.c, dy.c, w.c, p);
  gpu_->conv2d_backward_data(dx.g, dy.g, w.g, p);
  EXPECT_LT(error(dx), kTf32Tol);
  cpu_->conv2d_backward_filter(dw.c, dy.c, x.c, p);
  gpu_->conv2d_backward_filter(dw.g, dy.g, x.g, p);
  EXPECT_LT(error(dw), kTf32Tol);
  Pair a = make(Shape{128, 256}, 117), b = make(Shape{256, 96}, 118), c = make(Shape{128, 96}, 119);
  cpu_->gemm(c.c, a.c, b.c, false, false, 1.f, 0.f);
  gpu_->gemm(c.g, a.g, b.g, false, false, 1.f, 0.f);
  EXPECT_LT(error(c), kTf32Tol);
}

// deterministic: true picks deterministic cuDNN algorithms: two runs give identical bits.
using DeterministicGpu = ParityWith<&BackendOptions::deterministic>;

TEST_F(DeterministicGpu, ConvolutionGradientsAndBiasGradientRepeatBitForBit) {
  const Conv2dParams p{1, 1, 1, 1, 1, 1};
  Pair x = make(Shape{32, 8, 16, 16}, 101), w = make(Shape{16, 8, 3, 3}, 102);
  Pair dy = make(Shape{32, 16, 16, 16}, 103);
  Pair dw = make(Shape{16, 8, 3, 3}, 104), dx = make(Shape{32, 8, 16, 16}, 105);
  Pair db = make(Shape{16}, 106);
  Floats first_dw, first_dx, first_db;
  for (int run = 0; run < 2; ++run) {
    gpu_->conv2d_backward_filter(dw.g, dy.g, x.g, p);
    gpu_->conv2d_backward_data(dx.g, dy.g, w.g, p);
    gpu_->bias_backward(db.g, dy.g);
    Floats a = get(*gpu_, dw.g), b = get(*gpu_, dx.g), c = get(*gpu_, db.g);
    if (run == 0) {
      first_dw = a, first_dx = b, first_db = c;
    } else {
      EXPECT_EQ(std::memcmp(a.data(), first_dw.data(), a.size() * 4), 0);
      EXPECT_EQ(std::memcmp(b.data(), first_dx.data(), b.size() * 4), 0);
      EXPECT_EQ(std::memcmp(c.data(), first_db.data(), c.size() * 4), 0);
    }
  }
  cpu_->conv2d_backward_filter(dw.c, dy.c, x.c, p);
  EXPECT_LT(error(dw), kConvTol);
}

// Batch normalization's sums run in a fixed order on the GPU, with or without the option.
TEST_F(Parity, BatchNormRepeatsBitForBitOnTheGpu) {
  const Shape s{64, 24, 20, 20}, c{24};
  Pair x = make(s, 120), gamma = make(c, 121), beta = make(c, 122), dy = make(s, 123);
  Pair rm = make(c, 124), rv = make(c, random_floats(24, 125, 0.5f, 2.f));
  Pair y = make(s, 126), mean = make(c, 127), inv_std = make(c, 128);
  Pair dx = make(s, 129), dgamma = make(c, 130), dbeta = make(c, 131);
  std::vector<Floats> first;
  for (int run = 0; run < 2; ++run) {
    gpu_->batchnorm_forward_training(y.g, mean.g, inv_std.g, rm.g, rv.g, x.g, gamma.g, beta.g, 0.f,
                                     1e-5f);
    gpu_->batchnorm_backward(&dx.g, dgamma.g, dbeta.g, dy.g, x.g, gamma.g, mean.g, inv_std.g);
    std::vector<Floats> got = {get(*gpu_, y.g), get(*gpu_, inv_std.g), get(*gpu_, dx.g),
                               get(*gpu_, dgamma.g)};
    if (run == 0) first = got;
    for (size_t k = 0; k < got.size() && run == 1; ++k)
      EXPECT_EQ(std::memcmp(got[k].data(), first[k].data(), got[k].size() * 4), 0) << k;
  }
}

}  // namespace
}  // namespace tandem
