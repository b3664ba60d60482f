// The relu fusions the graph chooses (Graph::allocate, Backend::fuses_relu): which pairs fuse,
// and that a fused model computes what the unfused one does, bit for bit, in training and in
// inference, in the CPU's blocked and plain orders, and that a NaN still reaches the loss.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend_registry.h"
#include "engine/config.h"
#include "engine/graph.h"
#include "engine/layer_profile.h"
#include "engine/layer_registry.h"
#include "engine/rng.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

using Floats = std::vector<float>;

// Every place a relu may or may not fuse: after batch normalization of images and of a flat
// input, after a residual add, after a batchnorm whose output two layers take (not fused), before
// a max pooling of 2x2 windows and of overlapping 3x3 ones (after a convolution, which computes
// no relu of its own, and after a frozen batchnorm, which is not fused), and a relu whose input
// two layers take (not fused).
const char* kNet = R"(
input: {shape: [3, 10, 10]}
layers:
  - {conv2d: {filters: 16, kernel: 3, padding: 1}, name: stem}
  - {batchnorm: {}, name: bn}
  - {relu: {}, name: bn_relu}
  - {conv2d: {filters: 16, kernel: 3, padding: 1, bias: false}, name: conv_a}
  - {batchnorm: {}, name: shared_bn}
  - {relu: {}, name: after_shared}
  - {add: {}, inputs: [after_shared, shared_bn], name: sum}
  - {relu: {}, name: sum_relu}
  - {conv2d: {filters: 16, kernel: 1}, name: conv_b}
  - {relu: {}, name: conv_relu}
  - {maxpool: {kernel: 2, stride: 2}, name: pool}
  - {batchnorm: {}, name: frozen_bn, trainable: false}
  - {relu: {}, name: frozen_relu}
  - {maxpool: {kernel: 3, stride: 1, padding: 1}, name: pool3}
  - {relu: {}, name: shared_relu}
  - {add: {}, inputs: [shared_relu, pool3]}
  - flatten
  - {dense: {units: 12}, name: fc1}
  - {batchnorm: {}, name: flat_bn}
  - {relu: {}, name: flat_relu}
  - {dense: {units: 10}}
loss: softmax_cross_entropy
train: {batch_size: 6, optimizer: {type: sgd, lr: 0.05, momentum: 0.9, weight_decay: 1.0e-4}}
)";

// Sets (or, with null, clears) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

int index_of(const Graph& graph, const std::string& name) {
  for (size_t i = 0; i < graph.layers().size(); ++i)
    if (graph.layers()[i]->name() == name) return static_cast<int>(i);
  ADD_FAILURE() << "no layer " << name;
  return -1;
}

struct Outcome {
  std::vector<double> losses;
  Floats params, logits;  // after the steps; the logits of an inference forward
};

// 4 training steps and an inference forward, fused or not, in the CPU's fp32 order `layout`
// ("plain" or the default); `nan_at`: a sample's first pixel made NaN in the last step.
Outcome train(bool fused, const char* layout, bool nan_in_last = false) {
  ScopedEnv order("TANDEM_CPU_FP32_LAYOUT", std::string(layout) == "plain" ? "plain" : nullptr);
  ScopedEnv fusion("TANDEM_FUSION", fused ? nullptr : "off");
  Config config = parse_config(kNet, "net.yaml");
  auto backend = create_backend("cpu", {});
  Graph graph(config);
  auto loss = make_loss(config.loss);
  graph.allocate(*backend, 6, 5);
  TrainStep step(graph, *loss, *backend, config.train.optimizer, 5);
  const int64_t sample = graph.input_shape().numel();
  Outcome run;
  std::vector<float> x(static_cast<size_t>(6 * sample));
  std::vector<int32_t> y(6);
  for (uint64_t b = 0; b < 4; ++b) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(philox_normal(8, b, i));
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>(philox_uniform(9, b, i) * 10);
    if (nan_in_last && b == 3) x[0] = std::numeric_limits<float>::quiet_NaN();
    step.upload(6, x.data(), y.data());
    step.train(6, 0.05, b);
    double l, correct;
    step.read(&l, &correct);
    run.losses.push_back(l);
  }
  run.params.resize(static_cast<size_t>(graph.packed_values().numel()));
  backend->download(run.params.data(), graph.packed_values());
  Context ctx{*backend, false, 5, 0};
  backend->upload(graph.input(), x.data());
  Tensor logits = graph.forward(ctx, 6);
  run.logits.resize(static_cast<size_t>(logits.numel()));
  backend->download(run.logits.data(), logits);
  return run;
}

