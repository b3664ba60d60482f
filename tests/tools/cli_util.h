// Running the built trainer executable from tests: its exit status and everything it printed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tandem::test {

struct CliResult {
  int status;
  std::string out;  // stdout and stderr together
};

// A shell command's exit status and output.
inline CliResult run_command(const std::string& command) {
  const std::string cmd = command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The trainer started by `launcher` (a command that takes the trainer's command line after it).
inline CliResult run_trainer_with(const std::string& launcher, const std::string& args) {
  return run_command(launcher + " " + std::string(TANDEM_TRAINER) + " " + args);
}

inline CliResult run_trainer(const std::string& args) { return run_trainer_with("", args); }

inline std::string source_path(const std::string& rel) {
  return std::string(TANDEM_SOURCE_DIR) + "/" + rel;
}

// ctest runs tests as parallel processes, and several write the same file: each writes its own
// copy and renames it into place, so a reader never sees a half-written file.
// The small model and synthetic data the CLI tests train (well under a second an epoch); a
// config is this plus its train section.
inline std::string small_model_yaml(const std::string& name) {
  return "name: " + name + R"(
input: {shape: [1, 12, 12]}
layers:
  - conv2d: {filters: 4, kernel: 3}
  - relu
  - maxpool: {kernel: 2}
  - flatten
  - dense: {units: 4}
data: {format: synthetic, classes: 4, train_size: 256, test_size: 64, seed: 3}
)";
}

// An empty path under the test temp folder: what a previous run left there is removed.
// A folder of the running test's own under the temporary folder (ending in '/'): ctest runs tests
// in parallel, and two that wrote the same file name would read each other's.
inline std::string test_temp_dir() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = t ? std::string(t->test_suite_name()) + "." + t->name() : "outside-a-test";
  for (char& c : name)
    if (c == '/') c = '_';  // parameterised tests: "Suite/Test/0"
  const std::string dir = ::testing::TempDir() + name + "/";
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string fresh_dir(const std::string& name) {
  const std::string dir = test_temp_dir() + name;
  std::filesystem::remove_all(dir);
  return dir;
}

inline std::string write_temp_file(const std::string& name, const std::string& text) {
  std::string path = test_temp_dir() + name;
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  std::ofstream(tmp) << text;
  std::rename(tmp.c_str(), path.c_str());
  return path;
}

}  // namespace tandem::test
