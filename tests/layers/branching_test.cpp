// Branching models (`name:`, `inputs:`, add, concat): the gradients of a graph whose outputs are
// taken by several layers against finite differences, on every backend; what the graph reports
// of its branches.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/config.h"
#include "engine/graph.h"
#include "tests/cpu/backend_test_util.h"

namespace tandem {
namespace {

using testing::Floats;

// Every way a gradient meets another: stem is taken by tanh_1 and add_1, tanh_1 by conv2d_2 and
// side, concat_1 by a flatten (a view, whose gradient is then copied rather than shared) and by
// global_avgpool_1, and dense_2 twice by add_2. tanh and average pooling keep the model smooth,
// so finite differences have no kink to straddle.
const char* kBranching = R"(
input: {shape: [2, 6, 6]}
layers:
  - {conv2d: {filters: 3, kernel: 3, padding: 1}, name: stem}
  - tanh
  - conv2d: {filters: 3, kernel: 3, padding: 1}
  - {add: {}, inputs: [stem, conv2d_1]}
  - {conv2d: {filters: 2, kernel: 1}, inputs: [tanh_1], name: side}
  - {concat: {}, inputs: [add_1, side]}
  - flatten
  - dense: {units: 4}
  - {global_avgpool: {}, inputs: [concat_1]}
  - flatten
  - dense: {units: 4}
  - {add: {}, inputs: [dense_1, dense_2, dense_2]}
loss: softmax_cross_entropy
)";

// Squeeze-and-excitation, both ways a gate is written: (C,1,1) from global_avgpool and 1x1
// convolutions, (C) from a flat pooling and a dense layer; and a multiply of two inputs of one
// shape (a gated linear unit's form).
const char* kGated = R"(
input: {shape: [4, 5, 5]}
layers:
  - {conv2d: {filters: 4, kernel: 3, padding: 1}, name: stem}
  - tanh
  - global_avgpool
  - conv2d: {filters: 2, kernel: 1}
  - silu
  - conv2d: {filters: 4, kernel: 1}
  - sigmoid
  - {multiply: {}, inputs: [tanh_1, sigmoid_1], name: se}
  - {global_avgpool: {keep_dims: false}, inputs: [se]}
  - dense: {units: 4}
  - sigmoid
  - {multiply: {}, inputs: [sigmoid_2, se], name: se2}
  - {tanh: {}, inputs: [stem]}
  - {multiply: {}, inputs: [se2, tanh_2]}
  - flatten
  - dense: {units: 4}
loss: softmax_cross_entropy
)";

class BranchingGradient : public testing::BackendTest {
 protected:
  void check(const char* yaml, size_t params_expected);
};

TEST_P(BranchingGradient, EveryParameterMatchesFiniteDifferences) { check(kBranching, 10); }

TEST_P(BranchingGradient, GatesOfMultiplyMatchFiniteDifferences) { check(kGated, 10); }

// L = sum(logits * r): the backward pass from dL/dlogits = r against central differences of the
// forward, in fp32 on the backend, at up to 25 entries of every parameter.
void BranchingGradient::check(const char* yaml, size_t params_expected) {
  Config config = parse_config(yaml, "branching.yaml");
  Graph graph(config);
  ASSERT_TRUE(graph.branches());
  const int64_t n = 3;
  graph.allocate(be(), n, 7);
  Tensor in = graph.input().prefix(n);
  be().upload(in, random(in.numel(), 1).data());
  const Floats r = random(n * 4, 2);
  Context ctx{be(), true, 7, 0};
  auto objective = [&] {
    Floats y = download(graph.forward(ctx, n));
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
    return s;
  };
  objective();
  Tensor dlogits = upload({n, 4}, r);
  graph.backward(ctx, dlogits);
  const auto params = graph.params();
  ASSERT_EQ(params.size(), params_expected);  // weights and biases
  for (Param* p : params) {
    SCOPED_TRACE(p->name);
    const Floats analytic = download(p->grad);
    Floats values = download(p->value);
    double max_err = 0, scale = 0;
    for (float g : analytic) scale = std::max(scale, std::abs(static_cast<double>(g)));
    ASSERT_GT(scale, 1e-3) << "a gradient that does not reach " << p->name;
    const size_t step = std::max<size_t>(1, values.size() / 25);
    for (size_t i = 0; i < values.size(); i += step) {
      const float orig = values[i], h = 1e-2f * std::max(1.f, std::abs(orig));
      auto at = [&](float v) {
        values[i] = v;
        be().upload(p->value, values.data());
        return objective();
      };
      const float up = orig + h, down = orig - h;
      const double fd = (at(up) - at(down)) / (static_cast<double>(up) - down);
      at(orig);
      max_err = std::max(max_err, std::abs(fd - analytic[i]));
    }
    EXPECT_LT(max_err / scale, 2e-3) << "max |finite difference - backward| " << max_err
                                     << " against a largest gradient of " << scale;
  }
}

TANDEM_INSTANTIATE_BACKEND_SUITE(BranchingGradient);

TEST(Branching, SummaryNamesEachLayersInputs) {
  Config config = parse_config(kBranching, "branching.yaml");
  Graph graph(config);
  const std::vector<SummaryRow> rows = graph.summary();
  ASSERT_EQ(rows.size(), 12u);
  EXPECT_EQ(rows[0].name, "stem");
  EXPECT_EQ(rows[0].inputs, std::vector<std::string>{"input"});
  EXPECT_EQ(rows[2].inputs, std::vector<std::string>{"tanh_1"});
  EXPECT_EQ(rows[4].name, "side");
  EXPECT_EQ(rows[5].name, "concat_1");
  EXPECT_EQ(rows[5].inputs, (std::vector<std::string>{"add_1", "side"}));
  EXPECT_EQ(rows[5].output, (Shape{5, 6, 6}));
  EXPECT_EQ(rows[11].inputs, (std::vector<std::string>{"dense_1", "dense_2", "dense_2"}));
  EXPECT_EQ(rows[11].flops, 2 * 4);  // two additions of 4 values
  // Automatic names count the unnamed layers of a type only: the conv2d after stem is conv2d_1.
  EXPECT_EQ(rows[2].name, "conv2d_1");
  EXPECT_EQ(graph.params().front()->name, "stem.weight");
}

TEST(Branching, ASequentialModelReportsNoBranchesAndNoInputs) {
  Config config = parse_config(R"(
input: {shape: [4]}
layers:
  - dense: {units: 3}
  - {relu: {}, inputs: [dense_1]}
  - dense: {units: 2}
)",
                               "seq.yaml");
  Graph graph(config);
  EXPECT_FALSE(graph.branches());  // naming the layer before is no branch
  for (const SummaryRow& row : graph.summary()) EXPECT_TRUE(row.inputs.empty()) << row.name;
}

}  // namespace
}  // namespace tandem
