// `mpirun -np 2 trainer ...`: data-parallel training end to end, through the real launcher and
// MPI. Skipped, saying why, where the build has no MPI or no mpirun is on the PATH.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/backend_registry.h"
#include "engine/checkpoint.h"
#include "engine/config.h"
#include "engine/graph.h"
#include "engine/optimizer.h"
#include "tests/cpu/backend_test_util.h"
#include "tests/tools/cli_util.h"
#include "tools/app.h"

namespace tandem {
namespace {

// Why these tests cannot run here; empty when they can.
std::string why_no_mpi() {
#if !TANDEM_WITH_MPI
  return "this build has no MPI (configure found none; apt-get install libopenmpi-dev)";
#else
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0)
    return "no mpirun on the PATH (apt-get install openmpi-bin)";
  return "";
#endif
}

#define SKIP_WITHOUT_MPI()                                  \
  do {                                                      \
    if (const std::string why = why_no_mpi(); !why.empty()) \
      GTEST_SKIP() << "data-parallel CLI: " << why;         \
  } while (0)

// The trainer as `processes` processes of one run; root may run them (CI containers). Open MPI
// keeps memory to the end on purpose in plugins it unloads before exit, where the leak checker of
// a sanitizer build cannot name (nor so suppress) them: under mpirun that check is off, and the
// single-process runs of the suite keep it.
test::CliResult run_mpi(int processes, const std::string& args) {
  return test::run_trainer_with(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 "
      "mpirun --oversubscribe -np " +
          std::to_string(processes),
      args);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// 72 samples: batches of 16 leave a ragged end, so the run's last step is one process's alone.
std::string config_file() {
  return test::write_temp_file("data_parallel.yaml", R"(name: dp_cli
input: {shape: [1, 8, 8]}
layers:
  - conv2d: {filters: 4, kernel: 3}
  - relu
  - maxpool: {kernel: 2}
  - flatten
  - dense: {units: 3}
data: {format: synthetic, classes: 3, train_size: 72, test_size: 40, seed: 9}
train:
  epochs: 1
  batch_size: 32
  optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
  seed: 4
)");
}

// The weights a checkpoint holds, packed as the graph lays them out.
std::vector<float> checkpoint_weights(const std::string& config, const std::string& file) {
  register_everything();
  Config c = load_config(config);
  std::unique_ptr<Backend> cpu = create_backend("cpu", BackendOptions{});
  Graph g(c);
  g.allocate(*cpu, 1, c.train.seed);
  Optimizer opt(c.train.optimizer, g.params(), *cpu);
  restore_checkpoint(file, g, opt);
  std::vector<float> v(static_cast<size_t>(g.packed_values().numel()));
  cpu->download(v.data(), g.packed_values());
  return v;
}

TEST(DataParallelCli, TwoProcessesPrintOneRunAndTrainLikeOneWithTheirBatchesTogether) {
  SKIP_WITHOUT_MPI();
  const std::string config = config_file();
  const std::string one = test::fresh_dir("dp_one"), two = test::fresh_dir("dp_two");
  const test::CliResult whole =
      test::run_trainer("--config " + config + " --device cpu:1 --checkpoint-dir " + one);
  ASSERT_EQ(whole.status, 0) << whole.out;
  const test::CliResult split =
      run_mpi(2, "--config " + config + " --device cpu:1 --batch-size 16 --checkpoint-dir " + two);
  ASSERT_EQ(split.status, 0) << split.out;
  EXPECT_NE(split.out.find("data-parallel over 2 processes (Open MPI"), std::string::npos)
      << split.out;
  EXPECT_NE(split.out.find("batch 16 each, 32 samples a step"), std::string::npos) << split.out;
  // The second process prints nothing: one header, one epoch, one result.
  EXPECT_EQ(count(split.out, "Epoch 1/1"), 1u) << split.out;
  EXPECT_EQ(count(split.out, "cpu:1: test accuracy"), 1u) << split.out;

  const std::string file = two + "/epoch-1.safetensors";
  EXPECT_EQ(read_checkpoint_meta(file).processes, 2);
  const std::vector<float> a = checkpoint_weights(config, one + "/epoch-1.safetensors");
  const std::vector<float> b = checkpoint_weights(config, file);
  EXPECT_LT(testing::relative_error(b, {a.begin(), a.end()}), 1e-5)
      << "3 steps of batch 32 and of 2 x 16 must give the same weights";

  // Another process count would cut other steps: resuming is refused, saying how to.
  const test::CliResult resumed =
      test::run_trainer("--config " + config + " --epochs 2 --batch-size 16 --resume " + file);
  EXPECT_EQ(resumed.status, 7) << resumed.out;
  EXPECT_NE(resumed.out.find("was trained by 2 data-parallel processes (mpirun -np 2), this run "
                             "is one process"),
            std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("resume it under mpirun -np 2"), std::string::npos) << resumed.out;
}

TEST(DataParallelCli, AnErrorEveryProcessMeetsIsToldOnceAndEndsTheRun) {
  SKIP_WITHOUT_MPI();
  const std::string bad = test::write_temp_file("data_parallel_bad.yaml",
                                                "name: bad\ninput: {shape: [1, 8, 8]}\nlayers:\n"
                                                "  - conv2d: {filters: 4, kernel: 3}\n  - relux\n");
  const test::CliResult r = run_mpi(2, "--config " + bad + " --device cpu:1");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_EQ(count(r.out, "error: "), 1u) << r.out;
  EXPECT_NE(r.out.find("relux"), std::string::npos) << r.out;
}

// No usable GPU on any process: one error, and no word of a stop (mpirun's SIGTERM, after the
// first process ended the run, comes before training started: there is nothing to save).
TEST(DataParallelCli, ADeviceErrorEveryProcessMeetsIsToldOnce) {
  SKIP_WITHOUT_MPI();
  const test::CliResult devices = test::run_trainer("devices");
  if (devices.out.find("gpu:0") != std::string::npos)
    GTEST_SKIP() << "a GPU is present here: the device error cannot be had";
  const test::CliResult r = run_mpi(2, "--config " + config_file() + " --device gpu");
  EXPECT_EQ(r.status, 5) << r.out;
  EXPECT_EQ(count(r.out, "error: "), 1u) << r.out;
  EXPECT_EQ(count(r.out, "error (process "), 0u) << r.out;
  EXPECT_EQ(r.out.find("stopping after this step"), std::string::npos) << r.out;
}

// A file missing on one host only: the error is that process's alone, and told, after the wait
// for the first process to tell a shared one.
TEST(DataParallelCli, AnErrorOfOneProcessAloneIsToldByIt) {
  SKIP_WITHOUT_MPI();
  const std::string good = config_file(), missing = ::testing::TempDir() + "no-such-config.yaml";
  // Two programs in one run (mpirun's A : B): process 1 is given the missing config.
  const test::CliResult r =
      run_mpi(1, "--config " + good + " --device cpu:1 : -np 1 " + std::string(TANDEM_TRAINER) +
                     " --config " + missing + " --device cpu:1");
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("error (process 1 of 2): "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no-such-config.yaml"), std::string::npos) << r.out;
}

// bench would time processes that compete for the cores; eval and the others would each do
// all the work.
TEST(DataParallelCli, OnlyTrainingRunsUnderMpirun) {
  SKIP_WITHOUT_MPI();
  const test::CliResult r = run_mpi(2, "bench --config " + config_file() + " --device cpu:1");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(count(r.out, "error: "), 1u) << r.out;
  EXPECT_NE(r.out.find("trainer bench runs in one process; mpirun started 2"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("run it without mpirun (only training is data-parallel)"), std::string::npos)
      << r.out;
}

// Without MPI, N processes that a launcher started would each train alone: they stop instead.
TEST(DataParallelCli, ABuildWithoutMpiStartedAsSeveralProcessesSaysSo) {
#if TANDEM_WITH_MPI
  GTEST_SKIP() << "this build has MPI; the case is for builds without it (-DTANDEM_MPI=OFF, as "
                  "CI's CPU-only build is)";
#else
  // What Open MPI's launcher tells each process it starts.
  const test::CliResult r =
      test::run_trainer_with("OMPI_COMM_WORLD_SIZE=2", "--config " + config_file());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("started by an MPI launcher as one of 2 processes, but this build has no "
                       "MPI: each process would train alone"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("install Open MPI"), std::string::npos) << r.out;
#endif
}

}  // namespace
}  // namespace tandem
