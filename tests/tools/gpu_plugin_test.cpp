// A CUDA build's trainer reaches the GPU backend through libtandem_gpu.so beside it: without the
// plugin, or without a library the plugin needs, the trainer still starts and trains on the CPU,
// and a GPU run says what is missing and what to do.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "engine/backend_registry.h"
#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using test::run_command;

const fs::path kPlugin = fs::path(TANDEM_TRAINER).parent_path() / "libtandem_gpu.so";

// A copy of the trainer in a folder of its own, with a file of `plugin_text` as its plugin when
// given.
std::string trainer_copy(const std::string& name, const std::string& plugin_text = "") {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  // With the engine it needs: the copies find it beside them, as the README says to keep them.
  fs::copy_file(TANDEM_TRAINER, dir / "trainer");
  fs::copy_file(fs::path(TANDEM_TRAINER).parent_path() / "libtandem_engine.so",
                dir / "libtandem_engine.so");
  if (!plugin_text.empty()) std::ofstream(dir / "libtandem_gpu.so") << plugin_text;
  return (dir / "trainer").string();
}

std::string config(const std::string& name) {
  return test::write_temp_file(name + ".yaml", test::small_model_yaml(name) +
                                                   "train: {epochs: 1, batch_size: 32}\n");
}

class GpuPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!build_has_cuda()) GTEST_SKIP() << "a CPU-only build has no GPU plugin";
  }
};

TEST_F(GpuPlugin, TheTrainerLinksNoCudaLibraryAndThePluginIsBesideIt) {
  ASSERT_TRUE(fs::exists(kPlugin)) << kPlugin;
  CliResult ldd = run_command("ldd " + std::string(TANDEM_TRAINER));
  ASSERT_EQ(ldd.status, 0) << ldd.out;
  for (const char* lib : {"libcudart", "libcublas", "libcudnn"})
    EXPECT_EQ(ldd.out.find(lib), std::string::npos) << lib << " in\n" << ldd.out;
  CliResult plugin = run_command("ldd " + kPlugin.string());
  EXPECT_NE(plugin.out.find("libcudnn"), std::string::npos) << plugin.out;
}

TEST_F(GpuPlugin, WithoutItTheCpuTrainsAndAGpuRunSaysItIsMissing) {
  const std::string trainer = trainer_copy("no_plugin");
  const std::string missing = (fs::path(trainer).parent_path() / "libtandem_gpu.so").string();
  CliResult cpu =
      run_command(trainer + " --config " + config("no_plugin_cpu") + " --device cpu --quiet");
  EXPECT_EQ(cpu.status, 0) << cpu.out;
  EXPECT_NE(cpu.out.find("cpu: test accuracy"), std::string::npos) << cpu.out;

  CliResult gpu =
      run_command(trainer + " --config " + config("no_plugin_gpu") + " --device gpu --quiet");
  EXPECT_EQ(gpu.status, 5) << gpu.out;
  EXPECT_NE(gpu.out.find("error: this trainer's GPU backend, " + missing + ", is missing\nhint: "
                         "rebuild (cmake --build) so that it is beside the trainer again, or use "
                         "--device cpu"),
            std::string::npos)
      << gpu.out;

  CliResult devices = run_command(trainer + " devices");
  EXPECT_EQ(devices.status, 0) << devices.out;
  EXPECT_NE(devices.out.find("none usable: this trainer's GPU backend, " + missing + ", is missing"),
            std::string::npos)
      << devices.out;
}

TEST_F(GpuPlugin, OneThatDoesNotLoadIsNamedWithTheLoadersReason) {
  const std::string trainer = trainer_copy("bad_plugin", "not a shared library\n");
  CliResult gpu =
      run_command(trainer + " --config " + config("bad_plugin") + " --device gpu --quiet");
  EXPECT_EQ(gpu.status, 5) << gpu.out;
  EXPECT_TRUE(std::regex_search(
      gpu.out, std::regex("error: this trainer's GPU backend could not be loaded \\(.*libtandem_gpu"
                          "\\.so: [^)]+\\)\nhint: rebuild it")))
      << gpu.out;
}

// cuDNN made unreadable in a mount namespace of the test's own (needs root, as CI has): the CPU
// trains, --device all says why it has no GPU, a GPU run names cuDNN and how to install it.
TEST_F(GpuPlugin, WithoutCudnnTheCpuTrainsAndAGpuRunNamesCudnn) {
  CliResult ldd = run_command("ldd " + kPlugin.string());
  std::smatch m;
  const std::regex cudnn_line("libcudnn\\.so\\.[0-9]+ => (/[^ ]+)");
  ASSERT_TRUE(std::regex_search(ldd.out, m, cudnn_line)) << ldd.out;
  const std::string cudnn = fs::canonical(m[1].str()).string();
  const std::string hide = "unshare -m sh -c 'mount --bind /dev/null " + cudnn + " && ";
  if (run_command(hide + "true'").status != 0)
    GTEST_SKIP() << "cannot hide " << cudnn << " here (unshare -m and mount --bind need root)";

  CliResult all = run_command(hide + TANDEM_TRAINER + " --config " + config("no_cudnn") +
                              " --device all --quiet'");
  EXPECT_EQ(all.status, 0) << all.out;
  EXPECT_NE(all.out.find("--device all: the CPU only, because cuDNN could not be loaded ("),
            std::string::npos)
      << all.out;
  EXPECT_NE(all.out.find("cpu: test accuracy"), std::string::npos) << all.out;

  CliResult gpu = run_command(hide + TANDEM_TRAINER + " --config " + config("no_cudnn_gpu") +
                              " --device gpu --quiet'");
  EXPECT_EQ(gpu.status, 5) << gpu.out;
  EXPECT_TRUE(std::regex_search(gpu.out, std::regex("error: cuDNN could not be loaded \\(.*libcudnn"
                                                    "[^)]*\\)\nhint: install cuDNN [0-9]+ for "
                                                    "CUDA [0-9]+ \\(e\\.g\\. apt install cudnn")))
      << gpu.out;
}

}  // namespace
}  // namespace tandem
