// Frozen layers (trainable: false, train.freeze) and learning-rate multipliers: what training does
// to a frozen layer's weights, gradients, optimizer state and batch-normalization statistics, and
// the update a multiplier gives. On every backend present; the GPU cases are skipped, with the
// reason, without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/rng.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

// A convolution that trains under a frozen batch normalization, a frozen dense layer between two
// that train: the frozen layers' input gradients are needed, their weight gradients are not.
const char* kMixed = R"(
input: {shape: [2, 6, 6]}
layers:
  - conv2d: {filters: 3, kernel: 3, padding: 1}
  - {batchnorm: {}, trainable: false}
  - relu
  - flatten
  - dense: {units: 8}
  - relu
  - dense: {units: 8}
  - relu
  - dense: {units: 4}
loss: softmax_cross_entropy
train:
  batch_size: 8
  optimizer: {type: sgd, lr: 0.1, momentum: 0.9, weight_decay: 0.01}
  freeze: [dense_2]
)";

std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  t.backend().download(v.data(), t);
  return v;
}

void set_values(Tensor& t, const std::vector<float>& v) { t.backend().upload(t, v.data()); }

// kMixed on a backend, allocated for batches of 8, with its training step.
struct Mixed {
  explicit Mixed(const std::string& device)
      : config(parse_config(kMixed, "test.yaml")),
        backend(create_backend(device, {})),
        graph(std::make_unique<Graph>(config)),
        loss(make_loss(config.loss)) {
    graph->allocate(*backend, 8, 3);
    step = std::make_unique<TrainStep>(*graph, *loss, *backend, config.train.optimizer, 3);
  }
  Config config;
  std::unique_ptr<Backend> backend;  // before the graph: its tensors go first
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Loss> loss;
  std::unique_ptr<TrainStep> step;
};

class Freeze : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    register_builtin_layers();
    if (GetParam() == "cpu") return;
    try {
      create_backend(GetParam(), {});
    } catch (const Error& e) {
      GTEST_SKIP() << "no usable GPU: " << e.cause();
    }
  }
  // Trains `steps` steps of batches of 8 random samples.
  void train(TrainStep& step, int steps) {
    const Graph& g = step.graph();
    const int64_t numel = 8 * g.input_shape().numel();
    for (int s = 0; s < steps; ++s) {
      std::vector<float> x(static_cast<size_t>(numel));
      std::vector<int32_t> y(8);
      for (int64_t i = 0; i < numel; ++i)
        x[static_cast<size_t>(i)] = static_cast<float>(
            1.0 + philox_normal(5, static_cast<uint64_t>(s), static_cast<uint64_t>(i)));
      for (int i = 0; i < 8; ++i)
        y[static_cast<size_t>(i)] = static_cast<int32_t>(
            philox_uniform(6, static_cast<uint64_t>(s), static_cast<uint64_t>(i)) *
            static_cast<double>(g.classes()));
      step.upload(8, x.data(), y.data());
      step.train(8, 0.1, static_cast<uint64_t>(s));
    }
    step.backend().synchronize();
  }
};

TEST_P(Freeze, FrozenWeightsStayBitForBitWhileTheOthersTrain) {
  Mixed m(GetParam());
  Graph& graph = *m.graph;
  TrainStep& step = *m.step;
  std::map<std::string, std::vector<float>> before;
  for (Param* p : graph.params()) before[p->name] = values(p->value);
  for (auto& [name, t] : graph.buffers()) before[name] = values(t);
  train(step, 4);
  const std::set<std::string> frozen = {"batchnorm_1.weight", "batchnorm_1.bias", "dense_2.weight",
                                        "dense_2.bias"};
  for (Param* p : graph.params()) {
    EXPECT_EQ(p->trainable, !frozen.count(p->name)) << p->name;
    if (frozen.count(p->name)) {
      // Weight decay and momentum touch them neither; no gradient is computed for them.
      EXPECT_EQ(values(p->value), before[p->name]) << p->name;
      for (float g : values(p->grad)) ASSERT_EQ(g, 0.f) << p->name;
    } else {
      EXPECT_NE(values(p->value), before[p->name]) << p->name;
    }
  }
  // The frozen batch normalization's running statistics did not move.
  for (auto& [name, t] : graph.buffers()) EXPECT_EQ(values(t), before[name]) << name;
}

