// What a run decides from its own figures: a loss that diverges (stop), a metric that stopped
// improving (train.early_stopping: stop; schedule plateau: a smaller learning rate). The
// callbacks that act on them: engine/callbacks/.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace tandem
