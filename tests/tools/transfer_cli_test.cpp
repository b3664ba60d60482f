// Transfer learning from the command line: --init and train.init, frozen layers in the model
// table and the summary, and a resumed run of a model with frozen layers.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// The small model of the CLI tests with `classes` outputs, NAME.yaml; `train` is its train
// section's keys.
std::string config(const std::string& name, int classes, const std::string& train) {
  std::string yaml = test::small_model_yaml(name);
  const std::string four = "units: 4", classes4 = "classes: 4";
  yaml.replace(yaml.find(four), four.size(), "units: " + std::to_string(classes));
  yaml.replace(yaml.find(classes4), classes4.size(), "classes: " + std::to_string(classes));
  return test::write_temp_file(name + ".yaml", yaml + "train: {" + train + "}\n");
}

// Every tensor of a checkpoint, by name.
std::map<std::string, std::vector<float>> tensors_of(const std::string& path) {
  auto backend = create_backend("cpu", {});
  NamedTensors tensors;
  for (const auto& [name, shape] : read_checkpoint_contents(path).tensors)
    tensors.emplace_back(name, Tensor(*backend, shape));
  read_matching_tensors(path, tensors);
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : tensors) {
    out[name].resize(static_cast<size_t>(t.numel()));
    backend->download(out[name].data(), t);
  }
  return out;
}

