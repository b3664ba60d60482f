// The data-parallel report fed a run's start: one line naming what sums the gradients.
#include "engine/callbacks/parallel_report.h"

#include <gtest/gtest.h>

#include "tests/engine/callbacks/events.h"

namespace tandem {
namespace {

TEST(ParallelReportCallback, NamesWhatSumsTheGradients) {
  test::Captured out;
  ParallelReport c(out.file());
  test::RunStartOf start({}, "MPI_Allreduce over 2 processes");
  c.run_start(start.event());
  EXPECT_EQ(out.text(), "Sums   gradients summed by MPI_Allreduce over 2 processes\n");
}

TEST(ParallelReportCallback, SaysNothingInARunOfOneProcess) {
  test::Captured out;
  ParallelReport c(out.file());
  test::RunStartOf start;
  c.run_start(start.event());
  EXPECT_EQ(out.text(), "");
}

}  // namespace
}  // namespace tandem
