// The update gate of every backend (backend.h): the gradients' norm, the gate it and the loss make,
// and the optimizer updates that read it on the device.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "tests/cpu/backend_test_util.h"

namespace tandem::testing {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

class UpdateGateTest : public BackendTest {
 protected:
  // A gate as a step starts it: factor 1, applies, loss scale `scale`, no growth yet.
  Tensor fresh_gate(float scale = 1.f) { return upload({kGateSize}, {1.f, 0.f, scale, 0.f, 0.f}); }
  float norm_of(const Floats& g) {
    Tensor t = upload({static_cast<int64_t>(g.size())}, g), norm(be(), Shape{1});
    be().gradient_norm(norm, t);
    return download(norm)[0];
  }
  // The gate after one step of loss `loss` and gradient norm `norm` (NaN: not computed).
  Floats gate_after(Tensor& gate, float loss, float norm, const GateParams& p) {
    Tensor l = upload({1}, {loss});
    Tensor n = upload({1}, {norm});
    be().update_gate(gate, l, std::isnan(norm) && !p.check_gradients ? nullptr : &n, p);
    return download(gate);
  }
};

TEST_P(UpdateGateTest, GradientNormIsTheL2NormOfEveryElement) {
  for (int64_t n : {1, 7, 70001}) {  // 70001: several blocks and the CPU's parallel path
    const Floats g = random(n, 11, -3.f, 3.f);
    double sum = 0;
    for (float v : g) sum += static_cast<double>(v) * v;
    EXPECT_NEAR(norm_of(g), std::sqrt(sum), 1e-6 * std::sqrt(sum)) << n << " values";
  }
}

TEST_P(UpdateGateTest, GradientNormIsNotFiniteExactlyWhenAGradientIsNot) {
  Floats g = random(1000, 12);
  g[500] = kNan;
  EXPECT_TRUE(std::isnan(norm_of(g)));
  g[500] = -kInf;
  EXPECT_EQ(norm_of(g), kInf);
  // Finite values whose squares overflow a float stay finite: summed in double, clamped.
  EXPECT_EQ(norm_of(Floats(4, 3e38f)), FLT_MAX);
  EXPECT_NEAR(norm_of(Floats(4, 1e30f)), 2e30f, 1e24f);
}

TEST_P(UpdateGateTest, ANonFiniteLossSkipsTheStepAndAFiniteOneAppliesIt) {
  Tensor gate = fresh_gate();
  Floats g = gate_after(gate, kNan, kNan, {});
  EXPECT_EQ(g[kGateSkip], 1.f);
  g = gate_after(gate, kInf, kNan, {});
  EXPECT_EQ(g[kGateSkip], 1.f);
  g = gate_after(gate, 2.5f, kNan, {});
  EXPECT_EQ(g[kGateSkip], 0.f);
  EXPECT_EQ(g[kGateFactor], 1.f);
}

TEST_P(UpdateGateTest, ANonFiniteGradientSkipsOnlyWhenTheGateChecksGradients) {
  Tensor gate = fresh_gate();
  GateParams p;
  Tensor l = upload({1}, {1.f}), norm = upload({1}, {kInf});
  be().update_gate(gate, l, &norm, p);
  EXPECT_EQ(download(gate)[kGateSkip], 0.f);
  p.check_gradients = true;
  be().update_gate(gate, l, &norm, p);
  EXPECT_EQ(download(gate)[kGateSkip], 1.f);
  Tensor finite = upload({1}, {3.f});
  be().update_gate(gate, l, &finite, p);
  Floats got = download(gate);
  EXPECT_EQ(got[kGateSkip], 0.f);
  EXPECT_EQ(got[kGateGradNorm], 3.f);
}

// PyTorch's clip_grad_norm_: coef = max_norm / (norm + 1e-6), used only when below 1.
TEST_P(UpdateGateTest, ClippingScalesTheGradientsDownToMaxNormOnly) {
  Tensor gate = fresh_gate();
  GateParams p;
  p.max_norm = 1.f;
  EXPECT_FLOAT_EQ(gate_after(gate, 0.5f, 5.f, p)[kGateFactor], 1.f / (5.f + 1e-6f));
  EXPECT_EQ(gate_after(gate, 0.5f, 0.25f, p)[kGateFactor], 1.f);
}

// The gradients of a loss scaled by S are S times too big: the factor and the norm undo it.
TEST_P(UpdateGateTest, TheLossScaleIsDividedOutOfTheFactorAndTheNorm) {
  Tensor gate = fresh_gate(1024.f);
  GateParams p;
  p.max_norm = 1.f;
  Floats g = gate_after(gate, 0.5f, 4096.f, p);  // the unscaled norm is 4
  EXPECT_FLOAT_EQ(g[kGateGradNorm], 4.f);
  EXPECT_FLOAT_EQ(g[kGateFactor], (1.f / 1024.f) * (1.f / (4.f + 1e-6f)));
  EXPECT_EQ(g[kGateLossScale], 1024.f);  // no growth interval: the scale stays
}

// GradScaler: a skipped step halves the scale and restarts the count; growth_interval applied
// steps in a row double it.
TEST_P(UpdateGateTest, TheDynamicLossScaleFollowsGradScalersRules) {
  Tensor gate = fresh_gate(256.f);
  GateParams p;
  p.check_gradients = true;
  p.growth_interval = 2;
  EXPECT_EQ(gate_after(gate, 1.f, 1.f, p)[kGateLossScale], 256.f);
  Floats g = gate_after(gate, 1.f, kInf, p);
  EXPECT_EQ(g[kGateSkip], 1.f);
  EXPECT_EQ(g[kGateLossScale], 128.f);
  EXPECT_EQ(g[kGateGrowthTracker], 0.f);
  EXPECT_EQ(gate_after(gate, 1.f, 1.f, p)[kGateLossScale], 128.f);
  g = gate_after(gate, 1.f, 1.f, p);
  EXPECT_EQ(g[kGateLossScale], 256.f);
  EXPECT_EQ(g[kGateGrowthTracker], 0.f);
}

TEST_P(UpdateGateTest, ASkippedUpdateLeavesWeightsAndOptimizerStateAsTheyWere) {
  Tensor gate = upload({kGateSize}, {1.f, 1.f, 1.f, 0.f, 0.f});  // skip
  const Floats w0 = random(100, 13), g0 = random(100, 14), s0 = random(100, 15, 0.f, 1.f);
  Tensor w = upload({100}, w0), v = upload({100}, s0), m = upload({100}, s0),
         grad = upload({100}, g0);
  SgdParams sgd;
  sgd.momentum = 0.9f, sgd.gate = &gate;
  be().sgd_update(w, v, grad, sgd);
  AdamParams adam;
  adam.gate = &gate;
  be().adam_update(w, m, v, grad, adam);
  EXPECT_EQ(download(w), w0);
  EXPECT_EQ(download(v), s0);
  EXPECT_EQ(download(m), s0);
}

// The factor multiplies the gradient before anything else (weight decay, momentum, moments): the
// update equals an ungated one of factor * grad, and a factor of 1 changes no bit.
TEST_P(UpdateGateTest, AnAppliedUpdateUsesTheFactorTimesTheGradient) {
  const int64_t n = 70001;
  const Floats w0 = random(n, 16), g0 = random(n, 17);
  for (float factor : {1.f, 0.125f}) {
    Floats scaled = g0;
    for (float& x : scaled) x *= factor;
    Tensor gate = upload({kGateSize}, {factor, 0.f, 1.f, 0.f, 0.f});
    Tensor grad = upload({n}, g0), grad_scaled = upload({n}, scaled);
    SgdParams sgd;
    sgd.lr = 0.1f, sgd.momentum = 0.9f, sgd.weight_decay = 1e-3f;
    Tensor w1 = upload({n}, w0), v1 = upload({n}, Floats(n, 0.f));
    Tensor w2 = upload({n}, w0), v2 = upload({n}, Floats(n, 0.f));
    be().sgd_update(w2, v2, grad_scaled, sgd);
    sgd.gate = &gate;
    be().sgd_update(w1, v1, grad, sgd);
    EXPECT_EQ(download(w1), download(w2)) << "sgd, factor " << factor;
    AdamParams adam;
    adam.lr = 0.01f, adam.weight_decay = 0.01f;
    Tensor m1 = upload({n}, Floats(n, 0.f)), m2 = upload({n}, Floats(n, 0.f));
    Tensor s1 = upload({n}, Floats(n, 0.f)), s2 = upload({n}, Floats(n, 0.f));
    be().adam_update(w2, m2, s2, grad_scaled, adam);
    adam.gate = &gate;
    be().adam_update(w1, m1, s1, grad, adam);
    const Floats got = download(w1);
    ASSERT_TRUE(std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); }));
    EXPECT_EQ(got, download(w2)) << "adam, factor " << factor;
  }
}

TANDEM_INSTANTIATE_BACKEND_SUITE(UpdateGateTest);

}  // namespace
}  // namespace tandem::testing
