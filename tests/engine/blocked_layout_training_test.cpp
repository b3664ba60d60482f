// The CPU's fp32 images in oneDNN's blocked order (nChw8c, nChw16c) train the same steps as in
// the plain order (TANDEM_CPU_FP32_LAYOUT=plain), through every layer kind that meets a blocked
// activation; each op alone: tests/cpu/blocked_layout_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/backend_registry.h"
#include "engine/config.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/rng.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

using Floats = std::vector<float>;

// Largest |a - b| over the largest |b|.
double relative_gap(const Floats& a, const Floats& b) {
  EXPECT_EQ(a.size(), b.size());
  double gap = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    gap = std::max(gap, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return gap / (scale > 0 ? scale : 1);
}

// A network of every layer kind that meets a blocked activation: convolutions with and without
// bias, a depthwise 5x5, batch normalization, max pooling, a residual add, stochastic depth,
// squeeze-and-excitation, global average pooling, then a flatten into dense layers.
const char* kNet = R"(
input: {shape: [3, 12, 12]}
layers:
  - {conv2d: {filters: 16, kernel: 3, padding: 1}, name: stem}
  - batchnorm
  - relu
  - {conv2d: {filters: 16, kernel: 5, padding: 2, groups: 16, bias: false}, name: dw}
  - {batchnorm: {}, name: dw_bn}
  - {silu: {}, name: dw_act}
  - {global_avgpool: {keep_dims: true}, name: squeeze}
  - {conv2d: {filters: 16, kernel: 1}, name: excite}
  - {sigmoid: {}, name: gate}
  - {multiply: {}, inputs: [dw_act, gate], name: scaled}
  - {drop_path: {rate: 0.3}, name: drop}
  - {add: {}, inputs: [drop, stem]}
  - {maxpool: {kernel: 2, stride: 2}}
  - {conv2d: {filters: 32, kernel: 3, padding: 1, bias: false}}
  - relu
  - flatten
  - {dense: {units: 10}}
loss: softmax_cross_entropy
train: {batch_size: 6, optimizer: {type: sgd, lr: 0.05, momentum: 0.9, weight_decay: 1.0e-4}}
)";

// The losses of 4 steps and the parameters after them, with the CPU's fp32 images in `layout`
// ("plain" or the blocked default).
std::pair<std::vector<double>, Floats> train_steps(const char* layout) {
  if (std::string(layout) == "plain")
    setenv("TANDEM_CPU_FP32_LAYOUT", "plain", 1);
  else
    unsetenv("TANDEM_CPU_FP32_LAYOUT");
  Config config = parse_config(kNet, "net.yaml");
  auto backend = create_backend("cpu", {});
  unsetenv("TANDEM_CPU_FP32_LAYOUT");
  Graph graph(config);
  auto loss = make_loss(config.loss);
  graph.allocate(*backend, 6, 5);
  TrainStep step(graph, *loss, *backend, config.train.optimizer, 5);
  const int64_t sample = graph.input_shape().numel();
  std::vector<double> losses;
  for (uint64_t b = 0; b < 4; ++b) {
    std::vector<float> x(static_cast<size_t>(6 * sample));
    std::vector<int32_t> y(6);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(philox_normal(8, b, i));
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>(philox_uniform(9, b, i) * 10);
    step.upload(6, x.data(), y.data());
    step.train(6, 0.05, b);
    double l, correct;
    step.read(&l, &correct);
    losses.push_back(l);
  }
  Floats params(static_cast<size_t>(graph.packed_values().numel()));
  backend->download(params.data(), graph.packed_values());
  return {losses, params};
}

TEST(BlockedLayoutTraining, GivesThePlainOrdersStepsOnEveryLayerKind) {
  auto cpu = create_backend("cpu", {});
  if (cpu->activation_layout(DType::kF32, Shape{6, 16, 12, 12}) == Layout::kPlain)
    GTEST_SKIP() << "oneDNN blocks nothing on this CPU (no AVX2): the plain order is the only one";
  EXPECT_EQ(cpu->activation_layout(DType::kF32, Shape{6, 12, 12, 12}), Layout::kPlain)
      << "12 channels are no whole block";
  auto [blocked_losses, blocked_params] = train_steps("blocked");
  auto [plain_losses, plain_params] = train_steps("plain");
  ASSERT_EQ(blocked_losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(blocked_losses[i], plain_losses[i], 1e-5 * std::fabs(plain_losses[i])) << i;
  EXPECT_NE(plain_losses[0], plain_losses[3]);  // it trained
  EXPECT_LE(relative_gap(blocked_params, plain_params), 1e-5);
}

}  // namespace
}  // namespace tandem
