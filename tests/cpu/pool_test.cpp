// Max and average pooling forward and backward of every backend against the reference.
#include <cmath>
#include <string>
#include <vector>

#include "tests/cpu/backend_test_util.h"
#include "tests/reference/reference.h"

namespace tandem::testing {
namespace {

struct PoolCase {
  std::string name;
  int64_t n, c, h, w;
  Pool2dParams p;
};

Pool2dParams pool(PoolMode mode, int kh, int kw, int sh, int sw, int ph = 0, int pw = 0) {
  Pool2dParams p;
  p.mode = mode, p.kernel_h = kh, p.kernel_w = kw, p.stride_h = sh, p.stride_w = sw, p.pad_h = ph,
  p.pad_w = pw;
  return p;
}

Pool2dParams ceil(Pool2dParams p) {
  p.ceil_mode = true;
  return p;
}

std::vector<PoolCase> pool_cases() {
  const PoolMode kMax = PoolMode::kMax, kAvg = PoolMode::kAverage;
  return {
      {"max_2x2_s2", 2, 3, 8, 8, pool(kMax, 2, 2, 2, 2)},
      {"max_2x2_s2_odd", 1, 5, 7, 9, pool(kMax, 2, 2, 2, 2)},
      {"max_3x3_s2_pad1", 2, 3, 9, 10, pool(kMax, 3, 3, 2, 2, 1, 1)},
      {"max_3x2_s21", 2, 17, 6, 7, pool(kMax, 3, 2, 2, 1)},
      {"avg_2x2_s2", 2, 3, 8, 8, pool(kAvg, 2, 2, 2, 2)},
      {"avg_3x3_s1_pad1", 1, 4, 7, 5, pool(kAvg, 3, 3, 1, 1, 1, 1)},
      {"avg_3x3_s2_pad1_nonsquare", 2, 3, 9, 6, pool(kAvg, 3, 3, 2, 2, 1, 1)},
      // ceil_mode: a last, partial window on each odd axis (SqueezeNet's 3x3 stride 2), one that
      // would start in the end padding left out, and 2x2 stride 2 on odd sizes.
      {"max_3x3_s2_ceil", 2, 3, 8, 7, ceil(pool(kMax, 3, 3, 2, 2))},
      {"max_2x2_s2_ceil_odd", 1, 4, 7, 5, ceil(pool(kMax, 2, 2, 2, 2))},
      {"max_3x3_s2_pad1_ceil", 1, 3, 6, 8, ceil(pool(kMax, 3, 3, 2, 2, 1, 1))},
      {"avg_3x3_s2_ceil", 2, 3, 8, 7, ceil(pool(kAvg, 3, 3, 2, 2))},
      {"avg_2x2_s2_pad1_ceil", 1, 2, 5, 6, ceil(pool(kAvg, 2, 2, 2, 2, 1, 1))},
  };
}

class PoolTest : public BackendTest {};

TEST_P(PoolTest, ForwardMatchesReference) {
  uint32_t seed = 10;
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(c.name);
    const int64_t P = pool_out_size(c.h, c.p.kernel_h, c.p.stride_h, c.p.pad_h, c.p.ceil_mode);
    const int64_t Q = pool_out_size(c.w, c.p.kernel_w, c.p.stride_w, c.p.pad_w, c.p.ceil_mode);
    Floats x = random(c.n * c.c * c.h * c.w, seed++);
    Tensor tx = upload({c.n, c.c, c.h, c.w}, x), y = output({c.n, c.c, P, Q});
    be().pool2d_forward(y, tx, c.p);
    EXPECT_CLOSE(download(y), reference::pool2d_forward(x, c.n, c.c, c.h, c.w, c.p));
  }
}

// Inputs on a coarse grid of values, so max windows hold ties: the gradient goes to the first.
TEST_P(PoolTest, BackwardMatchesReferenceWithTies) {
  uint32_t seed = 20;
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(c.name);
    const int64_t P = pool_out_size(c.h, c.p.kernel_h, c.p.stride_h, c.p.pad_h, c.p.ceil_mode);
    const int64_t Q = pool_out_size(c.w, c.p.kernel_w, c.p.stride_w, c.p.pad_w, c.p.ceil_mode);
    Floats x = random(c.n * c.c * c.h * c.w, seed++, -2.f, 2.f);
    for (float& v : x) v = std::round(v);
    Floats dy = random(c.n * c.c * P * Q, seed++);
    Tensor tx = upload({c.n, c.c, c.h, c.w}, x), y = output({c.n, c.c, P, Q});
    be().pool2d_forward(y, tx, c.p);
    Tensor tdy = upload({c.n, c.c, P, Q}, dy), dx = output({c.n, c.c, c.h, c.w});
    be().pool2d_backward(dx, tdy, tx, y, c.p);
    EXPECT_CLOSE(download(dx), reference::pool2d_backward(dy, x, c.n, c.c, c.h, c.w, c.p));
  }
}

