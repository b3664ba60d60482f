// Which 16-bit types a GPU computes in (cuda/dtype_support.h): pure host logic, run on every
// machine.
#include "cuda/dtype_support.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(GpuDtypeSupport, Bf16FromAmpereFp16FromVoltaFp32Everywhere) {
  EXPECT_EQ(dtype_unsupported_reason(DType::kBF16, "NVIDIA H100", 9, 0), "");
  EXPECT_EQ(dtype_unsupported_reason(DType::kBF16, "NVIDIA A100", 8, 0), "");
  EXPECT_NE(dtype_unsupported_reason(DType::kBF16, "Tesla T4", 7, 5), "");
  EXPECT_EQ(dtype_unsupported_reason(DType::kF16, "Tesla V100", 7, 0), "");
  EXPECT_NE(dtype_unsupported_reason(DType::kF16, "Tesla P100", 6, 0), "");
  EXPECT_EQ(dtype_unsupported_reason(DType::kF32, "Tesla K80", 3, 7), "");
}

TEST(GpuDtypeSupport, TheRefusalNamesTheGpuWhatItNeedsAndWhatToUse) {
  EXPECT_EQ(dtype_unsupported_reason(DType::kBF16, "Tesla T4", 7, 5),
            "the Tesla T4 (compute capability 7.5) has no bf16 tensor cores: bf16 needs compute "
            "capability 8.0 (Ampere or later); use --precision fp16 or fp32 there");
  EXPECT_EQ(dtype_unsupported_reason(DType::kF16, "Tesla P100", 6, 0),
            "the Tesla P100 (compute capability 6.0) has no fp16 tensor cores: fp16 needs compute "
            "capability 7.0 (Volta or later); use --precision fp32 there");
  EXPECT_NE(
      dtype_unsupported_reason(DType::kBF16, "Tesla P100", 6, 0).find("use --precision fp32 there"),
      std::string::npos);
}

}  // namespace
}  // namespace tandem
