// The CPU's arithmetic peak (the roofline of `trainer bench`): measured, remembered, and an upper
// bound on what the CPU's own fastest kernel reaches.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "cpu/cpu_backend.h"

namespace tandem {
namespace {

TEST(CpuPeak, IsMeasuredOnceAndRemembered) {
  std::unique_ptr<Backend> cpu = make_cpu_backend(1);
  const ArithmeticPeak first = cpu->arithmetic_peak(DType::kF32);
  ASSERT_GT(first.gflops, 0) << first.how;
  EXPECT_EQ(first.how.rfind("measured: ", 0), 0u) << first.how;
  EXPECT_NE(first.how.find("1 thread,"), std::string::npos) << first.how;
  const ArithmeticPeak again = cpu->arithmetic_peak(DType::kF32);
  EXPECT_EQ(again.gflops, first.gflops);
  const ArithmeticPeak bf16 = cpu->arithmetic_peak(DType::kBF16);
  EXPECT_GT(bf16.gflops, 0) << bf16.how;
  if (__builtin_cpu_supports("avx512bf16"))
    EXPECT_NE(bf16.how.find("vdpbf16ps"), std::string::npos) << bf16.how;
  else
    EXPECT_EQ(bf16.gflops, first.gflops) << "without a bf16 dot product bf16 computes in fp32";
}

// A peak that undercounts (one dependency chain, one thread of several, narrow vectors) would
// sit below what oneDNN's matrix product reaches. Best of 3 products against the peak, with room
// for a turbo clock that a short register loop and a longer product do not share.
TEST(CpuPeak, IsAboveWhatTheFastestMatrixProductReaches) {
  std::unique_ptr<Backend> cpu = make_cpu_backend(0);
  const int64_t n = 768;
  Tensor a(*cpu, Shape{n, n}), b(*cpu, Shape{n, n}), c(*cpu, Shape{n, n});
  cpu->fill(a, 0.5f);
  cpu->fill(b, 0.25f);
  cpu->gemm(c, a, b, false, false, 1.f, 0.f);  // primitive creation, first touch
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    cpu->gemm(c, a, b, false, false, 1.f, 0.f);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / sec / 1e9);
  }
  std::vector<float> out(static_cast<size_t>(n * n));
  cpu->download(out.data(), c);
  ASSERT_FLOAT_EQ(out[0], 0.125f * n);
  const ArithmeticPeak peak = cpu->arithmetic_peak(DType::kF32);
  EXPECT_LE(best, 1.15 * peak.gflops) << "matrix product " << best << " GFLOP/s, peak " << peak.how;
}

}  // namespace
}  // namespace tandem
