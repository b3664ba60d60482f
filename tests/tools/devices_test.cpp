// `trainer devices`: what each GPU is and can do, or why there is none; exit status 0 either way.
#include <gtest/gtest.h>

#include "engine/backend_registry.h"
#include "tests/tools/cli_util.h"

namespace tandem {
namespace {

using test::run_trainer;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Devices, NamesTheMpiOfDataParallelTrainingOrWhatToInstall) {
  auto r = run_trainer("devices");
  EXPECT_EQ(r.status, 0) << r.out;
#if TANDEM_WITH_MPI
  EXPECT_TRUE(has(r.out, "  MPI      Open MPI v")) << r.out;
  EXPECT_TRUE(has(r.out, ": mpirun -np N trainer --config FILE trains one run over N processes"))
      << r.out;
#else
  EXPECT_TRUE(has(r.out, "  MPI      none in this build: install libopenmpi-dev")) << r.out;
#endif
}

#if TANDEM_WITH_NCCL
// The toolkit here has NCCL: the GPU section names the version loaded, with or without a GPU.
TEST(Devices, NamesTheNcclThatSumsDataParallelGpuRuns) {
  auto r = run_trainer("devices");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "  NCCL             loaded 2.")) << r.out;
  EXPECT_TRUE(has(r.out, " (data-parallel sums)\n")) << r.out;
}
#endif

// CUDA_VISIBLE_DEVICES hides or renumbers GPUs: when it is set, the GPU section shows it.
TEST(Devices, ShowsCudaVisibleDevicesWhenItIsSet) {
  if (!build_has_cuda()) GTEST_SKIP() << "a build without CUDA has no GPU section to show it in";
  auto r = test::run_trainer_with("env CUDA_VISIBLE_DEVICES=", "devices");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "  CUDA_VISIBLE_DEVICES  '' (only these GPUs are seen, numbered from 0)"))
      << r.out;
  auto unset = test::run_trainer_with("env -u CUDA_VISIBLE_DEVICES", "devices");
  EXPECT_FALSE(has(unset.out, "CUDA_VISIBLE_DEVICES")) << unset.out;
}

TEST(Devices, ExitsZeroAndNamesEveryGpuOrWhyThereIsNone) {
  auto r = run_trainer("devices");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "CPU")) << r.out;
  EXPECT_TRUE(has(r.out, "GPU")) << r.out;
  if (!has(r.out, "gpu:0")) {
    EXPECT_TRUE(has(r.out, "none usable: ")) << r.out;
    EXPECT_TRUE(has(r.out, "--device cpu") || has(r.out, "-DTANDEM_CUDA=ON")) << r.out;
    GTEST_SKIP() << "no GPU here, so its self-tests cannot be checked: " << r.out;
  }
  // A GPU this build runs on: its self-tests ran and the sgemm agrees with the host.
  EXPECT_TRUE(has(r.out, "usable         yes")) << r.out;
  EXPECT_TRUE(has(r.out, "GB/s pinned")) << r.out;
  EXPECT_TRUE(has(r.out, "check against the host: ok")) << r.out;
  EXPECT_FALSE(has(r.out, "test failed")) << r.out;
  EXPECT_FALSE(has(r.out, " 0 MHz")) << r.out;  // a clock attribute that did not answer
}

}  // namespace
}  // namespace tandem
