// The controls a run takes from its own figures, end to end: early stopping with its best and
// last checkpoints, the plateau schedule, a diverging loss that stops the run, and an image folder
// of class sub-folders with its test split held out.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/tools/cli_util.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

// The learning_rate of each line of a JSON-lines metrics file.
std::vector<double> learning_rates(const std::string& path) {
  std::vector<double> out;
  std::ifstream in(path);
  const std::regex lr("\"learning_rate\": ([0-9.e+-]+)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, lr)) out.push_back(std::stod(m[1]));
  }
  return out;
}

TEST(EarlyStopping, StopsSaysSoAndKeepsTheBestAndTheLastEpoch) {
  // A min_delta no epoch can beat: the first epoch is the best, the run ends after patience more.
  const std::string config = write_temp_file(
      "early.yaml", small_model_yaml("early") +
                        "train: {epochs: 20, batch_size: 32, seed: 1, early_stopping: {metric: "
                        "train_loss, patience: 2, min_delta: 100}}\n");
  const std::string dir = fresh_dir("early_ckpt");
  const std::string metrics = test_temp_dir() + "early.jsonl";
  const CliResult r =
      run_trainer("--config " + config + " --checkpoint-dir " + dir + " --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("early stopping: train_loss has not improved by more than 100 for 2 "
                       "epochs (best "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("at epoch 1); the run ends after epoch 3 of 20\n"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("Epoch 4/20"), std::string::npos) << r.out;
  EXPECT_EQ(learning_rates(metrics).size(), 3u);
  EXPECT_TRUE(fs::exists(dir + "/best.safetensors")) << r.out;
  EXPECT_TRUE(fs::exists(dir + "/epoch-3.safetensors")) << r.out;
  EXPECT_NE(r.out.find("  last epoch: " + dir + "/epoch-3.safetensors; best: " + dir +
                       "/best.safetensors (train_loss "),
            std::string::npos)
      << r.out;
}

TEST(EarlyStopping, WithoutACheckpointFolderSaysHowToKeepTheEpochs) {
  const std::string config = write_temp_file(
      "early_nodir.yaml", small_model_yaml("early_nodir") +
                              "train: {epochs: 5, batch_size: 32, early_stopping: {patience: 1, "
                              "min_delta: 100}}\n");
  const CliResult r = run_trainer("--config " + config + " --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("the run ends after epoch 2 of 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no checkpoint folder was set: --checkpoint-dir DIR keeps the best epoch "
                       "and the last"),
            std::string::npos)
      << r.out;
}

