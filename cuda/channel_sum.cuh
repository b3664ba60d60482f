// Per-channel sums over an (N, C, inner) tensor in two fixed-order stages, so that they are
// deterministic without atomics: block (ch * parts + part) sums the part-th slice of channel ch's
// N * inner values into a partial, then one thread per channel adds its parts in order and hands
// the total to a finishing functor. One block per channel alone would leave most SMs idle on a
// conv layer's few channels. Used by bias_backward and batch normalization.
//
// Value(idx, ch) -> float2 is what is summed at element idx (of channel ch); two sums at once
// serve a backward that needs both. Finish(ch, float2 total) writes the channel's results.
#pragma once

#include <algorithm>

#include "cuda/cuda_backend_impl.h"
#include "cuda/index_math.h"

namespace tandem {

template <typename Value>
__global__ void channel_partial_kernel(float2* partial, Value value, int64_t c, int64_t inner,
                                       int64_t count, int64_t chunk, int parts) {
  __shared__ float2 buf[kThreads];
  const int64_t ch = blockIdx.x / parts;
  const int64_t begin = (blockIdx.x % parts) * chunk, end = min(begin + chunk, count);
  // (n, k) of value j = n*inner + k, advanced by blockDim without a division per value.
  int64_t j = begin + threadIdx.x, n = j / inner, k = j % inner;
  const int64_t dn = blockDim.x / inner, dk = blockDim.x % inner;
  float2 s = make_float2(0.f, 0.f);
  for (; j < end; j += blockDim.x) {
    const float2 v = value((n * c + ch) * inner + k, ch);
    s.x += v.x;
    s.y += v.y;
    n += dn, k += dk;
    if (k >= inner) k -= inner, ++n;
  }
  buf[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {  // launched with kThreads threads
    if (threadIdx.x < stride) {
      buf[threadIdx.x].x += buf[threadIdx.x + stride].x;
      buf[threadIdx.x].y += buf[threadIdx.x + stride].y;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = buf[0];
}

template <typename Finish>
__global__ void channel_finish_kernel(Finish finish, const float2* partial, int64_t c, int parts) {
  for (int64_t ch = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; ch < c;
       ch += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float2 s = make_float2(0.f, 0.f);
    for (int part = 0; part < parts; ++part) {
      s.x += partial[ch * parts + part].x;
      s.y += partial[ch * parts + part].y;
    }
    finish(ch, s);
  }
}

// Queues both stages on the backend's stream for a tensor of geometry (n, c, inner).
template <typename Value, typename Finish>
void channel_sums(CudaBackend& be, int64_t n, int64_t c, int64_t inner, Value value,
                  Finish finish) {
  if (c == 0) return;
  // Parts of at least 16 values a thread, at most 64 per channel: enough blocks for every SM.
  const int64_t count = n * inner;
  const int parts = static_cast<int>(std::clamp<int64_t>(count / (16 * kThreads), 1, 64));
  const int64_t chunk = (count + parts - 1) / parts;
  auto partial = be.scratch(static_cast<size_t>(c * parts) * sizeof(float2));
  auto* pp = static_cast<float2*>(partial.get());
  channel_partial_kernel<<<static_cast<unsigned>(c * parts), kThreads, 0, be.stream()>>>(
      pp, value, c, std::max<int64_t>(inner, 1), count, chunk, parts);
  CUDA_CHECK_LAUNCH();
  channel_finish_kernel<<<grid_for(c), kThreads, 0, be.stream()>>>(finish, pp, c, parts);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem
