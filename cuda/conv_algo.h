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

// Whether a convolution may use tensor-op math. fp32 data: only with the tf32 option, since
// there tensor cores mean TF32 (10-bit products). bf16 and fp16 data: always; their tensor-op
// math multiplies the 16-bit values exactly and accumulates in fp32 (the descriptor's compute
// type), which is not TF32 and is what 16-bit training is for.
inline bool conv_tensor_ops(bool tf32, bool sixteen_bit_data) { return tf32 || sixteen_bit_data; }

// The math type a candidate runs with, set on the convolution descriptor before its workspace
// query and before every call. Without tensor-op math (conv_tensor_ops), FMA always: on Ampere
// and later DEFAULT_MATH lets cuDNN use TF32 tensor cores for fp32. With it, the candidate's own
// type, as cuDNN asks (the algorithm and the math type together name the kernel).
inline ConvMath conv_run_math(ConvMath candidate, bool tensor_ops) {
  return tensor_ops ? candidate : ConvMath::kFma;
}

// Index of the best-ranked candidate that succeeded, is deterministic when asked, uses no
// tensor-op math unless allowed (conv_tensor_ops: TF32 for fp32 data, the 16-bit type's own for
// bf16 and fp16 data), never converts its data down, and whose workspace fits the limit; -1 when
// there is none.
inline int choose_conv_candidate(const std::vector<ConvCandidate>& ranked, bool deterministic,
                                 bool tensor_ops, size_t workspace_limit) {
  for (size_t i = 0; i < ranked.size(); ++i) {
    const ConvCandidate& c = ranked[i];
    if (!c.ok || (deterministic && !c.deterministic) || c.workspace > workspace_limit) continue;
    if (!tensor_ops && c.math != ConvMath::kFma && c.math != ConvMath::kDefault) continue;
    // ALLOW_CONVERSION may round fp32 data down to fp16, coarser than TF32 (and bf16 data to
    // fp16, a narrower range): never taken.
    if (c.math == ConvMath::kTensorOpAllowConversion) continue;
    return static_cast<int>(i);
  }
  return -1;
}

}  // namespace tandem
