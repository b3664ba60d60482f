// The fp16 loss scaler follows PyTorch's GradScaler: start at 2^16, halve and skip on a
// non-finite gradient, double after 2000 good steps in a row.
#include "engine/loss_scaler.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(LossScaler, StartsAtTwoToTheSixteen) {
  LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.good_steps(), 0);
}

TEST(LossScaler, ANonFiniteGradientSkipsTheStepAndHalvesTheScale) {
  LossScaler s;
  EXPECT_TRUE(s.update(true));
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.good_steps(), 0);  // the run of good steps starts again
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 16384.0);
}

TEST(LossScaler, TwoThousandGoodStepsDoubleTheScale) {
  LossScaler s;
  for (int i = 0; i < 1999; ++i) ASSERT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.good_steps(), 1999);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 131072.0);
  EXPECT_EQ(s.good_steps(), 0);
}

TEST(LossScaler, AnOverflowRestartsTheCountTowardsGrowth) {
  LossScaler s;
  for (int i = 0; i < 1500; ++i) s.update(true);
  s.update(false);  // 32768, count reset
  for (int i = 0; i < 1999; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 32768.0);
  s.update(true);
  EXPECT_EQ(s.scale(), 65536.0);
}

TEST(LossScaler, RestoreContinuesFromACheckpointsState) {
  LossScaler s;
  s.restore(1024.0, 1998);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 2048.0);
}

TEST(LossScaler, OptionsSetTheRule) {
  LossScaler s({8.0, 4.0, 0.25, 3});
  s.update(true), s.update(true), s.update(true);
  EXPECT_EQ(s.scale(), 32.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 8.0);
}

}  // namespace
}  // namespace tandem
