// The choice among cuDNN's ranked convolution algorithms (cuda/conv_algo.h): pure host logic, run
// on every machine.
#include "cuda/conv_algo.h"

#include <gtest/gtest.h>

#include <vector>

namespace tandem {
namespace {

constexpr size_t kMiB = 1u << 20;

ConvCandidate fma(size_t ws, bool det = true) { return {true, det, ConvMath::kFma, ws}; }

TEST(ConvAlgoChoice, TakesTheBestRankedCandidateThatQualifies) {
  EXPECT_EQ(choose_conv_candidate({fma(0), fma(0)}, false, false, kMiB), 0);
}

TEST(ConvAlgoChoice, SkipsFailedResultsAndFailedWorkspaceQueries) {
  std::vector<ConvCandidate> ranked = {fma(0), fma(0), fma(0)};
  ranked[0].ok = false;  // e.g. CUDNN_STATUS_NOT_SUPPORTED for this shape
  ranked[1].ok = false;
  EXPECT_EQ(choose_conv_candidate(ranked, false, false, kMiB), 2);
}

TEST(ConvAlgoChoice, SkipsWorkspacesAboveTheLimitButTakesOneExactlyAtIt) {
  EXPECT_EQ(choose_conv_candidate({fma(2 * kMiB), fma(kMiB), fma(0)}, false, false, kMiB), 1);
}

TEST(ConvAlgoChoice, DeterministicModeTakesOnlyDeterministicResults) {
  std::vector<ConvCandidate> ranked = {fma(0, false), fma(0, true)};
  EXPECT_EQ(choose_conv_candidate(ranked, true, false, kMiB), 1);
  EXPECT_EQ(choose_conv_candidate(ranked, false, false, kMiB), 0);
}

TEST(ConvAlgoChoice, Fp32ModeSkipsTensorOpResultsAndTf32TakesThem) {
  std::vector<ConvCandidate> ranked = {{true, true, ConvMath::kTensorOp, 0},
                                       {true, true, ConvMath::kTensorOpAllowConversion, 0},
                                       {true, true, ConvMath::kDefault, 0}};
  EXPECT_EQ(choose_conv_candidate(ranked, false, false, kMiB), 2);
  EXPECT_EQ(choose_conv_candidate(ranked, false, true, kMiB), 0);
}

// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION may compute fp32 data in fp16: not even with TF32.
TEST(ConvAlgoChoice, Tf32ModeSkipsResultsThatMayConvertToFp16) {
  std::vector<ConvCandidate> ranked = {{true, true, ConvMath::kTensorOpAllowConversion, 0},
                                       {true, true, ConvMath::kTensorOp, 0}};
  EXPECT_EQ(choose_conv_candidate(ranked, false, true, kMiB), 1);
  EXPECT_EQ(choose_conv_candidate(ranked, false, false, kMiB), -1);
}

TEST(ConvAlgoChoice, NoneWhenNothingQualifies) {
  EXPECT_EQ(choose_conv_candidate({}, false, false, kMiB), -1);
  EXPECT_EQ(choose_conv_candidate({fma(2 * kMiB), fma(0, false)}, true, false, kMiB), -1);
}

// DEFAULT_MATH lets cuDNN use TF32 tensor cores for fp32 on Ampere and later: without TF32 every
// candidate runs with FMA_MATH, whatever cuDNN reported.
TEST(ConvAlgoChoice, Fp32RunsEveryCandidateWithFmaMathTf32WithItsOwn) {
  for (ConvMath m : {ConvMath::kDefault, ConvMath::kTensorOp, ConvMath::kFma}) {
    EXPECT_EQ(conv_run_math(m, false), ConvMath::kFma);
    EXPECT_EQ(conv_run_math(m, true), m);
  }
}

// bf16 and fp16 data take tensor-op math whatever the tf32 option (it is their own math, not
// TF32); fp32 data only with TF32.
TEST(ConvAlgoChoice, SixteenBitDataAlwaysAllowsTensorOpMathFp32OnlyWithTf32) {
  EXPECT_TRUE(conv_tensor_ops(false, true));
  EXPECT_TRUE(conv_tensor_ops(true, true));
  EXPECT_FALSE(conv_tensor_ops(false, false));
  EXPECT_TRUE(conv_tensor_ops(true, false));
  std::vector<ConvCandidate> ranked = {{true, true, ConvMath::kTensorOp, 0},
                                       {true, true, ConvMath::kFma, 0}};
  EXPECT_EQ(choose_conv_candidate(ranked, false, conv_tensor_ops(false, true), kMiB), 0);
  EXPECT_EQ(conv_run_math(ConvMath::kTensorOp, conv_tensor_ops(false, true)), ConvMath::kTensorOp);
  EXPECT_EQ(choose_conv_candidate(ranked, false, conv_tensor_ops(false, false), kMiB), 1);
}

// Every candidate that qualifies is kept, best first: the next is taken when cuDNN refuses one at
// its first call (heuristic mode has no trial run to weed such candidates out).
TEST(ConvAlgoOrder, KeepsEveryQualifyingCandidateInCudnnsRanking) {
  std::vector<ConvCandidate> ranked = {fma(0), fma(2 * kMiB), fma(0, false), fma(kMiB)};
  ranked[0].ok = false;
  EXPECT_EQ(conv_candidate_order(ranked, false, false, kMiB), (std::vector<int>{2, 3}));
  EXPECT_EQ(conv_candidate_order(ranked, true, false, kMiB), (std::vector<int>{3}));
  EXPECT_TRUE(conv_candidate_order({}, false, false, kMiB).empty());
}

// A 16-bit weight gradient tries the deterministic candidates first: the others add partial sums
// into the 16-bit output, rounding it once per part. They stay, after, as choices of last resort.
TEST(ConvAlgoOrder, SixteenBitWeightGradientsTryTheCandidatesThatAccumulateOnceFirst) {
  const std::vector<ConvCandidate> ranked = {fma(0, false), fma(0, true), fma(0, false),
                                             fma(0, true)};
  EXPECT_EQ(conv_candidate_order(ranked, false, false, kMiB, true), (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(conv_candidate_order(ranked, false, false, kMiB, false),
            (std::vector<int>{0, 1, 2, 3}));
}

// A refusal at a candidate's first call moves on to the next; a refusal after it ran, or any other
// failure, is an error.
TEST(ConvAlgoOrder, OnlyARefusalAtTheFirstCallTakesTheNextCandidate) {
  EXPECT_TRUE(conv_takes_next(ConvCall::kRefused, false));
  EXPECT_FALSE(conv_takes_next(ConvCall::kRefused, true));
  EXPECT_FALSE(conv_takes_next(ConvCall::kFailed, false));
  EXPECT_FALSE(conv_takes_next(ConvCall::kDone, false));
}

// With no candidate left, 16-bit data computes the pass in fp32; fp32 data is refused.
TEST(ConvAlgoOrder, SixteenBitPassesWithoutACandidateComputeInFp32) {
  EXPECT_EQ(conv_when_none_left(true), ConvFallback::kFp32);
  EXPECT_EQ(conv_when_none_left(false), ConvFallback::kRefuse);
}

}  // namespace
}  // namespace tandem
