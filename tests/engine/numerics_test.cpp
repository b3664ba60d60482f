// A non-finite training step is traced to where its first NaN or Inf appeared.
#include "engine/numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/backend_registry.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

constexpr int64_t kBatch = 4;

// dense_1 (8 -> 16), relu, dense_2 (16 -> 3) on a batch of ones, one training step computed.
struct SmallStep {
  Config config;
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  Graph graph;
  std::unique_ptr<Loss> loss;
  std::unique_ptr<TrainStep> step;

  explicit SmallStep(const std::string& loss_type = "softmax_cross_entropy")
      : config(parse_config("name: small\ninput: {shape: [8]}\nlayers:\n  - dense: {units: 16}\n"
                            "  - relu\n  - dense: {units: 3}\nloss: " +
                                loss_type + "\ntrain: {batch_size: 4, seed: 7}\n",
                            "small.yaml")),
        graph(config),
        loss(make_loss(config.loss)) {
    graph.allocate(*backend, kBatch, config.train.seed);
    step = std::make_unique<TrainStep>(graph, *loss, *backend, config.train.optimizer,
                                       config.train.seed);
    std::vector<float> images(kBatch * 8, 1.f);
    std::vector<int32_t> labels{0, 1, 2, 0};
    step->upload(kBatch, images.data(), labels.data());
  }
  Param& param(const std::string& name) {
    for (Param* p : graph.params())
      if (p->name == name) return *p;
    throw std::runtime_error("no parameter " + name);
  }
  std::vector<float> values(const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    backend->download(v.data(), t);
    return v;
  }
  void set(Tensor& t, const std::vector<float>& v) { backend->upload(t, v.data()); }
  double computed_loss() {
    step->compute(kBatch, 0);
    double l, correct;
    step->read(&l, &correct);
    return l;
  }
};

TEST(LocateNonfinite, NamesExactlyTheParameterThatHoldsANan) {
  SmallStep s;
  Tensor& w = s.param("dense_2.weight").value;
  std::vector<float> v = s.values(w);
  v[5] = std::numeric_limits<float>::quiet_NaN();
  s.set(w, v);
  ASSERT_TRUE(std::isnan(s.computed_loss()));
  EXPECT_EQ(locate_nonfinite(*s.step, kBatch, 0),
            "the weights dense_2.weight hold 1 non-finite value: an earlier update made them so");
}

TEST(LocateNonfinite, NamesTheLayerWhoseOutputOverflows) {
  SmallStep s;
  // Finite weights, but eight products of 1e38 sum past the float range: dense_1's output is Inf.
  Tensor& w = s.param("dense_1.weight").value;
  s.set(w, std::vector<float>(static_cast<size_t>(w.numel()), 1e38f));
  ASSERT_FALSE(std::isfinite(s.computed_loss()));
  EXPECT_EQ(locate_nonfinite(*s.step, kBatch, 0),
            "first non-finite value: output of dense_1 (layer 1, dense), 64 of 64 values");
}

TEST(LocateNonfinite, NamesTheLossWhenTheOutputsAreFinite) {
  SmallStep s("mse");
  // Outputs of 1e20 are finite, their squares are not.
  Tensor& b = s.param("dense_2.bias").value;
  s.set(b, std::vector<float>(3, 1e20f));
  ASSERT_FALSE(std::isfinite(s.computed_loss()));
  EXPECT_EQ(locate_nonfinite(*s.step, kBatch, 0),
            "first non-finite value: the mse loss of finite outputs");
}

TEST(LocateNonfinite, BlamesTheInputBatchFirst) {
  SmallStep s;
  std::vector<float> images(kBatch * 8, 1.f);
  images[9] = std::numeric_limits<float>::infinity();
  images[30] = std::numeric_limits<float>::quiet_NaN();
  std::vector<int32_t> labels{0, 1, 2, 0};
  s.step->upload(kBatch, images.data(), labels.data());
  ASSERT_FALSE(std::isfinite(s.computed_loss()));
  EXPECT_EQ(locate_nonfinite(*s.step, kBatch, 0),
            "the input batch holds 2 non-finite values (check data.normalize)");
}

TEST(LocateNonfinite, RerunsTheStepWithoutChangingAWeight) {
  SmallStep s;
  Tensor& w = s.param("dense_1.weight").value;
  s.set(w, std::vector<float>(static_cast<size_t>(w.numel()), 1e38f));
  s.computed_loss();
  std::vector<std::vector<float>> before;
  for (Param* p : s.graph.params()) before.push_back(s.values(p->value));
  locate_nonfinite(*s.step, kBatch, 0);
  std::vector<std::vector<float>> after;
  for (Param* p : s.graph.params()) after.push_back(s.values(p->value));
  EXPECT_EQ(before, after);
}

TEST(LocateNonfinite, AFiniteStepIsBlamedOnNothing) {
  SmallStep s;
  ASSERT_TRUE(std::isfinite(s.computed_loss()));
  EXPECT_EQ(locate_nonfinite(*s.step, kBatch, 0).find("first non-finite value"), std::string::npos);
}

}  // namespace
}  // namespace tandem
