// What a run decides from its own figures: a loss that diverges (stop), a metric that stopped
// improving (train.early_stopping: stop; schedule plateau: a smaller learning rate).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/epoch_metric.h"
#include "engine/epoch_stats.h"

namespace tandem {

// A training loss this many times its reference (the first step's, or the loss of a guess among
// the classes, ln(classes), when that is larger) is a run diverging: it only grows from there.
constexpr double kDivergenceFactor = 1e4;

// Watches the step losses of a run for divergence.
class DivergenceWatch {
 public:
  explicit DivergenceWatch(int64_t classes);
  // True when `loss` (finite) is past kDivergenceFactor times the reference.
  bool diverged(double loss);
  double reference() const { return reference_; }

 private:
  double floor_;           // ln(classes)
  double reference_ = -1;  // < 0: no step yet
};

// The best value of one epoch metric so far and the epochs since it improved by more than
// min_delta (Keras' "wait").
class MetricWatch {
 public:
  MetricWatch(const EpochMetric& metric, double min_delta);
  // Takes an epoch's figures; true when it improved on the best.
  bool observe(const EpochStats& e);
  int64_t epochs_without_improvement() const { return waited_; }
  void reset_wait() { waited_ = 0; }
  bool any() const { return best_epoch_ > 0; }
  double best() const { return best_; }
  int64_t best_epoch() const { return best_epoch_; }
  const EpochMetric& metric() const { return metric_; }

 private:
  const EpochMetric& metric_;
  double min_delta_;
  double best_ = 0;
  int64_t best_epoch_ = 0, waited_ = 0;
};

// "97.12%" for an accuracy, "0.1234" for a loss.
std::string metric_text(const EpochMetric& metric, double value);

// The metric early stopping and the plateau schedule watch when the config names none:
// val_loss with a validation split, else train_loss (the test split is not for choosing).
std::string default_watched_metric(const Config& config);

// Early stopping and the plateau schedule of one run. A resumed run replays the epochs before
// the resume, so that it decides as the uninterrupted run would have.
class RunControl {
 public:
  explicit RunControl(const TrainConfig& train);
  void replay(const std::vector<EpochStats>& earlier);
  // The plateau schedule's factor on the learning rate (1 for other schedules).
  double lr_scale() const { return scale_; }
  // After an epoch: the lines to print (a learning-rate cut, the stop) and whether to stop.
  struct Decision {
    bool stop = false;
    std::vector<std::string> messages;
  };
  Decision after_epoch(const EpochStats& e, double base_lr);

 private:
  const TrainConfig& train_;
  std::vector<MetricWatch> early_, plateau_;  // zero or one each
  double scale_ = 1;
};

// --log-every N: the means of every N steps' figures, passed on as one LoggedStep.
class StepLog {
 public:
  explicit StepLog(std::string device);
  // One step: its loss and correct count over its n samples (skipped: a step left out, which
  // counts for the step number only). Calls on_log after every `every`-th step of the run.
  void add(int64_t every, const std::function<void(const LoggedStep&)>& on_log, double loss,
           double correct, int64_t n, double lr, double epoch_position, uint64_t step, bool skipped,
           double grad_norm = -1, double loss_scale = 0);
  // An epoch starts: the images/s of the next logged step leave out the evaluation before it.
  void new_epoch();

 private:
  std::string device_;
  double loss_sum_ = 0, correct_ = 0;
  int64_t samples_ = 0, timed_samples_ = 0;
  double norm_sum_ = 0;
  int64_t norms_ = 0;
  std::chrono::steady_clock::time_point since_;
};

}  // namespace tandem
