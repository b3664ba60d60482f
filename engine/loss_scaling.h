// fp16's dynamic loss scaling: PyTorch's GradScaler settings, run by the update gate.
//
// fp16 keeps 5 exponent bits, so gradients below 2^-24 round to zero: the loss gradient is
// multiplied by a scale S before the backward pass and the update divides by it. The update gate
// (engine/backend.h, its arithmetic gate_step in engine/optimizer_math.h) holds S on the device
// and applies GradScaler's rules: a step with a non-finite gradient is skipped and S halved;
// 2000 applied steps in a row double it. bf16 has fp32's exponent range and needs none of this.
#pragma once

#include "engine/backend.h"

namespace tandem {

inline constexpr float kInitialLossScale = 65536.f;  // 2^16, GradScaler's init_scale

// The gate's parameters for a run that scales its loss: every gradient is checked (an overflow
// must skip the step), and the scale moves by GradScaler's factors and interval.
inline GateParams loss_scaling_gate() {
  GateParams p;
  p.check_gradients = true;
  p.growth_interval = 2000;
  p.growth_factor = 2.f;
  p.backoff_factor = 0.5f;
  return p;
}

}  // namespace tandem
