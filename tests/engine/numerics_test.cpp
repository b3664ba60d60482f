// A non-finite training step is traced to where its first NaN or Inf appeared.
#include "engine/numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/trainer.h"
#include "tests/log_capture.h"

namespace tandem {
namespace {

constexpr int64_t kBatch = 4;

std::string small_yaml(const std::string& activation, const std::string& loss) {
  return "name: small\ninput: {shape: [8]}\nlayers:\n  - dense: {units: 16}\n  - " + activation +
         "\n  - dense: {units: 3}\nloss: " + loss + "\ntrain: {batch_size: 4, seed: 7}\n";
}

// dense_1 (8 -> 16), relu (or another activation), dense_2 (16 -> 3) on a batch of ones.
struct SmallStep {
  Config config;
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  Graph graph;
  std::unique_ptr<Loss> loss;
  std::unique_ptr<TrainStep> step;

  explicit SmallStep(const std::string& loss_type = "softmax_cross_entropy",
                     const std::string& activation = "relu")
      : config(parse_config(small_yaml(activation, loss_type), "small.yaml")),
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

TEST(LocateNonfinite, NamesTheGradientThatOverflowsInTheBackwardPass) {
  SmallStep s("mse");
  // dense_1 gives negative values, so relu passes zeros on and dense_2's outputs are its bias,
  // 1e18: the loss (1e36) is finite, its gradient (2e18/12) times dense_2's weights (1e22) is not.
  Tensor& w1 = s.param("dense_1.weight").value;
  s.set(w1, std::vector<float>(static_cast<size_t>(w1.numel()), -1.f));
  Tensor& w2 = s.param("dense_2.weight").value;
  s.set(w2, std::vector<float>(static_cast<size_t>(w2.numel()), 1e22f));
  s.set(s.param("dense_2.bias").value, std::vector<float>(3, 1e18f));
  ASSERT_TRUE(std::isfinite(s.computed_loss()));
  EXPECT_EQ(locate_nonfinite(*s.step, kBatch, 0),
            "first non-finite value: gradient of the input of dense_2 (layer 3, dense) in the "
            "backward pass, 64 of 64 values");
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
  EXPECT_EQ(locate_nonfinite(*s.step, kBatch, 0),
            "run again, the step gave finite values throughout");
}

// 20 batches of 4 samples (8 values each, a learnable class signal); the batches listed (0-based)
// hold one `poison` value (a NaN unless told).
class PoisonedBatches : public BatchSource {
 public:
  static constexpr int64_t kBatches = 20;
  explicit PoisonedBatches(std::set<int64_t> bad,
                           float poison = std::numeric_limits<float>::quiet_NaN())
      : bad_(std::move(bad)), poison_(poison) {}
  int64_t size() const override { return kBatches * kBatch; }
  int64_t batches_per_epoch() const override { return kBatches; }
  void start_epoch(int64_t) override {}
  int64_t fill(int64_t b, float* images, int32_t* labels) const override {
    for (int64_t i = 0; i < kBatch; ++i) {
      labels[i] = static_cast<int32_t>((b + i) % 3);
      for (int64_t j = 0; j < 8; ++j)
        images[i * 8 + j] = j % 3 == labels[i] ? 1.f : 0.1f * static_cast<float>(j - i);
    }
    if (bad_.count(b)) images[5] = poison_;
    return kBatch;
  }

