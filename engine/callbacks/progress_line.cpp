#include "engine/callbacks/progress_line.h"

#include <fmt/format.h>

#include "engine/epoch_figures.h"

namespace tandem {

ProgressLine::ProgressLine(int verbose, ProgressOutput out, int64_t later_epochs)
    : verbose_(verbose), out_(out), later_epochs_(later_epochs) {}

void ProgressLine::epoch_start(const EpochStart& e) {
  const auto now = std::chrono::steady_clock::now();
  if (started_ == 0) first_start_ = now;
  const double run_seconds = std::chrono::duration<double>(now - first_start_).count();
  if (verbose_ == 1) fmt::print(out_.file, "Epoch {}/{}\n", e.epoch + 1, e.epochs);
  bar_.emplace(
      e.batches, verbose_,
      ProgressRun{e.epoch, e.epochs, started_ ? run_seconds / static_cast<double>(started_) : 0,
                  later_epochs_},
      out_);
  ++started_;
}

void ProgressLine::step_end(const StepEnd& e) {
  if (bar_ && e.epoch_samples)
    bar_->update(e.batch + 1, e.epoch_loss, e.epoch_accuracy, e.images_per_second, e.loss_scale);
}

void ProgressLine::epoch_end(const EpochEnd& e) {
  if (!bar_) return;
  bar_->finish(progress_fields(e.stats), fmt::format("Epoch {}/{}", e.stats.epoch, e.epochs));
  bar_.reset();
}

void ProgressLine::stopped(const RunStop& e) {
  if (!bar_) return;
  bar_->finish({"stopped"}, fmt::format("Epoch {}/{}", e.epoch + 1, e.epochs));
  bar_.reset();
}

}  // namespace tandem
