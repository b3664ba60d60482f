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
  // State tensors (velocity, or Adam's moments) start at zero on the params' backend. Params of
  // frozen layers (Param::trainable false) are left out: no state, never updated. Each param is
  // updated with lr times its Param::lr_mult (as PyTorch's param groups of their own lr).
  Optimizer(const OptimizerConfig& config, std::vector<Param*> params, Backend& backend);
  // One update of every parameter from its gradient, with learning rate lr. With a gate
  // (backend.h's update gate) the device decides whether it applies: it is counted (Adam's bias
  // correction) only once the caller, having read the gate, calls applied().
  void step(double lr, const Tensor* gate = nullptr);
  void applied() { ++steps_; }
  int64_t steps() const { return steps_; }
  // Resuming: the steps already done (Adam's bias correction counts them).
  void set_steps(int64_t steps) { steps_ = steps; }
  // The state tensors by name, "optimizer.conv2d_1.weight.velocity" (SGD) or ".m" and ".v" (Adam);
  // none for a frozen layer's params.
  std::vector<std::pair<std::string, Tensor>> state() const;
  // The same state as one packed tensor per kind (velocity, or m and v), laid out like the params.
  std::vector<Tensor*> state_tensors();

 private:
  // Params packed back to back in one buffer (packed_numel, as Graph::allocate lays them out),
  // with their state laid out alike: one update op covers them all.
  struct Run {
    size_t first = 0;    // index into params_
    int64_t numel = 0;   // from the first param's start to the last one's end
    double lr_mult = 1;  // of every param of the run
  };

  OptimizerConfig config_;
  std::vector<Param*> params_;
  Backend& backend_;
  Tensor packed_m_, packed_v_;  // v: Adam only
  std::vector<Tensor> m_, v_;  // per param, views of the state buffers; SGD uses m_ as the velocity
  std::vector<Run> runs_;
  int64_t steps_ = 0;
};

// The learning rate of a step: the schedule works per epoch (like PyTorch's schedulers stepped
// each epoch); the linear warm-up works per step over the first warmup_epochs.
double learning_rate(const OptimizerConfig& opt, const ScheduleConfig& schedule, int64_t epochs,
                     int64_t epoch, int64_t step_in_epoch, int64_t steps_per_epoch);

}  // namespace tandem
