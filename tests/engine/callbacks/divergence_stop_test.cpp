// The divergence stop fed recorded steps: which steps it measures, and the error it stops with.
#include "engine/callbacks/divergence_stop.h"

#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/engine/callbacks/events.h"

namespace tandem {
namespace {
using test::step_event;

OptimizerConfig sgd(double lr) {
  OptimizerConfig o;
  o.type = "sgd";
  o.lr = lr;
  o.momentum = 0;
  return o;
}

TEST(DivergenceStopCallback, StopsAtAnAppliedStepPastTenThousandTimesTheFirstLoss) {
  DivergenceStop c(10, sgd(0.1));
  c.step_end(step_event(0, 3.0));
  c.step_end(step_event(1, 30000.0));
  try {
    c.step_end(step_event(6, 30001.0));
    FAIL() << "expected a NumericsError";
  } catch (const NumericsError& e) {
    EXPECT_EQ(e.cause(),
              "the training loss diverged: 30001 at step 7 (epoch 2, batch 3 of 4), more than "
              "10,000 times its first value 3; the run stops here rather than train on to a "
              "result no better than chance");
    EXPECT_NE(e.hint().find("try --lr 0.01"), std::string::npos) << e.hint();
  }
}

TEST(DivergenceStopCallback, StepsThatWereNotAppliedAreNotMeasured) {
  DivergenceStop c(10, sgd(0.1));
  // Not the reference either: an overflowed first step does not set it.
  c.step_end(step_event(0, 1e9, StepEnd::kOverflowed));
  c.step_end(step_event(1, 3.0));
  c.step_end(step_event(2, 1e9, StepEnd::kSkipped));
  c.step_end(step_event(3, 1e9, StepEnd::kOverflowed));
  EXPECT_THROW(c.step_end(step_event(4, 1e9)), NumericsError);
}

}  // namespace
}  // namespace tandem
