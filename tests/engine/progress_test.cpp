// The number formats of the progress bar and the summaries.
#include "engine/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using tandem::format_loss;

TEST(Progress, LossHasFourDecimalsUntilTheyWouldBeARowOfDigits) {
  EXPECT_EQ(format_loss(0.15), "0.1500");
  EXPECT_EQ(format_loss(2.302585), "2.3026");
  EXPECT_EQ(format_loss(99999.5), "99999.5000");
  EXPECT_EQ(format_loss(1.30131966e26), "1.301e+26");
  EXPECT_EQ(format_loss(-2.5e7), "-2.5e+07");
  EXPECT_EQ(format_loss(std::nan("")), "nan");
  EXPECT_EQ(format_loss(std::numeric_limits<double>::infinity()), "inf");
}

TEST(Progress, CountsAndBytesAndDurations) {
  EXPECT_EQ(tandem::format_count(1234567.4), "1,234,567");
  EXPECT_EQ(tandem::format_count(-1234), "-1,234");
  EXPECT_EQ(tandem::format_bytes(512), "512 B");
  EXPECT_EQ(tandem::format_bytes(3u << 20), "3.0 MiB");
  EXPECT_EQ(tandem::format_duration(3.25), "3.2s");
  EXPECT_EQ(tandem::format_duration(64), "1m 04s");
  EXPECT_EQ(tandem::format_duration(3720), "1h 02m");
}

}  // namespace
