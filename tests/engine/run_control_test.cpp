// Divergence and the metric watches: what a run decides from its own figures, and the config keys
// that ask for early stopping and the plateau schedule (their callbacks: callbacks/).
#include "engine/run_control.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "engine/config.h"
#include "engine/error.h"

namespace tandem {
namespace {

TEST(Divergence, ALossTenThousandTimesItsFirstIsDiverging) {
  DivergenceWatch w(10);
  EXPECT_FALSE(w.diverged(3.0));  // the first step sets the reference
  EXPECT_DOUBLE_EQ(w.reference(), 3.0);
  EXPECT_FALSE(w.diverged(29000.0));
  EXPECT_FALSE(w.diverged(30000.0));
  EXPECT_TRUE(w.diverged(30001.0));
  EXPECT_TRUE(w.diverged(8.57e7));
}

TEST(Divergence, ASmallFirstLossIsMeasuredAgainstAGuessAmongTheClasses) {
  DivergenceWatch w(10);
  EXPECT_FALSE(w.diverged(1e-4));  // a resumed, well-trained run
  EXPECT_DOUBLE_EQ(w.reference(), std::log(10.0));
  EXPECT_FALSE(w.diverged(50.0));  // one bad batch is not divergence
  EXPECT_TRUE(w.diverged(1e4 * std::log(10.0) * 1.01));
}

TEST(Divergence, NonFiniteLossesAreTheNanChecksNotThis) {
  DivergenceWatch w(4);
  EXPECT_FALSE(w.diverged(NAN));
  EXPECT_LT(w.reference(), 0);
  EXPECT_FALSE(w.diverged(INFINITY));
}

EpochStats epoch(int64_t n, double val_loss) {
  EpochStats e;
  e.epoch = n;
  e.has_val = true;
  e.val_loss = val_loss;
  return e;
}

TEST(MetricWatch, CountsEpochsThatDoNotImproveByMoreThanMinDelta) {
  MetricWatch w(*find_epoch_metric("val_loss"), 0.01);
  EXPECT_TRUE(w.observe(epoch(1, 1.0)));
  EXPECT_TRUE(w.observe(epoch(2, 0.98)));
  EXPECT_FALSE(w.observe(epoch(3, 0.975)));  // better, but by less than min_delta
  EXPECT_EQ(w.epochs_without_improvement(), 1);
  EXPECT_FALSE(w.observe(epoch(4, 1.5)));
  EXPECT_EQ(w.epochs_without_improvement(), 2);
  EXPECT_DOUBLE_EQ(w.best(), 0.98);
  EXPECT_EQ(w.best_epoch(), 2);
}

TEST(MetricWatch, HigherIsBetterForAccuracies) {
  MetricWatch w(*find_epoch_metric("test_accuracy"), 0);
  EpochStats e;
  e.epoch = 1, e.test_accuracy = 0.5;
  EXPECT_TRUE(w.observe(e));
  e.epoch = 2, e.test_accuracy = 0.4;
  EXPECT_FALSE(w.observe(e));
  e.epoch = 3, e.test_accuracy = 0.6;
  EXPECT_TRUE(w.observe(e));
}

std::string config_error(const std::string& train_yaml, const std::string& data_extra = "") {
  try {
    parse_config(R"(name: t
input: {shape: [4]}
layers: [dense: {units: 2}]
data: {format: synthetic, classes: 2)" +
                     data_extra + R"(}
train: )" + train_yaml +
                     "\n",
                 "t.yaml");
  } catch (const ConfigError& e) {
    return e.cause() + "\nhint: " + e.hint();
  }
  return "";
}

TEST(RunControlConfig, WatchesTrainLossWithoutAValidationSplit) {
  Config c = parse_config(R"(name: t
input: {shape: [4]}
layers: [dense: {units: 2}]
train: {early_stopping: {patience: 3, min_delta: 0.01}, schedule: {type: plateau}}
)",
                          "t.yaml");
  EXPECT_EQ(c.train.early_stopping.metric, "train_loss");
  EXPECT_EQ(c.train.early_stopping.patience, 3);
  EXPECT_DOUBLE_EQ(c.train.early_stopping.min_delta, 0.01);
  EXPECT_EQ(c.train.schedule.metric, "train_loss");
  EXPECT_DOUBLE_EQ(c.train.schedule.factor, 0.1);
}

TEST(RunControlConfig, BadValuesAreRefusedAtTheirKey) {
  EXPECT_NE(config_error("{early_stopping: {metric: val_los}}", ", val_split: 0.1")
                .find("'metric': unknown metric 'val_los'; did you mean 'val_loss'?"),
            std::string::npos);
  EXPECT_NE(config_error("{early_stopping: {metric: val_loss}}")
                .find("val_loss needs a validation split: set data.val_split"),
            std::string::npos);
  EXPECT_NE(config_error("{early_stopping: {patience: 0}}").find("'patience': expected at least 1"),
            std::string::npos);
  EXPECT_NE(config_error("{early_stopping: {min_delta: -1}}").find("'min_delta': expected zero"),
            std::string::npos);
  EXPECT_NE(config_error("{schedule: {type: plateau, factor: 2}}")
                .find("'factor': expected a factor between 0 and 1"),
            std::string::npos);
  EXPECT_NE(config_error("{clip_grad_norm: -1}").find("'clip_grad_norm': expected zero (off)"),
            std::string::npos);
  EXPECT_NE(config_error("{early_stopping: {patience: 2, wait: 3}}").find("'wait': unknown key"),
            std::string::npos);
  EXPECT_EQ(config_error("{clip_grad_norm: 1.5}"), "");
}

}  // namespace
}  // namespace tandem
