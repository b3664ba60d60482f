// Shared fixture of the backend op suites: one backend per test, parameterised by backend name.
//
// A backend that cannot be created here (no GPU, or a CPU-only build asked for "gpu") skips its
// tests with the reason printed. Data moves through upload/download only, so the same test runs
// on device memory.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/error.h"
#include "engine/tensor.h"

namespace tandem::testing {

using Floats = std::vector<float>;
using Doubles = std::vector<double>;

// Error of `got` against `ref`: max |got - ref| / max(1e-6, max |ref|). One scale for the whole
// tensor, so that entries near zero (cancellation in a sum) are judged against the typical size.
inline double relative_error(const Floats& got, const Doubles& ref) {
  double diff = 0, scale = 1e-6;
  if (got.size() != ref.size()) return INFINITY;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
    if (std::isnan(got[i]) != std::isnan(ref[i])) return INFINITY;
  }
  return diff / scale;
}

// n uniform random values in [lo, hi) from a fixed seed.
inline Floats random_floats(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Floats v(static_cast<size_t>(n));
  for (float& x : v) x = d(gen);
  return v;
}

constexpr double kTolerance = 1e-4;
// A GPU convolution against the reference, here and in the CPU/GPU parity suite: cuDNN's timed
// search or its heuristics may take an FFT or Winograd algorithm, which computes in a transformed
// domain with a larger rounding error than a direct sum (typically 1e-5..1e-4 of the output's
// scale, a few times that at worst). The CPU's oneDNN convolutions sum directly: kTolerance.
constexpr double kConvTolerance = 5e-4;

#define EXPECT_CLOSE(got, ref) \
  EXPECT_LT(::tandem::testing::relative_error((got), (ref)), ::tandem::testing::kTolerance)
// The same for a convolution of the backend under test (kConvTolerance on a GPU).
#define EXPECT_CONV_CLOSE(got, ref)                    \
  EXPECT_LT(                                           \
      ::tandem::testing::relative_error((got), (ref)), \
      GetParam() == "cpu" ? ::tandem::testing::kTolerance : ::tandem::testing::kConvTolerance)

class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { start(GetParam()); }
  // Creates backend `name`, or skips the test with the reason (the caller checks IsSkipped()).
  void start(const std::string& name, const BackendOptions& options = {}) {
    try {
      backend_ = create_backend(name, options);
    } catch (const DeviceError& e) {
      GTEST_SKIP() << "backend '" << name << "' unavailable: " << e.cause() << " (" << e.hint()
                   << ")";
    }
  }

  Backend& be() { return *backend_; }

  Tensor upload(const Shape& s, const Floats& host) {
    Tensor t(be(), s);
    EXPECT_EQ(static_cast<int64_t>(host.size()), t.numel());
    be().upload(t, host.data());
    return t;
  }
  Tensor upload_labels(const std::vector<int32_t>& host) {
    Tensor t(be(), Shape{static_cast<int64_t>(host.size())}, DType::kI32);
    be().upload(t, host.data());
    return t;
  }
  // Uniform random values in [lo, hi) from a fixed seed (random_floats).
  static Floats random(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
    return random_floats(n, seed, lo, hi);
  }
  Floats download(const Tensor& t) {
    be().synchronize();
    Floats v(t.numel());
    be().download(v.data(), t);
    return v;
  }
  // An output tensor pre-filled with NaN, so an op that leaves entries unwritten fails.
  Tensor output(const Shape& s) {
    Tensor t(be(), s);
    be().fill(t, NAN);
    return t;
  }

  std::unique_ptr<Backend> backend_;
};

inline std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace tandem::testing

// Instantiates a BackendTest-derived suite for every backend name.
#define TANDEM_INSTANTIATE_BACKEND_SUITE(Suite)                              \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::Values("cpu", "gpu"), \
                           ::tandem::testing::backend_param_name)
