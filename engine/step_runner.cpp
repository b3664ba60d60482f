// A training run's steps: upload ahead, compute, data-parallel sums, gated update, accounting.
#include "engine/step_runner.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "engine/layer_profile.h"
#include "engine/loss_scaling.h"
#include "engine/numerics.h"

namespace tandem {
namespace {

// on_nan: skip_step: the non-finite steps in a row that stop the run, and the ones reported.
constexpr int64_t kMaxSkippedInARow = 10;
constexpr int64_t kSkippedStepsReported = 10;
// Loss scaling: the overflowing steps in a row after which a step is taken for non-finite, not
// for overflowing. Each one halves the scale: after 30, 2^16 has become 2^-14, at which no finite
// gradient of a trainable model overflows fp16.
constexpr int64_t kMaxOverflowsInARow = 30;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// What every process of a data-parallel run must hold alike: the weights (one packed tensor) and
// the optimizer's state.
std::vector<Tensor*> training_state(TrainStep& step) {
  std::vector<Tensor*> state{&step.graph().packed_values()};
  for (Tensor* t : step.optimizer().state_tensors()) state.push_back(t);
  return state;
}

// The diagnosis of a non-finite step of a data-parallel run, the same for every process: that of
// the first process whose own loss was not finite (the run's loss sums them all, so a NaN in one
// batch makes it NaN everywhere); process 0's where none was.
std::string run_diagnosis(Communicator& comm, const std::string& mine, bool own_loss_bad) {
  std::vector<double> bad(static_cast<size_t>(comm.size()), 0.0);
  bad[static_cast<size_t>(comm.rank())] = own_loss_bad ? 1.0 : 0.0;
  comm.sum(bad.data(), bad.size());
  int root = 0;
  while (root < comm.size() && bad[static_cast<size_t>(root)] == 0) ++root;
  if (root == comm.size()) root = 0;
  uint64_t length = mine.size();
  comm.broadcast(&length, sizeof length, root);
  std::string text = comm.rank() == root ? mine : std::string(length, ' ');
  comm.broadcast(text.data(), length, root);
  return root == 0 ? text : fmt::format("{} (in process {}'s batch)", text, root);
}

}  // namespace

BatchQueue::HostAllocator host_allocator(Backend& backend) {
  return [&backend](size_t bytes) { return backend.allocate_host(bytes); };
}

StepRunner::StepRunner(const Config& config, Graph& graph, Loss& loss, Backend& backend,
                       BatchSource& train_data, const TrainOptions& options, TrainResult& result,
                       Callbacks& callbacks)
    : config_(config),
      graph_(graph),
      backend_(backend),
      options_(options),
      result_(result),
      callbacks_(callbacks),
      comm_(options.comm ? *options.comm : alone_),
      parallel_(comm_.size() > 1),
      share_(train_data, comm_.rank(), comm_.size()),  // the source itself when alone
      step_(graph, loss, backend, config.train.optimizer,
            process_seed(config.train.seed, comm_.rank())),
      queue_(share_, graph.input_shape().numel(), graph.max_batch(), options.data_workers,
             host_allocator(backend)),
      sums_(comm_, backend),  // collective; nothing to do for one process
      batches_(share_.batches_per_epoch()),
      global_step_(options.start.step) {
  // on_nan: skip_step also has the gate check every gradient (a pass over them each step).
  skip_bad_ = config.train.on_nan == "skip_step";
  gate_.check_gradients = skip_bad_;
  // train.clip_grad_norm: the gate scales the gradients to this global L2 norm where above it.
  gate_.max_norm = static_cast<float>(config.train.clip_grad_norm);
  // A step's figures are read once the next step's forward and backward are queued, so that the
  // device computes while the host reads them. Not where they must be known first: a
  // data-parallel step sums them over the processes before its update, and with on_nan:
  // skip_step a model with running statistics would have them moved by the next step's forward
  // before a skipped step's diagnosis reruns it.
  overlap_ = !parallel_ && !(skip_bad_ && !graph.buffers().empty());
  // fp16 (or a run that asks for it): the loss gradient is multiplied by the gate's dynamic loss
  // scale, and the gate checks every gradient, so that an overflow skips the step.
  scaling_ = options.loss_scaling || graph.precision() == Precision::kF16;
}

std::string StepRunner::reductions() const { return parallel_ ? sums_.path() : ""; }

void StepRunner::begin() {
  if (scaling_) {
    const GateParams rules = loss_scaling_gate();
    gate_.check_gradients = rules.check_gradients;
    gate_.growth_interval = rules.growth_interval;
    gate_.growth_factor = rules.growth_factor;
    gate_.backoff_factor = rules.backoff_factor;
    loss_scale_ = options_.start.loss_scale > 0 ? options_.start.loss_scale : kInitialLossScale;
    good_steps_ = options_.start.good_steps;
    step_.scale_loss(loss_scale_, good_steps_);
  }
  // Every process starts from rank 0's weights and state (its checkpoint when resuming).
  if (parallel_) sums_.broadcast(training_state(step_));
}

bool StepRunner::out_of_steps(uint64_t steps) const {
  return options_.max_steps >= 0 && static_cast<int64_t>(steps) >= options_.max_steps;
}

void StepRunner::start_epoch(int64_t epoch, int64_t first_batch) {
  epoch_ = epoch;
  backend_.reset_peak_memory();
  queue_.start_epoch(epoch, first_batch);
  epoch_start_ = Clock::now();
  loss_sum_ = correct_sum_ = 0;
  seen_ = epoch_skipped_ = epoch_overflows_ = 0;
  ahead_ = computed_ = false;
  ahead_n_ = 0;
  in_flight_.reset();
}

void StepRunner::compute(const InFlight& now) {
  if (now.n == 0) return;  // no samples here this step: the gradient sum gets zeros from here
  if (now.step == 0 && options_.on_placement) {
    std::vector<LayerProfile> rows = layer_rows(graph_, now.n);
    std::vector<std::string> trace;
    {
      Graph::ScopedHook hook(graph_, trace_layers(backend_, rows, trace));
      step_.compute(now.n, now.step);
    }
    options_.on_placement(without_fused(graph_, std::move(rows)));
  } else {
    step_.compute(now.n, now.step);
  }
}

// One sum of the step's figures: the loss is the mean over every process's samples (a NaN
// anywhere makes it NaN everywhere), and a stop asked of any process stops them all. Then the
// gradients' sum, and the run's loss for every process's gate. True: a stop was asked.
bool StepRunner::sum_over_processes(InFlight& now) {
  double l = 0, correct = 0;
  if (now.n) step_.read(&l, &correct);
  now.own_loss = l;
  const double n = static_cast<double>(now.n);
  double figures[4] = {now.n ? l * n : 0.0, correct, n,
                       options_.stop && options_.stop() ? 1.0 : 0.0};
  comm_.sum(figures, 4);
  now.summed = true;
  now.step_n = static_cast<int64_t>(figures[2]);
  now.loss = figures[0] / figures[2];
  now.correct = figures[1];
  if (std::isfinite(now.loss)) sums_.sum({&graph_.packed_grads()}, n / figures[2]);
  step_.set_loss(now.loss);  // the gate of every process decides on the run's loss
  return figures[3] > 0;
}

bool StepRunner::run(int64_t b, double lr) {
  int64_t n = ahead_n_;  // this process's samples; 0 in a data-parallel epoch's ragged end
  if (ahead_) {
    step_.take_next();
    ahead_ = false;
  } else {
    const BatchQueue::Batch batch = queue_.next();
    n = batch.n;
    step_.upload(n, batch.images, batch.labels);
    // Asking the queue for the next batch gives this one's host buffer back.
    backend_.synchronize();
  }
  InFlight now{n, b, global_step_, lr, Clock::now()};
  computed_ = computed_ || n > 0;
  compute(now);
  const bool stop_asked = parallel_ && sum_over_processes(now);
  if (in_flight_) {
    const InFlight before = *in_flight_;
    in_flight_.reset();
    finish(before, &now);
  }
  // The next batch's upload runs beside this step (after the diagnosis above, which may need
  // the last batch's buffers).
  if (b + 1 < batches_ && !out_of_steps(global_step_ + 1)) {
    // queue.next() hands the buffer of this step's batch back to be refilled: its upload
    // (taken at the step's start) must have read it. Long done: it ran beside the step before.
    backend_.wait_taken_uploads();
    const BatchQueue::Batch next = queue_.next();
    step_.upload_next(next.n, next.images, next.labels);
    ahead_ = true;
    ahead_n_ = next.n;
  }
  // The device skips the update of a step that is not finite, so it changes no weight.
  step_.update_gated(lr, gate_);
  ++global_step_;
  const bool stop_now = parallel_ ? stop_asked : options_.stop && options_.stop();
  // Read at once where the host must know before going on: at the epoch's end, at a stop, and
  // the run's first step (its time is reported apart).
  if (!overlap_ || stop_now || !ahead_ || now.step == options_.start.step)
    finish(now, nullptr);
  else
    in_flight_ = now;
  return stop_now;
}

void StepRunner::finish(const InFlight& s, const InFlight* later) {
  const StepFigures f = step_.read_step();
  const double l = s.summed ? s.loss : f.loss;
  const double correct = s.summed ? s.correct : f.correct;
  const int64_t step_n = s.summed ? s.step_n : s.n;  // the step's samples over every process
  if (s.step == options_.start.step) {
    result_.first_step_seconds = seconds_since(s.start);
    result_.first_step_samples = step_n;
  }
  // Loss scaling: a step whose loss is finite and whose gradients are not overflowed at the
  // scale of the time (GradScaler's usual course): the gate halved the scale; its loss counts.
  const bool overflowed =
      f.skipped && scaling_ && std::isfinite(l) && overflows_in_a_row_ < kMaxOverflowsInARow;
  const double scale_before = loss_scale_;
  if (scaling_) {
    loss_scale_ = f.loss_scale;
    good_steps_ = f.good_steps;
  }
  StepEnd::Outcome outcome = StepEnd::kApplied;
  if (overflowed) {
    outcome = StepEnd::kOverflowed;
    ++overflows_in_a_row_;
    ++result_.overflow_steps;
    result_.overflowed_at.push_back(static_cast<int64_t>(result_.step_losses.size()));
    ++epoch_overflows_;
    spdlog::debug(
        "step {}: the gradients overflowed at loss scale {:g}; not applied, the scale is now {:g}",
        s.step + 1, scale_before, loss_scale_);
  } else if (f.skipped) {
    outcome = StepEnd::kSkipped;
    const std::string where = diagnose(s, later);
    if (!skip_bad_ || ++skipped_in_a_row_ == kMaxSkippedInARow)
      throw nonfinite_error(
          config_.train.optimizer, s.lr,
          fmt::format("{} at step {} (epoch {}, batch {} of {}){}; {}",
                      std::isfinite(l) ? "a gradient became non-finite"
                                       : "the training loss became " + loss_text(l),
                      s.step + 1, epoch_ + 1, s.b + 1, batches_,
                      skip_bad_ ? fmt::format(", the {}th non-finite step in a row (on_nan: "
                                              "skip_step)",
                                              kMaxSkippedInARow)
                                : "",
                      where));
    if (++result_.skipped_steps <= kSkippedStepsReported)
      spdlog::warn("skipped step {}: loss {}{} ({})", s.step + 1, loss_text(l),
                   std::isfinite(l) ? ", a gradient non-finite" : "", where);
    ++epoch_skipped_;
    if (later) step_.compute(later->n, later->step);
  } else {
    skipped_in_a_row_ = 0;
    overflows_in_a_row_ = 0;
  }
  if (outcome != StepEnd::kSkipped) {
    result_.step_losses.push_back(l);
    loss_sum_ += l * static_cast<double>(step_n);
    correct_sum_ += correct;
    seen_ += step_n;
  }
  const double seen = static_cast<double>(seen_);
  callbacks_.step_end({epoch_, s.b, batches_, s.step, s.lr, l, correct, step_n, outcome,
                       gate_.check_gradients || gate_.max_norm > 0.f ? f.grad_norm : -1,
                       loss_scale_, seen_ ? loss_sum_ / seen : 0, seen_ ? correct_sum_ / seen : 0,
                       seen_, seen / std::max(1e-9, seconds_since(epoch_start_))});
}

std::string StepRunner::diagnose(const InFlight& s, const InFlight* later) {
  std::string where = "this process had no samples in the step";
  if (s.n) {
    if (later) step_.take_next();
    where = locate_nonfinite(step_, s.n, s.step);
    if (later) step_.take_next();
  }
  if (parallel_) where = run_diagnosis(comm_, where, s.n > 0 && !std::isfinite(s.own_loss));
  return where;
}

void StepRunner::end_epoch() {
  // The batch-norm statistics become the average of the processes that ran a step of the epoch
  // (in an epoch of fewer batches than processes, the others' did not move), and rank 0's
  // weights everyone's (they are equal but for rounding), before any evaluation or checkpoint.
  if (parallel_) {
    double movers = computed_ ? 1.0 : 0.0;
    comm_.sum(&movers, 1);
    if (movers > 0) {
      // Views of the statistics, alive while they are summed; a frozen layer's do not move.
      auto named = graph_.buffers(true);
      std::vector<Tensor*> stats;
      for (auto& [name, t] : named) stats.push_back(&t);
      sums_.sum(stats, computed_ ? 1.0 / movers : 0.0);
    }
    sums_.broadcast(training_state(step_));
  }
  backend_.synchronize();
}

// The last step's update shows in no loss, and a sigmoid or tanh takes an infinite input to a
// finite value while the gradients are not: weights can turn non-finite behind finite losses.
// Checked before any checkpoint of them is written.
void StepRunner::check_weights(const std::string& when, double lr) {
  if (std::string weights = nonfinite_weights(graph_, backend_); !weights.empty())
    throw nonfinite_error(
        config_.train.optimizer, lr,
        fmt::format("{} {} (step {}) although the loss stayed finite (the update overflowed, "
                    "or a gradient was not finite: a sigmoid or tanh takes an infinite input "
                    "to a finite value){}",
                    weights, when, global_step_,
                    skip_bad_ ? "" : "; on_nan: skip_step checks the gradients of every step"));
}

EpochStats StepRunner::epoch_stats(double lr, BatchSource* test_data, BatchSource* val_data) {
  EpochStats e;
  e.device = options_.device_label;
  e.epoch = epoch_ + 1;
  e.seconds = seconds_since(epoch_start_);
  const double seen = static_cast<double>(seen_);
  e.train_loss = seen_ ? loss_sum_ / seen : 0;
  e.train_accuracy = seen_ ? correct_sum_ / seen : 0;
  e.images_per_second = seen / std::max(1e-9, e.seconds);
  e.learning_rate = lr;
  e.skipped_steps = epoch_skipped_;
  e.loss_scale = loss_scale_;
  e.overflow_steps = epoch_overflows_;
  result_.loss_scale = loss_scale_;
  if (epoch_skipped_)
    spdlog::warn("epoch {}: {} step{} skipped (not finite; on_nan: skip_step)", epoch_ + 1,
                 epoch_skipped_, epoch_skipped_ == 1 ? "" : "s");
  const int64_t max_batch = graph_.max_batch();
  e.has_test = test_data && test_data->size() > 0;
  if (e.has_test) {
    const EvalStats t = evaluate(step_, *test_data, max_batch, options_.data_workers, &comm_);
    e.test_loss = t.loss;
    e.test_accuracy = t.accuracy;
  }
  if (val_data && val_data->size() > 0) {
    const EvalStats v = evaluate(step_, *val_data, max_batch, options_.data_workers, &comm_);
    e.has_val = true;
    e.val_loss = v.loss;
    e.val_accuracy = v.accuracy;
  }
  e.peak_memory_bytes = backend_.peak_memory_bytes();
  return e;
}

TrainPosition StepRunner::position(int64_t epoch, int64_t batch, bool stopping, bool last) const {
  TrainPosition at{epoch, batch, global_step_, stopping, last};
  at.loss_scale = loss_scale_;
  at.good_steps = good_steps_;
  return at;
}

}  // namespace tandem
