// Element positions in (N, C, inner) and (planes, H, W) tensors for the grid-stride kernels, shared
// with plain host code so that the index math is tested on machines without a GPU.
//
// A 64-bit division is a long software routine on the GPU; tensors under 2^32 elements (all but
// the very largest) take the 32-bit one, which the hardware does in a few instructions. The
// branch depends on the tensor's size only, so it is uniform across a launch.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TANDEM_INDEX_HD __host__ __device__ __forceinline__
#else
#define TANDEM_INDEX_HD inline
#endif

namespace tandem {

constexpr int64_t kMax32BitIndex = 0xffffffffLL;

// The channel of element i of an (N, C, inner) tensor of `numel` elements.
TANDEM_INDEX_HD int64_t channel_of(int64_t i, int64_t inner, int64_t c, int64_t numel) {
  if (numel <= kMax32BitIndex)
    return (static_cast<uint32_t>(i) / static_cast<uint32_t>(inner)) % static_cast<uint32_t>(c);
  return (i / inner) % c;
}

// Where element i of a (planes, H, W) tensor of `numel` elements lies.
struct PlanePos {
  int64_t plane;
  int h, w;
};

TANDEM_INDEX_HD PlanePos plane_pos(int64_t i, int H, int W, int64_t numel) {
  if (numel <= kMax32BitIndex) {
    const uint32_t u = static_cast<uint32_t>(i), row = u / static_cast<uint32_t>(W);
    return {row / static_cast<uint32_t>(H), static_cast<int>(row % static_cast<uint32_t>(H)),
            static_cast<int>(u - row * static_cast<uint32_t>(W))};
  }
  const int64_t row = i / W;
  return {row / H, static_cast<int>(row % H), static_cast<int>(i - row * W)};
}

// Where element i, counted in logical (N,C,H,W) order, of a channels-last tensor (stored as
// (N,H,W,C)) of `numel` elements lies in memory; hw = H * W. Element i is (n, c, s) with s the
// spatial position h * W + w, stored at (n * hw + s) * C + c.
TANDEM_INDEX_HD int64_t channels_last_offset(int64_t i, int64_t c, int64_t hw, int64_t numel) {
  if (numel <= kMax32BitIndex) {
    const uint32_t u = static_cast<uint32_t>(i), uhw = static_cast<uint32_t>(hw),
                   uc = static_cast<uint32_t>(c);
    const uint32_t nc = u / uhw, s = u - nc * uhw, n = nc / uc, ch = nc - n * uc;
    return static_cast<int64_t>((n * uhw + s) * uc + ch);  // < numel: no overflow
  }
  const int64_t nc = i / hw, s = i - nc * hw, n = nc / c, ch = nc - n * c;
  return (n * hw + s) * c + ch;
}

}  // namespace tandem
