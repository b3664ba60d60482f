// The elementwise kernels of every float dtype (fp32, bf16, fp16) and memory order (plain,
// channels-last): conversions (copy), fill, the non-finite count, activations, add and bias
// (`typed` in cuda_backend_impl.h). One template per op serves the three dtypes.
//
// Every kernel loads its values as fp32, computes in fp32 and, for a 16-bit result, rounds it
// once to nearest even (__float2bfloat16_rn, __float2half_rn), like the CPU's bf16 loops
// (cpu/mixed_precision.cpp). NaN passes through relu, and relu's gradient multiplies by 0 or 1,
// so a NaN or infinite gradient stays one where x <= 0. Plain grid-stride kernels rather than
// cuDNN's activation API: the interface's relu-family backward uses the forward input x and
// sigmoid/tanh use y, which a kernel states directly, and cuDNN's calls do not take these dtype
// and layout mixes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/channel_sum.cuh"
#include "cuda/cuda_backend_impl.h"
#include "cuda/index_math.h"
#include "cuda/kernel_math.h"

namespace tandem {
namespace {

#define GRID_STRIDE(i, n)                                                                \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

using bf16 = __nv_bfloat16;
using fp16 = __half;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(fp16 v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ fp16 from_float<fp16>(float v) {
  return __float2half_rn(v);
}

// --- copy: element i of the logical order, from where src keeps it to where dst keeps it ---

// One side's memory order: element i at i (plain), or at its channels-last offset.
using kernel::element_offset;
using kernel::Order;

Order order_of(const Tensor& t) {
  if (t.layout() != Layout::kChannelsLast) return {false, 1, 1};
  TANDEM_CHECK(t.shape().rank() == 4, "a channels-last tensor is 4-D, not " + t.shape().str());
  return {true, t.dim(1), t.dim(2) * t.dim(3)};
}

// A flatten is the plain case of this: a channels-last (N,C,H,W) into a plain (N, C*H*W) reads
// src's element i (logical NCHW order) into dst's element i.
template <typename S, typename D>
__global__ void convert_kernel(D* dst, const S* src, int64_t n, Order so, Order dst_order) {
  GRID_STRIDE(i, n) {
    dst[element_offset(i, dst_order, n)] = from_float<D>(to_float(src[element_offset(i, so, n)]));
  }
}

// One dtype into another memory order: the bits move as they are (int32 too).
template <typename Bits>
__global__ void permute_kernel(Bits* dst, const Bits* src, int64_t n, Order so, Order dst_order) {
  GRID_STRIDE(i, n) dst[element_offset(i, dst_order, n)] = src[element_offset(i, so, n)];
}

template <typename S, typename D>
void launch_convert(CudaBackend& b, Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  convert_kernel<S, D><<<grid_for(n), kThreads, 0, b.stream()>>>(static_cast<D*>(dst.raw()),
                                                                 static_cast<const S*>(src.raw()),
                                                                 n, order_of(src), order_of(dst));
  CUDA_CHECK_LAUNCH();
}

template <typename S>
void convert_from(CudaBackend& b, Tensor& dst, const Tensor& src) {
  switch (dst.dtype()) {
    case DType::kBF16:
      return launch_convert<S, bf16>(b, dst, src);
    case DType::kF16:
      return launch_convert<S, fp16>(b, dst, src);
    default:
      return launch_convert<S, float>(b, dst, src);
  }
}

template <typename Bits>
void launch_permute(CudaBackend& b, Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  permute_kernel<Bits><<<grid_for(n), kThreads, 0, b.stream()>>>(
      static_cast<Bits*>(dst.raw()), static_cast<const Bits*>(src.raw()), n, order_of(src),
      order_of(dst));
  CUDA_CHECK_LAUNCH();
}

// --- fill and the non-finite count ---

template <typename T>
__global__ void fill_kernel(T* t, float v, int64_t n) {
  const T x = from_float<T>(v);
  GRID_STRIDE(i, n) t[i] = x;
}

template <typename T>
__global__ void count_nonfinite_kernel(unsigned long long* count, const T* t, int64_t n) {
  unsigned long long local = 0;
  GRID_STRIDE(i, n) local += isfinite(to_float(t[i])) ? 0 : 1;  // Inf and NaN widen as they are
  if (local) atomicAdd(count, local);
}

// --- elementwise ops: every tensor of one 16-bit type T and one memory order ---

// activation_value of each element, rounded once to T.
template <typename T>
__global__ void activation_forward_kernel(T* y, const T* x, int64_t n, Activation kind,
                                          float alpha) {
  GRID_STRIDE(i, n) y[i] = from_float<T>(activation_value(kind, to_float(x[i]), alpha));
}

// activation_grad; d is the forward output y for sigmoid and tanh, the input x for the others.
template <typename T>
__global__ void activation_backward_kernel(T* dx, const T* dy, const T* d, int64_t n,
                                           Activation kind, float alpha) {
  GRID_STRIDE(i, n) {
    dx[i] = from_float<T>(activation_grad(kind, to_float(dy[i]), to_float(d[i]), alpha));
  }
}

template <typename T>
__global__ void add_kernel(T* y, const T* a, const T* b, int64_t n) {
  GRID_STRIDE(i, n) y[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
}

// y += b[channel], y seen as (N, C, inner) in memory: inner = 1 for a channels-last tensor (its
// channel is the fastest axis) and for (N,C) rows, H*W for plain images.
template <typename T>
__global__ void bias_add_kernel(T* y, const float* b, int64_t n, int64_t c, int64_t inner) {
  GRID_STRIDE(i, n) y[i] = from_float<T>(to_float(y[i]) + b[channel_of(i, inner, c, n)]);
}

// The bias gradient's summands (channel_sum.cuh): idx is the element's logical (N,C,inner) index,
// which channel_sums walks; a channels-last dy keeps it at its channels-last offset.
template <typename T>
struct BiasValue {
  const T* dy;
  Order order;  // dy's (a channels-last one's H * W is the inner extent)
  int64_t numel;
  __device__ float2 operator()(int64_t idx, int64_t) const {
    return make_float2(to_float(dy[element_offset(idx, order, numel)]), 0.f);
  }
};
struct BiasFinish {
  float* db;
  __device__ void operator()(int64_t ch, float2 s) const { db[ch] = s.x; }
};

// Same dtype, same memory order (and so, for channels-last, the same shape): the elements pair
// up in memory.
bool same_form(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.layout() == b.layout() &&
         (a.layout() == Layout::kPlain || a.shape() == b.shape());
}

bool is_float(DType d) { return d != DType::kI32; }

// A float tensor whose channel (axis 1) a kernel can find: plain of rank >= 2, or channels-last.
bool channel_form(const Tensor& t) {
  return is_float(t.dtype()) && t.shape().rank() >= 2 &&
         (t.layout() == Layout::kPlain || t.shape().rank() == 4);
}

// Calls f with a value of the element type of dtype d: bf16, fp16, else float (int32 bits move
// as float bits where a caller lets them: fill).
template <typename F>
void by_type(DType d, F&& f) {
  if (d == DType::kBF16)
    f(bf16{});
  else if (d == DType::kF16)
    f(fp16{});
  else
    f(float{});
}

}  // namespace

namespace typed {

void convert(CudaBackend& b, Tensor& dst, const Tensor& src) {
  TANDEM_CHECK((src.dtype() == DType::kI32) == (dst.dtype() == DType::kI32),
               std::string("copy converts int32 only to int32, not ") + dtype_name(src.dtype()) +
                   " to " + dtype_name(dst.dtype()));
  TANDEM_CHECK(dst.numel() == src.numel(),
               "copy " + src.shape().str() + " to " + dst.shape().str());
  const int64_t n = src.numel();
  if (n == 0) return;
  TANDEM_CHECK(dst.raw() != src.raw(), "copy converts into another buffer, not in place");
  if (src.dtype() == dst.dtype())
    return dtype_size(src.dtype()) == 2 ? launch_permute<uint16_t>(b, dst, src)
                                        : launch_permute<uint32_t>(b, dst, src);
  switch (src.dtype()) {
    case DType::kBF16:
      return convert_from<bf16>(b, dst, src);
    case DType::kF16:
      return convert_from<fp16>(b, dst, src);
    default:
      return convert_from<float>(b, dst, src);
  }
}

void fill(CudaBackend& b, Tensor& t, float value) {
  const int64_t n = t.numel();
  if (n == 0) return;
  by_type(t.dtype(), [&](auto v) {
    using T = decltype(v);
    fill_kernel<<<grid_for(n), kThreads, 0, b.stream()>>>(static_cast<T*>(t.raw()), value, n);
  });
  CUDA_CHECK_LAUNCH();
}

void count_nonfinite(CudaBackend& b, unsigned long long* counter, const Tensor& t) {
  const int64_t n = t.numel();
  if (n == 0) return;
  by_type(t.dtype(), [&](auto v) {
    using T = decltype(v);
    count_nonfinite_kernel<<<grid_for(n), kThreads, 0, b.stream()>>>(
        counter, static_cast<const T*>(t.raw()), n);
  });
  CUDA_CHECK_LAUNCH();
}

bool activation_forward(CudaBackend& b, Tensor& y, const Tensor& x, Activation a, float alpha) {
  if (!is_float(x.dtype()) || !same_form(y, x)) return false;
  const int64_t n = x.numel();
  if (n == 0) return true;
  by_type(x.dtype(), [&](auto v) {
    using T = decltype(v);
    activation_forward_kernel<T><<<grid_for(n), kThreads, 0, b.stream()>>>(
        static_cast<T*>(y.raw()), static_cast<const T*>(x.raw()), n, a, alpha);
  });
  CUDA_CHECK_LAUNCH();
  return true;
}

bool activation_backward(CudaBackend& b, Tensor& dx, const Tensor& dy, const Tensor& x,
                         const Tensor& y, Activation a, float alpha) {
  const Tensor& d = activation_uses_output(a) ? y : x;
  if (!is_float(dy.dtype()) || !same_form(dx, dy) || !same_form(d, dy)) return false;
  const int64_t n = dy.numel();
  if (n == 0) return true;
  by_type(dy.dtype(), [&](auto v) {
    using T = decltype(v);
    activation_backward_kernel<T><<<grid_for(n), kThreads, 0, b.stream()>>>(
        static_cast<T*>(dx.raw()), static_cast<const T*>(dy.raw()), static_cast<const T*>(d.raw()),
        n, a, alpha);
  });
  CUDA_CHECK_LAUNCH();
  return true;
}

bool add(CudaBackend& b, Tensor& y, const Tensor& x1, const Tensor& x2) {
  if (!is_float(y.dtype()) || !same_form(y, x1) || !same_form(y, x2)) return false;
  const int64_t n = y.numel();
  if (n == 0) return true;
  by_type(y.dtype(), [&](auto v) {
    using T = decltype(v);
    add_kernel<T><<<grid_for(n), kThreads, 0, b.stream()>>>(static_cast<T*>(y.raw()),
                                                            static_cast<const T*>(x1.raw()),
                                                            static_cast<const T*>(x2.raw()), n);
  });
  CUDA_CHECK_LAUNCH();
  return true;
}

bool bias_add(CudaBackend& b, Tensor& y, const Tensor& bias) {
  if (!channel_form(y) || !bias.is_f32_plain()) return false;
  const int64_t n = y.dim(0), c = y.dim(1);
  expect_numel(bias, c, "bias");
  if (y.numel() == 0) return true;
  // y seen as (N, C, inner) in memory: a channels-last tensor's channel is its fastest axis.
  const int64_t inner = y.layout() == Layout::kChannelsLast ? 1 : y.numel() / (n * c);
  by_type(y.dtype(), [&](auto v) {
    using T = decltype(v);
    bias_add_kernel<T><<<grid_for(y.numel()), kThreads, 0, b.stream()>>>(
        static_cast<T*>(y.raw()), bias.data(), y.numel(), c, inner);
  });
  CUDA_CHECK_LAUNCH();
  return true;
}

bool bias_backward(CudaBackend& b, Tensor& db, const Tensor& dy) {
  if (!channel_form(dy) || !db.is_f32_plain()) return false;
  const int64_t n = dy.dim(0), c = dy.dim(1);
  expect_numel(db, c, "bias gradient");
  // The logical (N, C, inner) geometry; BiasValue finds a channels-last element's place.
  const int64_t inner = n * c == 0 ? 0 : dy.numel() / (n * c);
  by_type(dy.dtype(), [&](auto v) {
    using T = decltype(v);
    const BiasValue<T> value{static_cast<const T*>(dy.raw()), order_of(dy), dy.numel()};
    channel_sums(b, n, c, inner, value, BiasFinish{db.data()});
  });
  return true;
}

}  // namespace typed
}  // namespace tandem
