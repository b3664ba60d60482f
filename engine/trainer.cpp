// The training loop, a training step and evaluation (the steps' machinery: step_runner.cpp; the
// throughput benchmark: bench_steps.cpp).
#include "engine/trainer.h"

#include <fmt/format.h>

#include "engine/callbacks/divergence_stop.h"
#include "engine/callbacks/early_stopping.h"
#include "engine/callbacks/parallel_report.h"
#include "engine/callbacks/plateau_schedule.h"
#include "engine/callbacks/progress_line.h"
#include "engine/callbacks/step_log.h"
#include "engine/step_runner.h"

namespace tandem {
namespace {

// The callbacks of every run around the caller's, in the order the events reach them: the
// divergence stop first (a diverged step reaches no output), the step log and the progress line,
// the caller's outputs, then the controls, which decide on an epoch once its figures are out.
void add_standard_callbacks(Callbacks& callbacks, const Config& config, const Graph& graph,
                            const TrainOptions& options) {
  callbacks.add(std::make_shared<DivergenceStop>(graph.classes(), config.train.optimizer));
  if (options.log_every > 0)
    callbacks.add(std::make_shared<StepLog>(options.log_every, options.device_label, callbacks));
  if (options.progress) {
    callbacks.add(std::make_shared<ProgressLine>(options.verbose, ProgressOutput::standard(),
                                                 options.later_epochs));
    callbacks.add(std::make_shared<ParallelReport>());
  }
  callbacks.add_all(options.callbacks);
  if (config.train.schedule.type == "plateau")
    callbacks.add(std::make_shared<PlateauSchedule>(config.train, !options.progress));
  if (config.train.early_stopping.enabled())
    callbacks.add(std::make_shared<EarlyStopping>(config.train));
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
  Callbacks callbacks;
  StepRunner steps(config, graph, loss, backend, train_data, options, result, callbacks);
  RunState state;
  add_standard_callbacks(callbacks, config, graph, options);
  const int64_t epochs = config.train.epochs, batches = steps.batches();
  try {
    callbacks.run_start(
        {steps.step(), options.earlier, epochs, batches, steps.reductions(), state});
    steps.begin();
    for (int64_t epoch = options.start.epoch; epoch < epochs; ++epoch) {
      const int64_t first = epoch == options.start.epoch ? options.start.batch : 0;
      callbacks.epoch_start({epoch, epochs, batches, first});
      steps.start_epoch(epoch, first);
      auto rate = [&](int64_t b) {
        return learning_rate(config.train.optimizer, config.train.schedule, epochs, epoch, b,
                             batches);
      };
      double lr = 0;
      bool cut_short = false;  // options.max_steps
      int64_t b = first;
      while (b < batches && !result.stopped) {
        if (steps.out_of_steps(steps.steps_done())) {
          cut_short = true;
          break;
        }
        lr = state.lr_scale * rate(b);
        result.stopped = steps.run(b++, lr);
      }
      steps.end_epoch();
      if (result.stopped && b < batches) {  // the current step is done; the epoch is not
        callbacks.stopped({epoch, epochs, b});
        steps.check_weights(fmt::format("when stopped in epoch {}", epoch + 1), lr);
        callbacks.checkpoint({steps.step(), steps.position(epoch, b, true, false)});
        break;
      }
      steps.check_weights(fmt::format("at the end of epoch {}", epoch + 1), lr);
      result.epochs.push_back(steps.epoch_stats(lr, test_data, options.val));
      callbacks.epoch_end({result.epochs.back(), epochs, rate(batches - 1), cut_short, state});
      if (cut_short) break;
      result.early_stopped = state.stop && epoch + 1 < epochs;
      callbacks.checkpoint(
          {steps.step(), steps.position(epoch + 1, 0, result.stopped, result.early_stopped)});
      if (result.stopped || result.early_stopped) break;
    }
  } catch (const std::exception& e) {
    callbacks.error(e);
    throw;
  }
  return result;
}

}  // namespace tandem
