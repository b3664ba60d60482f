// Adam's update of one element (backend.h's adam_update) and its per-step scalars, shared by the
// CPU backend's loop and the GPU's kernel, so that both devices compute the same expression and it
// is tested on machines without a GPU.
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

}  // namespace tandem
