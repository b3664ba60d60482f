// Per-channel mean and sum of squared deviations in one pass over the values (batch normalization's
// statistics), shared with plain host code so that the arithmetic is tested without a GPU.
//
// Each thread sums its values' deviations from the first one it reads (a shift close to the data,
// so the sum of squares does not cancel as a plain sum of x^2 would for a mean far from zero);
// the threads' moments are then merged pairwise by Chan et al.'s formula, which is exact in
// exact arithmetic and as stable as the two-pass variance.
#pragma once

#if defined(__CUDACC__)
#define TANDEM_MOMENTS_HD __host__ __device__ __forceinline__
#else
#define TANDEM_MOMENTS_HD inline
#endif

namespace tandem {

// n values, their mean, and the sum of their squared deviations from it.
struct Moments {
  float n, mean, m2;
};

// One thread's values: their count, and the sums of (x - shift) and (x - shift)^2.
struct ShiftedSums {
  float shift = 0.f, n = 0.f, s1 = 0.f, s2 = 0.f;
  TANDEM_MOMENTS_HD void add(float x) {
    if (n == 0.f) shift = x;
    const float d = x - shift;
    n += 1.f;
    s1 += d;
    s2 += d * d;
  }
  TANDEM_MOMENTS_HD Moments moments() const {
    if (n == 0.f) return {0.f, 0.f, 0.f};
    const float dm = s1 / n;
    const float m2 = s2 - s1 * dm;
    return {n, shift + dm, m2 > 0.f ? m2 : 0.f};
  }
};

// The moments of the union of two sets of values (Chan, Golub and LeVeque), in T (float in the
// block merges, double in the final one).
template <typename T>
TANDEM_MOMENTS_HD void merge_moments(T& n, T& mean, T& m2, T nb, T mean_b, T m2_b) {
  const T total = n + nb;
  if (nb == T(0)) return;
  const T delta = mean_b - mean, f = nb / total;
  mean += delta * f;
  m2 += m2_b + delta * delta * n * f;
  n = total;
}

}  // namespace tandem