TEST_P(Freeze, FrozenLayersHaveNoOptimizerState) {
  Mixed m(GetParam());
  Graph& graph = *m.graph;
  TrainStep& step = *m.step;
  std::set<std::string> names;
  for (const auto& [name, t] : checkpoint_tensors(graph, step.optimizer())) names.insert(name);
  EXPECT_TRUE(names.count("dense_2.weight"));  // the weights are the model's, saved
  EXPECT_TRUE(names.count("batchnorm_1.running_mean"));
  EXPECT_FALSE(names.count("optimizer.dense_2.weight.velocity"));
  EXPECT_FALSE(names.count("optimizer.dense_2.bias.velocity"));
  EXPECT_FALSE(names.count("optimizer.batchnorm_1.weight.velocity"));
  EXPECT_TRUE(names.count("optimizer.conv2d_1.weight.velocity"));
  EXPECT_TRUE(names.count("optimizer.dense_3.weight.velocity"));
  // The packed state holds the trainable parameters only.
  int64_t trainable = 0;
  for (Param* p : graph.params())
    if (p->trainable) trainable += packed_numel(p->shape);
  EXPECT_EQ(step.optimizer().state_tensors()[0]->numel(), trainable);
}

TEST_P(Freeze, FrozenBatchNormNormalizesWithItsRunningStatisticsInTraining) {
  Config config = parse_config(R"(
input: {shape: [3, 2, 2]}
layers:
  - {batchnorm: {}, trainable: false}
  - flatten
  - dense: {units: 2}
train: {batch_size: 4}
)",
                               "test.yaml");
  auto backend = create_backend(GetParam(), {});
  Graph graph(config);
  graph.allocate(*backend, 4, 1);
  const std::vector<float> mean = {0.5f, -1.f, 2.f}, var = {4.f, 0.25f, 1.f},
                           gamma = {2.f, -1.f, 0.5f}, beta = {0.1f, 0.2f, -0.3f};
  auto bufs = graph.buffers();
  set_values(bufs[0].second, mean);
  set_values(bufs[1].second, var);
  set_values(graph.params()[0]->value, gamma);
  set_values(graph.params()[1]->value, beta);
  std::vector<float> x(4 * 12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(philox_normal(9, 0, i));
  backend->upload(graph.input(), x.data());
  Context ctx{*backend, true, 1, 0};
  graph.forward(ctx, 4);
  const std::vector<float> y = values(graph.output(0, 4));
  const float eps = 1e-5f;
  for (size_t n = 0; n < 4; ++n)
    for (size_t c = 0; c < 3; ++c)
      for (size_t k = 0; k < 4; ++k) {
        const size_t i = (n * 3 + c) * 4 + k;
        const float want = gamma[c] * (x[i] - mean[c]) / std::sqrt(var[c] + eps) + beta[c];
        EXPECT_NEAR(y[i], want, 1e-5f * (1.f + std::fabs(want))) << "n " << n << " c " << c;
      }
  EXPECT_EQ(values(bufs[0].second), mean);
  EXPECT_EQ(values(bufs[1].second), var);
  // And a flat input of one sample trains: the statistics are not the batch's.
  EXPECT_EQ(graph.min_training_batch(), 1);
}

TEST_P(Freeze, FrozenBatchNormPassesTheGradientOfItsRunningStatisticsFormula) {
  Config config = parse_config(R"(
input: {shape: [4]}
layers:
  - dense: {units: 3}
  - {batchnorm: {}, trainable: false}
  - dense: {units: 2}
train: {batch_size: 4}
)",
                               "test.yaml");
  auto backend = create_backend(GetParam(), {});
  Graph graph(config);
  graph.allocate(*backend, 4, 1);
  const std::vector<float> var = {4.f, 0.25f, 1.f}, gamma = {2.f, -1.f, 0.5f};
  auto bufs = graph.buffers();
  set_values(bufs[1].second, var);
  set_values(graph.params()[2]->value, gamma);  // dense_1 weight, bias; then batchnorm_1
  std::vector<float> x(16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(philox_normal(2, 0, i));
  backend->upload(graph.input(), x.data());
  Context ctx{*backend, true, 1, 0};
  graph.forward(ctx, 4);
  Tensor dlogits(*backend, Shape{4, 2});
  std::vector<float> d(8);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<float>(philox_normal(3, 0, i));
  set_values(dlogits, d);
  graph.backward(ctx, dlogits);
  const std::vector<float> dy = values(graph.output_gradient(1, 4));
  const std::vector<float> dx = values(graph.input_gradient(1, 4));
  for (size_t n = 0; n < 4; ++n)
    for (size_t c = 0; c < 3; ++c) {
      const size_t i = n * 3 + c;
      const float want = gamma[c] * dy[i] / std::sqrt(var[c] + 1e-5f);
      EXPECT_NEAR(dx[i], want, 1e-6f * (1.f + std::fabs(want))) << "n " << n << " c " << c;
    }
  for (Param* p : graph.params()) {
    if (p->trainable) continue;
    for (float g : values(p->grad)) ASSERT_EQ(g, 0.f) << p->name;
  }
}

