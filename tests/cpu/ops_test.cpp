// Gemm, bias, add, activations, losses, accuracy, non-finite count and memory statistics of every
// backend against the reference.
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "tests/cpu/backend_test_util.h"
#include "tests/reference/reference.h"

namespace tandem::testing {
namespace {

class GemmTest : public BackendTest {};

TEST_P(GemmTest, AllTransposesMatchReference) {
  struct Dims {
    int64_t m, n, k;
  };
  uint32_t seed = 1;
  for (Dims d : {Dims{7, 13, 5}, Dims{1, 10, 800}, Dims{64, 500, 33}, Dims{3, 1, 1}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      SCOPED_TRACE(std::to_string(d.m) + "x" + std::to_string(d.n) + "x" + std::to_string(d.k) +
                   (ta ? " A^T" : "") + (tb ? " B^T" : ""));
      Floats a = random(d.m * d.k, seed++), b = random(d.k * d.n, seed++);
      Floats c = random(d.m * d.n, seed++);
      Tensor ta_t = upload(ta ? Shape{d.k, d.m} : Shape{d.m, d.k}, a);
      Tensor tb_t = upload(tb ? Shape{d.n, d.k} : Shape{d.k, d.n}, b);
      Tensor tc = upload({d.m, d.n}, c);
      be().gemm(tc, ta_t, tb_t, ta, tb, 0.5f, 0.25f);
      EXPECT_CLOSE(download(tc), reference::gemm(c, a, b, d.m, d.n, d.k, ta, tb, 0.5, 0.25));
    }
  }
}

// With beta 0 the old contents of c are not read: NaN there must not leak into the result.
TEST_P(GemmTest, BetaZeroIgnoresOldOutput) {
  Floats a = random(4 * 6, 1), b = random(6 * 5, 2);
  Tensor ta = upload({4, 6}, a), tb = upload({6, 5}, b), tc = output({4, 5});
  be().gemm(tc, ta, tb, false, false, 1.f, 0.f);
  EXPECT_CLOSE(download(tc), reference::gemm(Floats(20), a, b, 4, 5, 6, false, false, 1, 0));
}

// The dense layers' calls (alpha 1, beta 0) at a width where the leading dimensions are 1024,
// twice on one shape with new data: a backend that caches per shape must read the new operands.
TEST_P(GemmTest, DenseLayerShapesReadNewOperandsOnEveryCall) {
  const int64_t m = 16, n = 1024, k = 1024;
  uint32_t seed = 1;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    SCOPED_TRACE(std::string(ta ? "A^T " : "") + (tb ? "B^T" : ""));
    for (int call = 0; call < 2; ++call) {
      Floats a = random(m * k, seed++), b = random(k * n, seed++);
      Tensor ta_t = upload(ta ? Shape{k, m} : Shape{m, k}, a);
      Tensor tb_t = upload(tb ? Shape{n, k} : Shape{k, n}, b);
      Tensor tc = output({m, n});
      be().gemm(tc, ta_t, tb_t, ta, tb, 1.f, 0.f);
      EXPECT_CLOSE(download(tc), reference::gemm(Floats(m * n), a, b, m, n, k, ta, tb, 1, 0));
    }
  }
}

// An empty inner dimension (K 0) leaves c = beta * c.
TEST_P(GemmTest, EmptyInnerDimensionScalesOutput) {
  Floats c = random(3 * 4, 1);
  Tensor ta = output({3, 0}), tb = output({0, 4}), tc = upload({3, 4}, c);
  be().gemm(tc, ta, tb, false, false, 1.f, 0.5f);
  Doubles want(c.begin(), c.end());
  for (double& v : want) v *= 0.5;
  EXPECT_CLOSE(download(tc), want);
}

TANDEM_INSTANTIATE_BACKEND_SUITE(GemmTest);

class ElementwiseTest : public BackendTest {};

TEST_P(ElementwiseTest, BiasAddMatchesReference) {
  struct Case {
    Shape shape;
    int64_t inner;
  };
  uint32_t seed = 1;
  for (const Case& c :
       {Case{{5, 7}, 1}, Case{{3, 4, 5, 6}, 30}, Case{{1, 3, 1, 1}, 1}, Case{{2, 17, 3, 5}, 15}}) {
    SCOPED_TRACE(c.shape.str());
    const int64_t n = c.shape[0], ch = c.shape[1];
    Floats y = random(c.shape.numel(), seed++), b = random(ch, seed++);
    Tensor ty = upload(c.shape, y), tb = upload({ch}, b);
    be().bias_add(ty, tb);
    EXPECT_CLOSE(download(ty), reference::bias_add(y, b, n, ch, c.inner));
  }
}

TEST_P(ElementwiseTest, BiasBackwardMatchesReference) {
  uint32_t seed = 10;
  for (const Shape& s : {Shape{5, 7}, Shape{128, 512}, Shape{3, 4, 5, 6}, Shape{64, 20, 24, 24}}) {
    SCOPED_TRACE(s.str());
    const int64_t n = s[0], ch = s[1], inner = s.numel() / (n * ch);
    Floats dy = random(s.numel(), seed++);
    Tensor tdy = upload(s, dy), db = output({ch});
    be().bias_backward(db, tdy);
    EXPECT_CLOSE(download(db), reference::bias_backward(dy, n, ch, inner));
  }
}

TEST_P(ElementwiseTest, AddMatchesReferenceAndMayAlias) {
  Floats a = random(1001, 1), b = random(1001, 2);
  Tensor ta = upload({7, 11, 13}, a), tb = upload({7, 11, 13}, b), y = output({7, 11, 13});
  be().add(y, ta, tb);
  EXPECT_CLOSE(download(y), reference::add(a, b));
  be().add(ta, ta, tb);  // in place
  EXPECT_CLOSE(download(ta), reference::add(a, b));
}

// Channel concatenation and its backward: a run of columns of each row, the rest untouched.
TEST_P(ElementwiseTest, CopyColumnsCopiesARunOfEveryRowOnly) {
  struct Case {
    Shape dst, src;
    int64_t dst_col, src_col, cols;
  };
  uint32_t seed = 30;
  for (const Case& c : {Case{{4, 3, 5, 5}, {4, 2, 5, 5}, 25, 0, 50},  // concat: channels 1..2
                        Case{{4, 2, 5, 5}, {4, 3, 5, 5}, 0, 25, 50},  // its backward
                        Case{{130, 96}, {130, 7}, 89, 0, 7},          // flat, odd sizes
                        Case{{3, 10}, {3, 4}, 2, 1, 0},               // nothing
                        Case{{1, 9}, {1, 9}, 0, 0, 9}}) {             // one whole row
    SCOPED_TRACE(c.dst.str() + " <- " + c.src.str());
    Floats dst = random(c.dst.numel(), seed++), src = random(c.src.numel(), seed++);
    Tensor td = upload(c.dst, dst), ts = upload(c.src, src);
    be().copy_columns(td, c.dst_col, ts, c.src_col, c.cols);
    Floats want = dst;
    const int64_t rows = c.dst[0], dr = c.dst.numel() / rows, sr = c.src.numel() / rows;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < c.cols; ++j)
        want[static_cast<size_t>(r * dr + c.dst_col + j)] =
            src[static_cast<size_t>(r * sr + c.src_col + j)];
    EXPECT_EQ(download(td), want);
  }
  Tensor a = output({2, 6}), b = output({3, 4});
  EXPECT_THROW(be().copy_columns(a, 0, b, 0, 4), Error);  // other row counts
  Tensor d = output({2, 4});
  EXPECT_THROW(be().copy_columns(a, 3, d, 0, 4), Error);  // past the end of dst's rows
  EXPECT_THROW(be().copy_columns(a, 0, d, 1, 4), Error);  // past the end of src's rows
}

