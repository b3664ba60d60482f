// The trainer facing files that are not what they claim: FIFOs, devices, folders and enormous
// files where a file is expected are refused at once by name; a checkpoint whose metadata cannot
// belong to the run is refused naming the field; two runs writing one checkpoint folder both
// succeed; names that are not UTF-8 still give checkpoints a strict reader passes. Every run is
// bounded by timeout(1), so a regression that hangs fails instead of stalling the suite.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "tests/tools/timeout_util.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

constexpr int kLimit = 60;  // seconds; every run here takes one or two

// A FIFO at `path` (what was there is removed).
std::string make_fifo(const std::string& path) {
  fs::remove_all(path);
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
  return path;
}

// The small model trained for 2 epochs with a checkpoint each into `dir`; the config's path.
std::string trained(const std::string& name, const std::string& dir) {
  const std::string config = write_temp_file(
      name + ".yaml", small_model_yaml(name) + "train: {epochs: 2, batch_size: 32}\n");
  fs::remove_all(dir);
  const CliResult r =
      run_trainer_within(kLimit, "--config " + config + " --quiet --checkpoint-dir " + dir);
  EXPECT_EQ(r.status, 0) << r.out;
  return config;
}

void expect_refused(const CliResult& r, int status, const std::string& needle) {
  EXPECT_NE(r.status, kTimedOut) << "the trainer hung: " << r.out;
  EXPECT_EQ(r.status, status) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: "), std::string::npos) << r.out;
}

TEST(HostileFiles, PredictOnAFifoIsRefusedAtOnce) {
  const std::string dir = fresh_dir("ckpt");
  trained("hostile_predict_fifo", dir);
  const std::string fifo = make_fifo(test_temp_dir() + "image.png");
  expect_refused(run_trainer_within(kLimit, "predict --checkpoint " + dir + " " + fifo), 4,
                 "the image '" + fifo + "' is a FIFO (named pipe), not a file");
}

TEST(HostileFiles, PredictOnADeviceIsRefusedWithoutReadingIt) {
  const std::string dir = fresh_dir("ckpt");
  trained("hostile_predict_dev", dir);
  expect_refused(run_trainer_within(kLimit, "predict --checkpoint " + dir + " /dev/zero"), 4,
                 "the image '/dev/zero' is a character device, not a file");
}

TEST(HostileFiles, EvalOfAFifoCheckpointIsRefusedAtOnce) {
  const std::string fifo = make_fifo(test_temp_dir() + "model.safetensors");
  expect_refused(run_trainer_within(kLimit, "eval --checkpoint " + fifo), 7,
                 "checkpoint '" + fifo + "' is a FIFO (named pipe), not a file");
}

TEST(HostileFiles, ResumeFromAFifoIsRefusedAtOnce) {
  const std::string fifo = make_fifo(test_temp_dir() + "resume.safetensors");
  const std::string config = one_epoch_config("hostile_resume_fifo");
  expect_refused(run_trainer_within(kLimit, "--config " + config + " --epochs 3 --resume " + fifo),
                 7, "checkpoint '" + fifo + "' is a FIFO (named pipe), not a file");
}

TEST(HostileFiles, AConfigThatIsAFifoADeviceOrEnormousIsRefusedByName) {
  const std::string fifo = make_fifo(test_temp_dir() + "config.yaml");
  expect_refused(run_trainer_within(kLimit, "--config " + fifo), 3,
                 "config file '" + fifo + "' is a FIFO (named pipe), not a file");
  expect_refused(run_trainer_within(kLimit, "--config /dev/zero"), 3,
                 "config file '/dev/zero' is a character device, not a file");
  // Sparse: 20 GiB announced, no disk taken; reading it whole would exhaust memory.
  const std::string big = test_temp_dir() + "big.yaml";
  fs::remove(big);
  { std::ofstream(big) << "name: big\n"; }
  fs::resize_file(big, uint64_t{20} << 30);
  expect_refused(run_trainer_within(kLimit, "--config " + big), 3,
                 "config file '" + big +
                     "' is 20.0 GiB, more than the 16.0 MiB such a file may "
                     "have");
  fs::remove(big);
}

