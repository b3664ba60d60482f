// trainer bench's spread of the timed steps (rows and JSON) and its warnings about the machine.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <thread>

#include "engine/trainer.h"
#include "tests/tools/cli_util.h"

namespace tandem::test {
namespace {

TEST(StepSpread, QuartilesAreLinearBetweenTheSortedStepsAndTheMedianIsTheMiddleOne) {
  const StepSpread s = step_spread({9, 1, 5, 3, 7});
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.q1, 3);
  EXPECT_DOUBLE_EQ(s.median, 5);
  EXPECT_DOUBLE_EQ(s.q3, 7);
  EXPECT_DOUBLE_EQ(s.max, 9);
  const StepSpread four = step_spread({4, 1, 2, 3});
  EXPECT_DOUBLE_EQ(four.q1, 1.75);
  EXPECT_DOUBLE_EQ(four.q3, 3.25);
  EXPECT_DOUBLE_EQ(four.median, 3);  // the upper middle, as bench's medians always were
}

double json_number(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\": ([0-9.e+-]+)"))) return -1;
  return std::stod(m[1]);
}

TEST(BenchSpread, JsonCarriesTheQuartilesAndExtremesOfBothKindsOfStep) {
  const CliResult r = run_trainer("bench --config " + one_epoch_config("bench_spread") +
                                  " --batch-size 8 --steps 5 --warmup 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* kind : {"train", "infer"}) {
    const std::string k = kind;
    const double lo = json_number(r.out, k + "_ms_min"), q1 = json_number(r.out, k + "_ms_q1"),
                 mid = json_number(r.out, k + "_ms_per_step"),
                 q3 = json_number(r.out, k + "_ms_q3"), hi = json_number(r.out, k + "_ms_max");
    EXPECT_GT(lo, 0) << r.out;
    EXPECT_LE(lo, q1) << r.out;
    EXPECT_LE(q1, mid + 1e-4) << r.out;
    EXPECT_LE(mid, q3 + 1e-4) << r.out;
    EXPECT_LE(q3, hi) << r.out;
  }
}

TEST(BenchSpread, EachRowGivesItsFastestAndSlowestStep) {
  const CliResult r = run_trainer("bench --config " + one_epoch_config("bench_rows") +
                                  " --batch-size 8 --steps 5 --warmup 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("train ms/step +min-max ms +train img/s")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\ncpu +8 +[0-9.]+ +[0-9.]+-[0-9.]+ )")))
      << r.out;
}

TEST(BenchSpread, MoreThreadsThanCoresIsWarnedAbout) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int threads = 4 * cores;
  const CliResult r =
      run_trainer("bench --config " + one_epoch_config("bench_threads") + " --threads " +
                  std::to_string(threads) + " --batch-size 8 --steps 1 --warmup 0 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("warning: " + std::to_string(threads) + " threads on "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("the threads take turns on the cores, which slows every step"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace tandem::test