TEST_P(ElementwiseTest, FillAndCopy) {
  Tensor t = output({3, 5});
  be().fill(t, 2.5f);
  EXPECT_EQ(download(t), Floats(15, 2.5f));
  Floats src = random(15, 3);
  Tensor s = upload({15}, src);
  be().copy(t, s);
  EXPECT_EQ(download(t), src);
}

TEST_P(ElementwiseTest, CountNonfiniteCountsNanAndBothInfinities) {
  Floats v = random(100003, 4);
  v[0] = NAN;
  v[5000] = INFINITY;
  v[100002] = -INFINITY;
  Tensor t = upload({100003}, v);
  EXPECT_EQ(be().count_nonfinite(t), 3);
  Tensor clean = upload({4}, {1.f, -1.f, 0.f, 3e38f});
  EXPECT_EQ(be().count_nonfinite(clean), 0);
  // Several tensors at once (a step's gradients): the sum of their counts.
  EXPECT_EQ(be().count_nonfinite({&t, &clean, &t}), 6);
  EXPECT_EQ(be().count_nonfinite({&clean}), 0);
  EXPECT_EQ(be().count_nonfinite(std::vector<const Tensor*>{}), 0);
}

// multiply of one shape, with a (N,C) or (N,C,1,1) gate broadcast over odd positions, and with
// one value per sample ((N) or (N,1,1,1), drop_path's scale); its gradients, the gate's summed
// over the positions; and in place over a.
TEST_P(ElementwiseTest, MultiplyAndItsGradientsMatchReference) {
  const Shape x{3, 5, 7, 3};
  const struct {
    Shape gate;
    int64_t inner;
  } cases[] = {{x, 1},           {Shape{3, 5}, 21},     {Shape{3, 5, 1, 1}, 21},
               {Shape{3, 5}, 1}, {Shape{3}, 5 * 7 * 3}, {Shape{3, 1, 1, 1}, 5 * 7 * 3}};
  uint32_t seed = 60;
  for (const auto& c : cases) {
    const Shape a_shape = c.gate.rank() == 2 && c.inner == 1 ? Shape{3, 5} : x;
    SCOPED_TRACE(a_shape.str() + " * " + c.gate.str());
    const Floats a = random(a_shape.numel(), seed++), b = random(c.gate.numel(), seed++);
    const Floats dy = random(a_shape.numel(), seed++);
    Tensor ta = upload(a_shape, a), tb = upload(c.gate, b), y = output(a_shape);
    be().multiply(y, ta, tb);
    EXPECT_CLOSE(download(y), reference::multiply(a, b, c.inner));
    Tensor tdy = upload(a_shape, dy), da = output(a_shape), db = output(c.gate);
    be().multiply_backward(&da, &db, tdy, ta, tb);
    EXPECT_CLOSE(download(da), reference::multiply(dy, b, c.inner));
    EXPECT_CLOSE(download(db), reference::multiply_backward_b(dy, a, c.inner));
    Tensor only_db = output(c.gate);  // either gradient alone
    be().multiply_backward(nullptr, &only_db, tdy, ta, tb);
    EXPECT_EQ(download(only_db), download(db));
    be().multiply(ta, ta, tb);  // in place
    EXPECT_CLOSE(download(ta), reference::multiply(a, b, c.inner));
  }
}

