// What a user sees when the GPU cannot be used: one sentence with the cause, and the fix.
#include <gtest/gtest.h>

#include "engine/backend_registry.h"
#include "engine/error.h"

namespace tandem {
namespace {

TEST(GpuErrors, CreatingTheGpuBackendWithoutOneSaysWhyAndWhatToDo) {
  std::unique_ptr<Backend> gpu;
  try {
    gpu = create_backend("gpu", {});
  } catch (const DeviceError& e) {
    if (build_has_cuda()) {
      // No driver or no device here: the runtime's code is translated, not passed through.
      EXPECT_TRUE(e.cause().starts_with("no NVIDIA driver found") ||
                  e.cause().starts_with("no NVIDIA GPU found"))
          << e.cause();
      EXPECT_NE(e.hint().find("--device cpu"), std::string::npos) << e.hint();
    } else {
      EXPECT_NE(e.cause().find("this build has no GPU backend (built without CUDA)"),
                std::string::npos)
          << e.cause();
      EXPECT_NE(e.hint().find("-DTANDEM_CUDA=ON"), std::string::npos) << e.hint();
      EXPECT_NE(e.hint().find("--device cpu"), std::string::npos) << e.hint();
    }
    EXPECT_EQ(e.code(), ExitCode::kDevice);
    return;
  }
  GTEST_SKIP() << "a GPU is present here (" << gpu->info().front().second
               << "): the no-GPU message cannot be observed";
}

}  // namespace
}  // namespace tandem
