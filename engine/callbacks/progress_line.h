// The progress line (engine/progress.h's ProgressBar): "Epoch 3/10", the bar redrawn as the steps
// end, and each epoch's closing line with the fields of the figure table (epoch_figures.h).
#pragma once

#include <chrono>
#include <optional>

#include "engine/callback.h"
#include "engine/progress.h"

namespace tandem {

class ProgressLine : public Callback {
 public:
  // verbose: 1 the bar and the closing line, 2 the closing line only (ProgressBar).
  // later_epochs: those of the devices after this one in a device list (the run's ETA counts
  // them at this device's pace).
  explicit ProgressLine(int verbose, ProgressOutput out = ProgressOutput::standard(),
                        int64_t later_epochs = 0);
  void epoch_start(const EpochStart& e) override;
  void step_end(const StepEnd& e) override;
  void epoch_end(const EpochEnd& e) override;
  void stopped(const RunStop& e) override;

 private:
  int verbose_;
  ProgressOutput out_;
  std::optional<ProgressBar> bar_;
  // The run's ETA: the wall time of its finished epochs, evaluation and checkpoints included.
  std::chrono::steady_clock::time_point first_start_;
  int64_t started_ = 0;
  int64_t later_epochs_ = 0;
};

}  // namespace tandem
