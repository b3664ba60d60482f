#include "engine/callbacks/step_log.h"

#include <cmath>

namespace tandem {

StepLog::StepLog(int64_t every, std::string device, Callbacks& to)
    : every_(every),
      device_(std::move(device)),
      to_(to),
      since_(std::chrono::steady_clock::now()) {}

void StepLog::epoch_start(const EpochStart&) {
  since_ = std::chrono::steady_clock::now();
  timed_samples_ = 0;
}

void StepLog::step_end(const StepEnd& e) {
  if (e.outcome != StepEnd::kSkipped && e.samples > 0) {
    loss_sum_ += e.loss * static_cast<double>(e.samples);
    correct_ += e.correct;
    samples_ += e.samples;
  }
  timed_samples_ += e.samples;
  if (e.grad_norm >= 0 && std::isfinite(e.grad_norm)) norm_sum_ += e.grad_norm, ++norms_;
  const uint64_t step = e.step + 1;
  if (every_ <= 0 || step % static_cast<uint64_t>(every_) != 0) return;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - since_).count();
  LoggedStep f;
  f.device = device_;
  f.step = step;
  f.epoch = static_cast<double>(e.epoch) + static_cast<double>(e.batch + 1) / e.batches;
  // A window of only skipped steps has no mean: NaN, which the files write as null (or empty).
  f.loss = samples_ ? loss_sum_ / static_cast<double>(samples_) : NAN;
  f.accuracy = samples_ ? correct_ / static_cast<double>(samples_) : NAN;
  f.learning_rate = e.lr;
  f.images_per_second = seconds > 0 ? static_cast<double>(timed_samples_) / seconds : 0;
  f.grad_norm = norms_ ? norm_sum_ / static_cast<double>(norms_) : -1;
  f.loss_scale = e.loss_scale;
  loss_sum_ = correct_ = norm_sum_ = 0;
  samples_ = timed_samples_ = norms_ = 0;
  since_ = now;
  to_.logged(f);
}

}  // namespace tandem