TEST_P(Freeze, NothingBelowAFrozenStartRunsABackward) {
  Config config = parse_config(R"(
input: {shape: [2, 6, 6]}
layers:
  - conv2d: {filters: 3, kernel: 3}
  - relu
  - conv2d: {filters: 3, kernel: 3}
  - relu
  - flatten
  - dense: {units: 4}
train: {batch_size: 8, freeze: {up_to: relu_2}}
)",
                               "test.yaml");
  auto backend = create_backend(GetParam(), {});
  Graph graph(config);
  auto loss = make_loss(config.loss);
  graph.allocate(*backend, 8, 3);
  TrainStep step(graph, *loss, *backend, config.train.optimizer, 3);
  std::set<size_t> backward;
  Graph::ScopedHook hook(graph, [&](size_t layer, bool is_backward, bool done) {
    if (is_backward && done) backward.insert(layer);
  });
  train(step, 1);
  // The dense layer's weight gradient only: no input gradient below it, no convolution pass.
  EXPECT_EQ(backward, (std::set<size_t>{5}));
  EXPECT_FALSE(graph.input_gradient(5, 8).defined());
}

TEST_P(Freeze, LrMultiplierUpdatesByLrTimesTheFactor) {
  // Plain SGD, one step: w - lr * mult * g, for runs of params back to back of either factor.
  Config config = parse_config(R"(
input: {shape: [3]}
layers:
  - dense: {units: 5}
  - dense: {units: 4}
  - dense: {units: 2}
train:
  optimizer: {type: sgd, lr: 0.1, lr_multipliers: {dense_2: 10, dense_3: 0.5}}
)",
                               "test.yaml");
  auto backend = create_backend(GetParam(), {});
  Graph graph(config);
  graph.allocate(*backend, 2, 7);
  Optimizer opt(config.train.optimizer, graph.params(), *backend);
  std::map<std::string, std::vector<float>> w0, g;
  uint64_t stream = 0;
  for (Param* p : graph.params()) {
    w0[p->name] = values(p->value);
    std::vector<float> grad(static_cast<size_t>(p->value.numel()));
    for (size_t i = 0; i < grad.size(); ++i)
      grad[i] = static_cast<float>(philox_normal(8, stream, i));
    ++stream;
    set_values(p->grad, grad);
    g[p->name] = grad;
  }
  opt.step(0.1);
  const std::map<std::string, double> mult = {{"dense_1", 1}, {"dense_2", 10}, {"dense_3", 0.5}};
  for (Param* p : graph.params()) {
    const double m = mult.at(p->name.substr(0, p->name.find('.')));
    EXPECT_EQ(p->lr_mult, m) << p->name;
    const float lr = static_cast<float>(0.1 * m);
    const std::vector<float> w = values(p->value);
    for (size_t i = 0; i < w.size(); ++i)
      EXPECT_FLOAT_EQ(w[i], w0[p->name][i] - lr * g[p->name][i]) << p->name << "[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Freeze, ::testing::Values("cpu", "gpu"),
                         [](const auto& info) { return info.param; });

// --- the config: what names a frozen layer, and what is refused ---

std::string refusal(const std::string& train, const std::string& layers = "") {
  register_builtin_layers();
  const std::string yaml = "input: {shape: [1, 8, 8]}\nlayers:\n" +
                           (layers.empty() ? std::string(R"(  - conv2d: {filters: 2, kernel: 3}
  - relu
  - flatten
  - dense: {units: 3}
)")
                                           : layers) +
                           "train:\n" + train;
  try {
    Config c = parse_config(yaml, "net.yaml");
    Graph g(c);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), ExitCode::kConfig);
    return e.cause() + " | " + e.hint();
  }
  return "";
}

