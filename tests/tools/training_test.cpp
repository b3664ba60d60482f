// End to end on the CPU: LeNet learns the bundled MNIST sample; runs are reproducible.
#include <gtest/gtest.h>

#include <cmath>

#include "datasets/dataset.h"
#include "engine/backend_registry.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/trainer.h"
#include "tools/app.h"

namespace tandem {
namespace {

std::string source(const std::string& rel) { return std::string(TANDEM_SOURCE_DIR) + "/" + rel; }

// Trains `config` on the CPU with `threads` threads for at most max_steps steps, the batches cut
// by `workers` background threads.
TrainResult run(Config config, int threads, int64_t max_steps, const DataSplits& data,
                int workers = 0) {
  Graph graph(config);
  BackendOptions o;
  o.threads = threads;
  auto backend = create_backend("cpu", o);
  auto loss = make_loss(config.loss);
  graph.allocate(*backend, config.train.batch_size, config.train.seed);
  Batcher train_src(data.train, config.train.batch_size, true, config.train.seed, config.data.mean,
                    config.data.std);
  train_src.set_augment(config.data.augment);
  Batcher test_src(data.test, config.train.batch_size, false, config.train.seed, config.data.mean,
                   config.data.std);
  TrainOptions opts;
  opts.progress = false;
  opts.max_steps = max_steps;
  opts.data_workers = workers;
  return train(config, graph, *loss, *backend, train_src, &test_src, opts);
}

class LeNetOnMnist : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    config_ = new Config(load_config(source("configs/lenet.yaml")));
    data_ = new DataSplits(load_data(config_->data, config_->input, 10));
  }
  static void TearDownTestSuite() {
    delete config_;
    delete data_;
  }
  static Config* config_;
  static DataSplits* data_;
};
Config* LeNetOnMnist::config_ = nullptr;
DataSplits* LeNetOnMnist::data_ = nullptr;

TEST_F(LeNetOnMnist, OneEpochReachesNinetyPercentTestAccuracy) {
  Config c = *config_;
  c.train.epochs = 1;
  TrainResult r = run(c, 0, -1, *data_);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_GE(r.epochs[0].test_accuracy, 0.90);
  EXPECT_LT(r.step_losses.back(), r.step_losses.front());
  // The first step is timed on its own, within the epoch's time.
  EXPECT_EQ(r.first_step_samples, c.train.batch_size);
  EXPECT_GT(r.first_step_seconds, 0);
  EXPECT_LT(r.first_step_seconds, r.epochs[0].seconds);
}

TEST_F(LeNetOnMnist, SameSeedGivesTheSameLossesTwice) {
  TrainResult a = run(*config_, 0, 20, *data_);
  TrainResult b = run(*config_, 0, 20, *data_);
  ASSERT_EQ(a.step_losses.size(), 20u);
  EXPECT_EQ(a.step_losses, b.step_losses);
}

TEST_F(LeNetOnMnist, BackgroundWorkersGiveTheSameRunBitForBit) {
  Config c = *config_;
  c.train.epochs = 2;
  c.data.augment.crop_padding = 2;  // the augmented batches too
  DataSplits small = *data_;  // two short epochs, each with its test evaluation
  for (auto [d, n] : {std::pair{&small.train, 640}, std::pair{&small.test, 200}}) {
    d->labels.resize(n);
    d->images.resize(static_cast<size_t>(n * d->sample_shape.numel()));
  }
  TrainResult inline_batches = run(c, 0, -1, small, 0);
  TrainResult workers = run(c, 0, -1, small, 3);
  ASSERT_EQ(workers.epochs.size(), 2u);
  EXPECT_EQ(inline_batches.step_losses, workers.step_losses);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(inline_batches.epochs[e].test_loss, workers.epochs[e].test_loss);
    EXPECT_EQ(inline_batches.epochs[e].test_accuracy, workers.epochs[e].test_accuracy);
  }
}

TEST_F(LeNetOnMnist, AnotherSeedGivesOtherLosses) {
  Config c = *config_;
  c.train.seed = 43;
  TrainResult a = run(*config_, 0, 5, *data_);
  TrainResult b = run(c, 0, 5, *data_);
  EXPECT_NE(a.step_losses, b.step_losses);
}

TEST_F(LeNetOnMnist, ThreadCountsAgreeOnTheFirstSteps) {
  TrainResult one = run(*config_, 1, 10, *data_);
  TrainResult two = run(*config_, 2, 10, *data_);
  ASSERT_EQ(one.step_losses.size(), two.step_losses.size());
  for (size_t i = 0; i < one.step_losses.size(); ++i)
    EXPECT_NEAR(one.step_losses[i], two.step_losses[i], 1e-5 * std::fabs(one.step_losses[i]))
        << "step " << i + 1;
}

TEST(Training, SyntheticDataIsLearnableByTheMlp) {
  Config c = load_config(source("configs/mlp.yaml"));
  c.data = DataConfig{};
  c.data.format = "synthetic";
  c.data.shape = c.input;
  c.data.train_size = 1024;
  c.data.test_size = 256;
  c.data.seed = 5;
  c.train.epochs = 2;
  DataSplits data = load_data(c.data, c.input, 10);
  TrainResult r = run(c, 0, -1, data);
  EXPECT_GT(r.epochs.back().test_accuracy, 0.5);
}

}  // namespace
}  // namespace tandem
