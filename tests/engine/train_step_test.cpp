// TrainStep's second set of batch buffers: uploading the next batch while a step computes gives
// the same steps as uploading each batch when its step starts. On every backend present; the GPU
// case (where the upload runs on a copy stream) is skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/backend_registry.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/rng.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

// A first flatten (a view of the input buffer) and a convolution (reads the input in backward).
const char* kMlp = R"(
input: {shape: [1, 6, 6]}
layers:
  - flatten
  - dense: {units: 16}
  - relu
  - dense: {units: 4}
loss: softmax_cross_entropy
train: {batch_size: 8, optimizer: {type: sgd, lr: 0.1, momentum: 0.9}}
)";
const char* kConv = R"(
input: {shape: [2, 6, 6]}
layers:
  - conv2d: {filters: 3, kernel: 3, padding: 1}
  - relu
  - flatten
  - dense: {units: 4}
loss: softmax_cross_entropy
train: {batch_size: 8, optimizer: {type: sgd, lr: 0.1, momentum: 0.9}}
)";

// Batches of 8, 8, 8, 8 and a last one of 3 samples, each drawn from its own stream, in host
// memory of the backend's allocate_host.
struct Batches {
  std::vector<std::shared_ptr<void>> images, labels;
  std::vector<int64_t> sizes{8, 8, 8, 8, 3};
  Batches(Backend& backend, int64_t sample, int classes) {
    for (size_t b = 0; b < sizes.size(); ++b) {
      images.push_back(backend.allocate_host(static_cast<size_t>(8 * sample) * sizeof(float)));
      labels.push_back(backend.allocate_host(8 * sizeof(int32_t)));
      auto* x = static_cast<float*>(images.back().get());
      auto* y = static_cast<int32_t*>(labels.back().get());
      for (int64_t i = 0; i < 8 * sample; ++i)
        x[i] = static_cast<float>(philox_normal(3, b, static_cast<uint64_t>(i)));
      for (int64_t i = 0; i < 8; ++i)
        y[i] = static_cast<int32_t>(philox_uniform(4, b, static_cast<uint64_t>(i)) * classes);
    }
  }
  const float* x(size_t b) const { return static_cast<const float*>(images[b].get()); }
  const int32_t* y(size_t b) const { return static_cast<const int32_t*>(labels[b].get()); }
};

// Per-step losses of the batches in order, each uploaded when its step starts or (ahead) while
// the step before computes, like the training loop; and the weights after the last step.
std::pair<std::vector<double>, std::vector<float>> run(const std::string& device, const char* yaml,
                                                       bool ahead) {
  Config config = parse_config(yaml, "test.yaml");
  // Deterministic: no timed algorithm search, no atomics, so two runs may be compared bit for bit.
  BackendOptions options;
  options.deterministic = true;
  auto backend = create_backend(device, options);
  Graph graph(config);
  auto loss = make_loss(config.loss);
  graph.allocate(*backend, 8, 11);
  TrainStep step(graph, *loss, *backend, config.train.optimizer, 11);
  Batches data(*backend, graph.input_shape().numel(), static_cast<int>(graph.classes()));
  std::vector<double> losses;
  step.upload(data.sizes[0], data.x(0), data.y(0));
  for (size_t b = 0; b < data.sizes.size(); ++b) {
    if (b > 0 && !ahead) step.upload(data.sizes[b], data.x(b), data.y(b));
    step.train(data.sizes[b], 0.1, b);
    if (ahead && b + 1 < data.sizes.size())
      step.upload_next(data.sizes[b + 1], data.x(b + 1), data.y(b + 1));
    double l, correct;
    step.read(&l, &correct);
    losses.push_back(l);
    if (ahead) step.take_next();
  }
  Param* last = graph.params().back();
  std::vector<float> w(static_cast<size_t>(last->value.numel()));
  backend->download(w.data(), last->value);
  return {losses, w};
}

class UploadAhead : public ::testing::TestWithParam<std::string> {
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

TEST_P(UploadAhead, GivesTheSameStepsAsUploadingEachBatchInTurn) {
  for (const char* yaml : {kMlp, kConv}) {
    auto [in_turn, w_in_turn] = run(GetParam(), yaml, false);
    auto [ahead, w_ahead] = run(GetParam(), yaml, true);
    ASSERT_EQ(in_turn.size(), 5u);
    EXPECT_EQ(in_turn, ahead) << (yaml == kMlp ? "mlp" : "conv");
    EXPECT_EQ(w_in_turn, w_ahead) << (yaml == kMlp ? "mlp" : "conv");
    // The batches differ, so a step that read a stale buffer would have shown above.
    EXPECT_NE(in_turn[0], in_turn[1]);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, UploadAhead, ::testing::Values("cpu", "gpu"),
                         [](const auto& info) { return info.param; });

// The weights after gated Adam steps on the batches listed (poisoned with a NaN where marked),
// and the optimizer's count of applied updates.
std::pair<std::vector<float>, int64_t> gated_adam(
    const std::string& device, const std::vector<std::pair<size_t, bool>>& steps) {
  Config config = parse_config(kMlp, "test.yaml");
  config.train.optimizer.type = "adam";
  BackendOptions options;
  options.deterministic = true;
  auto backend = create_backend(device, options);
  Graph graph(config);
  auto loss = make_loss(config.loss);
  graph.allocate(*backend, 8, 11);
  TrainStep step(graph, *loss, *backend, config.train.optimizer, 11);
  Batches data(*backend, graph.input_shape().numel(), static_cast<int>(graph.classes()));
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto [b, bad] = steps[i];
    std::vector<float> x(data.x(b), data.x(b) + 8 * graph.input_shape().numel());
    if (bad) x[3] = std::numeric_limits<float>::quiet_NaN();
    step.upload(8, x.data(), data.y(b));
    step.compute(8, i);
    step.update_gated(0.01, GateParams{});
    const StepFigures f = step.read_step();
    EXPECT_EQ(f.skipped, bad) << "step " << i;
    EXPECT_EQ(std::isfinite(f.loss), !bad) << "step " << i;
  }
  std::vector<float> w(static_cast<size_t>(graph.packed_values().numel()));
  backend->download(w.data(), graph.packed_values());
  return {w, step.optimizer().steps()};
}

class GatedStep : public UploadAhead {};

// The device skips the update of a step whose loss is NaN; Adam's bias correction then counts
// the next update as its first, as if the bad step had not been there.
TEST_P(GatedStep, ANonFiniteLossChangesNoWeightAndIsNotCountedByAdam) {
  auto [after_bad, count] = gated_adam(GetParam(), {{0, true}, {1, false}, {2, false}});
  auto [without, count_without] = gated_adam(GetParam(), {{1, false}, {2, false}});
  EXPECT_EQ(count, 2);
  EXPECT_EQ(count_without, 2);
  EXPECT_EQ(after_bad, without);
}

INSTANTIATE_TEST_SUITE_P(Backends, GatedStep, ::testing::Values("cpu", "gpu"),
                         [](const auto& info) { return info.param; });

TEST(Graph, SwapInputRefusesAnotherShape) {
  Config config = parse_config(kMlp, "test.yaml");
  auto backend = create_backend("cpu", {});
  Graph graph(config);
  graph.allocate(*backend, 8, 1);
  Tensor other(*backend, Shape{4, 1, 6, 6});
  EXPECT_THROW(graph.swap_input(other), Error);
}

}  // namespace
}  // namespace tandem
