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

RunControl::RunControl(const TrainConfig& train) : train_(train) {
  if (train.early_stopping.enabled())
    early_.emplace_back(*find_epoch_metric(train.early_stopping.metric),
                        train.early_stopping.min_delta);
  if (train.schedule.type == "plateau")
    plateau_.emplace_back(*find_epoch_metric(train.schedule.metric), train.schedule.min_delta);
}

void RunControl::replay(const std::vector<EpochStats>& earlier) {
  for (const EpochStats& e : earlier) after_epoch(e, 0);
}

RunControl::Decision RunControl::after_epoch(const EpochStats& e, double base_lr) {
  Decision d;
  for (MetricWatch& w : plateau_) {
    w.observe(e);
    if (w.epochs_without_improvement() < train_.schedule.patience) continue;
    w.reset_wait();  // the next cut comes after as many epochs again (PyTorch's and Keras')
    const double before = scale_;
    scale_ *= train_.schedule.factor;
    d.messages.push_back(fmt::format(
        "plateau: {} has not improved by more than {:g} for {} epoch{} (best {} at epoch {}): "
        "learning rate {:g} -> {:g}",
        w.metric().name, train_.schedule.min_delta, train_.schedule.patience,
        train_.schedule.patience == 1 ? "" : "s", metric_text(w.metric(), w.best()), w.best_epoch(),
        base_lr * before, base_lr * scale_));
  }
  for (MetricWatch& w : early_) {
    w.observe(e);
    if (w.epochs_without_improvement() < train_.early_stopping.patience) continue;
    d.stop = true;
    d.messages.push_back(fmt::format(
        "early stopping: {} has not improved by more than {:g} for {} epoch{} (best {} at epoch "
        "{}); the run ends after epoch {} of {}",
        w.metric().name, train_.early_stopping.min_delta, train_.early_stopping.patience,
        train_.early_stopping.patience == 1 ? "" : "s", metric_text(w.metric(), w.best()),
        w.best_epoch(), e.epoch, train_.epochs));
  }
  return d;
}

StepLog::StepLog(std::string device)
    : device_(std::move(device)), since_(std::chrono::steady_clock::now()) {}

void StepLog::add(int64_t every, const std::function<void(const LoggedStep&)>& on_log, double loss,
                  double correct, int64_t n, double lr, double epoch_position, uint64_t step,
                  bool skipped, double grad_norm, double loss_scale) {
  if (!skipped && n > 0) {
    loss_sum_ += loss * static_cast<double>(n);
    correct_ += correct;
    samples_ += n;
  }
  timed_samples_ += n;
  if (grad_norm >= 0 && std::isfinite(grad_norm)) norm_sum_ += grad_norm, ++norms_;
  if (every <= 0 || step % static_cast<uint64_t>(every) != 0) return;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - since_).count();
  LoggedStep f;
  f.device = device_;
  f.step = step;
  f.epoch = epoch_position;
  f.loss = samples_ ? loss_sum_ / static_cast<double>(samples_) : NAN;
  f.accuracy = samples_ ? correct_ / static_cast<double>(samples_) : NAN;
  f.learning_rate = lr;
  f.images_per_second = seconds > 0 ? static_cast<double>(timed_samples_) / seconds : 0;
  f.grad_norm = norms_ ? norm_sum_ / static_cast<double>(norms_) : -1;
  f.loss_scale = loss_scale;
  loss_sum_ = correct_ = norm_sum_ = 0;
  samples_ = timed_samples_ = norms_ = 0;
  since_ = now;
  if (on_log) on_log(f);
}

void StepLog::new_epoch() {
  since_ = std::chrono::steady_clock::now();
  timed_samples_ = 0;
}

}  // namespace tandem
