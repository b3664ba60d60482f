// The events of a training run and the callbacks that act on them, as Keras' fit and Lightning's
// Trainer structure it: train() runs the epochs and steps and raises the events; every output and
// control (progress line, metrics file, checkpoints, early stopping, ...) is a callback of its own
// that does one thing. docs/architecture.md shows the loop and how to add one.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/epoch_stats.h"

namespace tandem {

class TrainStep;

// Where a run stands: epochs completed, batches done of the next one, steps done.
struct TrainPosition {
  int64_t epoch = 0, batch = 0;
  uint64_t step = 0;
  bool stopping = false;  // a checkpoint: the run stops here (TrainOptions::stop)
  bool last = false;      // a checkpoint: early stopping ends the run after this epoch
  // A loss-scaled run's dynamic loss scale and applied steps since it last changed
  // (engine/loss_scaling.h): where it stands, or where a resumed run starts (0: the initial
  // scale). 0 in a run without loss scaling.
  double loss_scale = 0;
  int64_t good_steps = 0;
};

// What the callbacks decide for the run; the loop reads it before every step and after every
// epoch. Only controls write it (early stopping, the plateau schedule).
struct RunState {
  bool stop = false;    // end the run after this epoch
  double lr_scale = 1;  // the factor on the schedule's learning rate
};

// Before the first step. A resumed run restores its weights here (before a data-parallel run
// gives every process rank 0's), and controls replay the epochs before the resume.
struct RunStart {
  TrainStep& step;
  const std::vector<EpochStats>& earlier;  // the epochs before a resume
  int64_t epochs, batches;                 // the run's epochs; batches an epoch (this process's)
  std::string reductions;                  // a data-parallel run's gradient sums; "" alone
  RunState& state;
};

struct EpochStart {
  int64_t epoch, epochs;  // 0-based, and the run's total
  int64_t batches;        // an epoch's (this process's)
  int64_t first_batch;    // > 0 in the epoch a resumed run starts inside
};

// After each training step, once its figures are read (a step later than its update where the
// loop overlaps them with the next step's compute).
struct StepEnd {
  int64_t epoch, batch, batches;  // 0-based epoch and batch
  uint64_t step;                  // 0-based, over the whole run
  double lr;
  // The run's figures for the step: the mean loss, the correct predictions and the samples of
  // every process.
  double loss, correct;
  int64_t samples;
  // Applied; not applied because the gradients overflowed at the loss scale of the time (its loss
  // counts); not applied because it was not finite (on_nan: skip_step; its loss does not count).
  enum Outcome { kApplied, kOverflowed, kSkipped } outcome;
  double grad_norm;   // the gradients' global L2 norm before clipping; < 0: not computed
  double loss_scale;  // the loss scale after the step; 0: a run without loss scaling
  // The epoch so far, the steps whose losses count: mean loss and accuracy, samples, images/s.
  double epoch_loss, epoch_accuracy;
  int64_t epoch_samples;
  double images_per_second;
};

// After each epoch's evaluation: its figures, and the place for controls to decide.
struct EpochEnd {
  const EpochStats& stats;
  int64_t epochs;
  double base_lr;  // the schedule's rate at the epoch's last batch, before RunState::lr_scale
  bool cut_short;  // TrainOptions::max_steps ended the run inside it: nothing is decided on it
  RunState& state;
};

// After each epoch, once every callback has seen its figures and decided, and where a stop ends
// the run inside an epoch: the place to save where the run stands.
struct Checkpoint {
  TrainStep& step;
  TrainPosition at;  // where a resumed run starts
};

// A stop asked for (Ctrl-C) ended the run inside an epoch, before its checkpoint.
struct RunStop {
  int64_t epoch, epochs, batch;  // 0-based epoch; batches done of it
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void run_start(const RunStart&) {}
  virtual void epoch_start(const EpochStart&) {}
  virtual void step_end(const StepEnd&) {}
  // Every N steps of --log-every N: the means over those steps (raised by the step log).
  virtual void logged(const LoggedStep&) {}
  virtual void epoch_end(const EpochEnd&) {}
  virtual void checkpoint(const Checkpoint&) {}
  virtual void stopped(const RunStop&) {}
  // The run ends with this exception (a non-finite step, a device failure); it is thrown on.
  virtual void error(const std::exception&) {}
};

// The callbacks of one run, in order: every event reaches each in the order they were added.
class Callbacks {
 public:
  void add(std::shared_ptr<Callback> c) {
    if (c) list_.push_back(std::move(c));
  }
  void add_all(const std::vector<std::shared_ptr<Callback>>& cs) {
    for (const auto& c : cs) add(c);
  }
  void run_start(const RunStart& e) { each(&Callback::run_start, e); }
  void epoch_start(const EpochStart& e) { each(&Callback::epoch_start, e); }
  void step_end(const StepEnd& e) { each(&Callback::step_end, e); }
  void logged(const LoggedStep& e) { each(&Callback::logged, e); }
  void epoch_end(const EpochEnd& e) { each(&Callback::epoch_end, e); }
  void checkpoint(const Checkpoint& e) { each(&Callback::checkpoint, e); }
  void stopped(const RunStop& e) { each(&Callback::stopped, e); }
  void error(const std::exception& e) { each(&Callback::error, e); }

 private:
  template <typename Event>
  void each(void (Callback::*event)(const Event&), const Event& e) {
    for (const auto& c : list_) ((*c).*event)(e);
  }
  std::vector<std::shared_ptr<Callback>> list_;
};

// A callback from functions, for a one-off (Keras' LambdaCallback): the tests, a resume's restore.
struct LambdaCallback : Callback {
  std::function<void(const RunStart&)> on_run_start;
  std::function<void(const StepEnd&)> on_step_end;
  std::function<void(const EpochEnd&)> on_epoch_end;
  std::function<void(const Checkpoint&)> on_checkpoint;
  std::function<void(const LoggedStep&)> on_logged;
  void run_start(const RunStart& e) override {
    if (on_run_start) on_run_start(e);
  }
  void step_end(const StepEnd& e) override {
    if (on_step_end) on_step_end(e);
  }
  void epoch_end(const EpochEnd& e) override {
    if (on_epoch_end) on_epoch_end(e);
  }
  void checkpoint(const Checkpoint& e) override {
    if (on_checkpoint) on_checkpoint(e);
  }
  void logged(const LoggedStep& e) override {
    if (on_logged) on_logged(e);
  }
};

// Callbacks of one event, for a one-off.
inline std::shared_ptr<Callback> on_run_start(std::function<void(const RunStart&)> f) {
  auto c = std::make_shared<LambdaCallback>();
  c->on_run_start = std::move(f);
  return c;
}
inline std::shared_ptr<Callback> on_checkpoint(std::function<void(const Checkpoint&)> f) {
  auto c = std::make_shared<LambdaCallback>();
  c->on_checkpoint = std::move(f);
  return c;
}

}  // namespace tandem
