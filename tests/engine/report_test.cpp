// Metrics files: the CSV columns with and without a validation split, and JSON lines.
#include "engine/report.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace tandem
