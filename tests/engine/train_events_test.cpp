// train() as its callbacks see it: which events a run raises, in which order, with which figures;
// and what the callbacks can decide (stop, the learning rate's factor).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/synthetic.h"
#include "engine/backend_registry.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

// Every event as a line, in the order raised.
struct Recorder : Callback {
  std::vector<std::string>& log;
  explicit Recorder(std::vector<std::string>& to) : log(to) {}
  void run_start(const RunStart& e) override {
    log.push_back(fmt::format("run_start {} epochs of {} batches", e.epochs, e.batches));
  }
  void epoch_start(const EpochStart& e) override {
    log.push_back(fmt::format("epoch_start {}", e.epoch));
  }
  void step_end(const StepEnd& e) override {
    log.push_back(fmt::format("step_end {}.{} step {} lr {:g}", e.epoch, e.batch, e.step, e.lr));
  }
  void epoch_end(const EpochEnd& e) override {
    log.push_back(fmt::format("epoch_end {}{}", e.stats.epoch, e.cut_short ? " cut short" : ""));
  }
  void checkpoint(const Checkpoint& e) override {
    log.push_back(fmt::format("checkpoint {}.{} step {}{}{}", e.at.epoch, e.at.batch, e.at.step,
                              e.at.stopping ? " stopping" : "", e.at.last ? " last" : ""));
  }
  void stopped(const RunStop& e) override {
    log.push_back(fmt::format("stopped {}.{}", e.epoch, e.batch));
  }
  void error(const std::exception& e) override { log.push_back(fmt::format("error {}", e.what())); }
};

// A small dense model on 24 synthetic samples: 3 batches of 8 an epoch, `epochs` epochs.
struct SmallRun {
  explicit SmallRun(int64_t epochs = 2) {
    config = parse_config(fmt::format(R"(name: events
input: {{shape: [1, 4, 4]}}
layers: [flatten, dense: {{units: 3}}]
data: {{format: synthetic, classes: 3}}
train: {{epochs: {}, batch_size: 8, optimizer: {{type: sgd, lr: 0.1}}}}
)",
                                      epochs),
                          "events.yaml");
    graph = std::make_unique<Graph>(config);
    loss = make_loss(config.loss);
    graph->allocate(*backend, 8, config.train.seed);
  }
  TrainResult train(TrainOptions options) {
    options.progress = false;
    options.callbacks.insert(options.callbacks.begin(), std::make_shared<Recorder>(events));
    Batcher batches(data, 8, true, config.train.seed, {}, {});
    return tandem::train(config, *graph, *loss, *backend, batches, nullptr, options);
  }
  Config config;
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Loss> loss;
  Dataset data = make_synthetic(Shape{1, 4, 4}, 3, 24, 7, true);
  std::vector<std::string> events;
};

TEST(TrainEvents, ARunRaisesEachEventInItsPlace) {
  SmallRun run;
  const TrainResult r = run.train({});
  EXPECT_EQ(r.step_losses.size(), 6u);
  const std::vector<std::string> expected = {
      "run_start 2 epochs of 3 batches", "epoch_start 0",
      "step_end 0.0 step 0 lr 0.1",      "step_end 0.1 step 1 lr 0.1",
      "step_end 0.2 step 2 lr 0.1",      "epoch_end 1",
      "checkpoint 1.0 step 3",           "epoch_start 1",
      "step_end 1.0 step 3 lr 0.1",      "step_end 1.1 step 4 lr 0.1",
      "step_end 1.2 step 5 lr 0.1",      "epoch_end 2",
      "checkpoint 2.0 step 6",
  };
  EXPECT_EQ(run.events, expected);
}

TEST(TrainEvents, AStopInsideAnEpochEndsItsBarThenSavesWhereTheRunStands) {
  SmallRun run;
  TrainOptions options;
  int asked = 0;
  options.stop = [&] { return ++asked == 2; };
  const TrainResult r = run.train(options);
  EXPECT_TRUE(r.stopped);
  const std::vector<std::string> expected = {
      "run_start 2 epochs of 3 batches", "epoch_start 0", "step_end 0.0 step 0 lr 0.1",
      "step_end 0.1 step 1 lr 0.1",      "stopped 0.2",   "checkpoint 0.2 step 2 stopping",
  };
  EXPECT_EQ(run.events, expected);
}

TEST(TrainEvents, MaxStepsCutsTheEpochShortAndSavesNothing) {
  SmallRun run;
  TrainOptions options;
  options.max_steps = 2;
  run.train(options);
  ASSERT_GE(run.events.size(), 2u);
  EXPECT_EQ(run.events[run.events.size() - 2], "step_end 0.1 step 1 lr 0.1");
  EXPECT_EQ(run.events.back(), "epoch_end 1 cut short");
}

// A control is a callback: this one stops the run after its first epoch, as early stopping does.
TEST(TrainEvents, ACallbackThatSetsStopEndsTheRunAfterTheEpochsCheckpoint) {
  SmallRun run(3);
  auto stop_after_one = std::make_shared<LambdaCallback>();
  stop_after_one->on_epoch_end = [](const EpochEnd& e) { e.state.stop = true; };
  TrainOptions options;
  options.callbacks.push_back(stop_after_one);
  const TrainResult r = run.train(options);
  EXPECT_TRUE(r.early_stopped);
  EXPECT_EQ(r.epochs.size(), 1u);
  EXPECT_EQ(run.events.back(), "checkpoint 1.0 step 3 last");
}

TEST(TrainEvents, TheLearningRateFactorACallbackSetsAppliesFromTheNextStep) {
  SmallRun run;
  auto halve = std::make_shared<LambdaCallback>();
  halve->on_epoch_end = [](const EpochEnd& e) { e.state.lr_scale = 0.5; };
  TrainOptions options;
  options.callbacks.push_back(halve);
  const TrainResult r = run.train(options);
  EXPECT_EQ(run.events[4], "step_end 0.2 step 2 lr 0.1");
  EXPECT_EQ(run.events[8], "step_end 1.0 step 3 lr 0.05");
  EXPECT_DOUBLE_EQ(r.epochs[1].learning_rate, 0.05);
}

TEST(TrainEvents, EveryCallbackSeesEachEventInTheOrderTheyWereAdded) {
  SmallRun run(1);
  std::vector<std::string> order;
  TrainOptions options;
  for (const char* name : {"first", "second"}) {
    auto c = std::make_shared<LambdaCallback>();
    c->on_step_end = [&order, name](const StepEnd& e) {
      order.push_back(fmt::format("{} {}", name, e.step));
    };
    options.callbacks.push_back(c);
  }
  run.train(options);
  const std::vector<std::string> expected = {"first 0",  "second 0", "first 1",
                                             "second 1", "first 2",  "second 2"};
  EXPECT_EQ(order, expected);
}

TEST(TrainEvents, AnErrorReachesEveryCallbackAndIsThrownOn) {
  SmallRun run;
  auto fail = std::make_shared<LambdaCallback>();
  fail->on_step_end = [](const StepEnd& e) {
    if (e.step == 1) throw std::runtime_error("the disk is full");
  };
  TrainOptions options;
  options.callbacks.push_back(fail);
  EXPECT_THROW(run.train(options), std::runtime_error);
  ASSERT_FALSE(run.events.empty());
  EXPECT_EQ(run.events.back(), "error the disk is full");
}

}  // namespace
}  // namespace tandem