 private:
  std::set<int64_t> bad_;
  float poison_;
};

TrainResult train_on(SmallStep& s, const std::set<int64_t>& bad, const std::string& on_nan,
                     TrainOptions options = {},
                     float poison = std::numeric_limits<float>::quiet_NaN()) {
  s.config.train.on_nan = on_nan;
  PoisonedBatches data(bad, poison);
  options.progress = false;
  return train(s.config, s.graph, *s.loss, *s.backend, data, nullptr, options);
}

bool all_weights_finite(SmallStep& s) {
  for (Param* p : s.graph.params())
    for (float v : s.values(p->value))
      if (!std::isfinite(v)) return false;
  return true;
}

// The input's NaN reaches the loss through the relu (which passes it on, as in PyTorch).
TEST(OnNan, StopEndsTheRunAtTheFirstNonFiniteLossNamingItsCause) {
  SmallStep s;
  try {
    train_on(s, {3}, "stop");
    FAIL() << "expected a NumericsError";
  } catch (const NumericsError& e) {
    EXPECT_EQ(e.cause(),
              "the training loss became NaN at step 4 (epoch 1, batch 4 of 20); the input batch "
              "holds 1 non-finite value (check data.normalize)");
    // No learning rate makes the input finite: the fix is in the data or its normalisation.
    EXPECT_NE(e.hint().find("give data.normalize a finite mean"), std::string::npos) << e.hint();
    EXPECT_EQ(e.hint().find("lower the learning rate"), std::string::npos) << e.hint();
  }
}

// The skipped steps' lines are logged: log_of captures them.
using test::log_of;

// tanh takes the input's infinity to 1, so the loss stays finite but dense_1's weight gradient
// does not. In the epoch's last batch, no later loss shows it: the check at the epoch's end does.
TEST(OnNan, StopEndsTheEpochWhoseUpdatesSpoiltAWeightBehindAFiniteLoss) {
  SmallStep s("softmax_cross_entropy", "tanh");
  try {
    train_on(s, {PoisonedBatches::kBatches - 1}, "stop", {}, HUGE_VALF);
    FAIL() << "expected a NumericsError";
  } catch (const NumericsError& e) {
    EXPECT_NE(e.cause().find("the weights dense_1.weight hold 16 non-finite values at the end of "
                             "epoch 1 (step 20) although the loss stayed finite"),
              std::string::npos)
        << e.cause();
  }
}

// Stopped mid-epoch (Ctrl-C) right after such a batch: no checkpoint of the spoilt weights.
TEST(OnNan, AStopMidEpochWritesNoCheckpointOfWeightsSpoiltBehindAFiniteLoss) {
  SmallStep s("softmax_cross_entropy", "tanh");
  TrainOptions options;
  int steps = 0;
  options.stop = [&] { return ++steps == 6; };
  bool written = false;
  options.callbacks.push_back(on_checkpoint([&](const Checkpoint&) { written = true; }));
  try {
    train_on(s, {5}, "stop", options, HUGE_VALF);  // the 6th step's batch
    FAIL() << "expected a NumericsError";
  } catch (const NumericsError& e) {
    EXPECT_NE(e.cause().find("the weights dense_1.weight hold 16 non-finite values when stopped "
                             "in epoch 1 (step 6) although the loss stayed finite"),
              std::string::npos)
        << e.cause();
  }
  EXPECT_FALSE(written);
}

TEST(OnNan, SkipStepLeavesOutAStepWithANonFiniteLossAndTrainsOn) {
  SmallStep s("softmax_cross_entropy", "tanh");
  TrainResult r;
  const std::string log = log_of([&] { r = train_on(s, {3}, "skip_step"); });
  EXPECT_EQ(r.skipped_steps, 1);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_EQ(r.epochs[0].skipped_steps, 1);
  EXPECT_TRUE(std::isfinite(r.epochs[0].train_loss));
  EXPECT_EQ(r.step_losses.size(), static_cast<size_t>(PoisonedBatches::kBatches - 1));
  for (double l : r.step_losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_TRUE(all_weights_finite(s));
  EXPECT_NE(log.find("skipped step 4: loss NaN (the input batch holds 1 non-finite value (check "
                     "data.normalize))"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("epoch 1: 1 step skipped"), std::string::npos) << log;
}

TEST(OnNan, SkipStepLeavesOutAStepWhoseLossIsFiniteButAGradientIsNot) {
  SmallStep s("softmax_cross_entropy", "tanh");  // an infinite input: as above
  TrainResult r;
  const std::string log = log_of([&] { r = train_on(s, {3}, "skip_step", {}, HUGE_VALF); });
  EXPECT_EQ(r.skipped_steps, 1);
  EXPECT_TRUE(all_weights_finite(s));
  EXPECT_TRUE(std::regex_search(
      log,
      std::regex(R"(skipped step 4: loss [-0-9.e+]+, a gradient non-finite \(the input batch)")))
      << log;
}

TEST(OnNan, SkipStepStopsAtTheTenthBadStepInARow) {
  SmallStep s("softmax_cross_entropy", "tanh");
  std::set<int64_t> bad;
  for (int64_t b = 3; b < 15; ++b) bad.insert(b);
  try {
    log_of([&] { train_on(s, bad, "skip_step"); });
    FAIL() << "expected a NumericsError";
  } catch (const NumericsError& e) {
    EXPECT_NE(e.cause().find("the training loss became NaN at step 13 (epoch 1, batch 13 of 20), "
                             "the 10th non-finite step in a row (on_nan: skip_step); the input "
                             "batch holds 1 non-finite value"),
              std::string::npos)
        << e.cause();
  }
}

TEST(OnNan, SkipStepCountsOnlyBadStepsInARowAndReportsTheFirstTen) {
  SmallStep s("softmax_cross_entropy", "tanh");
  s.config.train.epochs = 2;
  std::set<int64_t> bad;
  for (int64_t b = 1; b < PoisonedBatches::kBatches; b += 2) bad.insert(b);  // never 2 in a row
  TrainResult r;
  const std::string log = log_of([&] { r = train_on(s, bad, "skip_step"); });
  EXPECT_EQ(r.skipped_steps, 20);
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_EQ(r.epochs[1].skipped_steps, 10);
  EXPECT_EQ(r.step_losses.size(), 20u);
  EXPECT_TRUE(all_weights_finite(s));
  std::regex line("skipped step ([0-9]+):");
  std::vector<int> reported;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
       ++it)
    reported.push_back(std::stoi((*it)[1]));
  EXPECT_EQ(reported, (std::vector<int>{2, 4, 6, 8, 10, 12, 14, 16, 18, 20})) << log;
  EXPECT_NE(log.find("epoch 1: 10 steps skipped"), std::string::npos) << log;
  EXPECT_NE(log.find("epoch 2: 10 steps skipped"), std::string::npos) << log;
}

// The training loop reads a step's loss while the next step computes, and the device skips the
// bad steps' updates: the same steps and weights as reading each loss before deciding on its
// update, with a skipped step's diagnosis in between (two bad steps in a row, with SGD and Adam).
// The poison is a finite 3e38 whose square overflows the mse loss, so the diagnosis reruns the
// step to find where.
TEST(OnNan, SkipStepTrainsLikeAStepByStepLoop) {
  const std::set<int64_t> bad{3, 4, 9};
  for (const char* optimizer : {"sgd", "adam"}) {
    SmallStep looped("mse");
    looped.config.train.optimizer.type = optimizer;
    looped.config.train.epochs = 1;
    TrainResult r;
    const std::string log = log_of([&] { r = train_on(looped, bad, "skip_step", {}, 3e38f); });
    EXPECT_NE(log.find("first non-finite value"), std::string::npos) << log;

    SmallStep by_hand("mse");
    by_hand.config.train.optimizer.type = optimizer;
    TrainStep step(by_hand.graph, *by_hand.loss, *by_hand.backend, by_hand.config.train.optimizer,
                   by_hand.config.train.seed);
    PoisonedBatches data(bad, 3e38f);
    std::vector<double> losses;
    for (int64_t b = 0; b < PoisonedBatches::kBatches; ++b) {
      std::vector<float> x(kBatch * 8);
      std::vector<int32_t> y(kBatch);
      data.fill(b, x.data(), y.data());
      step.upload(kBatch, x.data(), y.data());
      step.compute(kBatch, static_cast<uint64_t>(b));
      double l, correct;
      step.read(&l, &correct);
      if (!std::isfinite(l) || !gradients_finite(by_hand.graph, *by_hand.backend)) {
        locate_nonfinite(step, kBatch, static_cast<uint64_t>(b));
        continue;
      }
      step.update(learning_rate(by_hand.config.train.optimizer, by_hand.config.train.schedule, 1, 0,
                                b, PoisonedBatches::kBatches));
      losses.push_back(l);
    }
    EXPECT_EQ(r.skipped_steps, 3) << optimizer;
    EXPECT_EQ(r.step_losses, losses) << optimizer;
    for (size_t i = 0; i < looped.graph.params().size(); ++i)
      EXPECT_EQ(looped.values(looped.graph.params()[i]->value),
                by_hand.values(by_hand.graph.params()[i]->value))
          << optimizer << " " << looped.graph.params()[i]->name;
  }
}

// Adam's bias correction counts updates, not steps: a resumed run continues both counts.
TEST(OnNan, ACheckpointKeepsTheUpdateCountApartFromTheStepCount) {
  const std::string path = ::testing::TempDir() + "skipped_updates.safetensors";
  SmallStep a;
  a.step->optimizer().set_steps(5);
  CheckpointMeta meta;
  meta.step = 7;  // two steps were skipped
  save_checkpoint(path, a.graph, a.step->optimizer(), meta);
  SmallStep b;
  EXPECT_EQ(restore_checkpoint(path, b.graph, b.step->optimizer()).step, 7u);
  EXPECT_EQ(b.step->optimizer().steps(), 5);
}

// With Adam, whose bias correction counts the updates, a run with a skipped step resumed after
// it continues bit for bit.
TEST(OnNan, ARunWithASkippedStepResumesBitForBit) {
  const std::string path = ::testing::TempDir() + "skipped_resume.safetensors";
  auto adam = [](SmallStep& s) {
    s.config.train.optimizer.type = "adam";
    s.config.train.epochs = 2;
  };
  SmallStep whole;
  adam(whole);
  TrainResult all;
  log_of([&] { all = train_on(whole, {3}, "skip_step"); });
  ASSERT_EQ(all.step_losses.size(), 2u * (PoisonedBatches::kBatches - 1));

  SmallStep first;
  adam(first);
  TrainOptions stop;
  int steps = 0;
  TrainPosition at;
  stop.stop = [&] { return ++steps == 7; };  // mid-epoch, three steps after the skipped one
  stop.callbacks.push_back(on_checkpoint([&](const Checkpoint& c) {
    TrainStep& step = c.step;
    const TrainPosition& p = c.at;
    CheckpointMeta meta;
    meta.epoch = p.epoch, meta.batch = p.batch, meta.step = p.step;
    save_checkpoint(path, step.graph(), step.optimizer(), meta);
    at = p;
  }));
  TrainResult before;
  log_of([&] { before = train_on(first, {3}, "skip_step", stop); });
  ASSERT_TRUE(before.stopped);

  SmallStep second;
  adam(second);
  TrainOptions resume;
  resume.start = at;
  resume.callbacks.push_back(on_run_start([&](const RunStart& e) {
    TrainStep& step = e.step;
    restore_checkpoint(path, step.graph(), step.optimizer());
  }));
  TrainResult after = train_on(second, {3}, "skip_step", resume);
  std::vector<double> joined = before.step_losses;
  joined.insert(joined.end(), after.step_losses.begin(), after.step_losses.end());
  EXPECT_EQ(joined, all.step_losses);
}

}  // namespace
}  // namespace tandem
