// fp16's loss scaling is GradScaler's, run by the update gate's arithmetic (gate_step, the same
// function the CPU loops and the GPU kernels call): start at 2^16, halve and skip on a
// non-finite gradient, double after 2000 applied steps in a row.
#include "engine/loss_scaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/synthetic.h"
#include "engine/backend_registry.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/optimizer_math.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

// The gate as a run with loss scaling starts it.
struct Gate {
  float g[kGateSize] = {1.f, 0.f, kInitialLossScale, 0.f, 0.f};
  // One step of loss 1 whose (scaled) gradients have this norm.
  void step(float norm) { gate_step(g, 1.f, norm, true, loss_scaling_gate()); }
  float scale() const { return g[kGateLossScale]; }
  bool skipped() const { return g[kGateSkip] != 0.f; }
};

TEST(LossScaling, StartsAtTwoToTheSixteenAndUnscalesTheGradients) {
  Gate gate;
  EXPECT_EQ(gate.scale(), 65536.f);
  gate.step(1.f);
  EXPECT_FALSE(gate.skipped());
  EXPECT_EQ(gate.g[kGateFactor], 1.f / 65536.f);  // the update divides by S
}

TEST(LossScaling, ANonFiniteGradientSkipsTheStepAndHalvesTheScale) {
  Gate gate;
  gate.step(INFINITY);
  EXPECT_TRUE(gate.skipped());
  EXPECT_EQ(gate.scale(), 32768.f);
  gate.step(NAN);
  EXPECT_TRUE(gate.skipped());
  EXPECT_EQ(gate.scale(), 16384.f);
}

TEST(LossScaling, TwoThousandAppliedStepsInARowDoubleTheScale) {
  Gate gate;
  for (int i = 0; i < 1999; ++i) gate.step(1.f);
  EXPECT_EQ(gate.scale(), 65536.f);
  gate.step(1.f);
  EXPECT_EQ(gate.scale(), 131072.f);
  EXPECT_EQ(gate.g[kGateGrowthTracker], 0.f);
}

TEST(LossScaling, AnOverflowRestartsTheCountTowardsGrowth) {
  Gate gate;
  for (int i = 0; i < 1500; ++i) gate.step(1.f);
  gate.step(INFINITY);  // 32768, the count starts again
  for (int i = 0; i < 1999; ++i) gate.step(1.f);
  EXPECT_EQ(gate.scale(), 32768.f);
  gate.step(1.f);
  EXPECT_EQ(gate.scale(), 65536.f);
}

// --- The training loop with loss scaling (TrainOptions::loss_scaling; fp16 runs turn it on) ---

const char* kModel = R"(
input: {shape: [1, 6, 6]}
layers:
  - conv2d: {filters: 4, kernel: 3, padding: 1}
  - batchnorm
  - relu
  - flatten
  - dense: {units: 4}
loss: softmax_cross_entropy
data: {format: synthetic, classes: 4, train_size: 64, test_size: 8, seed: 2}
train: {batch_size: 8, epochs: 2, optimizer: {type: adam, lr: 0.01}, seed: 11}
)";
// No batch normalization (which would make the gradients blind to the inputs' scale), and SGD
// (whose steps stay small for huge gradients when the rate is tiny, where Adam's squared
// gradients would overflow its state).
const char* kPlainModel = R"(
input: {shape: [1, 6, 6]}
layers:
  - flatten
  - dense: {units: 16}
  - relu
  - dense: {units: 4}
loss: softmax_cross_entropy
data: {format: synthetic, classes: 4, train_size: 64, test_size: 8, seed: 2}
train: {batch_size: 8, epochs: 2, optimizer: {type: sgd, lr: 0.01}, seed: 11}
)";

struct ScaledRun {
  TrainResult result;
  std::vector<float> weights;
  std::vector<TrainPosition> checkpoints;
};