TEST_P(ElementwiseTest, MultiplyRefusesShapesThatDoNotBroadcast) {
  Tensor a = output({2, 4, 3, 3}), y = output({2, 4, 3, 3});
  for (const Shape& gate : {Shape{2, 3}, Shape{2, 4, 3, 1}, Shape{4}, Shape{3}}) {
    Tensor b = output(gate);
    EXPECT_THROW(be().multiply(y, a, b), Error) << gate.str();
  }
}

TANDEM_INSTANTIATE_BACKEND_SUITE(ElementwiseTest);

class ActivationTest : public BackendTest {};

TEST_P(ActivationTest, ForwardAndBackwardMatchReference) {
  const float kAlpha = 0.1f;
  uint32_t seed = 1;
  for (Activation a : kActivations) {
    for (const Shape& s : {Shape{1003}, Shape{2, 3, 5, 7}}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(a)) + " " + s.str());
      Floats x = random(s.numel(), seed++, -4.f, 4.f), dy = random(s.numel(), seed++);
      Tensor tx = upload(s, x), y = output(s);
      be().activation_forward(y, tx, a, kAlpha);
      EXPECT_CLOSE(download(y), reference::activation_forward(x, a, kAlpha));
      Tensor tdy = upload(s, dy), dx = output(s);
      be().activation_backward(dx, tdy, tx, y, a, kAlpha);
      EXPECT_CLOSE(download(dx), reference::activation_backward(dy, x, a, kAlpha));
    }
  }
}

