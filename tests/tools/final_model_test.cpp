// A finished run keeps its model: runs/<config name>/ when no checkpoint folder is set (as a
// stop by Ctrl-C does), said in its closing lines, so that eval, predict and export find it as
// their help's examples show; train.checkpoint.final: false turns it off.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// The trainer run from `dir` as its working folder.
test::CliResult run_in(const std::string& dir, const std::string& args) {
  return test::run_command("cd '" + dir + "' && " + std::string(TANDEM_TRAINER) + " " + args);
}

TEST(FinalModel, ARunWithoutACheckpointFolderKeepsItsModelInRuns) {
  const std::string dir = test::fresh_dir("work");
  fs::create_directories(dir);
  const std::string config = test::one_epoch_config("final_model");
  test::CliResult r = run_in(dir, "--config " + config + " --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir + "/runs/final_model/epoch-1.safetensors")) << r.out;
  // Filled to 80 columns: compared with its lines joined.
  const std::string joined = std::regex_replace(r.out, std::regex("\\s+"), " ");
  EXPECT_NE(joined.find("model: runs/final_model/epoch-1.safetensors (eval, predict and export "
                        "take --checkpoint runs/final_model)"),
            std::string::npos)
      << r.out;
  r = run_in(dir, "eval --checkpoint runs/final_model");
  EXPECT_EQ(r.status, 0) << r.out;
}

TEST(FinalModel, ADeviceListKeepsEachDevicesModelAndTheFolderFindsTheNewest) {
  const std::string dir = test::fresh_dir("work");
  fs::create_directories(dir);
  const std::string config = test::one_epoch_config("final_models");
  test::CliResult r = run_in(dir, "--config " + config + " --device cpu:1,cpu:2 --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir + "/runs/final_models/cpu-1/epoch-1.safetensors")) << r.out;
  EXPECT_TRUE(fs::exists(dir + "/runs/final_models/cpu-2/epoch-1.safetensors")) << r.out;
  r = run_in(dir, "eval --checkpoint runs/final_models");
  EXPECT_EQ(r.status, 0) << r.out;
}

TEST(FinalModel, FinalFalseWritesNothing) {
  const std::string dir = test::fresh_dir("work");
  fs::create_directories(dir);
  const std::string config = test::write_temp_file(
      "no_final.yaml", test::small_model_yaml("no_final") +
                           "train: {epochs: 1, batch_size: 32, checkpoint: {final: false}}\n");
  const test::CliResult r = run_in(dir, "--config " + config + " --quiet");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(fs::exists(dir + "/runs")) << r.out;
  EXPECT_EQ(r.out.find("model:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem
