// The progress bar within the terminal's width, and the number formats of the user-facing output.
#include "engine/progress.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace {

using tandem::fit_fields;
using tandem::format_loss;
using tandem::progress_line;
using tandem::ProgressFigures;

TEST(Progress, LossHasFourDecimalsAtEveryMagnitudeARunReaches) {
  EXPECT_EQ(format_loss(0.15), "0.1500");
  EXPECT_EQ(format_loss(2.302585), "2.3026");
  EXPECT_EQ(format_loss(99999.5), "99999.5000");
  // A loss growing 2.3 -> 85,700,000 keeps one form (it used to turn into "8.57e+07").
  EXPECT_EQ(format_loss(8.57e7), "85700000.0000");
  EXPECT_EQ(format_loss(-2.5e7), "-25000000.0000");
  EXPECT_EQ(format_loss(1.30131966e26), "1.3013e+26");
  EXPECT_EQ(format_loss(std::nan("")), "nan");
  EXPECT_EQ(format_loss(std::numeric_limits<double>::infinity()), "inf");
}

TEST(Progress, AccuracyIsAPercentageWithTwoDecimals) {
  EXPECT_EQ(tandem::format_accuracy(0.97126), "97.13%");
  EXPECT_EQ(tandem::format_accuracy(1.0), "100.00%");
  EXPECT_EQ(tandem::format_accuracy(0.0), "0.00%");
}

TEST(Progress, CountsAndBytesAndDurations) {
  EXPECT_EQ(tandem::format_count(1234567.4), "1,234,567");
  EXPECT_EQ(tandem::format_count(-1234), "-1,234");
  EXPECT_EQ(tandem::format_bytes(512), "512 bytes");
  EXPECT_EQ(tandem::format_bytes(uint64_t{5} << 30), "5.0 GiB");
  EXPECT_EQ(tandem::format_bytes(uint64_t{3} << 40), "3072.0 GiB");
  EXPECT_EQ(tandem::format_bytes(3u << 20), "3.0 MiB");
  EXPECT_EQ(tandem::format_duration(3.25), "3.2s");
  EXPECT_EQ(tandem::format_duration(64), "1m 04s");
  EXPECT_EQ(tandem::format_duration(3720), "1h 02m");
}

ProgressFigures midway() {
  ProgressFigures f;
  f.done = 412;
  f.total = 1875;
  f.elapsed = 41.2;
  f.run_left = 1520;
  f.loss = 0.3141;
  f.accuracy = 0.9034;
  f.images_per_second = 12345;
  return f;
}

TEST(ProgressLine, HoldsEveryFieldWhereTheWidthAllows) {
  const std::string l = progress_line(midway(), 200);
  EXPECT_EQ(l,
            "  412/1,875 [======>.......................] - ETA 2m 26s (run 27m 46s) - loss "
            "0.3141 - acc 90.34% - 12,345 img/s");
}

TEST(ProgressLine, FitsEveryWidthFromWideToNarrow) {
  for (int width = 20; width <= 160; ++width) {
    const std::string l = progress_line(midway(), width);
    EXPECT_LE(static_cast<int>(l.size()), width) << l;
    EXPECT_NE(l.find("412/1,875"), std::string::npos) << l;
  }
}

TEST(ProgressLine, TheBarNarrowsBeforeAFieldGoes) {
  const std::string l = progress_line(midway(), 100);
  EXPECT_LE(l.size(), 100u) << l;
  for (const char* field : {"ETA 2m 26s", "(run 27m 46s)", "loss 0.3141", "acc 90.34%", "img/s"})
    EXPECT_NE(l.find(field), std::string::npos) << field << " in " << l;
  EXPECT_NE(l.find(" [=="), std::string::npos) << l;
  EXPECT_EQ(l.find(std::string(30, '.')), std::string::npos) << "the bar kept its 30: " << l;
}

