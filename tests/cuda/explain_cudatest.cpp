// The translation of CUDA, cuDNN and cuBLAS failures into a cause and a fix, on fake codes.
#include <gtest/gtest.h>

#include "cuda/check.h"

namespace tandem {
namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ExplainCuda, NoDriverSaysSoAndSuggestsTheCpu) {
  CudaContext ctx;
  ctx.driver_version = 0;
  ctx.runtime_version = 13000;
  Explanation e = explain_cuda_error(cudaErrorInsufficientDriver, "cudaGetDeviceCount", ctx);
  // Not the runtime's "driver version is insufficient": there is no driver to be old.
  EXPECT_EQ(e.cause,
            "no NVIDIA driver found (cudaGetDeviceCount: the CUDA runtime could load no driver "
            "library, libcuda.so.1)");
  EXPECT_TRUE(has(e.hint, "install the NVIDIA driver")) << e.hint;
  EXPECT_TRUE(has(e.hint, "--device cpu")) << e.hint;
}

// A driver with no device to show: the container's flag and CUDA_VISIBLE_DEVICES are named.
TEST(ExplainCuda, NoDeviceSaysTheDriverListsNoneAndNamesWhereAGpuHides) {
  CudaContext ctx;
  ctx.driver_version = 13000;
  ctx.runtime_version = 13000;
  Explanation e = explain_cuda_error(cudaErrorNoDevice, "cudaGetDeviceCount", ctx);
  EXPECT_TRUE(has(e.cause, "no NVIDIA GPU found: the driver lists none")) << e.cause;
  EXPECT_TRUE(has(e.hint, "--gpus all")) << e.hint;
  EXPECT_TRUE(has(e.hint, "CUDA_VISIBLE_DEVICES")) << e.hint;
  EXPECT_TRUE(has(e.hint, "--device cpu")) << e.hint;
}

// LD_LIBRARY_PATH with the toolkit's stubs/ folder: the stub answers instead of a driver.
TEST(ExplainCuda, TheToolkitsStubDriverIsNamedWithThePathToFix) {
  CudaContext ctx;
  Explanation e = explain_cuda_error(cudaErrorStubLibrary, "cudaGetDeviceCount", ctx);
  EXPECT_TRUE(has(e.cause, "the toolkit's stub")) << e.cause;
  EXPECT_TRUE(has(e.hint, "stubs/ folder out of LD_LIBRARY_PATH")) << e.hint;
  EXPECT_TRUE(has(e.hint, "--device cpu")) << e.hint;
}

TEST(ExplainCuda, ASystemNotReadyNamesTheFabricManager) {
  CudaContext ctx;
  Explanation e = explain_cuda_error(cudaErrorSystemNotReady, "cudaGetDeviceCount", ctx);
  EXPECT_TRUE(has(e.cause, "fabric manager is not running")) << e.cause;
  EXPECT_TRUE(has(e.hint, "nvidia-fabricmanager")) << e.hint;
}

TEST(ExplainCuda, DriverOlderThanRuntimePrintsBothVersions) {
  CudaContext ctx;
  ctx.driver_version = 12040;
  ctx.runtime_version = 13000;
  Explanation e = explain_cuda_error(cudaErrorInsufficientDriver, "cudaGetDeviceCount", ctx);
  EXPECT_TRUE(has(e.cause + e.hint, "12.4")) << e.cause << " / " << e.hint;
  EXPECT_TRUE(has(e.cause + e.hint, "13.0")) << e.cause << " / " << e.hint;
}

TEST(ExplainCuda, OutOfMemoryNamesTheSizeAndSuggestsASmallerBatch) {
  CudaContext ctx;
  ctx.requested_bytes = size_t{3} << 30;
  ctx.free_bytes = size_t{1} << 30;
  ctx.total_bytes = size_t{80} << 30;
  Explanation e = explain_cuda_error(cudaErrorMemoryAllocation, "cudaMalloc", ctx);
  EXPECT_TRUE(has(e.cause, "3.0 GiB")) << e.cause;
  EXPECT_TRUE(has(e.cause + e.hint, "1.0 GiB")) << e.cause << " / " << e.hint;
  EXPECT_TRUE(has(e.hint, "--batch-size")) << e.hint;
}

