// The step log (--log-every N): the means of every N steps' figures, raised to every callback as
// one LoggedStep (Callback::logged), which the metrics file, TensorBoard and the plot take.
#pragma once

#include <chrono>
#include <string>

#include "engine/callback.h"

namespace tandem {

class StepLog : public Callback {
 public:
  // Raises each window's means through `to` (the run's callbacks, this one among them).
  StepLog(int64_t every, std::string device, Callbacks& to);
  // An epoch starts: the images/s of the next logged step leave out the evaluation before it.
  void epoch_start(const EpochStart& e) override;
  // A skipped step counts for the step number and the images/s only.
  void step_end(const StepEnd& e) override;

 private:
  int64_t every_;
  std::string device_;
  Callbacks& to_;
  double loss_sum_ = 0, correct_ = 0;
  int64_t samples_ = 0, timed_samples_ = 0;
  double norm_sum_ = 0;
  int64_t norms_ = 0;
  std::chrono::steady_clock::time_point since_;
};

}  // namespace tandem
