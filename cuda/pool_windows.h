// Pooling window geometry along one axis, shared by the backward kernels of pool.cu and plain host
// code, so that the index math is tested on machines without a GPU.
#pragma once

#if defined(__CUDACC__)
#define TANDEM_POOL_HD __host__ __device__ __forceinline__
#else
#define TANDEM_POOL_HD inline
#endif

namespace tandem {

// Window o of an axis covers input rows o*stride - pad .. o*stride - pad + kernel - 1.
struct WindowRange {
  int first, last;  // the windows covering one input row; none when first > last
};

// The windows among [0, out) that cover input row i.
TANDEM_POOL_HD WindowRange covering_windows(int i, int kernel, int stride, int pad, int out) {
  const int lo = i + pad - kernel + 1;  // the smallest o*stride whose window still reaches i
  const int first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  const int last = (i + pad) / stride < out - 1 ? (i + pad) / stride : out - 1;
  return {first, last};
}

// The input rows of window o that are not padding: [begin, end) within [0, size).
struct WindowSpan {
  int begin, end;
};

TANDEM_POOL_HD WindowSpan window_span(int o, int kernel, int stride, int pad, int size) {
  const int start = o * stride - pad;
  return {start > 0 ? start : 0, start + kernel < size ? start + kernel : size};
}

}  // namespace tandem
