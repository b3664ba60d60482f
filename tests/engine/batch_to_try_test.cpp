// The batch size the out-of-memory hints of both backends suggest.
#include <gtest/gtest.h>

#include <cstddef>

#include "engine/backend.h"

namespace tandem {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

TEST(BatchToTry, HalfTheBatchWhenTheTensorTakesAtMostHalfOfWhatIsAvailable) {
  EXPECT_EQ(batch_to_try(256, 3 * kGiB, 0), 128);  // available unknown
  EXPECT_EQ(batch_to_try(256, 3 * kGiB, 6 * kGiB), 128);
  EXPECT_EQ(batch_to_try(255, kGiB, 16 * kGiB), 127);
}

TEST(BatchToTry, ThePowerOfTwoAtWhichTheTensorTakesHalfWhenHalfTheBatchWouldStillNotFit) {
  // 3 GiB for 256 samples, 1 GiB available: 32 samples take 384 MiB, 64 would take 768 MiB.
  EXPECT_EQ(batch_to_try(256, 3 * kGiB, kGiB), 32);
  // 292 GiB for 100,000,000 samples, 23 GiB available: 2^22 samples take 12.3 GiB, over half.
  EXPECT_EQ(batch_to_try(100000000, 292 * kGiB, 23 * kGiB), int64_t{1} << 21);
  // However little is available, a batch of one is the least it says.
  EXPECT_EQ(batch_to_try(64, 1000 * kGiB, kGiB), 1);
}

TEST(BatchToTry, ABatchOfOneStaysOne) { EXPECT_EQ(batch_to_try(1, kGiB, kGiB / 4), 1); }

}  // namespace
}  // namespace tandem
