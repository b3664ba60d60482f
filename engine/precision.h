// Precision: the arithmetic a run trains in, a property of the run like its device.
//
// fp32 is the reference. tf32 is fp32 data with the GPU's tensor-core math. bf16 and fp16 follow
// the mixed-precision recipe of PyTorch's autocast and NVIDIA's AMP: activations and their
// gradients in 16 bits (so convolutions and matrix products run in 16-bit with fp32
// accumulation), parameters, their gradients, optimizer state, the loss and normalization
// statistics in fp32. fp16 adds a dynamic loss scale (engine/loss_scaling.h).
#pragma once

#include <string>

#include "engine/tensor.h"

namespace tandem {

enum class Precision { kF32, kTF32, kBF16, kF16 };

// "fp32" | "tf32" | "bf16" | "fp16"; anything else throws UsageError naming the four.
Precision parse_precision(const std::string& name);
const char* precision_name(Precision p);
// The dtype of a run's activations and their gradients (the model's input and logits excepted).
inline DType activation_dtype(Precision p) {
  return p == Precision::kBF16 ? DType::kBF16 : p == Precision::kF16 ? DType::kF16 : DType::kF32;
}
inline bool is_16bit(Precision p) { return p == Precision::kBF16 || p == Precision::kF16; }

// The relative tolerance of a comparison between a 16-bit run and fp32 (side-by-side parity):
// bf16 keeps 8 significant bits (a rounding error of up to 2^-9 per stored value), fp16 11, and a
// training run compounds them over its layers and steps.
double parity_tolerance(Precision p);

}  // namespace tandem
