// A branching model end to end through the trainer: it learns, its checkpoint evaluates to the
// run's figures, and a checkpoint is refused for a config of the same layers wired otherwise.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

using test::run_trainer;

// A residual block over a stem and a concat of two branches; `shortcut` is what the add takes
// beside the block's output.
std::string residual_config(const std::string& name, const std::string& shortcut) {
  return test::write_temp_file(name + ".yaml", "name: " + name + R"(
input: {shape: [1, 12, 12]}
layers:
  - {conv2d: {filters: 4, kernel: 3, padding: 1}, name: stem}
  - relu
  - {conv2d: {filters: 4, kernel: 3, padding: 1}, name: block}
  - {add: {}, inputs: [)" + shortcut + R"(, block]}
  - {relu: {}, name: joined}
  - {conv2d: {filters: 2, kernel: 1}, inputs: [stem], name: side}
  - {concat: {}, inputs: [joined, side]}
  - maxpool: {kernel: 2}
  - flatten
  - dense: {units: 4}
data: {format: synthetic, classes: 4, train_size: 256, test_size: 64, seed: 3}
train: {epochs: 3, batch_size: 32, optimizer: {type: adam, lr: 0.01}, seed: 5}
)");
}

TEST(BranchingCli, TrainsAndItsCheckpointEvaluatesToTheRunsTestFigures) {
  const std::string dir = ::testing::TempDir() + "branching_ckpt";
  std::filesystem::remove_all(dir);
  auto train = run_trainer("--config " + residual_config("residual", "stem") +
                           " --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(train.status, 0) << train.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(train.out, m,
                                std::regex(R"(test accuracy ([0-9.]+)% \(loss ([0-9.]+)\))")))
      << train.out;
  EXPECT_GT(std::stod(m[1].str()), 60.0) << "chance is 25%: " << train.out;
  auto eval = run_trainer("eval --checkpoint " + dir);
  ASSERT_EQ(eval.status, 0) << eval.out;
  EXPECT_NE(eval.out.find("loss " + m[2].str() + "  accuracy " + m[1].str() + "%"),
            std::string::npos)
      << eval.out;
}

TEST(BranchingCli, ACheckpointIsRefusedForTheSameLayersWiredOtherwise) {
  const std::string dir = ::testing::TempDir() + "branching_rewired_ckpt";
  std::filesystem::remove_all(dir);
  auto train = run_trainer("--config " + residual_config("wired", "stem") +
                           " --quiet --epochs 1 --checkpoint-dir " + dir);
  ASSERT_EQ(train.status, 0) << train.out;
  // The same parameters; the add takes relu_1 instead of stem.
  auto resume = run_trainer("--config " + residual_config("rewired", "relu_1") +
                            " --quiet --epochs 2 --resume " + dir);
  EXPECT_EQ(resume.status, 7) << resume.out;
  EXPECT_NE(resume.out.find("holds another model: its layer 4 is add_1 [4, 12, 12] (0 "
                            "parameters) of stem, block, this config's is add_1 [4, 12, 12] (0 "
                            "parameters) of relu_1, block"),
            std::string::npos)
      << resume.out;
}

}  // namespace
}  // namespace tandem