TEST(ExplainCuda, OutOfMemoryInATrainingRunNamesHalfItsBatchSize) {
  CudaContext ctx;
  ctx.requested_bytes = size_t{3} << 30;
  ctx.batch_size = 256;
  Explanation e = explain_cuda_error(cudaErrorMemoryAllocation, "cudaMalloc", ctx);
  EXPECT_TRUE(has(e.hint, "--batch-size 128")) << e.hint;
}

// 3 GiB asked with 1 GiB free: half the batch would still not fit; 32 of 256 makes it 384 MiB.
TEST(ExplainCuda, OutOfMemoryBeyondWhatIsFreeScalesTheBatchDown) {
  CudaContext ctx;
  ctx.requested_bytes = size_t{3} << 30;
  ctx.free_bytes = size_t{1} << 30;
  ctx.total_bytes = size_t{80} << 30;
  ctx.batch_size = 256;
  Explanation e = explain_cuda_error(cudaErrorMemoryAllocation, "cudaMalloc", ctx);
  EXPECT_TRUE(has(e.hint, "try --batch-size 32 or less (this run's is 256)")) << e.hint;
}

TEST(ExplainCuda, DeviceBelowTheBuildsArchitecturesIsNamed) {
  auto e = explain_arch_support("Tesla K80", 3, 7, "75-real,80-real,90-real,90-virtual");
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(has(e->cause, "Tesla K80")) << e->cause;
  EXPECT_TRUE(has(e->cause, "3.7")) << e->cause;
  EXPECT_TRUE(has(e->cause + e->hint, "7.5")) << e->cause << " / " << e->hint;
  EXPECT_FALSE(explain_arch_support("NVIDIA H200", 9, 0, "75-real,90-real").has_value());
  EXPECT_FALSE(explain_arch_support("future GPU", 12, 0, "90-real,90-virtual").has_value());
}

TEST(ExplainCudnn, AnotherMajorVersionIsRefusedWithBothVersions) {
  auto major = explain_cudnn_version(8900, 91900);
  ASSERT_TRUE(major.has_value());
  EXPECT_TRUE(has(major->cause, "8.9")) << major->cause;
  EXPECT_TRUE(has(major->cause, "9.19")) << major->cause;
  EXPECT_FALSE(explain_cudnn_version(92000, 91900).has_value());  // newer minor: fine
}

// The backend calls nothing that cuDNN 9.0 lacks: an older minor version than the headers runs it.
TEST(ExplainCudnn, AnOlderMinorVersionWithEveryCallRunsTheBuild) {
  EXPECT_FALSE(explain_cudnn_version(91000, 91900).has_value());
  EXPECT_FALSE(explain_cudnn_version(kOldestCudnn, 91900).has_value());
  EXPECT_FALSE(explain_cudnn_version(kOldestCudnn, kOldestCudnn).has_value());
}

TEST(ExplainCudnn, BuiltForAnotherCudaMajorIsRefusedNamingBothAndThePackage) {
  auto other = explain_cudnn_cuda(12090, 13000);
  ASSERT_TRUE(other.has_value());
  EXPECT_TRUE(has(other->cause, "built for CUDA 12")) << other->cause;
  EXPECT_TRUE(has(other->cause, "runs CUDA 13.0")) << other->cause;
  EXPECT_TRUE(has(other->hint, "-cuda-13")) << other->hint;
  EXPECT_FALSE(explain_cudnn_cuda(13010, 13000).has_value());  // another minor: compatible
  // The cuDNN this build loads here was built for the CUDA it runs.
  EXPECT_FALSE(explain_loaded_cudnn().has_value()) << explain_loaded_cudnn()->cause;
}

}  // namespace
}  // namespace tandem
