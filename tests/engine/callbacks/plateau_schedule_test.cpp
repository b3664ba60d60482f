// The plateau schedule fed recorded epochs: the factor it sets, what it says, and a resumed run's
// replay.
#include "engine/callbacks/plateau_schedule.h"

#include <gtest/gtest.h>

#include "tests/engine/callbacks/events.h"

namespace tandem {
namespace {
using test::Captured;
using test::val_epoch;

// Feeds one epoch's end to `c` with the run's state.
void end_epoch(PlateauSchedule& c, const EpochStats& e, RunState& state, bool cut_short = false) {
  c.epoch_end({e, 20, 0.1, cut_short, state});
}

TEST(PlateauScheduleCallback, CutsTheRateAfterPatienceEpochsAndWaitsAsLongAgain) {
  const TrainConfig t =
      test::controls("{epochs: 20, schedule: {type: plateau, factor: 0.5, patience: 2}}");
  EXPECT_EQ(t.schedule.metric, "val_loss");  // with a validation split
  Captured out;
  PlateauSchedule c(t, false, out.file());
  RunState state;
  end_epoch(c, val_epoch(1, 1.0), state);
  end_epoch(c, val_epoch(2, 1.1), state);
  EXPECT_EQ(state.lr_scale, 1);
  end_epoch(c, val_epoch(3, 1.2), state);
  EXPECT_FALSE(state.stop);
  EXPECT_EQ(state.lr_scale, 0.5);
  EXPECT_EQ(out.text(),
            "plateau: val_loss has not improved by more than 0 for 2 epochs (best 1.0000 at "
            "epoch 1): learning rate 0.1 -> 0.05\n");
  end_epoch(c, val_epoch(4, 1.2), state);
  EXPECT_EQ(state.lr_scale, 0.5);
  end_epoch(c, val_epoch(5, 1.2), state);
  EXPECT_EQ(state.lr_scale, 0.25);
}

TEST(PlateauScheduleCallback, QuietCutsTheRateWithoutAWord) {
  const TrainConfig t =
      test::controls("{epochs: 20, schedule: {type: plateau, factor: 0.5, patience: 1}}");
  Captured out;
  PlateauSchedule c(t, true, out.file());
  RunState state;
  end_epoch(c, val_epoch(1, 1.0), state);
  end_epoch(c, val_epoch(2, 1.0), state);
  EXPECT_EQ(state.lr_scale, 0.5);
  EXPECT_EQ(out.text(), "");
}

TEST(PlateauScheduleCallback, AnEpochCutShortByMaxStepsDecidesNothing) {
  const TrainConfig t =
      test::controls("{epochs: 20, schedule: {type: plateau, factor: 0.5, patience: 1}}");
  Captured out;
  PlateauSchedule c(t, false, out.file());
  RunState state;
  end_epoch(c, val_epoch(1, 1.0), state);
  end_epoch(c, val_epoch(2, 1.0), state, true);
  EXPECT_EQ(state.lr_scale, 1);
}

TEST(PlateauScheduleCallback, AResumedRunStartsAtTheRateTheWholeRunHad) {
  const TrainConfig t =
      test::controls("{epochs: 20, schedule: {type: plateau, factor: 0.5, patience: 1}}");
  Captured whole_out, resumed_out;
  PlateauSchedule whole(t, false, whole_out.file()), resumed(t, false, resumed_out.file());
  const std::vector<EpochStats> before = {val_epoch(1, 1.0), val_epoch(2, 1.1), val_epoch(3, 0.9)};
  RunState whole_state;
  for (const EpochStats& e : before) end_epoch(whole, e, whole_state);
  test::RunStartOf start(before);
  resumed.run_start(start.event());
  EXPECT_EQ(start.state.lr_scale, whole_state.lr_scale);
  EXPECT_EQ(start.state.lr_scale, 0.5);
  const std::string said_before = whole_out.text();
  end_epoch(whole, val_epoch(4, 0.95), whole_state);
  end_epoch(resumed, val_epoch(4, 0.95), start.state);
  EXPECT_EQ(resumed_out.text(), whole_out.text().substr(said_before.size()));
  EXPECT_EQ(start.state.lr_scale, 0.25);
}

}  // namespace
}  // namespace tandem
