// The training loop: steps, epochs, evaluation, metrics; and the throughput benchmark.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/batch_queue.h"
#include "engine/batch_source.h"
#include "engine/callback.h"
#include "engine/communicator.h"
#include "engine/config.h"
#include "engine/epoch_stats.h"
#include "engine/graph.h"
#include "engine/loss.h"
#include "engine/optimizer.h"

namespace tandem {

struct EvalStats {
  double loss = 0, accuracy = 0;
  int64_t samples = 0;
};

struct LayerProfile {
  std::string name, type;
  int64_t flops = 0;  // forward, whole batch
  // The forward's least memory traffic, whole batch: its input read and its output written once
  // in the run's activation dtype, and its parameters read once (fp32): a memory-bound layer's
  // (depthwise convolution, normalization, activation) rate is bytes over time.
  int64_t bytes = 0;
  double forward_ms = 0, backward_ms = 0;              // medians over the timed steps
  std::vector<std::string> forward_ops, backward_ops;  // what ran them (--log-placement)
};

class TrainStep;

struct TrainOptions {
  std::string device_label = "cpu";  // what the metrics and tables call this run
  bool progress = true;              // the per-epoch progress bar
  int verbose = 1;                   // with progress: 1 the bar, 2 one line per epoch
  // The epochs of the devices after this run's in a device list: the bar's run ETA counts them.
  int64_t later_epochs = 0;
  int64_t max_steps = -1;  // stop after this many steps (tests); -1: every epoch
  // Every `log_every` steps (0: never), the means over those steps reach the callbacks
  // (Callback::logged; --log-every).
  int64_t log_every = 0;
  // The run's outputs (metrics file, TensorBoard, checkpoints, plot, ...), which see every event
  // after the progress line and before the controls (engine/callback.h).
  std::vector<std::shared_ptr<Callback>> callbacks;
  // When set, the first step traces what ran each layer and passes it here (--log-placement).
  std::function<void(const std::vector<LayerProfile>&)> on_placement;
  // Resuming: the run starts at `start` (a callback's run_start restores the weights and the
  // optimizer state first).
  TrainPosition start;
  // The epochs before the resume (the checkpoint's history): early stopping and the plateau
  // schedule replay them, to decide as the uninterrupted run would.
  std::vector<EpochStats> earlier;
  // Asked after each step; true: stop there (Ctrl-C).
  std::function<bool()> stop;
  // Background threads that cut the next batches while the device computes (data.workers).
  int data_workers = 0;
  // Evaluated after each epoch like the test split, when set (data.val_split).
  BatchSource* val = nullptr;
  // Dynamic loss scaling (engine/loss_scaling.h): the loss gradient is multiplied by a scale that
  // the device keeps and moves by GradScaler's rules, a step whose gradients overflow is skipped.
  // Always on for an fp16 model; any other precision may ask for it too (it changes no result in
  // fp32, where the scale is a power of two: the tests use that).
  bool loss_scaling = false;
  // Data-parallel training: the run's processes (null or one: this process alone). Each process
  // takes its share of every step's batches (ShardedSource) and its own dropout masks; the
  // gradients are averaged over the step's samples before every update, so the processes keep
  // equal weights and train like one process whose batch is theirs together. Batch-norm running
  // statistics are averaged at the end of each epoch. Every figure reported is the whole run's.
  Communicator* comm = nullptr;
};

struct TrainResult {
  std::vector<EpochStats> epochs;
  std::vector<double> step_losses;  // every step's mini-batch loss, in order
  bool stopped = false;             // TrainOptions::stop ended the run
  bool early_stopped = false;       // train.early_stopping ended the run before its last epoch
  // The run's first step, which also creates the primitives and searches the convolution
  // algorithms: a one-off cost that the steady throughput leaves out.
  double first_step_seconds = 0;
  int64_t first_step_samples = 0;
  int64_t skipped_steps = 0;  // steps not applied, in step_losses neither (on_nan: skip_step)
  // Loss scaling: the steps whose gradients overflowed at the scale of the time (not applied,
  // the scale halved; their losses are in step_losses), and the scale at the end.
  int64_t overflow_steps = 0;
  std::vector<int64_t>
      overflowed_at;  // their indices in step_losses (a parity check leaves them out)
  double loss_scale = 0;
};

// What a step's gated update left for the host (TrainStep::read_step).
struct StepFigures {
  double loss = 0, correct = 0;  // this process's, or set_loss's
  bool skipped = false;          // the gate kept the update from applying
  double grad_norm = 0;          // the gradients' global L2 norm, where the gate computed it
  double loss_scale = 1;         // the gate's loss scale after this step's update
  int64_t good_steps = 0;        // and its applied steps since the scale last changed
};

// One training step's machinery: graph, loss, optimizer and the batch buffers on a backend.
class TrainStep {
 public:
  TrainStep(Graph& graph, Loss& loss, Backend& backend, const OptimizerConfig& opt, uint64_t seed);
  Tensor& labels() { return labels_; }
  Tensor& input() { return graph_.input(); }
  Graph& graph() { return graph_; }
  const Loss& loss() const { return loss_; }
  Optimizer& optimizer() { return optimizer_; }
  Backend& backend() { return backend_; }
  // Uploads n samples (host floats and labels) into the batch buffers.
  void upload(int64_t n, const float* images, const int32_t* labels);
  // Uploads the next batch (from Backend::allocate_host memory) into the second set of batch
  // buffers, beside the step that is computing; take_next() makes them the batch buffers.
  void upload_next(int64_t n, const float* images, const int32_t* labels);
  void take_next();
  // Forward, loss and backward on the first n samples of the batch buffers, as training step
  // `step` (its dropout masks); the loss and correct count stay on the device until read().
  void compute(int64_t n, uint64_t step);
  // The optimizer's update of every parameter from the gradients compute() left.
  void update(double lr);
  // compute() then update(): a step whose loss is not looked at (bench, profiles).
  void train(int64_t n, double lr, uint64_t step);
  // Forward and loss only (evaluation / inference).
  void infer(int64_t n);
  // Downloads the last step's loss and number of correct predictions.
  void read(double* loss, double* correct);
  // The optimizer's update behind backend.h's update gate, with no wait: queues the gradients'
  // norm where `gate` needs it, the gate from the step's loss, the gated update, and the copy of
  // the step's figures to the host. Each is followed by read_step() before the next.
  void update_gated(double lr, const GateParams& gate);
  // Waits for the last update_gated()'s figures; an update that applied is counted by the
  // optimizer (Adam's bias correction).
  StepFigures read_step();
  // Makes the last step's loss on the device `loss` (a data-parallel run's), before update_gated.
  void set_loss(double loss);
  Tensor& gate() { return gate_; }  // kGateSize, kept from step to step
  // From now on compute() multiplies the loss gradient by the gate's loss scale, which starts at
  // `scale` with `good_steps` applied steps since it last changed (engine/loss_scaling.h).
  void scale_loss(double scale, int64_t good_steps);