TEST(ProgressLine, DropsImagesPerSecondThenTheRunsEtaThenTheBarThenAccuracy) {
  const std::string at78 = progress_line(midway(), 78);
  EXPECT_EQ(at78.find("img/s"), std::string::npos) << at78;
  EXPECT_NE(at78.find("(run 27m 46s)"), std::string::npos) << at78;
  EXPECT_NE(at78.find(" ["), std::string::npos) << at78;
  const std::string at70 = progress_line(midway(), 70);
  EXPECT_EQ(at70.find("(run "), std::string::npos) << at70;
  EXPECT_NE(at70.find(" ["), std::string::npos) << at70;
  const std::string at60 = progress_line(midway(), 60);
  EXPECT_EQ(at60.find("["), std::string::npos) << at60;
  EXPECT_NE(at60.find("acc 90.34%"), std::string::npos) << at60;
  const std::string at45 = progress_line(midway(), 45);
  EXPECT_EQ(at45.find("acc"), std::string::npos) << at45;
  EXPECT_EQ(at45, "  412/1,875 - ETA 2m 26s - loss 0.3141");
}

// fp16's loss scale is shown while there is room, and is the first field to go.
TEST(ProgressLine, ShowsTheLossScaleWhereThereIsRoomAndDropsItFirst) {
  ProgressFigures f = midway();
  f.loss_scale = 65536;
  const std::string wide = progress_line(f, 200);
  EXPECT_NE(wide.find(" - 12,345 img/s - scale 65,536"), std::string::npos) << wide;
  const std::string at100 = progress_line(f, 100);
  EXPECT_EQ(at100.find("scale"), std::string::npos) << at100;
  EXPECT_NE(at100.find("img/s"), std::string::npos) << at100;
  for (int width = 20; width <= 160; ++width)
    EXPECT_LE(static_cast<int>(progress_line(f, width).size()), width);
  f.loss_scale = 0.5;
  EXPECT_NE(progress_line(f, 200).find("scale 0.5"), std::string::npos);
  f.final = true;  // the epoch's closing line gives the scale among its fields instead
  EXPECT_EQ(progress_line(f, 200).find("scale"), std::string::npos);
}

TEST(ProgressLine, TheClosingLineGivesTheEpochsTrainingTime) {
  ProgressFigures f = midway();
  f.done = f.total;
  f.final = true;
  const std::string l = progress_line(f, 200);
  EXPECT_NE(l.find("1,875/1,875 [==============================] - 41.2s train - loss"),
            std::string::npos)
      << l;
  EXPECT_EQ(l.find("ETA"), std::string::npos) << l;
}

TEST(FitFields, BreaksBetweenFieldsNeverInsideOne) {
  const std::vector<std::string> fields = {"val_loss 0.2500", "val_acc 91.00%", "test_loss 0.2400",
                                           "test_acc 91.50%", "peak mem 12.0 MiB"};
  const std::string head(60, 'x');
  const std::vector<std::string> lines = fit_fields(head, fields, 79);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], head + " - val_loss 0.2500");
  EXPECT_EQ(lines[1], "  val_acc 91.00% - test_loss 0.2400 - test_acc 91.50% - peak mem 12.0 MiB");
  for (const std::string& l : lines) EXPECT_LE(l.size(), 79u);
  // Without a width limit (a file), one line.
  EXPECT_EQ(fit_fields(head, fields, 1 << 20).size(), 1u);
}

TEST(FitFields, AStartUpLineBreaksAfterItsCommasUnderItsText) {
  const std::vector<std::string> lines =
      fit_fields("Run    5 epochs",
                 {"batch 64", "sgd lr 0.01 momentum 0.9", "schedule constant",
                  "loss softmax_cross_entropy", "seed 42"},
                 50, ", ", 7);
  EXPECT_EQ(lines, (std::vector<std::string>{"Run    5 epochs, batch 64,",
                                             "       sgd lr 0.01 momentum 0.9, schedule constant,",
                                             "       loss softmax_cross_entropy, seed 42"}));
}

// The bar's output, as a terminal of `width` columns or a file would get it.
std::string bar_output(bool tty, int width, int verbose, int64_t total) {
  std::FILE* f = std::tmpfile();
  {
    tandem::ProgressBar bar(total, verbose, {0, 3, 0}, {f, tty, width});
    for (int64_t i = 1; i <= total; ++i) bar.update(i, 0.5, 0.75, 1000);
    bar.finish({"test_loss 0.4000", "test_acc 80.00%", "peak mem 1.0 MiB"}, "Epoch 1/3");
  }
  std::rewind(f);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  std::fclose(f);
  return out;
}

