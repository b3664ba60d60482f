// fp16's loss scaling is GradScaler's, run by the update gate's arithmetic (gate_step, the same
// function the CPU loops and the GPU kernels call): start at 2^16, halve and skip on a
// non-finite gradient, double after 2000 applied steps in a row.
#include "engine/loss_scaling.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/optimizer_math.h"

namespace tandem {
namespace {

// The gate as a run with loss scaling starts it.
struct Gate {
  float g[kGateSize] = {1.f, 0.f, kInitialLossScale, 0.f, 0.f};
  // One step of loss 1 whose (scaled) gradients have this norm.
  void step(float norm) { gate_step(g, 1.f, norm, true, loss_scaling_gate()); }
  float scale() const { return g[kGateLossScale]; }
  bool skipped() const { return g[kGateSkip] != 0.f; }
};

TEST(LossScaling, StartsAtTwoToTheSixteenAndUnscalesTheGradients) {
  Gate gate;
  EXPECT_EQ(gate.scale(), 65536.f);
  gate.step(1.f);
  EXPECT_FALSE(gate.skipped());
  EXPECT_EQ(gate.g[kGateFactor], 1.f / 65536.f);  // the update divides by S
}

TEST(LossScaling, ANonFiniteGradientSkipsTheStepAndHalvesTheScale) {
  Gate gate;
  gate.step(INFINITY);
  EXPECT_TRUE(gate.skipped());
  EXPECT_EQ(gate.scale(), 32768.f);
  gate.step(NAN);
  EXPECT_TRUE(gate.skipped());
  EXPECT_EQ(gate.scale(), 16384.f);
}

TEST(LossScaling, TwoThousandAppliedStepsInARowDoubleTheScale) {
  Gate gate;
  for (int i = 0; i < 1999; ++i) gate.step(1.f);
  EXPECT_EQ(gate.scale(), 65536.f);
  gate.step(1.f);
  EXPECT_EQ(gate.scale(), 131072.f);
  EXPECT_EQ(gate.g[kGateGrowthTracker], 0.f);
}

TEST(LossScaling, AnOverflowRestartsTheCountTowardsGrowth) {
  Gate gate;
  for (int i = 0; i < 1500; ++i) gate.step(1.f);
  gate.step(INFINITY);  // 32768, the count starts again
  for (int i = 0; i < 1999; ++i) gate.step(1.f);
  EXPECT_EQ(gate.scale(), 32768.f);
  gate.step(1.f);
  EXPECT_EQ(gate.scale(), 65536.f);
}

}  // namespace
}  // namespace tandem