// A NaN in a max window makes the window's output NaN wherever it stands in the window (as in
// PyTorch), so a non-finite activation is not hidden by the pooling after it.
TEST_P(PoolTest, MaxForwardPassesANaNOn) {
  for (const PoolCase& c : pool_cases()) {
    if (c.p.mode != PoolMode::kMax) continue;
    SCOPED_TRACE(c.name);
    const int64_t P = pool_out_size(c.h, c.p.kernel_h, c.p.stride_h, c.p.pad_h, c.p.ceil_mode);
    const int64_t Q = pool_out_size(c.w, c.p.kernel_w, c.p.stride_w, c.p.pad_w, c.p.ceil_mode);
    Floats x = random(c.n * c.c * c.h * c.w, 30);
    for (size_t i = 0; i < x.size(); i += 7) x[i] = NAN;
    Tensor tx = upload({c.n, c.c, c.h, c.w}, x), y = output({c.n, c.c, P, Q});
    be().pool2d_forward(y, tx, c.p);
    Floats got = download(y);
    Doubles want = reference::pool2d_forward(x, c.n, c.c, c.h, c.w, c.p);
    int64_t nans = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(std::isnan(got[i]), std::isnan(want[i])) << "output " << i;
      nans += std::isnan(want[i]);
    }
    EXPECT_GT(nans, 0);
  }
}

// A window holding a NaN sends its gradient to its first NaN, the element its output came from.
TEST_P(PoolTest, MaxBackwardRoutesANaNWindowToItsFirstNaN) {
  for (const PoolCase& c : pool_cases()) {
    if (c.p.mode != PoolMode::kMax) continue;
    SCOPED_TRACE(c.name);
    const int64_t P = pool_out_size(c.h, c.p.kernel_h, c.p.stride_h, c.p.pad_h, c.p.ceil_mode);
    const int64_t Q = pool_out_size(c.w, c.p.kernel_w, c.p.stride_w, c.p.pad_w, c.p.ceil_mode);
    Floats x = random(c.n * c.c * c.h * c.w, 31);
    for (size_t i = 1; i < x.size(); i += 5) x[i] = NAN;
    Floats dy = random(c.n * c.c * P * Q, 32);
    Tensor tx = upload({c.n, c.c, c.h, c.w}, x), y = output({c.n, c.c, P, Q});
    be().pool2d_forward(y, tx, c.p);
    Tensor tdy = upload({c.n, c.c, P, Q}, dy), dx = output({c.n, c.c, c.h, c.w});
    be().pool2d_backward(dx, tdy, tx, y, c.p);
    EXPECT_CLOSE(download(dx), reference::pool2d_backward(dy, x, c.n, c.c, c.h, c.w, c.p));
  }
}

TANDEM_INSTANTIATE_BACKEND_SUITE(PoolTest);

}  // namespace
}  // namespace tandem::testing
