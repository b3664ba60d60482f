// Checkpoints of training runs: written every few epochs and pruned, resumed bit for bit, and
// written on Ctrl-C.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "tests/tools/cli_util.h"
#include "tools/app.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

std::string small_config(const std::string& extra_train = "") {
  return test::write_temp_file("checkpoint_run.yaml", R"(name: ckpt_small
input: {shape: [1, 12, 12]}
layers:
  - conv2d: {filters: 4, kernel: 3}
  - relu
  - maxpool: {kernel: 2}
  - flatten
  - dense: {units: 4}
data: {format: synthetic, classes: 4, train_size: 256, test_size: 64, seed: 3}
train:
  epochs: 3
  batch_size: 32
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
  seed: 5
)" + extra_train);
}

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + name;
  fs::remove_all(dir);
  return dir;
}

TEST(CheckpointRun, EveryEpochIntoTheFolderKeepingTheNewest) {
  register_everything();
  const std::string dir = fresh_dir("ckpt_every");
  RunRequest r;
  r.config_path = small_config("  checkpoint: {dir: " + dir + ", every: 1, keep: 2}\n");
  r.quiet = true;
  ASSERT_EQ(run_train(r), 0);
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"epoch-2.safetensors", "epoch-3.safetensors"}));
  CheckpointMeta m = read_checkpoint_meta(dir + "/epoch-3.safetensors");
  EXPECT_EQ(m.epoch, 3);
  EXPECT_EQ(m.step, 24u);  // 8 batches of 32 per epoch
  EXPECT_EQ(m.seed, 5u);
  EXPECT_EQ(m.device, "cpu");
  EXPECT_NE(m.config_text.find("name: ckpt_small"), std::string::npos);
}

TEST(CheckpointRun, CheckpointDirFlagAndEveryTwoEpochs) {
  register_everything();
  const std::string dir = fresh_dir("ckpt_flag");
  RunRequest r;
  r.config_path = small_config("  checkpoint: {every: 2}\n");
  r.checkpoint_dir = dir;
  r.epochs = 4;
  r.quiet = true;
  ASSERT_EQ(run_train(r), 0);
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"epoch-2.safetensors", "epoch-4.safetensors"}));
}

}  // namespace
}  // namespace tandem
