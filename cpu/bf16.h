// bf16 <-> fp32 conversion for the CPU's own 16-bit loops (oneDNN's kernels convert for theirs).
//
// bf16 is the upper half of an fp32: widening is a shift; narrowing rounds to nearest, ties to
// even, as oneDNN's reorders and the hardware's vcvtneps2bf16 do, and keeps a NaN a NaN.
#pragma once

#include <bit>
#include <cstdint>

namespace tandem {

inline float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// Branch-free (masks, not a ternary of calls), so that GCC vectorises the loops that call it.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet = (u >> 16) | 0x40u;  // a NaN stays a NaN (rounding could carry it to inf)
  const uint32_t nan = 0u - static_cast<uint32_t>((u & 0x7fffffffu) > 0x7f800000u);
  return static_cast<uint16_t>((quiet & nan) | (rounded & ~nan));
}

// c ? a : b on bf16 bit patterns, as masks (vectorises where the ternary does not).
inline uint16_t select_bf16(bool c, uint16_t a, uint16_t b) {
  const auto m = static_cast<uint16_t>(0u - static_cast<uint32_t>(c));
  return static_cast<uint16_t>((a & m) | (b & static_cast<uint16_t>(~m)));
}

// Element i of fp32 or bf16 memory as fp32 (bf16 widened), and stored back (bf16 rounded once):
// one loop body for both dtypes.
inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) { return bf16_to_f32(p[i]); }
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(uint16_t* p, int64_t i, float v) { p[i] = f32_to_bf16(v); }

// Whether a bf16 is an infinity or a NaN: its exponent bits all set.
inline bool bf16_nonfinite(uint16_t h) { return (h & 0x7f80u) == 0x7f80u; }

}  // namespace tandem
