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

// Whether the rules take a candidate: it succeeded, is deterministic when asked, uses no
// tensor-op math unless allowed (conv_tensor_ops: TF32 for fp32 data, the 16-bit type's own for
// bf16 and fp16 data), never converts its data down, and its workspace fits the limit.
inline bool conv_candidate_qualifies(const ConvCandidate& c, bool deterministic, bool tensor_ops,
                                     size_t workspace_limit) {
  if (!c.ok || (deterministic && !c.deterministic) || c.workspace > workspace_limit) return false;
  if (!tensor_ops && c.math != ConvMath::kFma && c.math != ConvMath::kDefault) return false;
  // ALLOW_CONVERSION may round fp32 data down to fp16, coarser than TF32 (and bf16 data to
  // fp16, a narrower range): never taken.
  return c.math != ConvMath::kTensorOpAllowConversion;
}

// The indices of every candidate that qualifies, in the order they are tried: cuDNN's ranking,
// except that with `accumulate_once` (a 16-bit weight gradient) the deterministic ones come first.
// cuDNN's non-deterministic backward-filter algorithms split the sum over N*P*Q and add the parts
// into the output in the output's type, so a 16-bit dw would be rounded once per part; the
// deterministic ones sum each weight in fp32 and round it once. The others stay as later choices.
// The first is taken; the next when cuDNN refuses one at its first call (conv_refusal).
inline std::vector<int> conv_candidate_order(const std::vector<ConvCandidate>& ranked,
                                             bool deterministic, bool tensor_ops,
                                             size_t workspace_limit, bool accumulate_once = false) {
  std::vector<int> first, later;
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (!conv_candidate_qualifies(ranked[i], deterministic, tensor_ops, workspace_limit)) continue;
    (accumulate_once && !ranked[i].deterministic ? later : first).push_back(static_cast<int>(i));
  }
  first.insert(first.end(), later.begin(), later.end());
  return first;
}

// Index of the best-ranked candidate that qualifies; -1 when there is none.
inline int choose_conv_candidate(const std::vector<ConvCandidate>& ranked, bool deterministic,
                                 bool tensor_ops, size_t workspace_limit) {
  const std::vector<int> order =
      conv_candidate_order(ranked, deterministic, tensor_ops, workspace_limit);
  return order.empty() ? -1 : order.front();
}

// What a candidate's call answered (conv.cu maps cuDNN's status to it).
enum class ConvCall { kDone, kRefused, kFailed };

// Whether the pass moves on to its next candidate after a call: when cuDNN refused a candidate
// at its first call (CUDNN_STATUS_NOT_SUPPORTED or CUDNN_STATUS_EXECUTION_FAILED). A ranking
// without trial runs (heuristic mode) can offer a kernel the call then rejects, e.g. a tensor-op
// kernel for rows it cannot align. Any other failure, or a refusal from a candidate that has run
// before, is an error, not a choice.
inline bool conv_takes_next(ConvCall call, bool ran_before) {
  return call == ConvCall::kRefused && !ran_before;
}

// What a convolution pass does when its candidates are used up: 16-bit data computes that pass in
// fp32 on NCHW stand-ins (the first convolution's path), since cuDNN may have no 16-bit kernel
// for a shape (channels not a multiple of 8); fp32 data has nowhere further to go.
enum class ConvFallback { kFp32, kRefuse };
inline ConvFallback conv_when_none_left(bool sixteen_bit_data) {
  return sixteen_bit_data ? ConvFallback::kFp32 : ConvFallback::kRefuse;
}

}  // namespace tandem