// A NaN passes through every activation, as in PyTorch (relu is not max(0, x), which would turn it
// into 0 and hide it from the loss); infinities go to the activation's limits.
TEST_P(ActivationTest, ForwardPassesANaNOnAndTakesInfinitiesToTheLimits) {
  const float kAlpha = 0.1f, kInf = HUGE_VALF;
  Floats x = random(1003, 8, -4.f, 4.f);
  for (size_t i = 0; i < x.size(); i += 3) x[i] = i % 2 ? NAN : (i % 9 ? kInf : -kInf);
  Tensor tx = upload({1003}, x), y = output({1003});
  for (Activation a : kActivations) {
    SCOPED_TRACE(static_cast<int>(a));
    be().activation_forward(y, tx, a, kAlpha);
    Floats got = download(y);
    Doubles want = reference::activation_forward(x, a, kAlpha);
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << "x[" << i << "] = " << x[i] << " gave " << got[i];
      } else if (std::isinf(x[i])) {
        EXPECT_EQ(got[i], want[i]) << "x[" << i << "] = " << x[i];
      }
    }
  }
}

// A non-finite gradient from above stays non-finite, also where the unit is off (relu at x <= 0:
// dy * 0), as in the reference: the step's gradient check must see it on every device.
TEST_P(ActivationTest, BackwardPassesANonFiniteGradientOn) {
  const float kAlpha = 0.1f;
  Floats x = random(1003, 9, -4.f, 4.f), dy = random(1003, 10);
  for (size_t i = 0; i < dy.size(); i += 5) dy[i] = i % 2 ? NAN : HUGE_VALF;
  Tensor tx = upload({1003}, x), y = output({1003}), g = upload({1003}, dy), dx = output({1003});
  for (Activation a : kActivations) {
    SCOPED_TRACE(static_cast<int>(a));
    be().activation_forward(y, tx, a, kAlpha);
    be().activation_backward(dx, g, tx, y, a, kAlpha);
    Floats got = download(dx);
    Doubles want = reference::activation_backward(dy, x, a, kAlpha);
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isfinite(want[i]))
        EXPECT_TRUE(std::isfinite(got[i]))
            << "x " << x[i] << ", dy " << dy[i] << " gave " << got[i];
      else
        EXPECT_FALSE(std::isfinite(got[i]))
            << "x " << x[i] << ", dy " << dy[i] << " gave " << got[i];
    }
  }
}

TEST_P(ActivationTest, ForwardInPlace) {
  Floats x = random(999, 5, -3.f, 3.f);
  Tensor t = upload({999}, x);
  be().activation_forward(t, t, Activation::kTanh, 0.f);
  EXPECT_CLOSE(download(t), reference::activation_forward(x, Activation::kTanh, 0));
}

