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

}  // namespace
}  // namespace tandem
