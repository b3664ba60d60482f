// The choice among cuDNN's ranked convolution algorithms, as plain host logic (no cuDNN types), so
// that it is tested on machines without a GPU.
#pragma once

#include <cstddef>
#include <vector>

namespace tandem {

// cuDNN's cudnnMathType_t, in its order (conv.cu converts).
enum class ConvMath { kDefault, kTensorOp, kTensorOpAllowConversion, kFma };

// One ranked result of cudnnGet*Algorithm_v7 (or cudnnFind*), its workspace queried for the math
// type it would run with (conv_run_math).
struct ConvCandidate {
  bool ok = false;  // the result's status and its workspace query were both CUDNN_STATUS_SUCCESS
  bool deterministic = false;
  ConvMath math = ConvMath::kDefault;
  size_t workspace = 0;
};

// The math type a candidate runs with, set on the convolution descriptor before its workspace
// query and before every call. Without TF32, FMA always: on Ampere and later DEFAULT_MATH lets
// cuDNN use TF32 tensor cores for fp32. With TF32, the candidate's own type, as cuDNN asks (the
// algorithm and the math type together name the kernel).
inline ConvMath conv_run_math(ConvMath candidate, bool tf32) {
  return tf32 ? candidate : ConvMath::kFma;
}

// Index of the best-ranked candidate that succeeded, is deterministic when asked, computes in
// fp32 unless TF32 is allowed (and never in fp16), and whose workspace fits the limit; -1 when
// there is none.
inline int choose_conv_candidate(const std::vector<ConvCandidate>& ranked, bool deterministic,
                                 bool tf32, size_t workspace_limit) {
  for (size_t i = 0; i < ranked.size(); ++i) {
    const ConvCandidate& c = ranked[i];
    if (!c.ok || (deterministic && !c.deterministic) || c.workspace > workspace_limit) continue;
    if (!tf32 && c.math != ConvMath::kFma && c.math != ConvMath::kDefault) continue;
    // ALLOW_CONVERSION may round fp32 data down to fp16, coarser than TF32: never taken.
    if (c.math == ConvMath::kTensorOpAllowConversion) continue;
    return static_cast<int>(i);
  }
  return -1;
}

}  // namespace tandem
