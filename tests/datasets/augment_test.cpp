// Augmentation in the Batcher: random crop with padding and horizontal flip, reproducible from
// the seed, and exactly the pixel moves they promise.
#include <gtest/gtest.h>

#include <set>

#include "datasets/dataset.h"
#include "engine/error.h"

namespace tandem {
namespace {

// n images (1,H,W) whose pixel (y, x) is 1 + y * W + x (so 0 only where padding came in).
Dataset ramps(int64_t n, int64_t h, int64_t w) {
  Dataset d;
  d.name = "ramps";
  d.sample_shape = Shape{1, h, w};
  d.classes = 2;
  for (int64_t i = 0; i < n; ++i) {
    d.labels.push_back(static_cast<int32_t>(i % 2));
    for (int64_t p = 0; p < h * w; ++p) d.images.push_back(static_cast<uint8_t>(1 + p));
  }
  return d;
}

// Raw pixel values back (mean 0, std 1/255 makes the batch hold the uint8 values themselves).
std::vector<float> batch0(Batcher& b, int64_t epoch, int64_t n, int64_t numel) {
  b.start_epoch(epoch);
  std::vector<float> x(static_cast<size_t>(n * numel));
  std::vector<int32_t> y(static_cast<size_t>(n));
  b.fill(0, x.data(), y.data());
  return x;
}

const std::vector<float> kRaw{0.f}, kUnit{1.f / 255.f};

TEST(Augment, FlipMirrorsRowsOfAboutHalfTheSamples) {
  const int64_t n = 200, h = 3, w = 5;
  Dataset d = ramps(n, h, w);
  Batcher b(d, n, false, 7, kRaw, kUnit);
  b.set_augment({0, true});
  std::vector<float> x = batch0(b, 0, n, h * w);
  int flipped = 0;
  for (int64_t k = 0; k < n; ++k) {
    const float* s = x.data() + k * h * w;
    const bool mirrored = s[0] == static_cast<float>(w);  // pixel (0, w-1) moved to (0, 0)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t xx = 0; xx < w; ++xx) {
        const int64_t src = mirrored ? w - 1 - xx : xx;
        ASSERT_EQ(s[y * w + xx], static_cast<float>(1 + y * w + src)) << "sample " << k;
      }
    flipped += mirrored;
  }
  EXPECT_GT(flipped, 70);
  EXPECT_LT(flipped, 130);
}

TEST(Augment, CropShiftsByAtMostThePaddingAndFillsWithZeros) {
  const int64_t n = 300, h = 6, w = 6, pad = 2;
  Dataset d = ramps(n, h, w);
  Batcher b(d, n, false, 3, kRaw, kUnit);
  b.set_augment({static_cast<int>(pad), false});
  std::vector<float> x = batch0(b, 0, n, h * w);
  std::set<std::pair<int64_t, int64_t>> shifts;
  for (int64_t k = 0; k < n; ++k) {
    const float* s = x.data() + k * h * w;
    // Find the shift from any inside pixel, then check every pixel against it.
    int64_t dy = 99, dx = 99;
    for (int64_t p = 0; p < h * w && dy == 99; ++p)
      if (s[p] != 0) {
        const int64_t src = static_cast<int64_t>(s[p]) - 1;
        dy = src / w - p / w, dx = src % w - p % w;
      }
    ASSERT_LE(std::abs(dy), pad);
    ASSERT_LE(std::abs(dx), pad);
    for (int64_t y = 0; y < h; ++y)
      for (int64_t xx = 0; xx < w; ++xx) {
        const int64_t sy = y + dy, sx = xx + dx;
        const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
        ASSERT_EQ(s[y * w + xx], inside ? static_cast<float>(1 + sy * w + sx) : 0.f) << k;
      }
    shifts.insert({dy, dx});
  }
  EXPECT_EQ(shifts.size(), 25u) << "every offset in [-2, 2]^2 should occur in 300 draws";
}

TEST(Augment, SameSeedSameBatchesOtherEpochOtherDraws) {
  const int64_t n = 64, h = 8, w = 8;
  Dataset d = ramps(n, h, w);
  Batcher a(d, n, true, 11, kRaw, kUnit), b(d, n, true, 11, kRaw, kUnit);
  a.set_augment({2, true});
  b.set_augment({2, true});
  EXPECT_EQ(batch0(a, 0, n, h * w), batch0(b, 0, n, h * w));
  EXPECT_EQ(batch0(a, 3, n, h * w), batch0(b, 3, n, h * w));
  EXPECT_NE(batch0(a, 0, n, h * w), batch0(a, 1, n, h * w));
}

TEST(Augment, FlatSamplesAreRefused) {
  Dataset d;
  d.name = "flat";
  d.sample_shape = Shape{16};
  d.classes = 2;
  d.images.assign(16, 1);
  d.labels.assign(1, 0);
  Batcher b(d, 1, false, 0, {}, {});
  EXPECT_THROW(b.set_augment({0, true}), DataError);
}

}  // namespace
}  // namespace tandem
