// Adam's update of one element (backend.h's adam_update) and its per-step scalars, and the update
// gate's arithmetic, shared by the CPU backend's loops and the GPU's kernels, so that both devices
// compute the same expression and it is tested on machines without a GPU.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/backend.h"

#if defined(__CUDACC__)
#define TANDEM_OPT_HD __host__ __device__ __forceinline__
#else
#define TANDEM_OPT_HD inline
#endif

namespace tandem {

// Adam's per-step scalars, from the 1-based step: bias corrections in double, then fp32.
struct AdamScalars {
  float step_size;   // lr / (1 - beta1^t)
  float bc2_sqrt;    // sqrt(1 - beta2^t)
  float decay;       // AdamW: 1 - lr*wd; Adam: 1
  float coupled_wd;  // Adam: wd; AdamW: 0
};

inline AdamScalars adam_scalars(const AdamParams& p) {
  const double t = static_cast<double>(p.step);
  return {static_cast<float>(p.lr / (1.0 - std::pow(double{p.beta1}, t))),
          static_cast<float>(std::sqrt(1.0 - std::pow(double{p.beta2}, t))),
          p.decoupled ? 1.f - p.lr * p.weight_decay : 1.f, p.decoupled ? 0.f : p.weight_decay};
}

// PyTorch Adam/AdamW: w = w*decay; g = grad + coupled_wd*w; m = b1*m + (1-b1)*g;
// v = b2*v + (1-b2)*g^2; w -= step_size * m / (sqrt(v)/bc2_sqrt + eps). Returns the new w.
TANDEM_OPT_HD float adam_element(float w, float& m, float& v, float grad, float b1, float b2,
                                 float eps, const AdamScalars& s) {
  const float wi = w * s.decay;
  const float g = grad + s.coupled_wd * wi;
  const float mi = b1 * m + (1.f - b1) * g;
  const float vi = b2 * v + (1.f - b2) * g * g;
  m = mi;
  v = vi;
  return wi - s.step_size * mi / (sqrtf(vi) / s.bc2_sqrt + eps);
}

// x is neither NaN nor infinite (no library call, so the same on the host and in a kernel).
TANDEM_OPT_HD bool finite_value(float x) { return x - x == 0.f; }

// backend.h's update gate, in place on gate (kGateSize), from the step's loss and the norm of
// its gradients as the backward left them (scaled by S; have_norm false: not computed).
TANDEM_OPT_HD void gate_step(float* gate, float loss, float norm, bool have_norm,
                             const GateParams& p) {
  const float scale = gate[kGateLossScale];
  const float inv_scale = 1.f / scale;
  const float unscaled = norm * inv_scale;
  const bool apply =
      finite_value(loss) && (!p.check_gradients || (have_norm && finite_value(norm)));
  float factor = inv_scale;
  if (p.max_norm > 0.f) {
    // PyTorch's clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1; a NaN norm gives
    // a NaN coefficient there too (min() would hide it).
    const float coef = p.max_norm / (unscaled + 1e-6f);
    factor *= coef < 1.f || coef != coef ? coef : 1.f;
  }
  gate[kGateFactor] = factor;
  gate[kGateSkip] = apply ? 0.f : 1.f;
  gate[kGateGradNorm] = have_norm ? unscaled : 0.f;
  if (p.growth_interval > 0) {  // GradScaler's update of the scale
    if (!apply) {
      gate[kGateLossScale] = scale * p.backoff_factor;
      gate[kGateGrowthTracker] = 0.f;
    } else if (gate[kGateGrowthTracker] + 1.f >= static_cast<float>(p.growth_interval)) {
      const float grown = scale * p.growth_factor;
      if (finite_value(grown)) gate[kGateLossScale] = grown;
      gate[kGateGrowthTracker] = 0.f;
    } else {
      gate[kGateGrowthTracker] += 1.f;
    }
  }
}

}  // namespace tandem
