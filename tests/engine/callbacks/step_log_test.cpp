// The step log fed recorded steps: the windows it raises and their means.
#include "engine/callbacks/step_log.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/engine/callbacks/events.h"

namespace tandem {
namespace {
using test::step_event;

struct Logged {
  Callbacks run;
  std::vector<LoggedStep> windows;
  explicit Logged(int64_t every) {
    run.add(std::make_shared<StepLog>(every, "cpu", run));
    auto record = std::make_shared<LambdaCallback>();
    record->on_logged = [this](const LoggedStep& s) { windows.push_back(s); };
    run.add(record);
  }
};

TEST(StepLogCallback, RaisesTheMeansOfEveryNStepsToEveryCallback) {
  Logged log(2);
  StepEnd a = step_event(0, 1.0), b = step_event(1, 3.0), c = step_event(2, 2.0);
  a.grad_norm = 1.0, b.grad_norm = 2.0;
  b.samples = 24, b.correct = 12;  // the mean weighs each step by its samples
  log.run.step_end(a);
  log.run.step_end(b);
  log.run.step_end(c);
  ASSERT_EQ(log.windows.size(), 1u);
  const LoggedStep& w = log.windows[0];
  EXPECT_EQ(w.device, "cpu");
  EXPECT_EQ(w.step, 2u);           // 1-based: the window ends at the second step
  EXPECT_DOUBLE_EQ(w.epoch, 0.5);  // two of four batches of the first epoch
  EXPECT_DOUBLE_EQ(w.loss, (1.0 * 8 + 3.0 * 24) / 32);
  EXPECT_DOUBLE_EQ(w.accuracy, 18.0 / 32);
  EXPECT_DOUBLE_EQ(w.grad_norm, 1.5);
  EXPECT_DOUBLE_EQ(w.learning_rate, 0.1);
  EXPECT_GT(w.images_per_second, 0);
}

TEST(StepLogCallback, SkippedStepsCountForTheStepNumberOnly) {
  Logged log(2);
  log.run.step_end(step_event(0, 1.0));
  log.run.step_end(step_event(1, NAN, StepEnd::kSkipped));
  log.run.step_end(step_event(2, NAN, StepEnd::kSkipped));
  log.run.step_end(step_event(3, NAN, StepEnd::kSkipped));
  ASSERT_EQ(log.windows.size(), 2u);
  EXPECT_DOUBLE_EQ(log.windows[0].loss, 1.0);
  // A window of only skipped steps has no mean loss: NaN (the files write null).
  EXPECT_TRUE(std::isnan(log.windows[1].loss));
  EXPECT_TRUE(std::isnan(log.windows[1].accuracy));
  EXPECT_LT(log.windows[1].grad_norm, 0);  // none computed
}

TEST(StepLogCallback, OverflowedStepsCountTheirLoss) {
  Logged log(1);
  log.run.step_end(step_event(0, 2.5, StepEnd::kOverflowed));
  ASSERT_EQ(log.windows.size(), 1u);
  EXPECT_DOUBLE_EQ(log.windows[0].loss, 2.5);
}

}  // namespace
}  // namespace tandem
