// --tensorboard: event files that an independent reader (Python's protobuf and crc32c, with
// TensorBoard's field numbers) parses, both CRCs of every record checked, scalars read back.
#include "tools/tensorboard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "tests/tools/cli_util.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

// The reader's report of a file: tag -> step -> value.
struct Scalars {
  std::string version;
  std::map<std::string, std::map<int64_t, double>> values;
};

bool python_reader_present(std::string* why) {
  const CliResult r = run_command("/usr/bin/python3 -c 'import google.protobuf, crc32c'");
  if (r.status == 0) return true;
  *why =
      "no /usr/bin/python3 with python3-protobuf and python3-crc32c (tools/setup.sh installs "
      "them): " +
      r.out;
  return false;
}

CliResult read_back(const std::string& file) {
  return run_command("/usr/bin/python3 " + source_path("tests/tools/read_tfevents.py") + " '" +
                     file + "'");
}

Scalars parse(const std::string& text) {
  Scalars s;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string tag;
    words >> tag;
    if (tag == "file_version") {
      words >> s.version;
      continue;
    }
    int64_t step = 0;
    double value = 0;
    words >> step >> value;
    s.values[tag][step] = value;
  }
  return s;
}

std::string the_event_file(const std::string& folder) {
  std::string found;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      found = e.path().string();
  return found;
}

TEST(TensorBoard, MaskedCrc32cOfKnownData) {
  if (!tensorboard_available()) GTEST_SKIP() << "this build has no TensorBoard output";
  // CRC32C("123456789") is 0xE3069283 (the iSCSI check value); masked: rotated right 15 plus
  // 0xA282EAD8.
  const uint32_t crc = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xA282EAD8u);
}

TEST(TensorBoard, ATrainingRunsEventsReadBackWithTheirCrcsAndScalars) {
  if (!tensorboard_available()) GTEST_SKIP() << "this build has no TensorBoard output";
  std::string why;
  if (!python_reader_present(&why)) GTEST_SKIP() << why;
  const std::string dir = fresh_dir("tb");
  const std::string metrics = test_temp_dir() + "tb.jsonl";
  const std::string config = write_temp_file(
      "tb.yaml", small_model_yaml("tb") + "train: {epochs: 2, batch_size: 32, seed: 1}\n");
  const CliResult r = run_trainer("--config " + config + " --quiet --log-every 4 --tensorboard " +
                                  dir + " --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string file = the_event_file(dir + "/cpu");
  ASSERT_FALSE(file.empty()) << "no event file in " << dir << "/cpu";
  const CliResult read = read_back(file);
  ASSERT_EQ(read.status, 0) << read.out;
  const Scalars s = parse(read.out);
  EXPECT_EQ(s.version, "brain.Event:2");
  // 256 samples in batches of 32: 8 steps an epoch, a logged step every 4: steps 4, 8, 12, 16.
  ASSERT_EQ(s.values.count("step/loss"), 1u) << read.out;
  EXPECT_EQ(s.values.at("step/loss").size(), 4u) << read.out;
  for (const char* tag : {"step/accuracy", "step/learning_rate", "step/images_per_second",
                          "epoch/train_loss", "epoch/test_accuracy", "epoch/learning_rate"})
    EXPECT_EQ(s.values.count(tag), 1u) << tag << " in " << read.out;
  // The scalars are the metrics file's figures (as floats).
  std::ifstream in(metrics);
  const std::regex epoch_line(R"(^\{"device": "cpu", "epoch": ([0-9]+), "train_loss": ([^,]+),)");
  const std::regex step_line(
      R"(^\{"device": "cpu", "step": ([0-9]+), "epoch": [^,]+, "loss": ([^,]+),)");
  int epochs = 0, steps = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, epoch_line)) {
      ++epochs;
      EXPECT_NEAR(s.values.at("epoch/train_loss").at(std::stoll(m[1])), std::stod(m[2]),
                  1e-5 * std::fabs(std::stod(m[2])))
          << line;
    } else if (std::regex_search(line, m, step_line)) {
      ++steps;
      EXPECT_NEAR(s.values.at("step/loss").at(std::stoll(m[1])), std::stod(m[2]),
                  1e-5 * std::fabs(std::stod(m[2])))
          << line;
    }
  }
  EXPECT_EQ(epochs, 2);
  EXPECT_EQ(steps, 4);
}

// A run that scales its loss (fp16) logs the scale per epoch and per logged step; others do not.
TEST(TensorBoard, TheLossScaleIsLoggedWhereThereIsOne) {
  if (!tensorboard_available()) GTEST_SKIP() << "this build has no TensorBoard output";
  std::string why;
  if (!python_reader_present(&why)) GTEST_SKIP() << why;
  const std::string dir = fresh_dir("tb_scale");
  {
    TensorBoardWriter w(dir, "gpu");
    EpochStats e;
    e.epoch = 1;
    e.loss_scale = 32768;
    w.epoch(e);
    e.epoch = 2;
    e.loss_scale = 0;  // none
    w.epoch(e);
    LoggedStep s;
    s.step = 10;
    s.loss_scale = 65536;
    w.step(s);
  }
  const CliResult read = read_back(the_event_file(dir + "/gpu"));
  ASSERT_EQ(read.status, 0) << read.out;
  const Scalars s = parse(read.out);
  ASSERT_EQ(s.values.count("epoch/loss_scale"), 1u) << read.out;
  EXPECT_EQ(s.values.at("epoch/loss_scale").size(), 1u) << read.out;
  EXPECT_EQ(s.values.at("epoch/loss_scale").at(1), 32768);
  ASSERT_EQ(s.values.count("step/loss_scale"), 1u) << read.out;
  EXPECT_EQ(s.values.at("step/loss_scale").at(10), 65536);
}

TEST(TensorBoard, TheReaderRefusesADamagedRecord) {
  if (!tensorboard_available()) GTEST_SKIP() << "this build has no TensorBoard output";
  std::string why;
  if (!python_reader_present(&why)) GTEST_SKIP() << why;
  const std::string dir = fresh_dir("tb_damaged");
  {
    TensorBoardWriter w(dir, "cpu");
    w.scalar("epoch/train_loss", 1, 0.5);
  }
  const std::string file = the_event_file(dir + "/cpu");
  ASSERT_EQ(read_back(file).status, 0);
  // One bit of the last record's data flipped: its data CRC no longer matches.
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-6, std::ios::end);
  char c = 0;
  f.get(c);
  f.seekp(-6, std::ios::end);
  f.put(static_cast<char>(c ^ 1));
  f.close();
  const CliResult damaged = read_back(file);
  EXPECT_NE(damaged.status, 0) << damaged.out;
  EXPECT_NE(damaged.out.find("CRC"), std::string::npos) << damaged.out;
}

}  // namespace
}  // namespace tandem::test