// Trains kModel on the CPU in fp32, with or without loss scaling, from `start`; the samples are
// normalised by `std` (a tiny one makes inputs, and so the weight gradients, huge).
ScaledRun scaled_run(bool scaling, double start_scale = 0, float std = 1.f,
                     const char* yaml = kModel, double lr = 0.01) {
  Config config = parse_config(yaml, "scaled.yaml");
  config.train.optimizer.lr = lr;
  auto backend = create_backend("cpu", {});
  Graph graph(config);
  auto loss = make_loss(config.loss);
  graph.allocate(*backend, 8, config.train.seed);
  const Dataset data = make_synthetic(Shape{1, 6, 6}, 4, 64, 2, true);
  Batcher batches(data, 8, true, config.train.seed, {0.5f}, {std});
  TrainOptions options;
  options.progress = false;
  options.loss_scaling = scaling;
  options.start.loss_scale = start_scale;
  ScaledRun run;
  options.callbacks.push_back(on_checkpoint([&](const Checkpoint& c) {
    const TrainPosition& at = c.at;
    run.checkpoints.push_back(at);
  }));
  run.result = train(config, graph, *loss, *backend, batches, nullptr, options);
  run.weights.resize(static_cast<size_t>(graph.packed_values().numel()));
  backend->download(run.weights.data(), graph.packed_values());
  return run;
}

// In fp32, multiplying the loss gradient by 2^16 and the update by 2^-16 is exact (powers of two,
// nothing near fp32's limits): a scaled run takes the same steps as an unscaled one, bit for bit.
// So the scale reaches the backward pass and the update undoes it, neither more nor less.
TEST(LossScalingRun, InFp32ChangesNoStepAndNoWeight) {
  const ScaledRun plain = scaled_run(false);
  const ScaledRun scaled = scaled_run(true);
  ASSERT_EQ(plain.result.step_losses.size(), 16u);
  EXPECT_EQ(scaled.result.step_losses, plain.result.step_losses);
  EXPECT_EQ(scaled.weights, plain.weights);
  EXPECT_EQ(scaled.result.overflow_steps, 0);
  EXPECT_EQ(scaled.result.loss_scale, kInitialLossScale);  // 16 steps: no growth yet
  EXPECT_EQ(plain.result.loss_scale, 0);
  // The checkpoints record where the scale stands: 2^16, 8 and 16 applied steps since it was set.
  ASSERT_EQ(scaled.checkpoints.size(), 2u);
  EXPECT_EQ(scaled.checkpoints[0].loss_scale, kInitialLossScale);
  EXPECT_EQ(scaled.checkpoints[0].good_steps, 8);
  EXPECT_EQ(scaled.checkpoints[1].good_steps, 16);
  EXPECT_EQ(plain.checkpoints[1].loss_scale, 0);
}

// A resumed run goes on from the scale its checkpoint recorded.
TEST(LossScalingRun, StartsFromTheScaleItIsGiven) {
  const ScaledRun run = scaled_run(true, 1024);
  EXPECT_EQ(run.result.loss_scale, 1024);
  EXPECT_EQ(run.result.step_losses, scaled_run(false).result.step_losses);
}

// Inputs of about 1e30 make the first layer's weight gradients about 1e30 times the loss gradient:
// at a scale of 2^40 they overflow fp32. GradScaler's course: each such step is skipped (no weight
// moves) and halves the scale, until the gradients fit; then the steps apply and the scale stays.
TEST(LossScalingRun, AnOverflowSkipsTheStepAndHalvesTheScaleUntilTheGradientsFit) {
  const double start = std::ldexp(1.0, 40);
  const ScaledRun run = scaled_run(true, start, 1e-30f, kPlainModel, 1e-36);
  const int64_t over = run.result.overflow_steps;
  EXPECT_GT(over, 0);
  EXPECT_LT(over, 16);
  EXPECT_EQ(run.result.loss_scale, std::ldexp(start, -static_cast<int>(over)));
  // Every step's loss counts, the overflowed ones included (their forward pass was sound).
  EXPECT_EQ(run.result.step_losses.size(), 16u);
  EXPECT_EQ(run.result.skipped_steps, 0);
  EXPECT_EQ(run.result.epochs[0].overflow_steps + run.result.epochs[1].overflow_steps, over);
  // The same run without scaling never overflows: its gradients are 2^40 times smaller.
  EXPECT_EQ(scaled_run(false, 0, 1e-30f, kPlainModel, 1e-36).result.overflow_steps, 0);
}

}  // namespace
}  // namespace tandem
