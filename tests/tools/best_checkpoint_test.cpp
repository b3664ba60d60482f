// train.checkpoint.best: the run's best epoch by a metric in DIR/best.safetensors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "engine/checkpoint.h"
#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// A learning rate high enough that the test loss does not simply fall every epoch.
std::string best_config(const std::string& dir, const std::string& metric) {
  return test::write_temp_file("best_" + metric + ".yaml",
                               test::small_model_yaml("ckpt_best") + R"(train:
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

TEST(BestCheckpoint, AnUnknownMetricIsAConfigError) {
  const std::string dir = ::testing::TempDir() + "ckpt_best_unknown";
  auto r = test::run_trainer("--config " + best_config(dir, "val_acc"));
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("train.checkpoint: 'best': unknown metric 'val_acc'; expected one of: "
                       "test_accuracy, test_loss, train_accuracy, train_loss, val_accuracy, val_loss"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace tandem
