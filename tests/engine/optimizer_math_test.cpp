// Adam's element update and per-step scalars (engine/optimizer_math.h), which the CPU backend's
// loop and the GPU's kernel both call, against the double-precision reference; run on every
// machine.
#include "engine/optimizer_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/reference/reference.h"

namespace tandem {
namespace {

// The bias corrections use the 1-based step: Adam's first step moves a weight by lr (its
// corrected moments are g and g^2), whatever the gradient's size.
TEST(OptimizerMath, AdamsFirstStepMovesEachWeightByTheLearningRate) {
  AdamParams p;
  p.lr = 0.1f, p.step = 1;
  const AdamScalars s = adam_scalars(p);
  EXPECT_FLOAT_EQ(s.step_size, 1.0f);               // 0.1 / (1 - 0.9)
  EXPECT_NEAR(s.bc2_sqrt, std::sqrt(0.001), 1e-6);  // beta2 is the fp32 0.999
  for (float g : {0.5f, -3e-4f, 20.f}) {
    float m = 0.f, v = 0.f;
    const float w = adam_element(1.f, m, v, g, p.beta1, p.beta2, p.eps, s);
    EXPECT_NEAR(w, g > 0 ? 0.9f : 1.1f, 1e-4) << "gradient " << g;
  }
}

TEST(OptimizerMath, AdamAndAdamWFollowTheReferenceOverManySteps) {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const size_t n = 64;
  for (bool decoupled : {false, true}) {
    AdamParams p;
    p.lr = 1e-2f, p.weight_decay = 5e-2f, p.decoupled = decoupled;
    std::vector<float> w(n), m(n, 0.f), v(n, 0.f);
    for (float& x : w) x = d(gen);
    reference::Doubles rw(w.begin(), w.end()), rm(n, 0.0), rv(n, 0.0);
    for (p.step = 1; p.step <= 200; ++p.step) {
      std::vector<float> g(n);
      for (float& x : g) x = d(gen);
      const AdamScalars s = adam_scalars(p);
      for (size_t i = 0; i < n; ++i)
        w[i] = adam_element(w[i], m[i], v[i], g[i], p.beta1, p.beta2, p.eps, s);
      reference::adam_update(rw, rm, rv, reference::Doubles(g.begin(), g.end()), p);
    }
    for (size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(w[i], rw[i], 1e-4) << "decoupled " << decoupled << " element " << i;
      EXPECT_NEAR(m[i], rm[i], 1e-5) << "decoupled " << decoupled << " element " << i;
      EXPECT_NEAR(v[i], rv[i], 1e-5) << "decoupled " << decoupled << " element " << i;
    }
  }
}

// AdamW decays the weight itself and adds nothing to the gradient; Adam does the opposite.
TEST(OptimizerMath, WeightDecayIsDecoupledOnlyForAdamW) {
  AdamParams p;
  p.lr = 0.1f, p.weight_decay = 0.5f;
  p.decoupled = true;
  AdamScalars s = adam_scalars(p);
  EXPECT_FLOAT_EQ(s.decay, 0.95f);
  EXPECT_EQ(s.coupled_wd, 0.f);
  p.decoupled = false;
  s = adam_scalars(p);
  EXPECT_EQ(s.decay, 1.f);
  EXPECT_EQ(s.coupled_wd, 0.5f);
}

}  // namespace
}  // namespace tandem
