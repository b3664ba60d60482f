// CPU/GPU parity of whole training runs: the same config and seed give the same per-step losses.
// Skipped (with the reason) where no GPU can be used.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "engine/backend_registry.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/precision.h"
#include "engine/trainer.h"

namespace tandem {
namespace {

std::string source(const std::string& rel) { return std::string(TANDEM_SOURCE_DIR) + "/" + rel; }

std::vector<double> losses_on(const std::string& device, Config config, const DataSplits& data,
                              int64_t steps) {
  BackendOptions o;
  o.deterministic = true;
  auto backend = create_backend(device, o);
  Graph graph(config);
  auto loss = make_loss(config.loss);
  graph.allocate(*backend, config.train.batch_size, config.train.seed);
  Batcher train_src(data.train, config.train.batch_size, true, config.train.seed, config.data.mean,
                    config.data.std);
  TrainOptions opts;
  opts.progress = false;
  opts.max_steps = steps;
  return train(config, graph, *loss, *backend, train_src, nullptr, opts).step_losses;
}

class GpuParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    try {
      create_backend("gpu", {});
    } catch (const DeviceError& e) {
      GTEST_SKIP() << "no usable GPU: " << e.cause();
    }
  }
};

TEST_P(GpuParity, PerStepLossesAgreeWithTheCpu) {
  Config config = load_config(source("configs/" + GetParam() + ".yaml"));
  // LeNet: 50 steps of the real sample; the others: the first steps on synthetic data.
  const int64_t steps = GetParam() == "lenet" ? 50 : 5;
  if (config.data.format != "mnist") {
    config.data.format = "synthetic";
    config.data.train_size = config.train.batch_size * steps;
    config.data.test_size = 0;
  }
  DataSplits data = load_data(config.data, config.input, 10);
  std::vector<double> cpu = losses_on("cpu", config, data, steps);
  std::vector<double> gpu = losses_on("gpu", config, data, steps);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_NEAR(gpu[i], cpu[i], 1e-3 * std::fabs(cpu[i])) << GetParam() << " step " << i + 1;
}

INSTANTIATE_TEST_SUITE_P(Configs, GpuParity,
                         ::testing::Values("lenet", "mlp", "cifar_cnn", "cifar_bn", "cifar_resnet"));

// 16-bit training on the GPU (bf16, fp16) against the CPU's fp32 run of LeNet: the first 20 steps
// within the precision's parity tolerance (engine/precision.h), the verdict of a side-by-side
// run (tools/app.cpp's compare_runs checks 20 steps). Skipped where the GPU has no such type.
class GpuPrecisionParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::unique_ptr<Backend> gpu;
    try {
      gpu = create_backend("gpu", {});
    } catch (const DeviceError& e) {
      GTEST_SKIP() << "no usable GPU: " << e.cause();
    }
    std::string why;
    if (!gpu->supports_dtype(activation_dtype(parse_precision(GetParam())), &why))
      GTEST_SKIP() << "no " << GetParam() << " on this GPU: " << why;
  }
};

TEST_P(GpuPrecisionParity, LeNetLossesAgreeWithTheCpuInFp32) {
  Config config = load_config(source("configs/lenet.yaml"));
  DataSplits data = load_data(config.data, config.input, 10);
  constexpr int64_t kSteps = 20;
  std::vector<double> cpu = losses_on("cpu", config, data, kSteps);
  config.precision = GetParam();
  std::vector<double> gpu = losses_on("gpu", config, data, kSteps);
  const double tolerance = parity_tolerance(parse_precision(GetParam()));
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_NEAR(gpu[i], cpu[i], tolerance * std::fabs(cpu[i])) << GetParam() << " step " << i + 1;
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuPrecisionParity, ::testing::Values("bf16", "fp16"),
                         [](const auto& info) { return info.param; });

TEST(GpuDeterminism, TwoDeterministicGpuRunsGiveIdenticalLosses) {
  try {
    create_backend("gpu", {});
  } catch (const DeviceError& e) {
    GTEST_SKIP() << "no usable GPU: " << e.cause();
  }
  Config config = load_config(source("configs/lenet.yaml"));
  DataSplits data = load_data(config.data, config.input, 10);
  EXPECT_EQ(losses_on("gpu", config, data, 20), losses_on("gpu", config, data, 20));
}

}  // namespace
}  // namespace tandem
