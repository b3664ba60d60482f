// The element positions of the GPU's grid-stride kernels (cuda/index_math.h) against plain 64-bit
// arithmetic, on both sides of the 32-bit limit; run on every machine.
#include "cuda/index_math.h"

#include <gtest/gtest.h>

#include <vector>

namespace tandem {
namespace {

// Indices to try in a tensor of n elements: its start, its end and a spread between.
std::vector<int64_t> probes(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < 64 && k < n; ++k) out.push_back(k), out.push_back(n - 1 - k);
  for (int64_t k = 1; k < 1000; ++k) out.push_back(n / 1000 * k + k % 7);
  return out;
}

TEST(IndexMath, ChannelOfEqualsTheSixtyFourBitFormula) {
  struct Case {
    int64_t n, c, inner;
  };
  const Case cases[] = {
      {128, 64, 32 * 32},
      {3, 17, 1},
      {1, 1, 1},
      {7, 3, 49},
      {1024, 512, 1},
      {4, 1, 1 << 20},
      {255, 255, 257},
      // the largest tensors that take the 32-bit path, and the first that do not
      {65535, 65537, 1},
      {65537, 1, 65535},
      {1, 3, 1431655765},
      {2, 65537, 32768},
      {3, 5, 286331153},
      {1, 1, 1LL << 33},
  };
  for (const Case& k : cases) {
    const int64_t numel = k.n * k.c * k.inner;
    SCOPED_TRACE(testing::Message() << k.n << "x" << k.c << "x" << k.inner << " = " << numel);
    for (int64_t i : probes(numel)) {
      ASSERT_EQ(channel_of(i, k.inner, k.c, numel), (i / k.inner) % k.c) << "element " << i;
    }
  }
}

TEST(IndexMath, PlanePosEqualsTheSixtyFourBitFormula) {
  struct Case {
    int64_t planes;
    int h, w;
  };
  const Case cases[] = {
      {128 * 32, 32, 32}, {1, 1, 1},         {5, 7, 9},         {3, 1, 13},        {2, 13, 1},
      {1, 65535, 65537},  {65537, 257, 255}, {1, 65536, 65536}, {3, 46341, 46341},
  };
  for (const Case& k : cases) {
    const int64_t numel = k.planes * k.h * k.w;
    SCOPED_TRACE(testing::Message() << k.planes << "x" << k.h << "x" << k.w << " = " << numel);
    for (int64_t i : probes(numel)) {
      const PlanePos p = plane_pos(i, k.h, k.w, numel);
      ASSERT_EQ(p.plane, i / (static_cast<int64_t>(k.h) * k.w)) << "element " << i;
      ASSERT_EQ(p.h, (i / k.w) % k.h) << "element " << i;
      ASSERT_EQ(p.w, i % k.w) << "element " << i;
    }
  }
}

// Logical (N,C,H,W) index to channels-last (N,H,W,C) memory: the copy kernel's mapping.
TEST(IndexMath, ChannelsLastOffsetEqualsTheNhwcFormula) {
  struct Case {
    int64_t n, c, hw;
  };
  const Case cases[] = {
      {1, 2, 6},
      {2, 3, 1},
      {64, 20, 24 * 24},
      {3, 17, 63},
      {5, 1, 49},
      {1, 65537, 65535},  // the largest that takes the 32-bit path
      {2, 3, 715827883},  // past it: 64-bit arithmetic
  };
  for (const Case& k : cases) {
    const int64_t numel = k.n * k.c * k.hw;
    SCOPED_TRACE(testing::Message() << k.n << "x" << k.c << "x" << k.hw << " = " << numel);
    for (int64_t i : probes(numel)) {
      const int64_t n = i / (k.c * k.hw), c = (i / k.hw) % k.c, s = i % k.hw;
      ASSERT_EQ(channels_last_offset(i, k.c, k.hw, numel), (n * k.hw + s) * k.c + c)
          << "element " << i;
    }
  }
  // (1,2,2,3), the bf16 ops test's example: every slot of memory is hit once.
  std::vector<int> hits(12, 0);
  for (int64_t i = 0; i < 12; ++i) ++hits[static_cast<size_t>(channels_last_offset(i, 2, 6, 12))];
  EXPECT_EQ(hits, std::vector<int>(12, 1));
  EXPECT_EQ(channels_last_offset(1, 2, 6, 12), 2);  // (c 0, h 0, w 1) follows (c 1, h 0, w 0)
  EXPECT_EQ(channels_last_offset(6, 2, 6, 12), 1);  // (c 1, h 0, w 0)
}

}  // namespace
}  // namespace tandem
