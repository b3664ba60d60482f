// The training loop and evaluation (the throughput benchmark: bench_steps.cpp).
#include "engine/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "engine/error.h"
#include "engine/layer_profile.h"
#include "engine/loss_scaling.h"
#include "engine/numerics.h"
#include "engine/progress.h"
#include "engine/rng.h"
#include "engine/run_control.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// on_nan: skip_step: the non-finite steps in a row that stop the run, and the ones reported.
constexpr int64_t kMaxSkippedInARow = 10;
constexpr int64_t kSkippedStepsReported = 10;
// Loss scaling: the overflowing steps in a row after which a step is taken for non-finite, not
// for overflowing. Each one halves the scale: after 30, 2^16 has become 2^-14, at which no finite
// gradient of a trainable model overflows fp16.
constexpr int64_t kMaxOverflowsInARow = 30;

// A non-finite step that stops the run: its cause, and the learning rate to try: a tenth of it,
// and no more than the optimizer's usual one (a tenth of 1e6 would diverge too).
NumericsError nonfinite_error(const OptimizerConfig& opt, double lr, std::string cause) {
  // Normalised pixels are finite unless data.normalize makes them not: a smaller rate won't help.
  if (cause.find(kNonfiniteInput) != std::string::npos)
    return NumericsError(std::move(cause),
                         "give data.normalize a finite mean and a std well above 0 for each "
                         "channel (or 'normalize: auto'), then run again");
  const bool sgd = opt.type == "sgd";
  const double usual = !sgd ? 0.001 : opt.momentum > 0 ? 0.01 : 0.1;
  const double next = std::min(opt.lr / 10, usual);
  const std::string range =
      opt.lr / 10 > usual
          ? fmt::format(
                ", usual for {}{}", opt.type,
                sgd && opt.momentum > 0 ? fmt::format(" with momentum {:g}", opt.momentum) : "")
          : "";
  return NumericsError(
      std::move(cause),
      lr == opt.lr
          ? fmt::format("lower the learning rate (it was {:g}; try --lr {:g}{})", lr, next, range)
          : fmt::format("lower the learning rate (the schedule had made it {:g} from --lr "
                        "{:g}; try --lr {:g}{} or a gentler schedule)",
                        lr, opt.lr, next, range));
}

// "NaN", "infinite" or "2.3026".
std::string loss_text(double l) {
  return std::isnan(l) ? "NaN" : std::isinf(l) ? "infinite" : fmt::format("{:.5g}", l);
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

// A training step queued on the device, its figures not read yet; a data-parallel step's summed
// figures, read before its update.
struct StepInFlight {
  int64_t n = 0, b = 0;  // this process's samples, the batch in the epoch
  uint64_t step = 0;
  double lr = 0;
  Clock::time_point start;
  bool summed = false;  // a data-parallel step: the run's loss, correct count and samples below
  double loss = 0, correct = 0, own_loss = 0;
  int64_t step_n = 0;
};

BatchQueue::HostAllocator host_allocator(Backend& backend) {
  return [&backend](size_t bytes) { return backend.allocate_host(bytes); };
}

}  // namespace

TrainStep::TrainStep(Graph& graph, Loss& loss, Backend& backend, const OptimizerConfig& opt,
                     uint64_t seed)
    : graph_(graph),
      loss_(loss),
      backend_(backend),
      optimizer_(opt, graph.params(), backend),
      seed_(seed),
      labels_(backend, Shape{graph.max_batch()}, DType::kI32),
      dlogits_(backend, Shape{graph.max_batch(), graph.classes()}),
      figures_(backend, Shape{2 + kGateSize}),
      metrics_(figures_.rows(0, 2)),
      loss_value_(figures_.rows(0, 1)),
      correct_(figures_.rows(1, 1)),
      gate_(figures_.rows(2, kGateSize)),
      figures_host_(backend.allocate_host(figures_.bytes())),
      next_input_(backend, graph.input().shape()),
      next_labels_(backend, Shape{graph.max_batch()}, DType::kI32) {
  loss_.allocate(backend, graph.max_batch(), graph.classes());
  backend_.fill(gate_, 0.f);  // applies, no gradient norm yet
  Tensor factor = gate_.rows(kGateFactor, 1), scale = gate_.rows(kGateLossScale, 1);
  backend_.fill(factor, 1.f);
  backend_.fill(scale, 1.f);
}