TEST(HostileFiles, MetricsIntoAFifoIsRefusedBeforeTraining) {
  const std::string fifo = make_fifo(test_temp_dir() + "metrics.csv");
  const CliResult r = run_trainer_within(
      kLimit, "--config " + one_epoch_config("hostile_metrics") + " --metrics " + fifo);
  expect_refused(r, 2, "--metrics " + fifo + " is a FIFO (named pipe), not a file to write");
  EXPECT_EQ(r.out.find("Epoch"), std::string::npos) << "training started: " << r.out;
}

TEST(HostileFiles, APlotIntoAFifoIsRefusedBeforeTraining) {
#ifndef TANDEM_WITH_PLPLOT
  GTEST_SKIP() << "this build has no plotting (PLplot was not found)";
#endif
  const std::string fifo = make_fifo(test_temp_dir() + "plot.png");
  const CliResult r = run_trainer_within(
      kLimit, "--config " + one_epoch_config("hostile_plot") + " --plot " + fifo);
  expect_refused(r, 2, "--plot " + fifo + " is a FIFO (named pipe), not a file to write");
  EXPECT_EQ(r.out.find("Epoch"), std::string::npos) << "training started: " << r.out;
}

TEST(HostileFiles, AnMnistFileThatIsAFifoIsRefusedByName) {
  const std::string data = fresh_dir("mnist");
  fs::copy(source_path("datasets/mnist-sample"), data, fs::copy_options::recursive);
  std::string images;
  for (const auto& e : fs::directory_iterator(data))
    if (e.path().filename().string().starts_with("train-images")) images = e.path().string();
  ASSERT_FALSE(images.empty());
  make_fifo(images);
  expect_refused(run_trainer_within(kLimit, "--config " + source_path("configs/lenet.yaml") +
                                                " --data " + data + " --epochs 1"),
                 4, "the data file '" + images + "' is a FIFO (named pipe), not a file");
}

// --- Resume: every metadata field against the run -------------------------------------------

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Replaces `from` by `to` in a checkpoint's header, its length set again.
void edit_header(const std::string& path, const std::string& from, const std::string& to) {
  const std::string bytes = read_bytes(path);
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(bytes[i]);
  std::string header = bytes.substr(8, len);
  const size_t at = header.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  header.replace(at, from.size(), to);
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>(header.size() >> (8 * i));
  std::ofstream(path, std::ios::binary) << length + header + bytes.substr(8 + len);
}

struct BadPosition {
  const char* name;
  std::string from, to, needle;
};

void PrintTo(const BadPosition& p, std::ostream* os) { *os << p.name; }

class ResumeMetadata : public ::testing::TestWithParam<BadPosition> {};

// 256 samples in batches of 32: 8 batches an epoch; epoch-1 is at step 8.
TEST_P(ResumeMetadata, OutOfTheRunsRangeIsRefusedNamingTheField) {
  const BadPosition& c = GetParam();
  const std::string dir = fresh_dir("ckpt");
  const std::string config = trained(std::string("hostile_resume_") + c.name, dir);
  const std::string file = dir + "/epoch-1.safetensors";
  edit_header(file, c.from, c.to);
  const CliResult r =
      run_trainer_within(kLimit, "--config " + config + " --epochs 4 --resume " + file);
  expect_refused(r, 7, c.needle);
  EXPECT_EQ(r.out.find("Epoch 2/"), std::string::npos) << "training went on: " << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    HostileFiles, ResumeMetadata,
    ::testing::Values(
        BadPosition{"EpochBeyondAnyRun", "\"epoch\":\"1\"", "\"epoch\":\"18446744073709551615\"",
                    "metadata 'epoch' is 18446744073709551615"},
        BadPosition{"BatchBeyondTheEpoch", "\"batch\":\"0\"", "\"batch\":\"8\"",
                    "metadata 'batch' is 8, but an epoch of this run has 8 batches"},
        BadPosition{"StepOfAnotherRun", "\"step\":\"8\"", "\"step\":\"9000000000\"",
                    "metadata 'step' is 9000000000, but 1 epoch of 8 batches and 0 batches more "
                    "make 8"},
        BadPosition{"MoreUpdatesThanSteps", "\"updates\":\"8\"", "\"updates\":\"9\"",
                    "metadata 'updates' is 9"},
        BadPosition{"HistoryWithABrokenLine", "\\ncpu,", "\\ncpu,0,1\\ncpu,", "metadata 'history'"},
        BadPosition{"BatchSizeOfAnotherRun", "\"batch_size\":\"32\"", "\"batch_size\":\"31\"",
                    "was trained with batch size 31"},
        BadPosition{"SeedOfAnotherRun", "\"seed\":\"", "\"seed\":\"1", "was trained with seed 1"},
        BadPosition{"LossScaleBeyondFp32", "\"loss_scale\":\"0\"", "\"loss_scale\":\"1e39\"",
                    "metadata 'loss_scale' is 1e+39, beyond an fp32 number"},
        BadPosition{"GoodStepsPastTheGrowthInterval", "\"good_steps\":\"0\"",
                    "\"good_steps\":\"2000\"", "metadata 'good_steps' is 2000, outside 0 to 1999"}),
    [](const ::testing::TestParamInfo<BadPosition>& info) { return std::string(info.param.name); });