TEST(PlateauSchedule, CutsTheRateWhenTheMetricStopsImproving) {
  const std::string config = write_temp_file(
      "plateau.yaml", small_model_yaml("plateau") +
                          "train: {epochs: 4, batch_size: 32, optimizer: {type: sgd, lr: 0.1}, "
                          "schedule: {type: plateau, factor: 0.5, patience: 1, min_delta: 100}}\n");
  const std::string metrics = test_temp_dir() + "plateau.jsonl";
  const CliResult r = run_trainer("--config " + config + " --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("plateau: train_loss has not improved by more than 100 for 1 epoch (best "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("learning rate 0.1 -> 0.05\n"), std::string::npos) << r.out;
  const std::vector<double> lr = learning_rates(metrics);
  ASSERT_EQ(lr.size(), 4u);
  EXPECT_DOUBLE_EQ(lr[0], 0.1);
  EXPECT_DOUBLE_EQ(lr[1], 0.1);  // epoch 2 is the first without improvement: cut after it
  EXPECT_DOUBLE_EQ(lr[2], 0.05);
  EXPECT_DOUBLE_EQ(lr[3], 0.025);
}

// As a user met it: LeNet on the MNIST sample with Adam at lr 10 reached a loss of 8.57e+07 in 29
// steps, then trained on to a result no better than chance, with exit status 0.
TEST(Divergence, AdamAtLearningRateTenStopsWithTheNanHintNotAtChance) {
  std::string lenet;
  {
    std::ifstream in(source_path("configs/lenet.yaml"));
    for (std::string line; std::getline(in, line);) {
      if (line.find("optimizer:") != std::string::npos) line = "  optimizer: {type: adam, lr: 10}";
      if (line.find("path:") != std::string::npos)
        line = "  path: " + source_path("datasets/mnist-sample");
      lenet += line + "\n";
    }
  }
  const std::string config = write_temp_file("diverge.yaml", lenet);
  const CliResult r = run_trainer("--config " + config + " --epochs 1 --quiet");
  EXPECT_EQ(r.status, 6) << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(error: the training loss diverged: [0-9.e+]+ at step [0-9]+ \(epoch 1, )"
                        R"(batch [0-9]+ of 125\), more than 10,000 times its first value [0-9.]+; )"
                        R"(the run stops here rather than train on to a result no better than )"
                        R"(chance\n)")))
      << r.out;
  EXPECT_NE(r.out.find("hint: lower the learning rate (it was 10; try --lr 0.001, usual for adam)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("test accuracy"), std::string::npos) << r.out;
}

TEST(ClipGradNormCli, SaysSoAndTheLoggedStepsCarryTheGradientsNorm) {
  const std::string config = write_temp_file(
      "clip.yaml", small_model_yaml("clip") +
                       "train: {epochs: 1, batch_size: 32, clip_grad_norm: 0.5, seed: 1}\n");
  const std::string metrics = test_temp_dir() + "clip.jsonl";
  const CliResult r = run_trainer("--config " + config + " --log-every 2 --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("       gradients clipped to a global L2 norm of 0.5\n"), std::string::npos)
      << r.out;
  std::ifstream in(metrics);
  int steps = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"step\": ") == std::string::npos) continue;
    ++steps;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, std::regex("\"grad_norm\": ([0-9.e+-]+)\\}"))) << line;
    EXPECT_GT(std::stod(m[1]), 0) << line;
  }
  EXPECT_EQ(steps, 4);  // 8 steps, every second logged
  // Without clipping the norm is not computed, and not logged.
  const std::string plain = write_temp_file(
      "noclip.yaml", small_model_yaml("noclip") + "train: {epochs: 1, batch_size: 32}\n");
  ASSERT_EQ(run_trainer("--config " + plain + " --quiet --log-every 2 --metrics " + metrics).status,
            0);
  std::ifstream again(metrics);
  for (std::string line; std::getline(again, line);)
    EXPECT_EQ(line.find("grad_norm"), std::string::npos) << line;
}

// A channels-last input that no layer's shape check trips over: the data's check names it.
TEST(ChannelsLast, AnMnistModelOfDenseLayersIsToldTheOrder) {
  const std::string config = write_temp_file("channels_last.yaml", R"(name: cl
input: {shape: [28, 28, 1]}
layers:
  - flatten
  - dense: {units: 10}
data: {format: mnist, path: )" + source_path("datasets/mnist-sample") + R"(}
)");
  const CliResult r = run_trainer("--config " + config + " --quiet");
  EXPECT_EQ(r.status, 4) << r.out;
  EXPECT_NE(r.out.find(" are [1, 28, 28] (1 channel, 28x28) but the model's input is [28, 28, 1], "
                       "which looks channels-last (Keras' [H, W, C]); tandem takes [C, H, W]\n"
                       "hint: set the model's input to {shape: [1, 28, 28]}"),
            std::string::npos)
      << r.out;
}

TEST(ImageFolderOneFolder, HoldsOutAStratifiedTestSplit) {
  // The bundled sample's train/ is itself one folder of class sub-folders.
  const std::string config = write_temp_file("one_folder.yaml", R"(name: one_folder
input: {shape: [1, 28, 28]}
layers:
  - flatten
  - dense: {units: 10}
data: {format: image_folder, path: )" + source_path("datasets/mnist-png-sample/train") +
                                                                    R"(, test_split: 0.2}
train: {epochs: 1, batch_size: 64}
)");
  const CliResult r = run_trainer("--config " + config);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(Data   image_folder: ([0-9,]+) train / )"
                                                  R"(([0-9,]+) test samples)")))
      << r.out;
  EXPECT_NE(r.out.find("images held out of " + source_path("datasets/mnist-png-sample/train") +
                       ", a share of each class (data.test_split 0.2, drawn from data.seed 0)"),
            std::string::npos)
      << r.out;
}

TEST(ImageFolderOneFolder, WithoutATestSplitSaysWhatToSet) {
  const std::string config = write_temp_file("one_folder_no_split.yaml", R"(name: one_folder
input: {shape: [1, 28, 28]}
layers:
  - flatten
  - dense: {units: 10}
data: {format: image_folder, path: )" + source_path("datasets/mnist-png-sample/train") +
                                                                             R"(}
)");
  const CliResult r = run_trainer("--config " + config);
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("format image_folder needs a test split"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: e.g. 'test_split: 0.2' holds out a fifth of each class"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace tandem::test
