// The throughput benchmark: training and inference steps on one random batch, timed one by
// one (trainer bench), and the per-layer times (--per-layer).
#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/layer_profile.h"
#include "engine/rng.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

namespace {

// Random data (never all zeros: some kernels shortcut zeros), uploaded once, not timed.
void upload_random_batch(TrainStep& step, const Graph& graph, int64_t batch_size, uint64_t seed) {
  const int64_t sample = graph.input_shape().numel();
  std::vector<float> images(static_cast<size_t>(batch_size * sample));
  std::vector<int32_t> labels(static_cast<size_t>(batch_size));
  for (size_t i = 0; i < images.size(); ++i)
    images[i] = static_cast<float>(philox_normal(seed, 0xBE5C, i));
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<int32_t>(philox_uniform(seed, 0xBE5D, i) * graph.classes());
  step.upload(batch_size, images.data(), labels.data());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A small learning rate keeps the weights (and so the work) realistic over many steps.
constexpr double kBenchLr = 1e-4;

}  // namespace

BenchResult bench(Graph& graph, Loss& loss, Backend& backend, const OptimizerConfig& opt,
                  int64_t batch_size, int steps, int warmup, uint64_t seed) {
  TrainStep step(graph, loss, backend, opt, seed);
  upload_random_batch(step, graph, batch_size, seed);

  auto time_steps = [&](auto&& fn) {
    for (int i = 0; i < warmup; ++i) fn(i);
    backend.synchronize();
    std::vector<double> ms;
    for (int i = 0; i < steps; ++i) {
      auto t = Clock::now();
      fn(warmup + i);
      backend.synchronize();
      ms.push_back(seconds_since(t) * 1e3);
    }
    return step_spread(ms);
  };
  BenchResult r;
  r.batch_size = batch_size;
  r.warmup = warmup;
  r.steps = steps;
  r.train_spread =
      time_steps([&](int i) { step.train(batch_size, kBenchLr, static_cast<uint64_t>(i)); });
  r.infer_spread = time_steps([&](int) { step.infer(batch_size); });
  // Bench's figure per step stays the middle step's time.
  r.train_ms = r.train_spread.median;
  r.infer_ms = r.infer_spread.median;
  r.train_images_per_second = static_cast<double>(batch_size) * 1e3 / r.train_ms;
  r.infer_images_per_second = static_cast<double>(batch_size) * 1e3 / r.infer_ms;
  return r;
}

std::vector<LayerProfile> profile_layers(Graph& graph, Loss& loss, Backend& backend,
                                         const OptimizerConfig& opt, int64_t batch_size, int steps,
                                         int warmup, uint64_t seed) {
  TrainStep step(graph, loss, backend, opt, seed);
  upload_random_batch(step, graph, batch_size, seed);
  for (int i = 0; i < warmup; ++i) step.train(batch_size, kBenchLr, static_cast<uint64_t>(i));
  std::vector<LayerProfile> rows = layer_rows(graph, batch_size);
  std::vector<std::string> trace;
  auto train_step = [&](int i) {
    step.train(batch_size, kBenchLr, static_cast<uint64_t>(warmup + i));
  };
  // The first step traces the placement; the timed ones synchronise around every layer.
  {
    Graph::ScopedHook hook(graph, trace_layers(backend, rows, trace));
    train_step(0);
  }
  std::vector<std::vector<double>> fwd(rows.size()), bwd(rows.size());
  Clock::time_point start;
  {
    Graph::ScopedHook hook(graph, [&](size_t layer, bool backward, bool done) {
      backend.synchronize();
      if (!done) {
        start = Clock::now();
        return;
      }
      (backward ? bwd : fwd)[layer].push_back(seconds_since(start) * 1e3);
    });
    for (int i = 1; i <= steps; ++i) train_step(i);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].forward_ms = median(fwd[i]);
    rows[i].backward_ms = median(bwd[i]);
  }
  return without_fused(graph, std::move(rows));
}

}  // namespace tandem