TEST(TransferCli, InitTakesTheFeaturesAndSkipsAHeadOfAnotherShape) {
  const std::string pre = test::fresh_dir("pre"), fine = test::fresh_dir("fine");
  const test::CliResult a =
      test::run_trainer("--config " + config("pre4", 4, "epochs: 1, batch_size: 32") +
                        " --checkpoint-dir " + pre + " --quiet");
  ASSERT_EQ(a.status, 0) << a.out;
  const test::CliResult b = test::run_trainer(
      "--config " + config("fine3", 3, "epochs: 1, batch_size: 32, freeze: [conv2d_1]") +
      " --init " + pre + "/epoch-1.safetensors --checkpoint-dir " + fine);
  ASSERT_EQ(b.status, 0) << b.out;
  EXPECT_NE(
      b.out.find("Init   2 of the model's 4 tensors taken from " + pre + "/epoch-1.safetensors"),
      std::string::npos)
      << b.out;
  EXPECT_NE(b.out.find("skipped, of another shape (drawn from the seed): dense_1.weight ([3, 100] "
                       "here, [4, 100] in the file), dense_1.bias ([3] here, [4] in the file)"),
            std::string::npos)
      << b.out;
  EXPECT_NE(b.out.find("a new run: epoch 1, a fresh optimizer"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("conv2d_1, frozen"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("Params 303 trainable, 40 frozen, 0 non-trainable"), std::string::npos)
      << b.out;
  // The frozen convolution is the pretrained one, bit for bit, after the fine-tuning.
  auto before = tensors_of(pre + "/epoch-1.safetensors");
  auto after = tensors_of(fine + "/epoch-1.safetensors");
  EXPECT_EQ(after["conv2d_1.weight"], before["conv2d_1.weight"]);
  EXPECT_EQ(after["conv2d_1.bias"], before["conv2d_1.bias"]);
  EXPECT_FALSE(after.count("optimizer.conv2d_1.weight.velocity"));
}

TEST(TransferCli, RefusesAnInitOfNoMatchingTensorBeforeTraining) {
  const std::string pre = test::fresh_dir("pre"), out = test::fresh_dir("out");
  ASSERT_EQ(test::run_trainer("--config " + config("pre4", 4, "epochs: 1, batch_size: 32") +
                              " --checkpoint-dir " + pre + " --quiet")
                .status,
            0);
  const std::string other = test::write_temp_file("other.yaml", R"(name: other
input: {shape: [1, 12, 12]}
layers:
  - {conv2d: {filters: 4, kernel: 3}, name: features}
  - flatten
  - {dense: {units: 4}, name: head}
data: {format: synthetic, classes: 4, train_size: 64, test_size: 16}
train: {epochs: 1, init: )" + pre + "/epoch-1.safetensors}\n");
  const test::CliResult r = test::run_trainer("--config " + other + " --checkpoint-dir " + out);
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("error: " + other + ":8:26: train.init: none of the tensors of"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("Epoch"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
  const test::CliResult missing =
      test::run_trainer("--config " + other + " --init " + pre + "/nope.safetensors");
  EXPECT_EQ(missing.status, 3) << missing.out;
  EXPECT_NE(
      missing.out.find("error: --init: checkpoint '" + pre + "/nope.safetensors' does not exist"),
      std::string::npos)
      << missing.out;
}

TEST(TransferCli, SummaryCountsTrainableAndFrozenParameters) {
  const std::string path = config("frozen", 4, "freeze: {up_to: maxpool_1}");
  const test::CliResult text = test::run_trainer("summary --config " + path);
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("Params 404 trainable, 40 frozen, 0 non-trainable"), std::string::npos)
      << text.out;
  const test::CliResult json = test::run_trainer("summary --config " + path + " --json");
  ASSERT_EQ(json.status, 0) << json.out;
  EXPECT_NE(json.out.find("\"trainable_params\": 404, \"frozen_params\": 40"), std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"name\": \"conv2d_1\", \"type\": \"conv2d\", \"output\": \"[4, 10, "
                          "10]\", \"params\": 40, \"flops\": 7200, \"frozen\": true"),
            std::string::npos)
      << json.out;
}

TEST(TransferCli, AResumedRunWithFrozenLayersEqualsAnUninterruptedOne) {
  const std::string whole = test::fresh_dir("whole"), halves = test::fresh_dir("halves");
  const std::string path =
      config("resumed", 4,
             "epochs: 2, batch_size: 32, seed: 4, freeze: [conv2d_1], "
             "optimizer: {type: sgd, lr: 0.05, momentum: 0.9, lr_multipliers: {dense_1: 2}}");
  ASSERT_EQ(
      test::run_trainer("--config " + path + " --checkpoint-dir " + whole + " --quiet").status, 0);
  ASSERT_EQ(
      test::run_trainer("--config " + path + " --epochs 1 --checkpoint-dir " + halves + " --quiet")
          .status,
      0);
  const test::CliResult r =
      test::run_trainer("--config " + path + " --checkpoint-dir " + halves + " --resume " + halves +
                        "/epoch-1.safetensors --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  auto a = tensors_of(whole + "/epoch-2.safetensors");
  auto b = tensors_of(halves + "/epoch-2.safetensors");
  ASSERT_EQ(a.size(), 6u);  // 4 weights, the velocity of the 2 trained
  EXPECT_EQ(a, b);
}

TEST(TransferCli, TheDigitsExampleFineTunesAPretrainedLeNet) {
  // README's example: LeNet on the digits 0-4, then the digits 5-9 from five images of each.
  const std::string pre = test::fresh_dir("digits-0to4");
  const test::CliResult a =
      test::run_trainer("--config " + test::source_path("configs/lenet_png.yaml") + " --data " +
                        test::source_path("datasets/digits-transfer/pretrain-0to4") +
                        " --checkpoint-dir " + pre + " --epochs 3 --quiet");
  ASSERT_EQ(a.status, 0) << a.out;
  const test::CliResult b = test::run_trainer(
      "--config " + test::source_path("configs/finetune_digits.yaml") + " --init " + pre);
  ASSERT_EQ(b.status, 0) << b.out;
  EXPECT_NE(
      b.out.find("Init   6 of the model's 8 tensors taken from " + pre + "/epoch-3.safetensors"),
      std::string::npos)
      << b.out;
  EXPECT_NE(b.out.find("25 train / 250 test samples"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("Params 2,505 trainable, 426,070 frozen"), std::string::npos) << b.out;
  EXPECT_EQ(b.out.find("about chance"), std::string::npos) << b.out;
}

}  // namespace
}  // namespace tandem
