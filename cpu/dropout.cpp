// Dropout on the CPU: the mask comes from the engine's Philox stream, identical on every backend.
#include <algorithm>

#include "cpu/cpu_backend_impl.h"
#include "engine/rng.h"

// clang-format off: last, so that only what follows is compiled for AVX2 with FMA
#include "cpu/isa.h"
// clang-format on

namespace tandem {

// mask[i] = (philox_uniform(seed, offset, i) >= p) * 1/(1-p), y = x * mask; x, y, mask same numel.
// The scale is computed once in fp32 as 1.0f / (1.0f - p) (0 when p >= 1, everything dropped).
void CpuBackend::dropout_forward(Tensor& y, Tensor& mask, const Tensor& x, float p, uint64_t seed,
                                 uint64_t offset) {
  TANDEM_CHECK(y.numel() == x.numel() && mask.numel() == x.numel(),
               "dropout " + x.shape().str() + " -> " + y.shape().str());
  if (!all_f32_plain({&y, &mask, &x})) {  // the mask of the logical index, as in fp32
    F32Stage sy(*this, y, false, true), sm(*this, mask, false, true), sx(*this, x, true, false);
    dropout_forward(sy.f32(), sm.f32(), sx.f32(), p, seed, offset);
    sy.finish();
    return sm.finish();
  }
  const int64_t n = x.numel();
  const float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
  const float* xp = x.data();
  float* yp = y.data();
  float* mp = mask.data();
  const int64_t blocks = (n + 3) / 4;
  // One Philox call gives the four words of elements 4b .. 4b+3 (philox_uniform's layout).
#pragma omp parallel for schedule(static) if (n > 16384)
  for (int64_t b = 0; b < blocks; ++b) {
    const Philox4 r = philox_block(seed, offset, static_cast<uint64_t>(b));
    const int64_t end = std::min<int64_t>(n, 4 * b + 4);
    for (int64_t i = 4 * b; i < end; ++i) {
      const float m = philox_to_unit(r.v[i & 3]) >= p ? scale : 0.f;
      mp[i] = m;
      yp[i] = xp[i] * m;
    }
  }
}

// dx = dy * mask.
void CpuBackend::dropout_backward(Tensor& dx, const Tensor& dy, const Tensor& mask) {
  TANDEM_CHECK(dx.numel() == dy.numel() && mask.numel() == dy.numel(),
               "dropout backward " + dy.shape().str() + " -> " + dx.shape().str());
  if (!all_f32_plain({&dx, &dy, &mask})) {
    F32Stage sdx(*this, dx, false, true), sdy(*this, dy, true, false), sm(*this, mask, true, false);
    dropout_backward(sdx.f32(), sdy.f32(), sm.f32());
    return sdx.finish();
  }
  const int64_t n = dy.numel();
  const float* g = dy.data();
  const float* m = mask.data();
  float* d = dx.data();
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) d[i] = g[i] * m[i];
}

}  // namespace tandem
