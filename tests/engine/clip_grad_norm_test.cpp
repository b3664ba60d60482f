// train.clip_grad_norm: the update gate scales every gradient by max_norm / norm where the global
// L2 norm is above max_norm (PyTorch's clip_grad_norm_), on every backend present; the GPU case
// is skipped, with the reason, without a GPU. And the config reaches the training loop.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/synthetic.h"
#include "engine/backend_registry.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/rng.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

const char* kMlp = R"(
input: {shape: [1, 6, 6]}
layers:
  - flatten
  - dense: {units: 16}
  - relu
  - dense: {units: 4}
loss: softmax_cross_entropy
data: {format: synthetic, classes: 4, train_size: 64, test_size: 8, seed: 2}
train: {batch_size: 8, optimizer: {type: sgd, lr: 0.1}, seed: 11}
)";

class ClipGradNorm : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cpu") return;
    try {
      create_backend(GetParam(), {});
    } catch (const Error& e) {
      GTEST_SKIP() << "no usable GPU: " << e.cause();
    }
  }
};

struct Clipped {
  std::vector<float> before, grads, after;
  double norm = 0, gate_norm = 0;
};

// One SGD step (no momentum) on a random batch, clipped to `max_norm` (0: not clipped): the
// weights before and after it, the gradients, and their global L2 norm as the host and the gate
// computed it.
Clipped one_step(const std::string& device, float max_norm) {
  Config config = parse_config(kMlp, "clip.yaml");
  BackendOptions options;
  options.deterministic = true;
  auto backend = create_backend(device, options);
  Graph graph(config);
  auto loss = make_loss(config.loss);
  graph.allocate(*backend, 8, 11);
  TrainStep step(graph, *loss, *backend, config.train.optimizer, 11);
  std::vector<float> x(static_cast<size_t>(8 * graph.input_shape().numel()));
  std::vector<int32_t> y(8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(philox_normal(5, 0, i));
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>(i % 4);
  step.upload(8, x.data(), y.data());
  Clipped c;
  const size_t n = static_cast<size_t>(graph.packed_values().numel());
  c.before.resize(n), c.grads.resize(n), c.after.resize(n);
  backend->download(c.before.data(), graph.packed_values());
  step.compute(8, 0);
  backend->download(c.grads.data(), graph.packed_grads());
  for (float g : c.grads) c.norm += static_cast<double>(g) * g;
  c.norm = std::sqrt(c.norm);
  GateParams gate;
  gate.max_norm = max_norm;
  step.update_gated(0.1, gate);
  const StepFigures f = step.read_step();
  EXPECT_FALSE(f.skipped);
  c.gate_norm = f.grad_norm;
  backend->download(c.after.data(), graph.packed_values());
  return c;
}

TEST_P(ClipGradNorm, ScalesTheGradientsDownToTheNorm) {
  const Clipped free = one_step(GetParam(), 0);
  ASSERT_GT(free.norm, 0);
  const float max_norm = static_cast<float>(free.norm / 4);
  const Clipped c = one_step(GetParam(), max_norm);
  EXPECT_NEAR(c.gate_norm, c.norm, 1e-5 * c.norm);
  const double coef = max_norm / (c.norm + 1e-6);
  for (size_t i = 0; i < c.after.size(); ++i)
    ASSERT_NEAR(c.after[i], c.before[i] - 0.1 * coef * c.grads[i], 1e-6 + 1e-5 * std::fabs(c.before[i]))
        << "value " << i;
  // The step moved the weights by lr * max_norm in all.
  double moved = 0;
  for (size_t i = 0; i < c.after.size(); ++i)
    moved += (static_cast<double>(c.after[i]) - c.before[i]) * (c.after[i] - c.before[i]);
  EXPECT_NEAR(std::sqrt(moved), 0.1 * max_norm, 1e-3 * 0.1 * max_norm);
}

TEST_P(ClipGradNorm, LeavesGradientsBelowTheNormAsTheyAre) {
  const Clipped free = one_step(GetParam(), 0);
  const Clipped c = one_step(GetParam(), static_cast<float>(4 * free.norm));
  EXPECT_EQ(c.after, free.after);
}

INSTANTIATE_TEST_SUITE_P(Backends, ClipGradNorm, ::testing::Values("cpu", "gpu"),
                         [](const auto& info) { return info.param; });

// train.clip_grad_norm in a config reaches the loop: each SGD step moves the weights by
// lr * clip_grad_norm at most, where without it the first step moves them further.
TEST(ClipGradNormConfig, TheTrainingLoopClipsEveryStep) {
  auto moved_by_first_step = [](double clip) {
    Config config = parse_config(kMlp, "clip.yaml");
    config.train.clip_grad_norm = clip;
    auto backend = create_backend("cpu", {});
    Graph graph(config);
    auto loss = make_loss(config.loss);
    graph.allocate(*backend, 8, config.train.seed);
    const Dataset data = make_synthetic(Shape{1, 6, 6}, 4, 64, 2, true);
    Batcher batches(data, 8, true, config.train.seed, {}, {});
    const size_t n = static_cast<size_t>(graph.packed_values().numel());
    std::vector<float> before(n), after(n);
    backend->download(before.data(), graph.packed_values());
    TrainOptions options;
    options.progress = false;
    options.max_steps = 1;
    train(config, graph, *loss, *backend, batches, nullptr, options);
    backend->download(after.data(), graph.packed_values());
    double moved = 0;
    for (size_t i = 0; i < n; ++i)
      moved += (static_cast<double>(after[i]) - before[i]) * (after[i] - before[i]);
    return std::sqrt(moved);
  };
  const double free = moved_by_first_step(0);
  const double clip = free / 0.1 / 10;  // a tenth of the gradients' norm
  EXPECT_NEAR(moved_by_first_step(clip), 0.1 * clip, 1e-3 * 0.1 * clip);
  EXPECT_GT(free, 5 * 0.1 * clip);
}

}  // namespace
}  // namespace tandem
