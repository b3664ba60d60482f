// The progress line fed recorded events: the heading, the bar's lines and the closing line, whose
// fields come from the figure table.
#include "engine/callbacks/progress_line.h"

#include <gtest/gtest.h>

#include "tests/engine/callbacks/events.h"

namespace tandem {
namespace {
using test::Captured;
using test::step_event;

ProgressOutput to(Captured& out) { return {out.file(), false, 80}; }

EpochStats figures() {
  EpochStats e;
  e.epoch = 1;
  e.train_loss = 0.5, e.train_accuracy = 0.75;
  e.test_loss = 0.25, e.test_accuracy = 0.875;
  e.has_val = true, e.val_loss = 0.375, e.val_accuracy = 0.8125;
  e.peak_memory_bytes = 3 << 20;
  return e;
}

TEST(ProgressLineCallback, ClosesEachEpochWithTheTablesFieldsInTheirPlaces) {
  Captured out;
  ProgressLine c(2, to(out));
  RunState state;
  c.epoch_start({0, 3, 4, 0});
  for (uint64_t s = 0; s < 4; ++s) c.step_end(step_event(s, 0.5));
  EpochStats e = figures();
  e.loss_scale = 1024, e.overflow_steps = 2;
  c.epoch_end({e, 3, 0.1, false, state});
  const std::string text = out.text();
  EXPECT_EQ(text.rfind("Epoch 1/3 - ", 0), 0u) << text;
  EXPECT_NE(text.find(" train - loss 0.5000 - acc 75.00% - 1,000 img/s - val_loss 0.3750 - val_acc "
                      "81.25% - test_loss 0.2500 - test_acc 87.50% - peak mem 3.0 MiB - loss "
                      "scale 1,024 (2 overflowed steps skipped)\n"),
            std::string::npos)
      << text;
}

TEST(ProgressLineCallback, ShowsOnlyTheFiguresAnEpochHas) {
  Captured out;
  ProgressLine c(2, to(out));
  RunState state;
  c.epoch_start({1, 3, 4, 0});
  EpochStats e = figures();
  e.epoch = 2;
  e.has_val = false, e.has_test = false;
  c.epoch_end({e, 3, 0.1, false, state});
  const std::string text = out.text();
  EXPECT_EQ(text.find("val_"), std::string::npos) << text;
  EXPECT_EQ(text.find("test_"), std::string::npos) << text;
  EXPECT_EQ(text.find("loss scale"), std::string::npos) << text;
  EXPECT_NE(text.find("- peak mem 3.0 MiB\n"), std::string::npos) << text;
}

TEST(ProgressLineCallback, DrawsTheBarAtEachQuarterUnderTheEpochsHeading) {
  Captured out;
  ProgressLine c(1, to(out));
  c.epoch_start({0, 2, 4, 0});
  for (uint64_t s = 0; s < 4; ++s) c.step_end(step_event(s, 0.5));
  RunState state;
  c.epoch_end({figures(), 2, 0.1, false, state});
  const std::string text = out.text();
  EXPECT_EQ(text.rfind("Epoch 1/2\n1/4 [", 0), 0u) << text;
  EXPECT_NE(text.find("\n3/4 ["), std::string::npos) << text;
  EXPECT_NE(text.find("\n4/4 ["), std::string::npos) << text;  // the closing line
  EXPECT_NE(text.find("- val_loss 0.3750"), std::string::npos) << text;
}

TEST(ProgressLineCallback, AStopEndsTheBarWithStopped) {
  Captured out;
  ProgressLine c(2, to(out));
  c.epoch_start({0, 3, 4, 0});
  c.step_end(step_event(0, 0.5));
  c.stopped({0, 3, 1});
  const std::string text = out.text();
  EXPECT_EQ(text.rfind("Epoch 1/3 - ", 0), 0u) << text;
  EXPECT_NE(text.find(" - stopped\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace tandem
