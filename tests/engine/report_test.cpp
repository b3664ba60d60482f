// Metrics files: the CSV columns with and without a validation split, and JSON lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "engine/callbacks/metrics_file.h"
#include "engine/epoch_figures.h"
#include "engine/json_text.h"

namespace tandem {
namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

EpochStats epoch(int64_t n, bool val) {
  EpochStats e;
  e.device = "cpu";
  e.epoch = n;
  e.train_loss = 0.5, e.train_accuracy = 0.75, e.test_loss = 0.625, e.test_accuracy = 0.7;
  e.seconds = 1.5, e.images_per_second = 1000, e.learning_rate = 0.01, e.peak_memory_bytes = 42;
  e.skipped_steps = 3;
  e.has_val = val;
  e.val_loss = 0.875, e.val_accuracy = 0.6875;
  return e;
}

constexpr const char* kColumns =
    "device,epoch,train_loss,train_accuracy,test_loss,test_accuracy,seconds,images_per_second,"
    "learning_rate,peak_memory_bytes,skipped_steps";

TEST(MetricsWriter, CsvWithoutValidationHasNoValColumns) {
  const std::string path = ::testing::TempDir() + "report_plain.csv";
  {
    MetricsWriter w(path);
    w.write(epoch(1, false));
  }
  std::vector<std::string> lines = lines_of(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], kColumns);
  EXPECT_EQ(lines[1], "cpu,1,0.5,0.75,0.625,0.7,1.5000,1000.0,0.01,42,3");
}

TEST(MetricsWriter, CsvWithValidationEndsInValLossAndAccuracy) {
  const std::string path = ::testing::TempDir() + "report_val.csv";
  {
    MetricsWriter w(path, true);
    w.write(epoch(1, true));
    w.write(epoch(2, false));  // no validation pass this epoch: empty cells, not zeros
  }
  std::vector<std::string> lines = lines_of(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], std::string(kColumns) + ",val_loss,val_accuracy");
  EXPECT_EQ(lines[1], "cpu,1,0.5,0.75,0.625,0.7,1.5000,1000.0,0.01,42,3,0.875,0.6875");
  EXPECT_EQ(lines[2], "cpu,2,0.5,0.75,0.625,0.7,1.5000,1000.0,0.01,42,3,,");
}

TEST(MetricsWriter, JsonLinesCarryValKeysOnlyWhereAnEpochHasThem) {
  const std::string path = ::testing::TempDir() + "report_val.jsonl";
  {
    MetricsWriter w(path, true);
    w.write(epoch(1, true));
    w.write(epoch(2, false));
  }
  std::vector<std::string> lines = lines_of(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("\"val_loss\": 0.875, \"val_accuracy\": 0.6875}"), std::string::npos)
      << lines[0];
  EXPECT_EQ(lines[1].find("val_loss"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("\"skipped_steps\": 3"), std::string::npos) << lines[1];
}

// A --log-every window of only skipped steps has no mean loss or accuracy: the step line says
// null (JSON has no nan), and the line stays JSON that every reader takes.
TEST(MetricsWriter, AStepWithoutAFiniteLossWritesNullNotNan) {
  const std::string path = ::testing::TempDir() + "report_nan_step.jsonl";
  {
    MetricsWriter w(path);
    LoggedStep s;
    s.device = "cpu";
    s.step = 20;
    s.epoch = 0.5;
    s.loss = NAN;
    s.accuracy = NAN;
    s.learning_rate = 0.01;
    s.images_per_second = INFINITY;
    w.write_step(s);
  }
  const std::vector<std::string> lines = lines_of(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(
      lines[0],
      "{\"device\": \"cpu\", \"step\": 20, \"epoch\": 0.5, \"loss\": null, \"accuracy\": null, "
      "\"learning_rate\": 0.01, \"images_per_second\": null}");
}

TEST(JsonText, NumbersAreNullWhenNotFiniteAndStringsStayValidUtf8) {
  EXPECT_EQ(json_number(0.1234567), "0.123457");
  EXPECT_EQ(json_number(1500, "{:.1f}"), "1500.0");
  EXPECT_EQ(json_number(NAN), "null");
  EXPECT_EQ(json_number(-INFINITY), "null");
  EXPECT_EQ(json_string("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(json_string("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // valid UTF-8 kept
  EXPECT_EQ(json_string("caf\xe9"), "\"caf\\\\xe9\"");       // Latin-1: \\xe9
}

// The one record of an epoch's figures: each figure names one place in EpochStats, once, and a
// figure a checkpoint's history carries is one that reads back (a real or a count). The metrics
// file's columns are the table's, in its order.
TEST(EpochFigures, EachFigureIsStoredOnceAndTheFilesFollowTheTable) {
  std::set<std::string> names;
  for (const EpochFigure& f : epoch_figures()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name << " twice";
    EXPECT_EQ((f.real != nullptr) + (f.count != nullptr) + (f.bytes != nullptr), 1) << f.name;
    if (f.outputs & kHistory) {
      EXPECT_EQ(f.bytes, nullptr) << f.name;
    }
  }
  std::string header = "device";
  for (const EpochFigure& f : epoch_figures())
    if ((f.outputs & kMetricsFile) && f.when != EpochFigure::kWithValidation)
      header += std::string(",") + f.name;
  EXPECT_EQ(header, kColumns);
  EpochStats e = epoch(4, true);
  e.loss_scale = 0;
  int tensorboard = 0;
  for (const EpochFigure& f : epoch_figures())
    tensorboard += (f.outputs & kTensorBoard) && has_figure(e, f);
  EXPECT_EQ(tensorboard, 8);  // losses and accuracies of three splits, rate, throughput
  e.loss_scale = 1024;
  const auto scale =
      std::find_if(epoch_figures().begin(), epoch_figures().end(),
                   [](const EpochFigure& f) { return std::string(f.name) == "loss_scale"; });
  ASSERT_NE(scale, epoch_figures().end());
  EXPECT_TRUE(has_figure(e, *scale));
  EXPECT_EQ(figure_value(e, *scale), 1024);
}

}  // namespace
}  // namespace tandem
