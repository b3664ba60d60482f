// Synthetic data: deterministic per seed, different across seeds, balanced, and learnable.
#include "datasets/synthetic.h"

#include <gtest/gtest.h>

#include "engine/error.h"

namespace tandem {
namespace {

TEST(Synthetic, SameSeedGivesTheSameBytes) {
  Dataset a = make_synthetic(Shape{1, 28, 28}, 10, 64, 42, true);
  Dataset b = make_synthetic(Shape{1, 28, 28}, 10, 64, 42, true);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
}

TEST(Synthetic, OtherSeedGivesOtherImages) {
  Dataset a = make_synthetic(Shape{1, 28, 28}, 10, 64, 42, true);
  Dataset b = make_synthetic(Shape{1, 28, 28}, 10, 64, 43, true);
  EXPECT_NE(a.images, b.images);
}

TEST(Synthetic, TrainAndTestSplitsDiffer) {
  Dataset a = make_synthetic(Shape{1, 28, 28}, 10, 64, 42, true);
  Dataset b = make_synthetic(Shape{1, 28, 28}, 10, 64, 42, false);
  EXPECT_NE(a.images, b.images);
}

TEST(Synthetic, ASizeBeyondAnyMemoryIsADataErrorNamingTheKey) {
  // 9e18 samples of 144 bytes overflow the byte count: an internal error before.
  try {
    make_synthetic(Shape{1, 12, 12}, 4, 9000000000000000000, 3, true);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(e.cause(),
              "the synthetic train (seed 3) data: 9000000000000000000 samples of [1, 12, 12] take "
              "more than 8 EiB, more memory than this machine has");
    EXPECT_EQ(e.hint(), "lower data.train_size (synthetic data is kept in memory)");
  }
  try {
    make_synthetic(Shape{1, 12, 12}, 4, 9000000000000000000, 3, false);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(e.hint(), "lower data.test_size (synthetic data is kept in memory)");
  }
}

TEST(Synthetic, ShapeSizeAndBalancedLabels) {
  Dataset d = make_synthetic(Shape{3, 8, 6}, 4, 40, 1, true);
  EXPECT_EQ(d.sample_shape, (Shape{3, 8, 6}));
  EXPECT_EQ(d.size(), 40);
  EXPECT_EQ(d.images.size(), 40u * 144u);
  EXPECT_EQ(d.classes, 4);
  std::vector<int> count(4, 0);
  for (int32_t l : d.labels) count.at(l)++;
  EXPECT_EQ(count, (std::vector<int>{10, 10, 10, 10}));
}

TEST(Synthetic, PixelsSpreadOverTheByteRange) {
  Dataset d = make_synthetic(Shape{1, 28, 28}, 10, 32, 5, true);
  double sum = 0;
  int lo = 255, hi = 0;
  for (uint8_t v : d.images) {
    sum += v;
    lo = std::min<int>(lo, v);
    hi = std::max<int>(hi, v);
  }
  EXPECT_NEAR(sum / d.images.size(), 128.0, 8.0);
  EXPECT_LT(lo, 20);
  EXPECT_GT(hi, 235);
}

// The class signal is there: the nearest class mean of the train split classifies the test split
// far above chance (an MLP then reaches > 90% within two epochs on 1x28x28).
TEST(Synthetic, NearestClassMeanClassifiesTheTestSplit) {
  const Shape shape{1, 28, 28};
  const int classes = 10;
  Dataset train = make_synthetic(shape, classes, 500, 3, true);
  Dataset test = make_synthetic(shape, classes, 200, 3, false);
  const int64_t n = shape.numel();
  std::vector<double> mean(classes * n, 0.0);
  for (int64_t i = 0; i < train.size(); ++i)
    for (int64_t j = 0; j < n; ++j) mean[train.labels[i] * n + j] += train.images[i * n + j] / 50.0;
  int right = 0;
  for (int64_t i = 0; i < test.size(); ++i) {
    int best = -1;
    double best_d = 1e300;
    for (int c = 0; c < classes; ++c) {
      double d = 0;
      for (int64_t j = 0; j < n; ++j) {
        double t = test.images[i * n + j] - mean[c * n + j];
        d += t * t;
      }
      if (d < best_d) best_d = d, best = c;
    }
    right += best == test.labels[i];
  }
  EXPECT_GT(right, 180);
}

}  // namespace
}  // namespace tandem
