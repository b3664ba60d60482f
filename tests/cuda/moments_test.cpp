// Batch normalization's one-pass statistics on the GPU (cuda/moments.h): shifted sums per thread,
// merged pairwise, against the two-pass mean and variance in double; run on every machine.
#include "cuda/moments.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace tandem {
namespace {

struct Exact {
  double mean, variance;  // biased
};

Exact two_pass(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += v;
  const double mean = s / static_cast<double>(x.size());
  double q = 0;
  for (float v : x) q += (v - mean) * (v - mean);
  return {mean, q / static_cast<double>(x.size())};
}

// As the kernels: `threads` threads take every threads-th value, each thread's shifted sums
// become moments, merged pairwise in float (a block's tree), then in double in order.
Exact as_the_gpu(const std::vector<float>& x, int threads) {
  std::vector<float> n(threads), mean(threads), m2(threads);
  for (int t = 0; t < threads; ++t) {
    ShiftedSums s;
    for (size_t i = t; i < x.size(); i += threads) s.add(x[i]);
    const Moments m = s.moments();
    n[t] = m.n, mean[t] = m.mean, m2[t] = m.m2;
  }
  for (int stride = threads / 2; stride > 0; stride /= 2)
    for (int t = 0; t < stride; ++t)
      merge_moments(n[t], mean[t], m2[t], n[t + stride], mean[t + stride], m2[t + stride]);
  double dn = 0, dmean = 0, dm2 = 0;
  merge_moments<double>(dn, dmean, dm2, n[0], mean[0], m2[0]);
  return {dmean, dm2 / dn};
}

std::vector<float> normal(size_t count, double mean, double stddev, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(mean, stddev);
  std::vector<float> x(count);
  for (float& v : x) v = static_cast<float>(d(gen));
  return x;
}

TEST(Moments, OnePassMeanAndVarianceMatchTheTwoPassOnes) {
  for (size_t count : {2u, 3u, 255u, 1000u, 50000u}) {
    const std::vector<float> x = normal(count, 0.5, 2.0, static_cast<unsigned>(count));
    const Exact want = two_pass(x), got = as_the_gpu(x, 256);
    EXPECT_NEAR(got.mean, want.mean, 1e-6 * (1 + std::abs(want.mean))) << count;
    EXPECT_NEAR(got.variance, want.variance, 1e-5 * want.variance) << count;
  }
}

// A plain sum of x^2 in float loses the variance of values around 1e4 with spread 1 entirely
// (x^2 ~ 1e8, float keeps 7 digits); the shifted sums do not.
TEST(Moments, AMeanFarFromZeroCostsNoPrecision) {
  const std::vector<float> x = normal(50000, 1e4, 1.0, 7);
  const Exact want = two_pass(x), got = as_the_gpu(x, 256);
  EXPECT_NEAR(got.variance, want.variance, 1e-4 * want.variance);
  EXPECT_NEAR(got.mean, want.mean, 1e-6 * want.mean);
}

// Threads with no values (fewer values than threads) add nothing.
TEST(Moments, EmptyThreadsAddNothing) {
  const std::vector<float> x{1.f, 2.f, 4.f};
  const Exact got = as_the_gpu(x, 256);
  EXPECT_NEAR(got.mean, 7.0 / 3, 1e-6);
  EXPECT_NEAR(got.variance, (16.0 / 9 + 1.0 / 9 + 25.0 / 9) / 3, 1e-6);
}

}  // namespace
}  // namespace tandem