TEST(ReluFusion, FusesARelusProducerWhereItAloneTakesTheOutput) {
  Config config = parse_config(kNet, "net.yaml");
  auto backend = create_backend("cpu", {});
  Graph graph(config);
  graph.allocate(*backend, 6, 5);
  auto fused_into = [&](const char* relu) { return graph.fused_into(index_of(graph, relu)); };
  EXPECT_EQ(fused_into("bn_relu"), index_of(graph, "bn"));
  EXPECT_EQ(fused_into("sum_relu"), index_of(graph, "sum"));
  EXPECT_EQ(fused_into("flat_relu"), index_of(graph, "flat_bn"));
  EXPECT_EQ(fused_into("after_shared"), -1) << "the add takes the batchnorm's output too";
  // A convolution computes no relu of its own, a frozen batchnorm's backward is another op: the
  // max pooling after each takes it.
  EXPECT_EQ(fused_into("conv_relu"), index_of(graph, "pool"));
  EXPECT_EQ(fused_into("frozen_relu"), index_of(graph, "pool3"));
  EXPECT_EQ(fused_into("shared_relu"), -1) << "the add takes the relu's input too";
  EXPECT_EQ(graph.fused_into(index_of(graph, "bn")), -1);
  // A fused relu's output is its input's buffer: holding the relu's values when the layer before
  // computes it, the convolution's when the pooling after does.
  EXPECT_EQ(graph.output(index_of(graph, "bn_relu"), 6).raw(),
            graph.output(index_of(graph, "bn"), 6).raw());
  EXPECT_EQ(graph.output(index_of(graph, "conv_relu"), 6).raw(),
            graph.output(index_of(graph, "conv_b"), 6).raw());

  // The per-layer profile shows a fused pair as one row with both names, in the model's order.
  std::vector<LayerProfile> rows = without_fused(graph, layer_rows(graph, 6));
  EXPECT_EQ(rows.size(), graph.layers().size() - 5);
  int seen = 0;
  for (const LayerProfile& r : rows) {
    EXPECT_NE(r.name, "bn_relu");
    EXPECT_NE(r.name, "conv_relu");
    if (r.name == "bn+bn_relu") {
      ++seen;
      EXPECT_EQ(r.type, "batchnorm+relu");
    }
    if (r.name == "conv_relu+pool") {
      ++seen;
      EXPECT_EQ(r.type, "relu+maxpool");
    }
  }
  EXPECT_EQ(seen, 2);

  // Inside a block, the relu's name drops the scope both share.
  Config scoped = parse_config(R"(
input: {shape: [4, 6, 6]}
blocks:
  unit:
    layers:
      - {conv2d: {filters: 16, kernel: 3, padding: 1}, name: conv}
      - {batchnorm: {}, name: bn}
      - {relu: {}, name: act}
layers:
  - {unit: {}, name: stage1}
  - flatten
  - {dense: {units: 3}}
loss: softmax_cross_entropy
)",
                               "scoped.yaml");
  Graph block(scoped);
  block.allocate(*backend, 2, 5);
  std::vector<LayerProfile> block_rows = without_fused(block, layer_rows(block, 2));
  ASSERT_GE(block_rows.size(), 2u);
  EXPECT_EQ(block_rows[1].name, "stage1.bn+act");

  ScopedEnv off("TANDEM_FUSION", "off");
  Graph plain(config);
  plain.allocate(*backend, 6, 5);
  for (size_t i = 0; i < plain.layers().size(); ++i) EXPECT_EQ(plain.fused_into(i), -1) << i;
}

void expect_same(const Outcome& fused, const Outcome& unfused) {
  ASSERT_EQ(fused.losses.size(), unfused.losses.size());
  for (size_t i = 0; i < fused.losses.size(); ++i)
    EXPECT_EQ(fused.losses[i], unfused.losses[i]) << "step " << i;
  EXPECT_NE(unfused.losses.front(), unfused.losses.back());  // it trained
  ASSERT_EQ(fused.params.size(), unfused.params.size());
  size_t differ = 0;
  for (size_t i = 0; i < fused.params.size(); ++i) differ += fused.params[i] != unfused.params[i];
  EXPECT_EQ(differ, 0u) << "parameters differ after 4 steps";
  ASSERT_EQ(fused.logits.size(), unfused.logits.size());
  for (size_t i = 0; i < fused.logits.size(); ++i)
    EXPECT_EQ(fused.logits[i], unfused.logits[i]) << "inference logit " << i;
}

TEST(ReluFusion, TrainsAndInfersBitForBitAsTheUnfusedModelInTheBlockedOrder) {
  expect_same(train(true, "blocked"), train(false, "blocked"));
}

TEST(ReluFusion, TrainsAndInfersBitForBitAsTheUnfusedModelInThePlainOrder) {
  expect_same(train(true, "plain"), train(false, "plain"));
}

TEST(ReluFusion, PassesANanOnToTheLoss) {
  const Outcome run = train(true, "blocked", true);
  EXPECT_TRUE(std::isfinite(run.losses[2]));
  EXPECT_TRUE(std::isnan(run.losses[3])) << "a NaN pixel must make the loss NaN, not vanish in a "
                                            "fused relu";
}

}  // namespace
}  // namespace tandem