void TrainStep::upload(int64_t n, const float* images, const int32_t* labels) {
  Tensor x = graph_.input().prefix(n);
  Tensor y = labels_.prefix(n);
  backend_.upload(x, images);
  backend_.upload(y, labels);
}

void TrainStep::upload_next(int64_t n, const float* images, const int32_t* labels) {
  Tensor x = next_input_.prefix(n);
  Tensor y = next_labels_.prefix(n);
  backend_.upload_ahead(x, images);
  backend_.upload_ahead(y, labels);
}

void TrainStep::take_next() {
  graph_.swap_input(next_input_);
  std::swap(labels_, next_labels_);
  backend_.take_uploads();
}

void TrainStep::compute(int64_t n, uint64_t step) {
  Context ctx{backend_, true, seed_, step};
  Tensor logits = graph_.forward(ctx, n);
  Tensor labels = labels_.prefix(n);
  Tensor dlogits = dlogits_.prefix(n);
  loss_.forward(ctx, logits, labels, loss_value_);
  backend_.accuracy(correct_, logits, labels);
  loss_.backward(ctx, logits, labels, dlogits);
  if (scale_loss_) {
    const Tensor scale = gate_.rows(kGateLossScale, 1);
    backend_.scale_by(dlogits, scale);
  }
  graph_.backward(ctx, dlogits);
}

void TrainStep::scale_loss(double scale, int64_t good_steps) {
  Tensor s = gate_.rows(kGateLossScale, 1), tracker = gate_.rows(kGateGrowthTracker, 1);
  backend_.fill(s, static_cast<float>(scale));
  backend_.fill(tracker, static_cast<float>(good_steps));
  scale_loss_ = true;
}

void TrainStep::update(double lr) { optimizer_.step(lr); }

void TrainStep::train(int64_t n, double lr, uint64_t step) {
  compute(n, step);
  update(lr);
}

void TrainStep::infer(int64_t n) {
  Context ctx{backend_, false, seed_, 0};
  Tensor logits = graph_.forward(ctx, n);
  Tensor labels = labels_.prefix(n);
  loss_.forward(ctx, logits, labels, loss_value_);
  backend_.accuracy(correct_, logits, labels);
}

void TrainStep::read(double* loss, double* correct) {
  float values[2] = {0, 0};
  backend_.download(values, metrics_);  // one wait for the device per step
  *loss = values[0];
  *correct = values[1];
}

void TrainStep::update_gated(double lr, const GateParams& gate) {
  const bool norm = gate.check_gradients || gate.max_norm > 0.f;
  Tensor grad_norm = gate_.rows(kGateGradNorm, 1);
  if (norm) backend_.gradient_norm(grad_norm, graph_.packed_grads());
  backend_.update_gate(gate_, loss_value_, norm ? &grad_norm : nullptr, gate);
  optimizer_.step(lr, &gate_);
  backend_.download_later(figures_host_.get(), figures_);
}

StepFigures TrainStep::read_step() {
  backend_.wait_downloads();
  const float* f = static_cast<const float*>(figures_host_.get());
  StepFigures s{f[0],
                f[1],
                f[2 + kGateSkip] != 0.f,
                f[2 + kGateGradNorm],
                f[2 + kGateLossScale],
                static_cast<int64_t>(f[2 + kGateGrowthTracker])};
  if (!s.skipped) optimizer_.applied();
  return s;
}

void TrainStep::set_loss(double loss) { backend_.fill(loss_value_, static_cast<float>(loss)); }

EvalStats evaluate(TrainStep& step, BatchSource& data, int64_t max_batch, int workers,
                   Communicator* comm) {
  EvalStats s;
  SingleProcess alone;
  Communicator& run = comm ? *comm : alone;
  ShardedSource share(data, run.rank(), run.size());  // the source itself when alone
  const int64_t sample = step.input().numel() / step.input().dim(0);
  BatchQueue queue(share, sample, max_batch, workers, host_allocator(step.backend()));
  queue.start_epoch(0);
  double sums[3] = {0, 0, 0};  // loss over the samples, correct predictions, samples
  for (BatchQueue::Batch batch = queue.next(); batch.n; batch = queue.next()) {
    step.upload(batch.n, batch.images, batch.labels);
    step.infer(batch.n);
    double loss, correct;
    step.read(&loss, &correct);
    sums[0] += loss * static_cast<double>(batch.n);
    sums[1] += correct;
    sums[2] += static_cast<double>(batch.n);
  }
  run.sum(sums, 3);
  s.samples = static_cast<int64_t>(sums[2]);
  if (s.samples) {
    s.loss = sums[0] / sums[2];
    s.accuracy = sums[1] / sums[2];
  }
  return s;
}

