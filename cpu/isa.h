// Included last by each file of the CPU backend's own loops (elementwise ops, activations,
// normalization, pooling, the optimizer, ...): in the default build (TANDEM_CPU_AVX2) every
// function the file defines after it is compiled for AVX2 with FMA, so that its loops run 8 floats
// wide and its bf16 conversions vectorise (SSE2, x86-64's baseline, has neither: mobilenet_v2 in
// bf16 trained 1.7x faster, the fp32 models 7-12%). The pragma leaves what the file included
// before it (the standard library, the engine) for any x86-64, so that code shared with the rest
// of the program never carries AVX2 instructions; make_cpu_backend refuses a CPU without AVX2 and
// FMA with its reason. -DTANDEM_CPU_AVX2=OFF builds the loops for any x86-64 instead. The library
// is compiled with -ffp-contract=off: a * b + c stays two roundings, so the loops' results are
// the same to the bit in both builds (and the GPU's update kernels match them).
#pragma once

// GCC's pragma; clang (the fuzz build, tools/fuzz.sh) builds the loops for any x86-64.
#if defined(TANDEM_CPU_AVX2) && !defined(__clang__)
#pragma GCC target("avx2,fma")
#endif