TEST_P(ActivationTest, BackwardInPlaceOverDy) {
  Floats x = random(999, 6, -3.f, 3.f), dy = random(999, 7);
  Tensor tx = upload({999}, x), y = output({999}), g = upload({999}, dy);
  be().activation_forward(y, tx, Activation::kSigmoid, 0.f);
  be().activation_backward(g, g, tx, y, Activation::kSigmoid, 0.f);
  EXPECT_CLOSE(download(g), reference::activation_backward(dy, x, Activation::kSigmoid, 0));
}

TANDEM_INSTANTIATE_BACKEND_SUITE(ActivationTest);

class LossTest : public BackendTest {
 protected:
  static std::vector<int32_t> labels(int64_t n, int64_t c, uint32_t seed) {
    std::mt19937 gen(seed);
    std::vector<int32_t> l(n);
    for (int32_t& v : l) v = static_cast<int32_t>(gen() % c);
    return l;
  }
  static Doubles scalar(double v) { return Doubles{v}; }
};

// The plain one-hot target and label smoothing's (0.1, and 1: the uniform target alone).
TEST_P(LossTest, SoftmaxCrossEntropyMatchesReference) {
  for (float e : {0.f, 0.1f, 1.f})
    for (auto [n, c] : {std::pair<int64_t, int64_t>{1, 10}, {64, 10}, {7, 3}, {5, 1000}}) {
      SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(c) + " smoothing " + std::to_string(e));
      Floats x = random(n * c, static_cast<uint32_t>(n * c), -5.f, 5.f);
      std::vector<int32_t> l = labels(n, c, 3);
      Tensor logits = upload({n, c}, x), lab = upload_labels(l);
      Tensor loss = output({1}), probs = output({n, c}), d = output({n, c});
      be().softmax_cross_entropy_forward(loss, probs, logits, lab, e);
      EXPECT_CLOSE(download(loss), scalar(reference::softmax_cross_entropy(x, l, n, c, e)));
      Floats p = download(probs);
      EXPECT_CLOSE(p, reference::softmax(x, n, c));
      be().softmax_cross_entropy_backward(d, probs, lab, e);
      EXPECT_CLOSE(download(d), reference::softmax_cross_entropy_backward(p, l, n, c, e));
    }
}

// Logits around 1000 overflow exp() unless the row maximum is subtracted first.
TEST_P(LossTest, SoftmaxCrossEntropyIsStableForLargeLogits) {
  Floats x = random(4 * 10, 9, -5.f, 5.f);
  Floats shifted = x;
  for (float& v : shifted) v += 1000.f;
  std::vector<int32_t> l = labels(4, 10, 2);
  Tensor logits = upload({4, 10}, shifted), lab = upload_labels(l);
  Tensor loss = output({1}), probs = output({4, 10});
  be().softmax_cross_entropy_forward(loss, probs, logits, lab, 0.f);
  Floats got = download(loss);
  EXPECT_TRUE(std::isfinite(got[0]));
  EXPECT_LT(relative_error(got, scalar(reference::softmax_cross_entropy(x, l, 4, 10))), 1e-3);
}

TEST_P(LossTest, MseMatchesReference) {
  const int64_t n = 9, c = 5;
  Floats x = random(n * c, 4);
  std::vector<int32_t> l = labels(n, c, 5);
  Tensor pred = upload({n, c}, x), lab = upload_labels(l), loss = output({1});
  Tensor d = output({n, c});
  be().mse_forward(loss, pred, lab);
  EXPECT_CLOSE(download(loss), scalar(reference::mse(x, l, n, c)));
  be().mse_backward(d, pred, lab);
  EXPECT_CLOSE(download(d), reference::mse_backward(x, l, n, c));
}