// --- Writers ----------------------------------------------------------------------------------

// The strict reader (tests/tools/strict_safetensors.py) on every .safetensors file in `dir`: its
// exit status, -1 without /usr/bin/python3.
int strict_reader_status(const std::string& dir) {
  if (::access("/usr/bin/python3", X_OK) != 0) return -1;
  std::string files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") files += " '" + e.path().string() + "'";
  if (files.empty()) return -3;
  const CliResult r =
      run_command("/usr/bin/python3 " + source_path("tests/tools/strict_safetensors.py") + files);
  EXPECT_EQ(r.status, 0) << r.out;
  return r.status;
}

int temporaries(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().find(".tmp") != std::string::npos;
  return n;
}

// A second run started by mistake into the same folder: both finish, and each file in it is one
// run's complete checkpoint.
TEST(HostileFiles, TwoRunsWritingOneCheckpointFolderBothSucceed) {
  const std::string dir = fresh_dir("shared");
  const std::string config =
      write_temp_file("hostile_two_runs.yaml", small_model_yaml("hostile_two_runs") +
                                                   "train: {epochs: 4, batch_size: 32}\n");
  const std::string run = "timeout -k 5 " + std::to_string(kLimit) + " " + TANDEM_TRAINER +
                          " --config " + config + " --quiet --checkpoint-dir " + dir;
  const CliResult r = run_command(run + " --seed 1 > " + test_temp_dir() + "a.out 2>&1 & a=$!; " +
                                  run + " --seed 2 > " + test_temp_dir() + "b.out 2>&1 & b=$!; " +
                                  "wait $a; echo \"a=$?\"; wait $b; echo \"b=$?\"");
  EXPECT_NE(r.out.find("a=0"), std::string::npos) << r.out << read_bytes(test_temp_dir() + "a.out");
  EXPECT_NE(r.out.find("b=0"), std::string::npos) << r.out << read_bytes(test_temp_dir() + "b.out");
  EXPECT_EQ(temporaries(dir), 0);
  for (int epoch = 1; epoch <= 4; ++epoch) {
    const std::string file = dir + "/epoch-" + std::to_string(epoch) + ".safetensors";
    const CliResult eval = run_trainer_within(kLimit, "eval --quiet --checkpoint " + file);
    EXPECT_EQ(eval.status, 0) << eval.out;
  }
  const int strict = strict_reader_status(dir);
  if (strict == -1) GTEST_SKIP() << "no /usr/bin/python3 to run the strict reader";
}

// Class folders named in Latin-1, not UTF-8: training works, and its checkpoints pass the strict
// reader, with the name written so that it can still be recognised.
TEST(HostileFiles, ClassNamesThatAreNotUtf8GiveCheckpointsAStrictReaderPasses) {
  const std::string data = fresh_dir("latin1");
  fs::copy(source_path("datasets/mnist-png-sample"), data, fs::copy_options::recursive);
  for (const char* split : {"train", "test"})
    fs::rename(fs::path(data) / split / "7", fs::path(data) / split / "sept\xe9");
  const std::string dir = fresh_dir("ckpt");
  const CliResult r =
      run_trainer_within(kLimit, "--config " + source_path("configs/lenet_png.yaml") + " --data " +
                                     data + " --epochs 1 --quiet --checkpoint-dir " + dir);
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string bytes = read_bytes(dir + "/epoch-1.safetensors");
  // \xe9 in the list of names, a JSON string in a JSON string: each backslash escaped twice.
  EXPECT_NE(bytes.find(R"(sept\\\\xe9)"), std::string::npos) << "the name as written";
  const int strict = strict_reader_status(dir);
  if (strict == -1) GTEST_SKIP() << "no /usr/bin/python3 to run the strict reader";
}

}  // namespace
}  // namespace tandem::test
