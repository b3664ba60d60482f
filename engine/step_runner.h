// The steps of a training run on one backend, for train() (engine/trainer.cpp): each batch
// uploaded beside the step before it, forward and backward, a data-parallel run's sums, the
// gated update, and each step's figures read and accounted for (applied, overflowed, skipped or
// stopping the run), then raised as a StepEnd event.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "engine/backend.h"
#include "engine/batch_queue.h"
#include "engine/callback.h"
#include "engine/communicator.h"
#include "engine/trainer.h"

namespace tandem {

// The backend's host memory (pinned on a GPU) for a BatchQueue's batches.
BatchQueue::HostAllocator host_allocator(Backend& backend);

class StepRunner {
 public:
  StepRunner(const Config& config, Graph& graph, Loss& loss, Backend& backend,
             BatchSource& train_data, const TrainOptions& options, TrainResult& result,
             Callbacks& callbacks);
  TrainStep& step() { return step_; }
  int64_t batches() const { return batches_; }
  uint64_t steps_done() const { return global_step_; }
  // Whether `steps` steps reach TrainOptions::max_steps (never when it is -1).
  bool out_of_steps(uint64_t steps) const;
  // What sums a data-parallel run's gradients ("" alone), for RunStart.
  std::string reductions() const;
  // After RunStart (which may have restored a checkpoint's weights): the loss scale where the
  // run starts, and rank 0's weights and optimizer state for every process.
  void begin();
  void start_epoch(int64_t epoch, int64_t first_batch);
  // Runs the step of batch b at learning rate lr. Raises StepEnd for every step whose figures it
  // read (none, this one or the one before); throws NumericsError for a step that stops the run.
  // True when a stop was asked (TrainOptions::stop, in any process).
  bool run(int64_t b, double lr);
  // The epoch's steps are done: a data-parallel run averages the batch-norm statistics over its
  // processes and gives every one rank 0's weights. Waits for the device.
  void end_epoch();
  // Throws NumericsError naming the weights that are not finite `when` ("at the end of epoch 3").
  void check_weights(const std::string& when, double lr);
  // The epoch's figures: its training means, the test and validation passes, peak memory.
  EpochStats epoch_stats(double lr, BatchSource* test_data, BatchSource* val_data);
  // Where the run stands, for a checkpoint.
  TrainPosition position(int64_t epoch, int64_t batch, bool stopping, bool last) const;

 private:
  using Clock = std::chrono::steady_clock;
  // A training step queued on the device, its figures not read yet; a data-parallel step's summed
  // figures, read before its update.
  struct InFlight {
    int64_t n = 0, b = 0;  // this process's samples, the batch in the epoch
    uint64_t step = 0;
    double lr = 0;
    Clock::time_point start;
    bool summed = false;  // a data-parallel step: the run's loss, correct count and samples below
    double loss = 0, correct = 0, own_loss = 0;
    int64_t step_n = 0;
  };
  void compute(const InFlight& now);
  bool sum_over_processes(InFlight& now);
  // Reads step s's figures and accounts for it. `later` is the step queued after it, whose
  // forward and backward have run: a skipped step's diagnosis reruns s in its place (its batch
  // is still in the second set of buffers), then `later` again.
  void finish(const InFlight& s, const InFlight* later);
  // Where a step that was not finite first held a non-finite value (the same text in every
  // process of a data-parallel run).
  std::string diagnose(const InFlight& s, const InFlight* later);

  const Config& config_;
  Graph& graph_;
  Backend& backend_;
  const TrainOptions& options_;
  TrainResult& result_;
  Callbacks& callbacks_;
  SingleProcess alone_;
  Communicator& comm_;
  bool parallel_;
  ShardedSource share_;
  TrainStep step_;
  BatchQueue queue_;
  TensorSums sums_;
  int64_t batches_;
  uint64_t global_step_;
  GateParams gate_;
  bool skip_bad_, overlap_, scaling_;
  double loss_scale_ = 0;   // where the scale stands, as the last step read left it
  int64_t good_steps_ = 0;  // and its applied steps since it last changed
  int64_t skipped_in_a_row_ = 0, overflows_in_a_row_ = 0;
  // The epoch under way.
  int64_t epoch_ = 0;
  Clock::time_point epoch_start_;
  double loss_sum_ = 0, correct_sum_ = 0;
  int64_t seen_ = 0, epoch_skipped_ = 0, epoch_overflows_ = 0;
  bool ahead_ = false;     // the next batch was uploaded while the last step computed
  bool computed_ = false;  // this process ran a step of this epoch (moved its statistics)
  int64_t ahead_n_ = 0;
  std::optional<InFlight> in_flight_;  // queued, its figures not read yet
};

}  // namespace tandem
