// The CPU's arithmetic peak, measured: every thread runs a loop of independent fused multiply-adds
// on registers only (no memory traffic, no dependency chain shorter than the FMA units can hide),
// with the widest vectors the CPU has; the best of a few short runs is the peak. A roofline for
// `trainer bench`: a step's GFLOP/s over this figure is the share of the machine the step uses.
//
// An FMA counts as two FLOPs, as convolution FLOP counts do. Zen 4 runs 512-bit FMAs as two
// 256-bit halves, so there AVX-512 and AVX2 give the same peak; on Intel's AVX-512 server cores
// the 512-bit loop is twice the 256-bit one. bf16: the AVX512-BF16 dot product (vdpbf16ps)
// multiplies two pairs per fp32 lane, four FLOPs, where the CPU has it.
#include <fmt/format.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>

#include "cpu/cpu_backend_impl.h"

namespace tandem {
namespace {

// The loops are optimised and left uninstrumented in every build: the sanitizer build's -O1 and
// its checks of the accumulator array would keep them in memory and measure a fraction of the
// peak (13 GFLOP/s where 230 is right).
#ifdef __clang__  // clang has no optimize attribute (its fuzz build runs no benchmark)
#define TANDEM_REGISTER_LOOP(isa) __attribute__((target(isa), no_sanitize("address", "undefined")))
#else
#define TANDEM_REGISTER_LOOP(isa) \
  __attribute__((target(isa), optimize("O3"), no_sanitize("address", "undefined")))
#endif

// Enough accumulators to cover the FMA latency on both FMA pipes (4-5 cycles x 2), few enough to
// stay in the 16 ymm registers with the two operands.
constexpr int kChains256 = 12;
constexpr int kChains512 = 16;

TANDEM_REGISTER_LOOP("avx2,fma") float fma_loop_256(int64_t iters) {
  __m256 acc[kChains256];
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  for (int i = 0; i < kChains256; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  for (int64_t k = 0; k < iters; ++k)
#pragma GCC unroll 16
    for (int i = 0; i < kChains256; ++i) acc[i] = _mm256_fmadd_ps(acc[i], b, c);
  float s = 0;
  for (int i = 0; i < kChains256; ++i) s += _mm256_cvtss_f32(acc[i]);
  return s;
}

TANDEM_REGISTER_LOOP("avx512f") float fma_loop_512(int64_t iters) {
  __m512 acc[kChains512];
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  for (int i = 0; i < kChains512; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  for (int64_t k = 0; k < iters; ++k)
#pragma GCC unroll 16
    for (int i = 0; i < kChains512; ++i) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
  float s = 0;
  for (int i = 0; i < kChains512; ++i) s += _mm512_cvtss_f32(acc[i]);
  return s;
}

TANDEM_REGISTER_LOOP("avx512f,avx512bf16") float dot_bf16_loop_512(int64_t iters) {
  __m512 acc[kChains512];
  // 1/1024 in bf16 (0x3A80) in every half: each lane gains 2^-19 an iteration, far from overflow.
  const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3A80));
  for (int i = 0; i < kChains512; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  for (int64_t k = 0; k < iters; ++k)
#pragma GCC unroll 16
    for (int i = 0; i < kChains512; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
  float s = 0;
  for (int i = 0; i < kChains512; ++i) s += _mm512_cvtss_f32(acc[i]);
  return s;
}

struct Kernel {
  float (*loop)(int64_t);
  double flops_per_iteration;  // per thread
  const char* what;
};

Kernel kernel_for(DType d) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (d == DType::kBF16 && avx512 && __builtin_cpu_supports("avx512bf16"))
    return {dot_bf16_loop_512, kChains512 * 16 * 4.0, "AVX512-BF16 dot products (vdpbf16ps)"};
  if (avx512) return {fma_loop_512, kChains512 * 16 * 2.0, "AVX-512 FMAs"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {fma_loop_256, kChains256 * 8 * 2.0, "AVX2 FMAs"};
  return {nullptr, 0, ""};
}

}  // namespace

ArithmeticPeak CpuBackend::arithmetic_peak(DType d) {
  const DType key = d == DType::kBF16 ? DType::kBF16 : DType::kF32;
  auto known = peaks_.find(key);
  if (known != peaks_.end()) return known->second;
  const Kernel k = kernel_for(key);
  ArithmeticPeak peak;
  if (!k.loop) {
    peak.how = "not measured: the CPU has no AVX2 with FMA";
  } else {
    // About 30 ms a run at 100 GFLOP/s a thread; the best of 5 rides out a preempted one.
    const int64_t iters = static_cast<int64_t>(3e9 / k.flops_per_iteration);
    double best = 0;
    volatile float sink = 0;
    for (int run = 0; run < 5; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      float s = 0;
#pragma omp parallel num_threads(threads_) reduction(+ : s)
      s += k.loop(iters);
      const double sec =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      sink = sink + s;
      best = std::max(best, k.flops_per_iteration * static_cast<double>(iters) * threads_ / sec);
    }
    peak.gflops = best / 1e9;
    peak.how = fmt::format("measured: {} on registers, {} thread{}, best of 5", k.what, threads_,
                           threads_ == 1 ? "" : "s");
  }
  peaks_.emplace(key, peak);
  return peak;
}

}  // namespace tandem
