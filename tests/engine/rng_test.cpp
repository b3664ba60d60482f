// The Philox RNG: known-answer vectors, determinism, and the statistics init relies on.
#include "engine/rng.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/graph.h"
#include "layers/init_choice.h"

namespace tandem {
namespace {

TEST(Philox, MatchesTheRandom123KnownAnswers) {
  // Known-answer tests of Philox-4x32-10 from the Random123 distribution (kat_vectors).
  Philox4 zero = philox4x32_10(0, 0, 0, 0, 0);
  EXPECT_EQ(zero.v[0], 0x6627e8d5u);
  EXPECT_EQ(zero.v[1], 0xe169c58du);
  EXPECT_EQ(zero.v[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.v[3], 0x9b00dbd8u);
  Philox4 ones =
      philox4x32_10(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffffffffffull);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[1], 0x41c83b0eu);
  EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
}

TEST(Philox, UniformIsInTheUnitIntervalWithMeanOneHalf) {
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    float u = philox_uniform(42, 7, static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
}

TEST(Philox, NormalHasZeroMeanAndUnitVariance) {
  double sum = 0, sq = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    double x = philox_normal(1, 2, static_cast<uint64_t>(i));
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
}

TEST(Init, HeNormalHasTheVarianceOfItsFanIn) {
  Param p;
  p.shape = Shape{200, 100};
  p.init = Init::kHeNormal;
  p.fan_in = 100;
  std::vector<float> v = Graph::initial_values(p, 42, 1);
  double sq = 0;
  for (float x : v) sq += static_cast<double>(x) * x;
  EXPECT_NEAR(sq / static_cast<double>(v.size()), 2.0 / 100, 0.002);
  EXPECT_EQ(v, Graph::initial_values(p, 42, 1));  // same seed and stream, same weights
  EXPECT_NE(v, Graph::initial_values(p, 42, 2));
}

// Unless a layer names its init: He uniform before the ReLU family, Glorot before the bounded
// activations and anything else (bench/tandem_torch.py follows the same rule).
TEST(Init, TheReluFamilyGetsHeUniformTheBoundedActivationsGlorot) {
  for (const char* next :
       {"relu", "leaky_relu", "relu6", "silu", "hardswish", "gelu", "elu", "softplus", "mish"})
    EXPECT_EQ(resolve_init("", next), Init::kHeUniform) << next;
  for (const char* next : {"sigmoid", "tanh", "hardsigmoid", "dense", "batchnorm", ""})
    EXPECT_EQ(resolve_init("", next), Init::kGlorotUniform) << next;
  EXPECT_EQ(resolve_init("pytorch", "relu"), Init::kPytorch);
}

TEST(Init, GlorotUniformStaysWithinItsBound) {
  Param p;
  p.shape = Shape{50, 30};
  p.init = Init::kGlorotUniform;
  p.fan_in = 30;
  p.fan_out = 50;
  const float bound = std::sqrt(6.0f / 80.0f);
  float max_abs = 0;
  for (float x : Graph::initial_values(p, 3, 1)) max_abs = std::max(max_abs, std::fabs(x));
  EXPECT_LE(max_abs, bound);
  EXPECT_GT(max_abs, 0.9f * bound);
}

// Dropout's kernels fill four elements from one Philox call: its words are the uniforms of the
// four indices, in order, as philox_uniform gives them one by one.
TEST(Philox, ABlockHoldsTheUniformsOfItsFourIndices) {
  for (uint64_t block : {0ull, 1ull, 12345ull, (1ull << 32) + 3}) {
    const Philox4 r = philox_block(42, 7, block);
    for (uint64_t j = 0; j < 4; ++j)
      EXPECT_EQ(philox_to_unit(r.v[j]), philox_uniform(42, 7, 4 * block + j)) << block << " " << j;
  }
}

}  // namespace
}  // namespace tandem