uint64_t process_seed(uint64_t seed, int rank) {
  return seed + static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ull;
}

TrainResult train(const Config& config, Graph& graph, Loss& loss, Backend& backend,
                  BatchSource& train_data, BatchSource* test_data, const TrainOptions& options) {
  TrainResult result;
  const int64_t max_batch = graph.max_batch();
  SingleProcess alone;
  Communicator& comm = options.comm ? *options.comm : alone;
  const bool parallel = comm.size() > 1;
  ShardedSource share(train_data, comm.rank(), comm.size());  // the source itself when alone
  TrainStep step(graph, loss, backend, config.train.optimizer,
                 process_seed(config.train.seed, comm.rank()));
  BatchQueue queue(share, graph.input_shape().numel(), max_batch, options.data_workers,
                   host_allocator(backend));
  const int64_t batches = share.batches_per_epoch();
  uint64_t global_step = options.start.step;
  // on_nan: skip_step also has the gate check every gradient (a pass over them each step).
  const bool skip_bad = config.train.on_nan == "skip_step";
  GateParams gate;
  gate.check_gradients = skip_bad;
  // train.clip_grad_norm: the gate scales the gradients to this global L2 norm where above it.
  gate.max_norm = static_cast<float>(config.train.clip_grad_norm);
  // A step's figures are read once the next step's forward and backward are queued, so that the
  // device computes while the host reads them. Not where they must be known first: a
  // data-parallel step sums them over the processes before its update, and with on_nan:
  // skip_step a model with running statistics would have them moved by the next step's forward
  // before a skipped step's diagnosis reruns it.
  const bool overlap = !parallel && !(skip_bad && !graph.buffers().empty());
  int64_t skipped_in_a_row = 0;
  auto out_of_steps = [&](uint64_t steps) {
    return options.max_steps >= 0 && static_cast<int64_t>(steps) >= options.max_steps;
  };
  if (options.on_start) options.on_start(step);
  // fp16 (or a run that asks for it): the loss gradient is multiplied by the gate's dynamic loss
  // scale, and the gate checks every gradient, so that an overflow skips the step.
  const bool scaling = options.loss_scaling || graph.precision() == Precision::kF16;
  double loss_scale = 0;   // where the scale stands, as the last step read left it
  int64_t good_steps = 0;  // and its applied steps since it last changed
  int64_t overflows_in_a_row = 0;
  if (scaling) {
    const GateParams rules = loss_scaling_gate();
    gate.check_gradients = rules.check_gradients;
    gate.growth_interval = rules.growth_interval;
    gate.growth_factor = rules.growth_factor;
    gate.backoff_factor = rules.backoff_factor;
    loss_scale = options.start.loss_scale > 0 ? options.start.loss_scale : kInitialLossScale;
    good_steps = options.start.good_steps;
    step.scale_loss(loss_scale, good_steps);
  }
  auto position = [&](int64_t epoch, int64_t batch, bool stopping, bool last) {
    TrainPosition at{epoch, batch, global_step, stopping, last};
    at.loss_scale = loss_scale;
    at.good_steps = good_steps;
    return at;
  };
  // Every process starts from rank 0's weights and state (its checkpoint when resuming).
  TensorSums sums(comm, backend);  // collective; nothing to do for one process
  if (parallel && options.progress) fmt::print("Sums   gradients summed by {}\n", sums.path());
  if (parallel) sums.broadcast(training_state(step));
  StepLog log(options.device_label);
  RunControl control(config.train);
  control.replay(options.earlier);
  DivergenceWatch divergence(graph.classes());
  double run_seconds = 0;  // wall time of this run's finished epochs, evaluation included
  int64_t run_epochs = 0;

  for (int64_t epoch = options.start.epoch; epoch < config.train.epochs; ++epoch) {
    const int verbose = options.progress ? options.verbose : 0;
    if (verbose == 1) fmt::print("Epoch {}/{}\n", epoch + 1, config.train.epochs);
    backend.reset_peak_memory();
    const int64_t first = epoch == options.start.epoch ? options.start.batch : 0;
    queue.start_epoch(epoch, first);
    log.new_epoch();
    ProgressBar bar(batches, verbose,
                    {epoch, config.train.epochs,
                     run_epochs ? run_seconds / static_cast<double>(run_epochs) : 0});
    auto start = Clock::now();
    double loss_sum = 0, correct_sum = 0, lr = 0;
    int64_t seen = 0, epoch_skipped = 0, epoch_overflows = 0;
    bool stopped = false;
    bool ahead = false;     // the next batch was uploaded while the last step computed
    bool computed = false;  // this process ran a step of this epoch (moved its statistics)
    int64_t ahead_n = 0;
    int64_t b = first;
    std::optional<StepInFlight> in_flight;  // queued, its figures not read yet

    // Reads step s's figures and accounts for it. `later` is the step queued after it, whose
    // forward and backward have run: a skipped step's diagnosis reruns s in its place (its batch
    // is still in the second set of buffers), then `later` again.
    auto finish = [&](const StepInFlight& s, const StepInFlight* later) {
      const StepFigures f = step.read_step();
      const double l = s.summed ? s.loss : f.loss;
      const double correct = s.summed ? s.correct : f.correct;
      const int64_t step_n = s.summed ? s.step_n : s.n;  // the step's samples over every process
      if (s.step == options.start.step) {
        result.first_step_seconds = seconds_since(s.start);
        result.first_step_samples = step_n;
      }
      // Loss scaling: a step whose loss is finite and whose gradients are not overflowed at the
      // scale of the time (GradScaler's usual course): the gate halved the scale; its loss counts.
      const bool overflowed =
          f.skipped && scaling && std::isfinite(l) && overflows_in_a_row < kMaxOverflowsInARow;
      const double scale_before = loss_scale;
      if (scaling) {
        loss_scale = f.loss_scale;
        good_steps = f.good_steps;
      }
      if (overflowed) {
        ++overflows_in_a_row;
        ++result.overflow_steps;
        result.overflowed_at.push_back(static_cast<int64_t>(result.step_losses.size()));
        ++epoch_overflows;
        spdlog::debug(
            "step {}: the gradients overflowed at loss scale {:g}; not applied, the "
            "scale is now {:g}",
            s.step + 1, scale_before, loss_scale);
        result.step_losses.push_back(l);
        loss_sum += l * static_cast<double>(step_n);
        correct_sum += correct;
        seen += step_n;
      } else if (f.skipped) {
        std::string where = "this process had no samples in the step";
        if (s.n) {
          if (later) step.take_next();
          where = locate_nonfinite(step, s.n, s.step);
          if (later) step.take_next();
        }
        if (parallel) where = run_diagnosis(comm, where, s.n > 0 && !std::isfinite(s.own_loss));
        if (!skip_bad || ++skipped_in_a_row == kMaxSkippedInARow)
          throw nonfinite_error(
              config.train.optimizer, s.lr,
              fmt::format("{} at step {} (epoch {}, batch {} of {}){}; {}",
                          std::isfinite(l) ? "a gradient became non-finite"
                                           : "the training loss became " + loss_text(l),
                          s.step + 1, epoch + 1, s.b + 1, batches,
                          skip_bad ? fmt::format(", the {}th non-finite step in a row (on_nan: "
                                                 "skip_step)",
                                                 kMaxSkippedInARow)
                                   : "",
                          where));
        if (++result.skipped_steps <= kSkippedStepsReported)
          spdlog::warn("skipped step {}: loss {}{} ({})", s.step + 1, loss_text(l),
                       std::isfinite(l) ? ", a gradient non-finite" : "", where);
        ++epoch_skipped;
        if (later) step.compute(later->n, later->step);
      } else if (divergence.diverged(l)) {
        // Its update has applied (the gate holds back non-finite steps only); the checkpoint
        // the error names is the last one written before it.
        throw nonfinite_error(
            config.train.optimizer, s.lr,
            fmt::format("the training loss diverged: {} at step {} (epoch {}, batch {} of {}), "
                        "more than {} times its first value {}; the run stops here rather than "
                        "train on to a result no better than chance",
                        loss_text(l), s.step + 1, epoch + 1, s.b + 1, batches,
                        format_count(kDivergenceFactor), loss_text(divergence.reference())));
      } else {
        skipped_in_a_row = 0;
        overflows_in_a_row = 0;
        result.step_losses.push_back(l);
        loss_sum += l * static_cast<double>(step_n);
        correct_sum += correct;
        seen += step_n;
      }
      if (options.log_every > 0)
        log.add(options.log_every, options.on_log, l, correct, step_n, s.lr,
                static_cast<double>(epoch) + static_cast<double>(s.b + 1) / batches, s.step + 1,
                f.skipped && !overflowed,
                gate.check_gradients || gate.max_norm > 0.f ? f.grad_norm : -1, loss_scale);
      if (seen)
        bar.update(s.b + 1, loss_sum / static_cast<double>(seen),
                   correct_sum / static_cast<double>(seen),
                   static_cast<double>(seen) / std::max(1e-9, seconds_since(start)), loss_scale);
    };

    for (; b < batches; ++b) {
      if (out_of_steps(global_step)) {
        stopped = true;
        break;
      }
      int64_t n = ahead_n;  // this process's samples; 0 in a data-parallel epoch's ragged end
      if (ahead) {
        step.take_next();
        ahead = false;
      } else {
        const BatchQueue::Batch batch = queue.next();
        n = batch.n;
        step.upload(n, batch.images, batch.labels);
        // Asking the queue for the next batch gives this one's host buffer back.
        backend.synchronize();
      }
      lr = control.lr_scale() * learning_rate(config.train.optimizer, config.train.schedule,
                                              config.train.epochs, epoch, b, batches);
      StepInFlight now{n, b, global_step, lr, Clock::now()};
      computed = computed || n > 0;
      if (n == 0) {
        // No samples here this step: the gradient sum gets zeros from this process.
      } else if (global_step == 0 && options.on_placement) {
        std::vector<LayerProfile> rows = layer_rows(graph, n);
        std::vector<std::string> trace;
        {
          Graph::ScopedHook hook(graph, trace_layers(backend, rows, trace));
          step.compute(n, global_step);
        }
        options.on_placement(rows);
      } else {
        step.compute(n, global_step);
      }
      bool stop_now = false;
      if (parallel) {
        double l = 0, correct = 0;
        if (n) step.read(&l, &correct);
        now.own_loss = l;
        // One sum of the step's figures: the loss is the mean over every process's samples (a
        // NaN anywhere makes it NaN everywhere), and a stop asked of any process stops them all.
        double figures[4] = {n ? l * static_cast<double>(n) : 0.0, correct, static_cast<double>(n),
                             options.stop && options.stop() ? 1.0 : 0.0};
        comm.sum(figures, 4);
        now.summed = true;
        now.step_n = static_cast<int64_t>(figures[2]);
        now.loss = figures[0] / figures[2];
        now.correct = figures[1];
        stop_now = figures[3] > 0;
        if (std::isfinite(now.loss))
          sums.sum({&graph.packed_grads()}, static_cast<double>(n) / figures[2]);
        step.set_loss(now.loss);  // the gate of every process decides on the run's loss
      }
      if (in_flight) {
        finish(*in_flight, &now);
        in_flight.reset();
      }
      // The next batch's upload runs beside this step (after the diagnosis above, which may need
      // the last batch's buffers).
      if (b + 1 < batches && !out_of_steps(global_step + 1)) {
        // queue.next() hands the buffer of this step's batch back to be refilled: its upload
        // (taken at the step's start) must have read it. Long done: it ran beside the step before.
        backend.wait_taken_uploads();
        const BatchQueue::Batch next = queue.next();
        step.upload_next(next.n, next.images, next.labels);
        ahead = true;
        ahead_n = next.n;
      }
      // The device skips the update of a step that is not finite, so it changes no weight.
      step.update_gated(lr, gate);
      ++global_step;
      if (!parallel) stop_now = options.stop && options.stop();
      // Read at once where the host must know before going on: at the epoch's end, at a stop,
      // and the run's first step (its time is reported apart).
      if (!overlap || stop_now || !ahead || now.step == options.start.step)
        finish(now, nullptr);
      else
        in_flight = now;
      if (stop_now) {
        result.stopped = true;
        ++b;  // this batch is done
        break;
      }
    }
    // The last step's update shows in no loss, and a sigmoid or tanh takes an infinite input to
    // a finite value while the gradients are not: weights can turn non-finite behind finite
    // losses. Checked before any checkpoint of them is written.
    auto check_weights = [&](const std::string& when) {
      if (std::string weights = nonfinite_weights(graph, backend); !weights.empty())
        throw nonfinite_error(
            config.train.optimizer, lr,
            fmt::format("{} {} (step {}) although the loss stayed finite (the update overflowed, "
                        "or a gradient was not finite: a sigmoid or tanh takes an infinite input "
                        "to a finite value){}",
                        weights, when, global_step,
                        skip_bad ? "" : "; on_nan: skip_step checks the gradients of every step"));
    };
    // The batch-norm statistics become the average of the processes that ran a step of the epoch
    // (in an epoch of fewer batches than processes, the others' did not move), and rank 0's
    // weights everyone's (they are equal but for rounding), before any evaluation or checkpoint.
    if (parallel) {
      double movers = computed ? 1.0 : 0.0;
      comm.sum(&movers, 1);
      if (movers > 0) {
        auto named = graph.buffers();
        std::vector<Tensor*> stats;
        for (auto& [name, t] : named) stats.push_back(&t);
        sums.sum(stats, computed ? 1.0 / movers : 0.0);
      }
      sums.broadcast(training_state(step));
    }
    if (result.stopped && b < batches) {  // the current step is done; the epoch is not
      backend.synchronize();
      bar.finish({"stopped"}, fmt::format("Epoch {}/{}", epoch + 1, config.train.epochs));
      check_weights(fmt::format("when stopped in epoch {}", epoch + 1));
      if (options.on_checkpoint) options.on_checkpoint(step, position(epoch, b, true, false));
      break;
    }
    backend.synchronize();
    check_weights(fmt::format("at the end of epoch {}", epoch + 1));
    EpochStats e;
    e.device = options.device_label;
    e.epoch = epoch + 1;
    e.seconds = seconds_since(start);
    e.train_loss = seen ? loss_sum / static_cast<double>(seen) : 0;
    e.train_accuracy = seen ? correct_sum / static_cast<double>(seen) : 0;
    e.images_per_second = static_cast<double>(seen) / std::max(1e-9, e.seconds);
    e.learning_rate = lr;
    e.skipped_steps = epoch_skipped;
    e.loss_scale = loss_scale;
    e.overflow_steps = epoch_overflows;
    result.loss_scale = loss_scale;
    if (epoch_skipped)
      spdlog::warn("epoch {}: {} step{} skipped (not finite; on_nan: skip_step)", epoch + 1,
                   epoch_skipped, epoch_skipped == 1 ? "" : "s");
    if (test_data && test_data->size() > 0) {
      EvalStats t = evaluate(step, *test_data, max_batch, options.data_workers, &comm);
      e.test_loss = t.loss;
      e.test_accuracy = t.accuracy;
    }
    if (options.val && options.val->size() > 0) {
      EvalStats v = evaluate(step, *options.val, max_batch, options.data_workers, &comm);
      e.has_val = true;
      e.val_loss = v.loss;
      e.val_accuracy = v.accuracy;
    }
    e.peak_memory_bytes = backend.peak_memory_bytes();
    std::vector<std::string> fields;
    if (e.has_val)
      fields = {"val_loss " + format_loss(e.val_loss),
                "val_acc " + format_accuracy(e.val_accuracy)};
    if (test_data && test_data->size() > 0)
      fields.insert(fields.end(), {"test_loss " + format_loss(e.test_loss),
                                   "test_acc " + format_accuracy(e.test_accuracy)});
    fields.push_back("peak mem " + format_bytes(e.peak_memory_bytes));
    if (scaling)
      fields.push_back(fmt::format(
          "loss scale {}{}", format_loss_scale(loss_scale),
          epoch_overflows ? fmt::format(" ({} overflowed step{} skipped)", epoch_overflows,
                                        epoch_overflows == 1 ? "" : "s")
                          : ""));
    bar.finish(fields, fmt::format("Epoch {}/{}", epoch + 1, config.train.epochs));
    result.epochs.push_back(e);
    if (options.on_epoch) options.on_epoch(e);
    run_seconds += seconds_since(start);
    ++run_epochs;
    if (stopped) break;
    const RunControl::Decision next =
        control.after_epoch(e, learning_rate(config.train.optimizer, config.train.schedule,
                                             config.train.epochs, epoch, batches - 1, batches));
    for (const std::string& m : next.messages)
      if (options.progress || next.stop) fmt::print("{}\n", m);
    const bool early = next.stop && epoch + 1 < config.train.epochs;
    if (options.on_checkpoint)
      options.on_checkpoint(step, position(epoch + 1, 0, result.stopped, early));
    if (early) result.early_stopped = true;
    if (result.stopped || early) break;
  }
  return result;
}

}  // namespace tandem