TEST_P(LossTest, AccuracyCountsRowsWhoseFirstMaximumIsTheLabel) {
  // Row 0: max at 1 (label 1, hit). Row 1: tie between 0 and 2, first is 0 (label 0, hit).
  // Row 2: three-way tie (label 0, hit). Row 3: max at 2 (label 0, miss). Taking the last
  // maximum instead would give 1.
  Tensor scores = upload({4, 3}, {0.f, 5.f, 1.f, 3.f, 1.f, 3.f, 7.f, 7.f, 7.f, 1.f, 2.f, 3.f});
  Tensor lab = upload_labels({1, 0, 0, 0}), correct = output({1});
  be().accuracy(correct, scores, lab);
  EXPECT_EQ(download(correct)[0], 3.f);

  Floats x = random(100 * 7, 8);
  std::vector<int32_t> l = labels(100, 7, 9);
  Tensor s2 = upload({100, 7}, x), l2 = upload_labels(l);
  be().accuracy(correct, s2, l2);
  EXPECT_EQ(download(correct)[0], static_cast<float>(reference::accuracy(x, l, 100, 7)));
}

// A device backend may report the bad label at its next wait for the device rather than in the
// op (Backend::softmax_cross_entropy_forward), so each call is followed by one.
TEST_P(LossTest, LabelOutOfRangeNamesTheSample) {
  Tensor logits = upload({4, 10}, random(40, 1)), loss = output({1}), probs = output({4, 10});
  Tensor lab = upload_labels({0, 9, 3, 10});
  try {
    be().softmax_cross_entropy_forward(loss, probs, logits, lab, 0.f);
    be().synchronize();
    FAIL() << "no DataError for label 10";
  } catch (const DataError& e) {
    EXPECT_EQ(e.cause(), "label 10 of sample 3 is outside [0, 10)");
    EXPECT_FALSE(e.hint().empty());
  }
  Tensor negative = upload_labels({0, -1, 3, 2});
  EXPECT_THROW(
      {
        be().mse_forward(loss, logits, negative);
        be().synchronize();
      },
      DataError);
  // Reading the result is a wait too: the error comes there at the latest.
  EXPECT_THROW(
      {
        be().accuracy(loss, logits, lab);
        float correct = 0;
        be().download(&correct, loss);
      },
      DataError);
}

// Two bad calls before one wait give the first bad sample once; the next good call is not blamed.
TEST_P(LossTest, LabelErrorIsReportedOnceAndThenCleared) {
  const Floats scores = random(40, 2);
  Tensor logits = upload({4, 10}, scores), loss = output({1}), probs = output({4, 10});
  Tensor bad = upload_labels({0, 12, 3, 11}), good = upload_labels({0, 9, 3, 2});
  try {
    be().softmax_cross_entropy_forward(loss, probs, logits, bad, 0.f);
    be().accuracy(loss, logits, bad);
    be().synchronize();
    FAIL() << "no DataError for labels 12 and 11";
  } catch (const DataError& e) {
    EXPECT_EQ(e.cause(), "label 12 of sample 1 is outside [0, 10)");
  }
  EXPECT_NO_THROW({
    be().softmax_cross_entropy_forward(loss, probs, logits, good, 0.f);
    be().accuracy(loss, logits, good);
    be().synchronize();
  });
  // The error cleared, the next batch counts as it should.
  Floats got = download(loss);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], static_cast<float>(reference::accuracy(scores, {0, 9, 3, 2}, 4, 10)));
}

TANDEM_INSTANTIATE_BACKEND_SUITE(LossTest);

class TensorViewTest : public BackendTest {};

TEST_P(TensorViewTest, RowsAreTheEntriesAtTheirOffsetInTheSameBuffer) {
  Tensor t = upload({3, 2}, {0, 1, 2, 3, 4, 5});
  Tensor mid = t.rows(1, 2);
  EXPECT_EQ(mid.shape(), (Shape{2, 2}));
  EXPECT_EQ(download(mid), (Floats{2, 3, 4, 5}));
  Tensor last = t.rows(2, 1);
  EXPECT_EQ(last.capacity(), 2);
  be().fill(last, 9.f);
  EXPECT_EQ(download(t), (Floats{0, 1, 2, 3, 9, 9}));
  EXPECT_EQ(t.rows(3, 0).numel(), 0);
  EXPECT_THROW(t.rows(2, 2), Error);
  EXPECT_THROW(t.rows(-1, 1), Error);
}

