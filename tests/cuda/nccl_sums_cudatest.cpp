// NCCL sums of GPU tensors (cuda/nccl_sums.h): the library found at run time and its version,
// when a run refuses it, and on a GPU the sums of a one-process run.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend_registry.h"
#include "engine/communicator.h"
#include "engine/error.h"

#if TANDEM_WITH_NCCL
#include <nccl.h>

#include "cuda/nccl_sums.h"

namespace tandem {
namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The processes of a run as one process sees them (only the sizes matter here).
class Sizes : public SingleProcess {
 public:
  Sizes(int size, int local_size) : size_(size), local_size_(local_size) {}
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }

 private:
  int size_, local_size_;
};

TEST(NcclSums, TheToolkitsLibraryLoadsAtRunTimeAndNamesItsVersion) {
  std::string why;
  const std::string version = nccl_version(&why);
  ASSERT_FALSE(version.empty()) << why;
  EXPECT_TRUE(why.empty()) << why;
  // NCCL keeps its API within a major version, and the library that loads may be newer or older
  // than the header (the toolkit's, PyTorch's pip package's): the major version must agree.
  EXPECT_EQ(version.substr(0, version.find('.')), std::to_string(NCCL_MAJOR)) << version;
}

TEST(NcclSums, MoreProcessesOnAHostThanGpusAreRefusedWithTheCount) {
  const std::string why = nccl_unavailable(Sizes(8, 4), 2);
  EXPECT_TRUE(has(why, "4 processes on this host share 2 GPUs")) << why;
  EXPECT_TRUE(has(why, "at most 2 processes per host")) << why;
  EXPECT_EQ(nccl_unavailable(Sizes(8, 4), 4), "") << "a GPU each";
  EXPECT_EQ(nccl_unavailable(Sizes(2, 1), 1), "") << "one process on each of two hosts";
}

// On a GPU, NCCL connects a run of one process: its sum is the weighted tensor, a weight of 0
// clears even a NaN, and a broadcast from itself changes nothing.
TEST(NcclSums, AOneProcessRunSumsItsWeightedTensorsOnTheGpu) {
  std::unique_ptr<Backend> gpu;
  try {
    gpu = create_backend("gpu", {});
  } catch (const DeviceError& e) {
    GTEST_SKIP() << "no usable GPU: " << e.cause() << " (" << e.hint() << ")";
  }
  SingleProcess alone;
  std::string why;
  ASSERT_TRUE(gpu->device_sums_available(alone, &why)) << why;
  std::unique_ptr<DeviceSums> sums = gpu->start_device_sums(alone);
  ASSERT_NE(sums, nullptr);
  EXPECT_TRUE(has(sums->library(), "NCCL 2.")) << sums->library();

  const std::vector<float> a{1.f, -2.f, 3.5f, 8.f}, b{0.25f, 4.f};
  Tensor ta(*gpu, Shape{4}), tb(*gpu, Shape{2});
  gpu->upload(ta, a.data());
  gpu->upload(tb, b.data());
  sums->sum({&ta, &tb}, 0.5);
  std::vector<float> ra(4), rb(2);
  gpu->download(ra.data(), ta);
  gpu->download(rb.data(), tb);
  EXPECT_EQ(ra, (std::vector<float>{0.5f, -1.f, 1.75f, 4.f}));
  EXPECT_EQ(rb, (std::vector<float>{0.125f, 2.f}));

  const std::vector<float> bad{std::numeric_limits<float>::quiet_NaN(), 1.f};
  gpu->upload(tb, bad.data());
  sums->sum({&tb}, 0.0);
  gpu->download(rb.data(), tb);
  EXPECT_EQ(rb, (std::vector<float>{0.f, 0.f}));

  sums->broadcast({&ta}, 0);
  gpu->download(ra.data(), ta);
  EXPECT_EQ(ra, (std::vector<float>{0.5f, -1.f, 1.75f, 4.f}));
}

}  // namespace
}  // namespace tandem
#endif
