// Optimizers (SGD with momentum/Nesterov/weight decay, Adam, AdamW) and learning-rate schedules.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/config.h"
#include "engine/layer.h"

namespace tandem {

class Optimizer {
 public:
  // State tensors (velocity, or Adam's moments) start at zero on the params' backend.
  Optimizer(const OptimizerConfig& config, std::vector<Param*> params, Backend& backend);
  // One update of every parameter from its gradient, with learning rate lr.
  void step(double lr);
  int64_t steps() const { return steps_; }
  // Resuming: the steps already done (Adam's bias correction counts them).
  void set_steps(int64_t steps) { steps_ = steps; }
  // The state tensors by name, "optimizer.conv2d_1.weight.velocity" (SGD) or ".m" and ".v" (Adam).
  std::vector<std::pair<std::string, Tensor>> state() const;

 private:
  OptimizerConfig config_;
  std::vector<Param*> params_;
  Backend& backend_;
  std::vector<Tensor> m_, v_;  // SGD uses m_ as the velocity
  int64_t steps_ = 0;
};

// The learning rate of a step: the schedule works per epoch (like PyTorch's schedulers stepped
// each epoch); the linear warm-up works per step over the first warmup_epochs.
double learning_rate(const OptimizerConfig& opt, const ScheduleConfig& schedule, int64_t epochs,
                     int64_t epoch, int64_t step_in_epoch, int64_t steps_per_epoch);

}  // namespace tandem
