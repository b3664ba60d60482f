// train.checkpoint.best: the run's best epoch by a metric in DIR/best.safetensors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "engine/layer_registry.h"
#include "tests/tools/cli_util.h"
#include "tools/checkpoints.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// A learning rate high enough that the test loss does not simply fall every epoch.
std::string best_config(const std::string& dir, const std::string& metric) {
  return test::write_temp_file("best_" + metric + ".yaml", test::small_model_yaml("ckpt_best") +
                                                               R"(train:
  epochs: 5
  batch_size: 32
  optimizer: {type: sgd, lr: 0.3, momentum: 0.9}
  seed: 5
  checkpoint: {dir: )" + dir + ", keep: 1, best: " + metric + "}\n");
}

// Each epoch's value of `metric` from a --metrics JSON-lines file.
std::vector<double> metric_by_epoch(const std::string& path, const std::string& metric) {
  std::ifstream in(path);
  const std::regex value("\"" + metric + "\": ([-0-9.e+]+)");
  std::vector<double> out;
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, value)) out.push_back(std::stod(m[1]));
  return out;
}

void expect_best_of_run(const std::string& metric, bool lower_is_better) {
  const std::string dir = ::testing::TempDir() + "ckpt_best_" + metric;
  const std::string metrics = dir + ".jsonl";
  fs::remove_all(dir);
  fs::remove(metrics);
  auto r = test::run_trainer("--config " + best_config(dir, metric) + " --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  const std::vector<double> v = metric_by_epoch(metrics, metric);
  ASSERT_EQ(v.size(), 5u);
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (lower_is_better ? v[i] < v[best] : v[i] > v[best]) best = i;

  const std::string best_path = dir + "/best.safetensors";
  ASSERT_TRUE(fs::exists(best_path)) << r.out;
  EXPECT_EQ(read_checkpoint_meta(best_path).epoch, static_cast<int64_t>(best + 1)) << r.out;
  EXPECT_NE(r.out.find(fmt::format("new best {} ", metric)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("at epoch {} -> {}", best + 1, best_path)), std::string::npos)
      << r.out;
  // keep: 1 prunes the epoch files, never the best; the latest is still the last epoch.
  EXPECT_TRUE(fs::exists(dir + "/epoch-5.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/epoch-4.safetensors"));
  EXPECT_EQ(find_checkpoint(dir), dir + "/epoch-5.safetensors");
}

TEST(BestCheckpoint, HoldsTheEpochWithTheLowestTestLoss) { expect_best_of_run("test_loss", true); }

TEST(BestCheckpoint, HoldsTheEpochWithTheHighestTrainAccuracy) {
  expect_best_of_run("train_accuracy", false);
}

// A run's checkpoints as the trainer writes them after each epoch, on a small model's step.
struct EpochWriter {
  std::string dir;
  Config config;
  std::unique_ptr<Backend> backend = create_backend("cpu", {});
  Graph graph{config};
  std::unique_ptr<Loss> loss = make_loss(config.loss);
  std::unique_ptr<TrainStep> step;
  RunCheckpoints checkpoints{config, "cpu", false, true, {}};

  explicit EpochWriter(const std::string& name)
      : dir(::testing::TempDir() + name), config(load_config(best_config(dir, "test_accuracy"))) {
    fs::remove_all(dir);
    graph.allocate(*backend, config.train.batch_size, config.train.seed);
    step = std::make_unique<TrainStep>(graph, *loss, *backend, config.train.optimizer,
                                       config.train.seed);
  }
  void epoch(int64_t epoch, double test_accuracy) {
    EpochStats e;
    e.epoch = epoch;
    e.test_accuracy = test_accuracy;
    checkpoints.epoch_done(e);
    checkpoints.write(*step, {epoch, 0, static_cast<uint64_t>(8 * epoch)});
  }
};

CheckpointMeta best_before_resume(const std::string& metric, double value, int64_t epoch) {
  CheckpointMeta m;
  m.best_metric = metric;
  m.best_value = value;
  m.best_epoch = epoch;
  return m;
}

TEST(BestCheckpoint, AResumedRunKeepsTheBestOfTheEpochsBeforeTheResume) {
  EpochWriter run("ckpt_best_resumed");
  run.checkpoints.resumed(best_before_resume("test_accuracy", 0.9, 2),
                          run.dir + "/epoch-2.safetensors");
  run.epoch(3, 0.8);  // worse than epoch 2: best.safetensors is not written
  EXPECT_TRUE(fs::exists(run.dir + "/epoch-3.safetensors"));
  EXPECT_FALSE(fs::exists(run.dir + "/best.safetensors"));
  EXPECT_EQ(read_checkpoint_meta(run.dir + "/epoch-3.safetensors").best_epoch, 2);
  run.epoch(4, 0.95);
  ASSERT_TRUE(fs::exists(run.dir + "/best.safetensors"));
  const CheckpointMeta m = read_checkpoint_meta(run.dir + "/best.safetensors");
  EXPECT_EQ(m.epoch, 4);
  EXPECT_EQ(m.best_metric, "test_accuracy");
  EXPECT_EQ(m.best_value, 0.95);
  EXPECT_EQ(m.best_epoch, 4);
}

// Resumed from another folder: the best epoch's file is named where the resumed run kept it, or
// said not to be kept, never a path in this run's folder that does not exist.
TEST(BestCheckpoint, AfterAResumeFromAnotherFolderTheBestIsNamedWhereItIs) {
  const std::string before = ::testing::TempDir() + "ckpt_best_elsewhere";
  fs::remove_all(before);
  fs::create_directories(before);
  {
    EpochWriter run("ckpt_best_resumed_here");
    run.checkpoints.resumed(best_before_resume("test_accuracy", 0.9, 2),
                            before + "/epoch-2.safetensors");
    run.epoch(3, 0.8);
    const std::string note = run.checkpoints.early_stop_note();
    EXPECT_NE(note.find("best: not kept (epoch 2 was written by the run resumed"),
              std::string::npos)
        << note;
  }
  std::ofstream(before + "/best.safetensors") << "x";
  EpochWriter run("ckpt_best_resumed_here");
  run.checkpoints.resumed(best_before_resume("test_accuracy", 0.9, 2),
                          before + "/epoch-2.safetensors");
  run.epoch(3, 0.8);
  const std::string note = run.checkpoints.early_stop_note();
  EXPECT_NE(note.find("best: " + before + "/best.safetensors (test_accuracy"), std::string::npos)
      << note;
}

TEST(BestCheckpoint, ABestByAnotherMetricBeforeTheResumeIsNotCompared) {
  EpochWriter run("ckpt_best_other_metric");
  run.checkpoints.resumed(best_before_resume("test_loss", 0.01, 2),
                          run.dir + "/epoch-2.safetensors");
  run.epoch(3, 0.8);
  ASSERT_TRUE(fs::exists(run.dir + "/best.safetensors"));
  EXPECT_EQ(read_checkpoint_meta(run.dir + "/best.safetensors").best_epoch, 3);
}

TEST(BestCheckpoint, AnUnknownMetricIsAConfigError) {
  const std::string dir = ::testing::TempDir() + "ckpt_best_unknown";
  auto r = test::run_trainer("--config " + best_config(dir, "val_acc"));
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find(
                "train.checkpoint: 'best': unknown metric 'val_acc'; did you mean 'val_accuracy'?; "
                "expected one of: "
                "test_accuracy, test_loss, train_accuracy, train_loss, val_accuracy, val_loss"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace tandem
