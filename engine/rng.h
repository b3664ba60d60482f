// Philox-4x32-10, the counter-based RNG behind weight initialisation and dropout masks.
//
// Written by hand (it is 30 lines) so that host and device code share one definition and a seed
// gives the same numbers on every backend: the CPU backend calls it from C++, the CUDA backend from
// kernels. Reference: Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC 2011).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__ __forceinline__
#else
#define TANDEM_HD inline
#endif

namespace tandem {

struct Philox4 {
  uint32_t v[4];
};

TANDEM_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// Four 32-bit random words for a 128-bit counter (c0..c3) and a 64-bit key.
TANDEM_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint64_t key) {
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, c0, hi0, lo0);
    philox_mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Uniform in [0, 1) from 24 random bits: exactly representable in fp32 on every device.
TANDEM_HD float philox_to_unit(uint32_t r) { return static_cast<float>(r >> 8) * (1.0f / 16777216.0f); }

// The four words of block `block` of stream (key, stream): those of indices 4 block .. 4 block + 3.
// A kernel or loop that fills four elements from one call uses every word it computes.
TANDEM_HD Philox4 philox_block(uint64_t key, uint64_t stream, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                       static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32), key);
}

// The uniform number number `index` of stream (key, stream): word index % 4 of block index / 4.
TANDEM_HD float philox_uniform(uint64_t key, uint64_t stream, uint64_t index) {
  return philox_to_unit(philox_block(key, stream, index >> 2).v[index & 3]);
}

// A standard normal sample (Box-Muller on a pair of words): host-side initialisation only, in
// double so that the result does not depend on the platform's float transcendental functions.
inline double philox_normal(uint64_t key, uint64_t stream, uint64_t index) {
  Philox4 r = philox4x32_10(static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                            static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                            key ^ 0x5851F42D4C957F2Dull);
  double u1 = ((static_cast<uint64_t>(r.v[0]) << 21 ^ r.v[1]) + 0.5) / 9007199254740992.0;  // (0,1)
  double u2 = (static_cast<double>(r.v[2]) + 0.5) / 4294967296.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace tandem
