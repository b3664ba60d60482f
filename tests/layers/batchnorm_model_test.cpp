// A model with batch normalization: training moves the running statistics, eval normalizes with
// them (so an eval forward differs from a training one), and a checkpoint saves and restores them.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/rng.h"
#include "engine/trainer.h"
#include "tests/cpu/backend_test_util.h"
#include "tests/reference/reference.h"

namespace tandem {
namespace {

const char* kModel = R"(
input: {shape: [2, 6, 6]}
layers:
  - conv2d: {filters: 3, kernel: 3, padding: 1}
  - batchnorm
  - relu
  - flatten
  - dense: {units: 8}
  - batchnorm: {momentum: 0.2}
  - relu
  - dense: {units: 4}
loss: softmax_cross_entropy
train: {batch_size: 8, optimizer: {type: sgd, lr: 0.1, momentum: 0.9}}
)";

struct Model {
  Config config = parse_config(kModel, "bn.yaml");
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  Graph graph{config};
  std::unique_ptr<Loss> loss = make_loss(config.loss);
  std::unique_ptr<TrainStep> step;
  std::vector<float> x = std::vector<float>(8 * 72);
  std::vector<int32_t> y = std::vector<int32_t>(8);

  Model() {
    graph.allocate(*backend, 8, 5);
    step = std::make_unique<TrainStep>(graph, *loss, *backend, config.train.optimizer, 5);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 2.f + static_cast<float>(philox_normal(1, 0, i));
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>(i % 4);
  }
  std::vector<float> values(const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    backend->download(v.data(), t);
    return v;
  }
  std::vector<float> logits(bool training) {
    Tensor in = graph.input().prefix(8);
    backend->upload(in, x.data());
    Context ctx{*backend, training, 5, 0};
    return values(graph.forward(ctx, 8));
  }
};

// zero_init: the scale starts at 0 (a residual branch that starts as nothing), the shift at 0.
TEST(BatchNormModel, ZeroInitStartsTheScaleAtZero) {
  for (const bool zero : {false, true}) {
    std::string text = kModel;
    if (zero) text.replace(text.find("- batchnorm\n"), 12, "- batchnorm: {zero_init: true}\n");
    Config config = parse_config(text, "bn.yaml");
    auto backend = create_backend("cpu", {});
    Graph graph(config);
    graph.allocate(*backend, 8, 5);
    const Param& gamma = *graph.params()[2];  // the first batchnorm's weight, after conv2d's two
    ASSERT_EQ(gamma.name, "batchnorm_1.weight");
    std::vector<float> v(static_cast<size_t>(gamma.value.numel()));
    backend->download(v.data(), gamma.value);
    for (float g : v) EXPECT_EQ(g, zero ? 0.f : 1.f);
  }
}

TEST(BatchNormModel, TrainingMovesTheRunningStatisticsThatEvalUses) {
  Model m;
  auto buffers = m.graph.buffers();
  ASSERT_EQ(buffers.size(), 4u);
  EXPECT_EQ(buffers[0].first, "batchnorm_1.running_mean");
  EXPECT_EQ(buffers[3].first, "batchnorm_2.running_var");
  EXPECT_EQ(m.values(buffers[0].second), std::vector<float>(3, 0.f));
  EXPECT_EQ(m.values(buffers[1].second), std::vector<float>(3, 1.f));
  // Before any training eval normalizes with mean 0 and variance 1: not the batch's statistics.
  EXPECT_NE(m.logits(false), m.logits(true));

  m.step->upload(8, m.x.data(), m.y.data());
  double first = 0, loss = 0, correct = 0;
  for (uint64_t s = 0; s < 30; ++s) {
    m.step->train(8, 0.1, s);
    m.step->read(&loss, &correct);
    if (s == 0) first = loss;
  }
  EXPECT_LT(loss, 0.5 * first);  // one batch, learnt
  // The inputs are around 2: the conv layer's output mean moved the first running mean.
  for (float v : m.values(buffers[0].second)) EXPECT_NE(v, 0.f);
  for (float v : m.values(buffers[3].second)) EXPECT_NE(v, 1.f);

  // Eval normalizes each batchnorm layer's input with its running mean and variance (in that
  // order), its trained scale and shift: the reference's inference formula, layer by layer.
  m.logits(false);
  std::vector<std::vector<float>> scale_shift;  // batchnorm_1 weight, bias, batchnorm_2 ...
  for (Param* p : m.graph.params())
    if (p->name.starts_with("batchnorm_")) scale_shift.push_back(m.values(p->value));
  ASSERT_EQ(scale_shift.size(), 4u);
  struct At {
    size_t layer, channels, inner;
  };
  const At bn[2] = {{1, 3, 36}, {5, 8, 1}};  // layers batchnorm_1 (C=3, 6x6) and batchnorm_2
  for (size_t k = 0; k < 2; ++k) {
    const std::vector<float> in = m.values(m.graph.output(bn[k].layer - 1, 8));
    const std::vector<float> out = m.values(m.graph.output(bn[k].layer, 8));
    auto want = reference::batchnorm_inference(
        in, scale_shift[2 * k], scale_shift[2 * k + 1], m.values(buffers[2 * k].second),
        m.values(buffers[2 * k + 1].second), 8, static_cast<int64_t>(bn[k].channels),
        static_cast<int64_t>(bn[k].inner), 1e-5);
    // Where the relu after it is fused, the layer's output is the relu's.
    if (m.graph.fused_into(bn[k].layer + 1) == static_cast<int>(bn[k].layer))
      for (double& v : want) v = std::max(v, 0.0);
    EXPECT_LT(testing::relative_error(out, want), 1e-5) << "batchnorm_" << k + 1;
  }
}

TEST(BatchNormModel, ACheckpointRestoresTheRunningStatistics) {
  const std::string path = ::testing::TempDir() + "batchnorm.safetensors";
  Model a;
  a.step->upload(8, a.x.data(), a.y.data());
  for (uint64_t s = 0; s < 3; ++s) a.step->train(8, 0.1, s);
  CheckpointMeta meta;
  meta.step = 3;  // the steps above: a checkpoint never records more updates than steps
  save_checkpoint(path, a.graph, a.step->optimizer(), meta);
  Model b;
  restore_checkpoint(path, b.graph, b.step->optimizer());
  auto ba = a.graph.buffers(), bb = b.graph.buffers();
  ASSERT_EQ(ba.size(), bb.size());
  for (size_t k = 0; k < ba.size(); ++k)
    EXPECT_EQ(a.values(ba[k].second), b.values(bb[k].second)) << ba[k].first;
  EXPECT_EQ(a.logits(false), b.logits(false));
}

TEST(BatchNormModel, AFlatBatchOfOneSampleIsRefusedWhileTrainingButEvaluates) {
  Model m;
  Context train{*m.backend, true, 5, 0}, eval{*m.backend, false, 5, 0};
  Tensor in = m.graph.input().prefix(1);
  m.backend->upload(in, m.x.data());
  EXPECT_EQ(m.graph.min_training_batch(), 2);
  try {
    m.graph.forward(train, 1);
    FAIL() << "a batch of 1 was normalized by its own statistics";
  } catch (const ConfigError& e) {
    EXPECT_NE(e.cause().find("batchnorm_2"), std::string::npos) << e.cause();
    EXPECT_NE(e.hint().find("drop_last"), std::string::npos) << e.hint();
  }
  EXPECT_EQ(m.graph.forward(eval, 1).numel(), 4);
}

}  // namespace
}  // namespace tandem
