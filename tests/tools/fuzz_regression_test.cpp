// Every input a fuzz target found a fault with (a crash, a sanitizer report, a hang, a runaway
// allocation), committed in tests/fuzz/regressions/TARGET/, run through that target's own code
// (tests/fuzz/targets.h): read, or refused with a tandem::Error, and nothing else. The sanitizer
// build of the suite (CI) checks them under ASan and UBSan too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "tests/fuzz/targets.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

TEST(FuzzRegressions, EveryCommittedInputIsReadOrRefusedByItsTarget) {
  const std::map<std::string, std::function<void(const uint8_t*, size_t)>> targets = {
      {"image", fuzz::image_one},
      {"idx", fuzz::idx_one},
      {"cifar", fuzz::cifar_one},
      {"config", fuzz::config_one},
      {"safetensors", fuzz::safetensors_one},
      {"onnx", fuzz::onnx_one}};
  const fs::path root = fs::path(TANDEM_SOURCE_DIR) / "tests/fuzz/regressions";
  int inputs = 0;
  for (const auto& dir : fs::directory_iterator(root)) {
    if (!dir.is_directory()) continue;  // README.md
    const std::string target = dir.path().filename().string();
    ASSERT_TRUE(targets.count(target)) << "no fuzz target named " << target;
    for (const auto& file : fs::directory_iterator(dir.path())) {
      std::ifstream in(file.path(), std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
      SCOPED_TRACE(file.path().string());
      EXPECT_NO_THROW(targets.at(target)(bytes.data(), bytes.size()));
      ++inputs;
    }
  }
  EXPECT_GE(inputs, 2);
}

}  // namespace
}  // namespace tandem
