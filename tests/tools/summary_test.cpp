// trainer summary: the model table without data or training, and its JSON form.
#include <gtest/gtest.h>

#include <string>

#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

using test::run_trainer;

TEST(Summary, PrintsTheModelTableAndTheActivationsOfABatch) {
  const test::CliResult r =
      run_trainer("summary --config " + test::source_path("configs/lenet.yaml"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("Model lenet"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Params 431,080 trainable, 0 non-trainable"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Activations "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("for a training batch of 64 (fp32"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Epoch"), std::string::npos) << "summary trains nothing: " << r.out;
}

// LeNet's activations per sample: 20x24x24 + 20x12x12 + 50x8x8 + 50x4x4 + 800 (the flatten a
// view) + 500 + 500 + 10, each with a gradient of its size, in fp32; the input holds no
// gradient of its own. The figure scales with the batch.
TEST(Summary, JsonCountsTheParametersAndScalesTheActivationsWithTheBatch) {
  const std::string config = test::source_path("configs/lenet.yaml");
  const test::CliResult one = run_trainer("summary --json --batch-size 1 --config " + config);
  const test::CliResult four = run_trainer("summary --json --batch-size 4 --config " + config);
  ASSERT_EQ(one.status, 0) << one.out;
  ASSERT_EQ(four.status, 0) << four.out;
  EXPECT_NE(one.out.find("\"trainable_params\": 431080"), std::string::npos) << one.out;
  EXPECT_NE(
      one.out.find("\"name\": \"conv2d_1\", \"type\": \"conv2d\", \"output\": \"[20, 24, 24]\""),
      std::string::npos)
      << one.out;
  auto bytes_of = [](const std::string& out) {
    const std::string key = "\"activation_bytes\": ";
    const size_t at = out.find(key);
    return at == std::string::npos ? -1 : std::stoll(out.substr(at + key.size()));
  };
  const long long b1 = bytes_of(one.out), b4 = bytes_of(four.out);
  ASSERT_GT(b1, 0) << one.out;
  EXPECT_GE(b4, 3 * b1) << "a batch of 4 against one: " << b4 << " and " << b1;
}

TEST(Summary, ABadConfigIsRefusedAsTrainingRefusesIt) {
  const std::string bad = test::write_temp_file(
      "summary_bad.yaml", "name: bad\ninput: {shape: [1, 8, 8]}\nlayers: [conv3d: {}]\n");
  const test::CliResult r = run_trainer("summary --config " + bad);
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("unknown layer type 'conv3d'"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tandem
