// Divergence, early stopping and the plateau schedule, decided from the run's figures.
#include "engine/run_control.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/progress.h"

namespace tandem {

DivergenceWatch::DivergenceWatch(int64_t classes)
    : floor_(std::log(static_cast<double>(std::max<int64_t>(2, classes)))) {}

bool DivergenceWatch::diverged(double loss) {
  if (!std::isfinite(loss)) return false;
  if (reference_ < 0) {
    reference_ = std::max(std::fabs(loss), floor_);
    return false;
  }
  return std::fabs(loss) > kDivergenceFactor * reference_;
}

MetricWatch::MetricWatch(const EpochMetric& metric, double min_delta)
    : metric_(metric), min_delta_(min_delta) {}

bool MetricWatch::observe(const EpochStats& e) {
  const double v = metric_.of(e);
  const bool better = std::isfinite(v) &&
                      (best_epoch_ == 0 ||
                       (metric_.lower_is_better ? v < best_ - min_delta_ : v > best_ + min_delta_));
  if (better) {
    best_ = v;
    best_epoch_ = e.epoch;
    waited_ = 0;
  } else {
    ++waited_;
  }
  return better;
}

std::string metric_text(const EpochMetric& metric, double value) {
  return metric.lower_is_better ? format_loss(value) : format_accuracy(value);
}

std::string default_watched_metric(const Config& config) {
  return config.data.val_split > 0 ? "val_loss" : "train_loss";
}

}  // namespace tandem
