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

// An empty path under the test temp folder: what a previous run left there is removed.
inline std::string fresh_dir(const std::string& name) {
  const std::string dir = test_temp_dir() + name;
  std::filesystem::remove_all(dir);
  return dir;
}

// ctest runs tests as parallel processes, and several write the same file: each writes its own
// copy and renames it into place, so a reader never sees a half-written file.
inline std::string write_temp_file(const std::string& name, const std::string& text) {
  std::string path = test_temp_dir() + name;
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  std::ofstream(tmp) << text;
  std::rename(tmp.c_str(), path.c_str());
  return path;
}

// NAME.yaml: the small model for one epoch in batches of 32 (well under a second); its path.
inline std::string one_epoch_config(const std::string& name) {
  return write_temp_file(name + ".yaml",
                         small_model_yaml(name) + "train: {epochs: 1, batch_size: 32}\n");
}

// A model of dense layers over synthetic [1, side, side] samples: flatten, a dense layer and a
// relu for each of `hidden`, then a dense layer of one unit per class.
struct DenseModel {
  int side = 8;
  std::vector<int> hidden = {};
  int classes = 4;
  std::string data;   // the data section beside format and classes: "train_size: 32, seed: 3"
  std::string train;  // the train section's keys: "epochs: 1, batch_size: 8"
};

// NAME.yaml of that model, named NAME; its path.
inline std::string write_dense_config(const std::string& name, const DenseModel& m) {
  const std::string side = std::to_string(m.side), classes = std::to_string(m.classes);
  std::string yaml = "name: " + name + "\ninput: {shape: [1, " + side + ", " + side + "]}\n";
  yaml += "layers:\n  - flatten\n";
  for (int units : m.hidden)
    yaml += "  - dense: {units: " + std::to_string(units) + "}\n  - relu\n";
  yaml += "  - dense: {units: " + classes + "}\n";
  yaml += "data: {format: synthetic, classes: " + classes + ", " + m.data + "}\n";
  return write_temp_file(name + ".yaml", yaml + "train: {" + m.train + "}\n");
}

}  // namespace tandem::test