// Each piece between carriage returns and newlines: what a terminal shows on one row.
std::vector<std::string> rows_of(const std::string& out) {
  std::vector<std::string> rows;
  std::string row;
  for (char c : out) {
    if (c == '\r' || c == '\n') {
      rows.push_back(row);
      row.clear();
    } else {
      row += c;
    }
  }
  rows.push_back(row);
  return rows;
}

TEST(ProgressBar, OnA60ColumnTerminalNoRowIsWider) {
  const std::string out = bar_output(true, 60, 1, 8);
  for (std::string row : rows_of(out)) {
    if (const size_t esc = row.find("\033[K"); esc != std::string::npos) row.erase(esc, 3);
    EXPECT_LT(row.size(), 60u) << "'" << row << "'";
  }
  EXPECT_NE(out.find("test_acc 80.00%"), std::string::npos) << out;
}

TEST(ProgressBar, AFileGetsPlainLinesWithoutCarriageReturns) {
  const std::string out = bar_output(false, 60, 1, 8);
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(out.find('\033'), std::string::npos) << out;
  // A line at each quarter but the last, then the closing line with every field on it.
  const std::vector<std::string> rows = rows_of(out);
  ASSERT_EQ(rows.size(), 5u) << out;  // 3 quarters, the closing line, and the empty rest
  EXPECT_NE(rows[3].find("8/8 [==============================] - "), std::string::npos) << out;
  EXPECT_NE(rows[3].find(" - test_acc 80.00% - peak mem 1.0 MiB"), std::string::npos) << out;
}

TEST(ProgressBar, VerboseTwoPrintsOneLinePerEpoch) {
  const std::string out = bar_output(false, 80, 2, 8);
  EXPECT_EQ(out.find('['), std::string::npos) << out;
  ASSERT_EQ(rows_of(out).size(), 2u) << out;
  EXPECT_EQ(out.rfind("Epoch 1/3 - ", 0), 0u) << out;
  EXPECT_NE(out.find(" train - loss 0.5000 - acc 75.00% - 1,000 img/s - test_loss 0.4000"),
            std::string::npos)
      << out;
}

// The closing line's "train" time is the training steps': the evaluation between the last step
// and finish() (here a wait of half a second) is not in it, as the metrics file's seconds.
TEST(ProgressBar, TheClosingLinesTrainTimeLeavesOutWhatFollowsTheLastStep) {
  std::FILE* f = std::tmpfile();
  {
    tandem::ProgressBar bar(4, 2, {0, 1, 0}, {f, false, 80});
    for (int64_t i = 1; i <= 4; ++i) bar.update(i, 0.5, 0.75, 1000);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    bar.finish({"test_loss 0.4000"}, "Epoch 1/1");
  }
  std::rewind(f);
  char buf[4096];
  const std::string out(buf, std::fread(buf, 1, sizeof buf, f));
  std::fclose(f);
  EXPECT_NE(out.find("Epoch 1/1 - 0.0s train"), std::string::npos) << out;
}

// In a device list the run's ETA counts the later devices' epochs too, at this device's pace:
// epoch 1 of 2 with 2 epochs of another device after it leaves three epochs after this one.
TEST(ProgressBar, TheRunsEtaCountsTheLaterDevicesOfAList) {
  auto run_left = [](tandem::ProgressRun run) {
    std::FILE* f = std::tmpfile();
    std::string out;
    {
      tandem::ProgressBar bar(8, 1, run, {f, false, 200});
      for (int64_t i = 1; i <= 8; ++i) bar.update(i, 0.5, 0.5, 100);
    }
    std::rewind(f);
    char buf[4096];
    out.assign(buf, std::fread(buf, 1, sizeof buf, f));
    std::fclose(f);
    return out;
  };
  // 4 s an epoch: one epoch after this one is 4s; three are 12s.
  EXPECT_NE(run_left({0, 2, 4.0, 0}).find("(run 4."), std::string::npos)
      << run_left({0, 2, 4.0, 0});
  EXPECT_NE(run_left({0, 2, 4.0, 2}).find("(run 12."), std::string::npos)
      << run_left({0, 2, 4.0, 2});
}

TEST(ProgressBar, VerboseZeroPrintsNothing) { EXPECT_EQ(bar_output(true, 80, 0, 8), ""); }

}  // namespace
