// The pooling window geometry of the GPU's backward kernels (cuda/pool_windows.h) against a plain
// scan of every window, over kernels, strides, paddings and sizes; run on every machine.
#include "cuda/pool_windows.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/backend.h"

namespace tandem {
namespace {

TEST(PoolWindows, CoveringWindowsAreExactlyThoseThatContainTheRow) {
  for (int kernel = 1; kernel <= 5; ++kernel) {
    for (int stride = 1; stride <= 4; ++stride) {
      for (int pad = 0; pad < kernel; ++pad) {
        for (int size = 1; size <= 13; ++size) {
          const int64_t out = conv_out_size(size, kernel, stride, pad);
          if (out < 1) continue;
          for (int i = 0; i < size; ++i) {
            int first = -1, last = -2;
            for (int o = 0; o < out; ++o) {
              const int start = o * stride - pad;
              if (start <= i && i < start + kernel) {
                if (first < 0) first = o;
                last = o;
              }
            }
            const WindowRange r = covering_windows(i, kernel, stride, pad, static_cast<int>(out));
            SCOPED_TRACE(::testing::Message()
                         << "kernel " << kernel << " stride " << stride << " pad " << pad
                         << " size " << size << " row " << i);
            if (first < 0) {
              EXPECT_GT(r.first, r.last);
            } else {
              EXPECT_EQ(r.first, first);
              EXPECT_EQ(r.last, last);
            }
          }
        }
      }
    }
  }
}

TEST(PoolWindows, SpanIsTheWindowClippedToTheInput) {
  // 9 rows, kernel 3, stride 2, pad 1: windows start at -1, 1, 3, 5, 7.
  const int starts[] = {-1, 1, 3, 5, 7};
  for (int o = 0; o < 5; ++o) {
    const WindowSpan s = window_span(o, 3, 2, 1, 9);
    EXPECT_EQ(s.begin, std::max(starts[o], 0)) << o;
    EXPECT_EQ(s.end, std::min(starts[o] + 3, 9)) << o;
  }
  const WindowSpan last = window_span(2, 2, 2, 0, 7);  // 2x2 windows over 7 rows: row 6 in none
  EXPECT_EQ(last.begin, 4);
  EXPECT_EQ(last.end, 6);
}

}  // namespace
}  // namespace tandem