TANDEM_INSTANTIATE_BACKEND_SUITE(TensorViewTest);

class MemoryTest : public BackendTest {};

TEST_P(MemoryTest, PeakTracksAllocationsAndResets) {
  be().reset_peak_memory();
  const size_t base = be().peak_memory_bytes();
  {
    Tensor big(be(), Shape{1 << 20});  // 4 MiB
    EXPECT_GE(be().peak_memory_bytes(), base + (4u << 20));
  }
  be().reset_peak_memory();
  EXPECT_LT(be().peak_memory_bytes(), base + (4u << 20));
}

TEST_P(MemoryTest, AllocationsAre64ByteAligned) {
  for (size_t bytes : {1u, 3u, 100u, 4096u}) {
    std::shared_ptr<void> p = be().allocate(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 64, 0u) << bytes;
  }
}

// upload_ahead's copy runs on a copy stream on a GPU: it must not land before the ops queued
// before it (here gemms that write its destination, long enough that a copy started at once
// would finish first), whether it fences at the upload (nothing taken yet) or at take_uploads().
TEST_P(MemoryTest, AnUploadAheadLandsAfterTheOpsQueuedBeforeIt) {
  const bool gpu = GetParam() != "cpu";  // on the CPU the ops are done when called
  const int64_t m = 512, k = gpu ? 8192 : 512;
  Tensor a = upload({m, k}, random(m * k, 21)), b = upload({k, m}, random(k * m, 22));
  Tensor c(be(), Shape{m, m});
  std::shared_ptr<void> host = be().allocate_host(c.bytes());
  auto* h = static_cast<float*>(host.get());
  for (bool taken : {false, true}) {
    std::fill(h, h + m * m, taken ? 7.f : 5.f);
    for (int i = 0; i < (gpu ? 20 : 1); ++i) be().gemm(c, a, b, false, false, 1.f, 0.f);
    if (taken) be().take_uploads();
    be().upload_ahead(c, h);
    be().take_uploads();
    EXPECT_EQ(download(c), Floats(m * m, taken ? 7.f : 5.f)) << (taken ? "taken" : "first");
  }
}

// The ops queued after take_uploads() read what the copy wrote, however long it takes.
TEST_P(MemoryTest, OpsAfterTakeUploadsReadTheUploadedValues) {
  const int64_t n = 1 << 22;  // 16 MiB: a copy much longer than a device-to-device one
  Tensor d(be(), Shape{n}), e(be(), Shape{n});
  be().fill(d, 0.f);
  std::shared_ptr<void> host = be().allocate_host(d.bytes());
  auto* h = static_cast<float*>(host.get());
  for (int64_t i = 0; i < n; ++i) h[i] = static_cast<float>(i % 1000);
  be().upload_ahead(d, h);
  be().take_uploads();
  be().copy(e, d);
  const Floats got = download(e);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), h));
}

TANDEM_INSTANTIATE_BACKEND_SUITE(MemoryTest);

// Asked for more threads than cores, the CPU's device table says it will be slower, and what to
// use instead; at the cores' number it says nothing more.
TEST(CpuBackendInfo, MoreThreadsThanCoresAreNamedAsSlower) {
  const int cores = omp_get_num_procs();
  auto threads_row = [](const Backend& b) {
    for (const auto& [key, value] : b.info())
      if (key == "Threads") return value;
    return std::string("none");
  };
  const std::string over = threads_row(*make_cpu_backend(cores + 1));
  EXPECT_EQ(over, std::to_string(cores + 1) + " (more than the " + std::to_string(cores) +
                      " cores: slower, not faster; try --threads " + std::to_string(cores) + ")");
  EXPECT_EQ(threads_row(*make_cpu_backend(cores)), std::to_string(cores));
}

}  // namespace
}  // namespace tandem::testing
