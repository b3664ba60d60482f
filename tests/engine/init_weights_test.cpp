// train.init: a checkpoint's tensors taken by name where their shapes fit, a new head left to the
// seed, and the files refused with the reason.
#include "engine/init_weights.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/layer_registry.h"
#include "engine/optimizer.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// A model of `classes` outputs; `train` adds to its train section.
std::string model(int classes, const std::string& train = "") {
  return R"(
input: {shape: [1, 6, 6]}
layers:
  - conv2d: {filters: 2, kernel: 3}
  - batchnorm
  - relu
  - flatten
  - dense: {units: )" +
         std::to_string(classes) + R"(}
train:
  optimizer: {type: sgd, momentum: 0.9}
)" + train;
}

std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  t.backend().download(v.data(), t);
  return v;
}

class InitWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    register_builtin_layers();
    dir_ = ::testing::TempDir() + "init_weights_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  // A checkpoint of the 10-class model drawn from seed 1, its running statistics set apart from
  // their defaults; written to dir_/pre.safetensors.
  std::string pretrained() {
    Config c = parse_config(model(10), dir_ + "pre.yaml");
    Graph g(c);
    g.allocate(*backend_, 4, 1);
    std::vector<float> mean = {0.25f, -0.5f};
    auto bufs = g.buffers();
    backend_->upload(bufs[0].second, mean.data());
    Optimizer opt(c.train.optimizer, g.params(), *backend_);
    for (Param* p : g.params()) saved_[p->name] = values(p->value);
    saved_["batchnorm_1.running_mean"] = mean;
    CheckpointMeta meta;
    meta.config_text = "pretraining";
    save_checkpoint(dir_ + "pre.safetensors", g, opt, meta);
    return dir_ + "pre.safetensors";
  }
  std::string dir_;
  std::unique_ptr<Backend> backend_ = create_backend("cpu", {});
  std::map<std::string, std::vector<float>> saved_;
};

TEST_F(InitWeights, TakesTheTensorsThatFitAndLeavesANewHeadToTheSeed) {
  pretrained();
  std::ofstream(dir_ + "new.yaml") << model(3, "  init: pre.safetensors\n");
  Config c = load_config(dir_ + "new.yaml");  // relative to the config's folder
  EXPECT_EQ(c.train.init, dir_ + "pre.safetensors");
  Graph g(c);
  const InitPlan plan = plan_init(c, g, "");
  EXPECT_EQ(plan.taken,
            (std::vector<std::string>{"conv2d_1.weight", "conv2d_1.bias", "batchnorm_1.weight",
                                      "batchnorm_1.bias", "batchnorm_1.running_mean",
                                      "batchnorm_1.running_var"}));
  EXPECT_EQ(plan.reshaped,
            (std::vector<std::string>{"dense_1.weight ([3, 32] here, [10, 32] in the file)",
                                      "dense_1.bias ([3] here, [10] in the file)"}));
  EXPECT_TRUE(plan.fresh.empty());
  EXPECT_TRUE(plan.optimizer_state);
  EXPECT_FALSE(plan.same_config);
  g.allocate(*backend_, 4, 99);  // another seed: the taken tensors show
  Graph drawn(c);
  drawn.allocate(*backend_, 4, 99);
  load_init(plan, g);
  for (size_t i = 0; i < g.params().size(); ++i) {
    const Param& p = *g.params()[i];
    if (p.name.starts_with("dense_1"))
      EXPECT_EQ(values(p.value), values(drawn.params()[i]->value)) << p.name;
    else
      EXPECT_EQ(values(p.value), saved_[p.name]) << p.name;
  }
  EXPECT_EQ(values(g.buffers()[0].second), saved_["batchnorm_1.running_mean"]);
  const std::string report = init_report(plan);
  EXPECT_NE(report.find("6 of the model's 8 tensors taken"), std::string::npos) << report;
  EXPECT_NE(report.find("skipped, of another shape (drawn from the seed): dense_1.weight"),
            std::string::npos)
      << report;
}

TEST_F(InitWeights, NamesTheTensorsTheFileLacksAndACheckpointOfTheSameConfig) {
  pretrained();
  Config c = parse_config(R"(
input: {shape: [1, 6, 6]}
layers:
  - conv2d: {filters: 2, kernel: 3}
  - relu
  - flatten
  - dense: {units: 10}
  - relu
  - dense: {units: 3}
)",
                          dir_ + "other.yaml");
  c.train.init = dir_ + "pre.safetensors";
  c.train.init_from = "--init";
  Graph g(c);
  const InitPlan plan = plan_init(c, g, "pretraining");
  // dense_1 (32 -> 10) is the pretrained head's shape: taken too.
  EXPECT_EQ(plan.taken, (std::vector<std::string>{"conv2d_1.weight", "conv2d_1.bias",
                                                  "dense_1.weight", "dense_1.bias"}));
  EXPECT_EQ(plan.fresh, (std::vector<std::string>{"dense_2.weight", "dense_2.bias"}));
  EXPECT_TRUE(plan.same_config);
  const std::string report = init_report(plan);
  EXPECT_NE(report.find("not in the file (drawn from the seed): dense_2.weight, dense_2.bias"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("note: it is a checkpoint of this config; to continue that run instead, "
                        "--resume"),
            std::string::npos)
      << report;
}

TEST_F(InitWeights, RefusesAFileWithNoTensorOfTheModel) {
  pretrained();
  Config c = parse_config(R"(
input: {shape: [4]}
layers:
  - {dense: {units: 3}, name: fc}
)",
                          dir_ + "flat.yaml");
  c.train.init = dir_ + "pre.safetensors";
  c.train.init_from = "flat.yaml:9:9: train.init";
  Graph g(c);
  try {
    plan_init(c, g, "");
    FAIL() << "no tensor of the model is in the file";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), ExitCode::kConfig);
    EXPECT_NE(e.cause().find("flat.yaml:9:9: train.init: none of the tensors of '" + dir_ +
                             "pre.safetensors' fits the model by name and shape (the file has "
                             "conv2d_1.weight, "),
              std::string::npos)
        << e.cause();
    EXPECT_NE(e.cause().find("the model fc.weight, fc.bias"), std::string::npos) << e.cause();
    EXPECT_NE(e.hint().find("'name:'"), std::string::npos) << e.hint();
  }
}

TEST_F(InitWeights, RefusesAMissingFileAndAFileThatIsNoCheckpoint) {
  Config c = parse_config(model(3), dir_ + "m.yaml");
  Graph g(c);
  c.train.init = dir_ + "missing.safetensors";
  c.train.init_from = "--init";
  try {
    plan_init(c, g, "");
    FAIL() << "missing file";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.cause(), "--init: checkpoint '" + dir_ + "missing.safetensors' does not exist");
  }
  std::ofstream(dir_ + "notes.txt") << "name: not a checkpoint\n";
  c.train.init = dir_ + "notes.txt";
  try {
    plan_init(c, g, "");
    FAIL() << "a text file";
  } catch (const CheckpointError& e) {
    EXPECT_NE(e.cause().find("--init: checkpoint '" + dir_ +
                             "notes.txt' is unusable: it is not a "
                             ".safetensors file"),
              std::string::npos)
        << e.cause();
    EXPECT_NE(e.hint().find("give a .safetensors checkpoint"), std::string::npos) << e.hint();
  }
}

}  // namespace
}  // namespace tandem
