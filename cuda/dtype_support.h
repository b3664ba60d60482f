// Which 16-bit types a GPU computes in, from its compute capability: plain host logic (no CUDA
// types), so that it is tested on machines without a GPU.
#pragma once

#include <string>

#include "engine/tensor.h"

namespace tandem {

// The compute capability from which a GPU has tensor cores for d: bf16 8.0 (Ampere), fp16 7.0
// (Volta); 0 for fp32, which every GPU computes in.
inline int min_major_for(DType d) { return d == DType::kBF16 ? 8 : d == DType::kF16 ? 7 : 0; }

// Why the GPU `name` of compute capability major.minor does not compute in d, and what to use
// there instead; empty when it does.
inline std::string dtype_unsupported_reason(DType d, const std::string& name, int major,
                                            int minor) {
  const int need = min_major_for(d);
  if (major >= need) return "";
  const std::string type = dtype_name(d);
  const std::string instead = d == DType::kBF16 && major >= min_major_for(DType::kF16)
                                  ? "--precision fp16 or fp32"
                                  : "--precision fp32";
  return "the " + name + " (compute capability " + std::to_string(major) + "." +
         std::to_string(minor) + ") has no " + type + " tensor cores: " + type +
         " needs compute capability " + std::to_string(need) + ".0 (" +
         (d == DType::kBF16 ? "Ampere" : "Volta") + " or later); use " + instead + " there";
}

}  // namespace tandem
