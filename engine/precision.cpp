// Precision names and the parity tolerance of each.
#include "engine/precision.h"

#include "engine/error.h"

namespace tandem {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kF32;
  if (name == "tf32") return Precision::kTF32;
  if (name == "bf16") return Precision::kBF16;
  if (name == "fp16") return Precision::kF16;
  throw UsageError("unknown precision '" + name + "'", "use fp32, tf32, bf16 or fp16");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kF32:
      return "fp32";
    case Precision::kTF32:
      return "tf32";
    case Precision::kBF16:
      return "bf16";
    case Precision::kF16:
      return "fp16";
  }
  return "?";
}

double parity_tolerance(Precision p) {
  switch (p) {
    case Precision::kF32:
      return 1e-3;
    case Precision::kTF32:
      return 1e-2;  // tf32 keeps 10 mantissa bits in its products
    case Precision::kBF16:
      return 5e-2;  // 2^-9 per value, compounded over layers and steps
    case Precision::kF16:
      return 1e-2;  // 2^-12 per value
  }
  return 1e-3;
}

}  // namespace tandem
