// Early stopping fed recorded epochs: when it stops, what it says, and a resumed run's replay.
#include "engine/callbacks/early_stopping.h"

#include <gtest/gtest.h>

#include "tests/engine/callbacks/events.h"

namespace tandem {
namespace {
using test::Captured;
using test::val_epoch;

// Feeds one epoch's end; returns whether the run is to stop.
bool end_epoch(EarlyStopping& c, const EpochStats& e, bool cut_short = false) {
  RunState state;
  c.epoch_end({e, 20, 0.1, cut_short, state});
  return state.stop;
}

TEST(EarlyStoppingCallback, StopsAfterPatienceEpochsWithoutImprovementAndSaysWhy) {
  const TrainConfig t =
      test::controls("{epochs: 20, early_stopping: {metric: val_loss, patience: 2}}");
  Captured out;
  EarlyStopping c(t, out.file());
  EXPECT_FALSE(end_epoch(c, val_epoch(1, 1.0)));
  EXPECT_FALSE(end_epoch(c, val_epoch(2, 0.9)));
  EXPECT_FALSE(end_epoch(c, val_epoch(3, 0.95)));
  EXPECT_EQ(out.text(), "");
  EXPECT_TRUE(end_epoch(c, val_epoch(4, 0.91)));
  EXPECT_EQ(out.text(),
            "early stopping: val_loss has not improved by more than 0 for 2 epochs (best by more "
            "than 0: 0.9000 at epoch 2); the run ends after epoch 4 of 20\n");
}

TEST(EarlyStoppingCallback, AnEpochCutShortByMaxStepsDecidesNothing) {
  const TrainConfig t =
      test::controls("{epochs: 20, early_stopping: {metric: val_loss, patience: 1}}");
  Captured out;
  EarlyStopping c(t, out.file());
  EXPECT_FALSE(end_epoch(c, val_epoch(1, 1.0)));
  EXPECT_FALSE(end_epoch(c, val_epoch(2, 2.0), true));
  EXPECT_TRUE(end_epoch(c, val_epoch(2, 2.0)));
}

TEST(EarlyStoppingCallback, AResumedRunReplaysTheEpochsBeforeIt) {
  const TrainConfig t =
      test::controls("{epochs: 20, early_stopping: {metric: val_loss, patience: 2}}");
  Captured out;
  EarlyStopping c(t, out.file());
  const std::vector<EpochStats> before = {val_epoch(1, 1.0), val_epoch(2, 1.1)};
  test::RunStartOf start(before);
  c.run_start(start.event());
  EXPECT_TRUE(end_epoch(c, val_epoch(3, 1.05)));  // the second epoch without improvement
  EXPECT_NE(
      out.text().find("(best by more than 0: 1.0000 at epoch 1); the run ends after epoch 3 of 20"),
      std::string::npos)
      << out.text();
}

}  // namespace
}  // namespace tandem