TEST(FreezeConfig, AnUnknownFrozenNameIsRefusedAtItsLineWithTheClosestName) {
  const std::string m = refusal("  freeze: [conv2d_1, dense1]\n");
  EXPECT_NE(m.find("net.yaml:8:22: train.freeze names 'dense1', which is no layer of the model; "
                   "did you mean 'dense_1'?"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("trainer summary --config net.yaml"), std::string::npos) << m;
  const std::string up = refusal("  freeze: {up_to: conv2d}\n");
  EXPECT_NE(up.find("net.yaml:8:19: train.freeze.up_to names 'conv2d'"), std::string::npos) << up;
  EXPECT_NE(up.find("did you mean 'conv2d_1'?"), std::string::npos) << up;
}

TEST(FreezeConfig, AnUnknownOrFrozenLrMultiplierNameIsRefused) {
  const std::string m = refusal("  optimizer: {lr_multipliers: {dens_1: 10}}\n");
  EXPECT_NE(m.find("net.yaml:8:32: train.optimizer.lr_multipliers names 'dens_1', which is no "
                   "layer of the model; did you mean 'dense_1'?"),
            std::string::npos)
      << m;
  const std::string frozen =
      refusal("  freeze: [conv2d_1]\n  optimizer: {lr_multipliers: {conv2d_1: 10}}\n");
  EXPECT_NE(frozen.find("'conv2d_1' is frozen"), std::string::npos) << frozen;
  const std::string zero = refusal("  optimizer: {lr_multipliers: {dense_1: 0}}\n");
  EXPECT_NE(zero.find("'dense_1' must be a positive factor of the learning rate"),
            std::string::npos)
      << zero;
  EXPECT_NE(zero.find("freeze it"), std::string::npos) << zero;
}

TEST(FreezeConfig, FreezingALayerWithoutParametersByNameIsRefused) {
  const std::string listed = refusal("  freeze: [relu_1]\n");
  EXPECT_NE(listed.find("net.yaml:8:12: layer 2 (relu, relu_1) has no parameters to freeze"),
            std::string::npos)
      << listed;
  const std::string item = refusal("  epochs: 1\n", R"(  - conv2d: {filters: 2, kernel: 3}
  - {relu: {}, trainable: false}
  - flatten
  - dense: {units: 3}
)");
  EXPECT_NE(item.find("net.yaml:4:27: layer 2 (relu, relu_1) has no parameters to freeze"),
            std::string::npos)
      << item;
  // up_to covers the layers without parameters on its way: harmless.
  EXPECT_EQ(refusal("  freeze: {up_to: relu_1}\n"), "");
}

TEST(FreezeConfig, AModelWithNothingLeftToTrainIsRefused) {
  const std::string m = refusal("  freeze: {up_to: dense_1}\n");
  EXPECT_NE(m.find("net.yaml: every layer with parameters is frozen"), std::string::npos) << m;
  const std::string word =
      refusal("  epochs: 1\n", R"(  - {conv2d: {filters: 2, kernel: 3}, trainable: no}
  - flatten
  - dense: {units: 3}
)");
  EXPECT_NE(word.find("'trainable' must be true or false"), std::string::npos) << word;
}

TEST(FreezeConfig, TrainableFalseOnABlockUseFreezesItsLayers) {
  register_builtin_layers();
  Config c = parse_config(R"(
input: {shape: [1, 8, 8]}
blocks:
  stem:
    layers:
      - {conv2d: {filters: 2, kernel: 3}, name: conv}
      - relu
layers:
  - {stem: {}, name: s1, trainable: false}
  - {stem: {}, name: s2}
  - flatten
  - dense: {units: 3}
train: {optimizer: {lr_multipliers: {s2: 10}}}
)",
                          "net.yaml");
  Graph g(c);
  std::map<std::string, std::pair<bool, double>> rows;
  for (const SummaryRow& r : g.summary()) rows[r.name] = {r.frozen, r.lr_mult};
  EXPECT_EQ(rows["s1.conv"], std::make_pair(true, 1.0));
  EXPECT_EQ(rows["s2.conv"], std::make_pair(false, 10.0));
  EXPECT_EQ(rows["dense_1"], std::make_pair(false, 1.0));
  // s1.conv (1 -> 2 channels, 3x3) 20, s2.conv (2 -> 2) 38, dense_1 (32 -> 3) 99.
  EXPECT_EQ(g.frozen_parameter_count(), 20);
  EXPECT_EQ(g.parameter_count(), 157);
}

}  // namespace
}  // namespace tandem