 private:
  Graph& graph_;
  Loss& loss_;
  Backend& backend_;
  Optimizer optimizer_;
  uint64_t seed_;
  Tensor labels_, dlogits_;
  Tensor figures_;  // (2 + kGateSize): loss, correct count and the update gate, one download
  Tensor metrics_;  // (2): the loss and the correct count, read with one download
  Tensor loss_value_, correct_;  // its two entries
  Tensor gate_;
  bool scale_loss_ = false;
  std::shared_ptr<void> figures_host_;  // allocate_host memory for read_step
  Tensor next_input_, next_labels_;     // upload_next's buffers
};

// Trains for config.train.epochs epochs; evaluates on `test` (may be null) after each. Raises the
// events of engine/callback.h to the run's callbacks: the divergence stop, the step log
// (options.log_every), the progress line (options.progress), the data-parallel report, then
// options.callbacks, then early stopping and the plateau schedule where the config asks for them.
// Throws NumericsError when the loss stops being finite (on_nan: stop), or after
// several non-finite steps in a row that were skipped (on_nan: skip_step).
TrainResult train(const Config& config, Graph& graph, Loss& loss, Backend& backend,
                  BatchSource& train_data, BatchSource* test_data, const TrainOptions& options);

// Loss and accuracy over every batch of `data`, cut by `workers` background threads (0: in this
// thread); with `comm`, each process evaluates its share and every process gets the whole's.
EvalStats evaluate(TrainStep& step, BatchSource& data, int64_t max_batch, int workers = 0,
                   Communicator* comm = nullptr);

// The dropout seed of process `rank` of a data-parallel run: the run's seed for rank 0 (so one
// process trains as it always did), another stream for each other one.
uint64_t process_seed(uint64_t seed, int rank);

// The spread of a benchmark's timed steps, in ms.
struct StepSpread {
  double min = 0, q1 = 0, median = 0, q3 = 0, max = 0;
};
// The quartiles (linear between the sorted values) and extremes of `ms`.
StepSpread step_spread(std::vector<double> ms);

struct BenchResult {
  int64_t batch_size = 0;
  int warmup = 0, steps = 0;
  double train_ms = 0, infer_ms = 0;  // medians per step
  double train_images_per_second = 0, infer_images_per_second = 0;
  StepSpread train_spread, infer_spread;
};

// Throughput of training steps (forward, backward, update) and inference on random data, after
// `warmup` steps that are not counted (primitive creation, algorithm search, allocation).
BenchResult bench(Graph& graph, Loss& loss, Backend& backend, const OptimizerConfig& opt,
                  int64_t batch_size, int steps, int warmup, uint64_t seed);

// Per-layer forward and backward times of training steps on random data, the backend
// synchronised before and after each layer (like `caffe time`), after `warmup` steps that are
// not counted; and the library primitive or algorithm behind each layer's ops, traced on one
// more untimed step.
std::vector<LayerProfile> profile_layers(Graph& graph, Loss& loss, Backend& backend,
                                         const OptimizerConfig& opt, int64_t batch_size, int steps,
                                         int warmup, uint64_t seed);

}  // namespace tandem
