// Elementwise ops on the GPU: fill, bias add/backward, add, activations, dropout, non-finite count.
//
// Plain grid-stride kernels rather than cuDNN's activation API: the interface's relu-family
// backward uses the forward input x and sigmoid/tanh use y, which a kernel states directly.
// bias_backward reduces in a fixed order (channel_sum.cuh), so it is deterministic.
//
// These kernels take fp32 plain tensors; 16-bit ones go to cuda/mixed_precision.cu's kernels
// (activations, add, bias, fill, the non-finite count) or to fp32 stand-ins (dropout, and any
// mix those kernels do not take).
#include <algorithm>
#include <cmath>

#include "cuda/channel_sum.cuh"
#include "cuda/cuda_backend_impl.h"
#include "engine/rng.h"

namespace tandem {
namespace {

#define GRID_STRIDE(i, n)                                                              \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void fill_kernel(float* t, float v, int64_t n) {
  GRID_STRIDE(i, n) t[i] = v;
}

// y (N,C,inner) += b (C)
__global__ void bias_add_kernel(float* y, const float* b, int64_t n, int64_t c, int64_t inner) {
  GRID_STRIDE(i, n) y[i] += b[channel_of(i, inner, c, n)];
}

// The bias gradient's summands and where the channel sums go (channel_sum.cuh).
struct BiasValue {
  const float* dy;
  __device__ float2 operator()(int64_t i, int64_t) const { return make_float2(dy[i], 0.f); }
};
struct BiasFinish {
  float* db;
  __device__ void operator()(int64_t ch, float2 s) const { db[ch] = s.x; }
};

__global__ void add_kernel(float* y, const float* a, const float* b, int64_t n) {
  GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

// t *= factor[0], the factor read on the device (fp16's loss scale on the loss gradient).
__global__ void scale_by_kernel(float* t, const float* factor, int64_t n) {
  const float f = *factor;
  GRID_STRIDE(i, n) t[i] *= f;
}

__global__ void activation_forward_kernel(float* y, const float* x, int64_t n, int kind,
                                          float alpha) {
  GRID_STRIDE(i, n) {
    const float v = x[i];
    float r;
    switch (kind) {
      case 0: r = v <= 0.f ? 0.f : v; break;                   // relu (a NaN passes on)
      case 1: r = v > 0.f ? v : alpha * v; break;              // leaky relu
      case 2: r = 1.f / (1.f + expf(-v)); break;               // sigmoid
      default: r = tanhf(v); break;                            // tanh
    }
    y[i] = r;
  }
}

__global__ void activation_backward_kernel(float* dx, const float* dy, const float* x,
                                           const float* y, int64_t n, int kind, float alpha) {
  GRID_STRIDE(i, n) {
    float g;
    // relu multiplies rather than chooses, so a NaN or infinite dy stays one where x <= 0.
    switch (kind) {
      case 0: g = dy[i] * (x[i] > 0.f ? 1.f : 0.f); break;
      case 1: g = x[i] > 0.f ? dy[i] : alpha * dy[i]; break;
      case 2: g = dy[i] * y[i] * (1.f - y[i]); break;
      default: g = dy[i] * (1.f - y[i] * y[i]); break;
    }
    dx[i] = g;
  }
}

// mask[i] = (philox_uniform(seed, offset, i) >= p) * scale; the same words as the CPU backend.
// One thread per Philox block: its four words are the masks of elements 4b .. 4b + 3.
__global__ void dropout_forward_kernel(float* y, float* mask, const float* x, int64_t n, float p,
                                       float scale, uint64_t seed, uint64_t offset) {
  GRID_STRIDE(b, (n + 3) / 4) {
    const Philox4 r = philox_block(seed, offset, static_cast<uint64_t>(b));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t i = 4 * b + j;
      if (i >= n) break;
      const float m = philox_to_unit(r.v[j]) >= p ? scale : 0.f;
      mask[i] = m;
      y[i] = x[i] * m;
    }
  }
}

__global__ void multiply_kernel(float* y, const float* a, const float* b, int64_t n) {
  GRID_STRIDE(i, n) y[i] = a[i] * b[i];
}

__global__ void count_nonfinite_kernel(unsigned long long* count, const float* t, int64_t n) {
  unsigned long long local = 0;
  GRID_STRIDE(i, n) local += isfinite(t[i]) ? 0 : 1;
  if (local) atomicAdd(count, local);  // integer sums are exact in any order
}

int activation_kind(Activation a) {
  switch (a) {
    case Activation::kRelu: return 0;
    case Activation::kLeakyRelu: return 1;
    case Activation::kSigmoid: return 2;
    case Activation::kTanh: return 3;
  }
  return 0;
}

// (N, C, inner) view of a tensor whose axis 1 is the channel axis.
void channel_geometry(const Tensor& t, int64_t* n, int64_t* c, int64_t* inner) {
  TANDEM_CHECK(t.shape().rank() >= 2, "bias ops need a (N, C, ...) tensor, got " + t.shape().str());
  *n = t.dim(0);
  *c = t.dim(1);
  *inner = t.numel() / std::max<int64_t>(1, *n * *c);
}

}  // namespace

void CudaBackend::fill(Tensor& t, float value) {
  if (is_16bit(t.dtype())) return cuda16::fill(*this, t, value);
  if (t.numel() == 0) return;
  fill_kernel<<<grid_for(t.numel()), kThreads, 0, stream_>>>(t.data(), value, t.numel());
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::bias_add(Tensor& y, const Tensor& b) {
  if (!plain_f32({&y, &b})) {
    if (cuda16::bias_add(*this, y, b)) return;
    StandIn sy(*this, y, true, true), sb(*this, b, true, false);
    bias_add(sy.get(), sb.get());
    return sy.finish();
  }
  int64_t n, c, inner;
  channel_geometry(y, &n, &c, &inner);
  expect_numel(b, c, "bias");
  bias_add_kernel<<<grid_for(y.numel()), kThreads, 0, stream_>>>(y.data(), b.data(), y.numel(), c,
                                                                 inner);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::bias_backward(Tensor& db, const Tensor& dy) {
  if (!plain_f32({&db, &dy})) {
    if (cuda16::bias_backward(*this, db, dy)) return;
    StandIn sdb(*this, db, false, true), sdy(*this, dy, true, false);
    bias_backward(sdb.get(), sdy.get());
    return sdb.finish();
  }
  int64_t n, c, inner;
  channel_geometry(dy, &n, &c, &inner);
  expect_numel(db, c, "bias gradient");
  channel_sums(*this, n, c, inner, BiasValue{dy.data()}, BiasFinish{db.data()});
}

void CudaBackend::add(Tensor& y, const Tensor& a, const Tensor& b) {
  expect_numel(a, y.numel(), "add: a");
  expect_numel(b, y.numel(), "add: b");
  if (!plain_f32({&y, &a, &b})) {
    if (cuda16::add(*this, y, a, b)) return;
    // y may alias a or b: both are read into their stand-ins before y's is written back.
    StandIn sy(*this, y, false, true), sa(*this, a, true, false), sb(*this, b, true, false);
    add(sy.get(), sa.get(), sb.get());
    return sy.finish();
  }
  if (y.numel() == 0) return;
  add_kernel<<<grid_for(y.numel()), kThreads, 0, stream_>>>(y.data(), a.data(), b.data(), y.numel());
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::scale_by(Tensor& t, const Tensor& factor) {
  TANDEM_CHECK(t.dtype() == DType::kF32 && factor.dtype() == DType::kF32 && factor.numel() == 1,
               "scale_by takes an fp32 tensor and a one-element fp32 factor");
  if (t.numel() == 0) return;
  scale_by_kernel<<<grid_for(t.numel()), kThreads, 0, stream_>>>(t.data(), factor.data(),
                                                                 t.numel());
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::activation_forward(Tensor& y, const Tensor& x, Activation a, float alpha) {
  expect_numel(y, x.numel(), "activation output");
  if (!plain_f32({&y, &x})) {
    if (cuda16::activation_forward(*this, y, x, a, alpha)) return;
    StandIn sy(*this, y, false, true), sx(*this, x, true, false);  // y may alias x
    activation_forward(sy.get(), sx.get(), a, alpha);
    return sy.finish();
  }
  if (x.numel() == 0) return;
  activation_forward_kernel<<<grid_for(x.numel()), kThreads, 0, stream_>>>(
      y.data(), x.data(), x.numel(), activation_kind(a), alpha);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::activation_backward(Tensor& dx, const Tensor& dy, const Tensor& x,
                                      const Tensor& y, Activation a, float alpha) {
  expect_numel(dx, dy.numel(), "activation input gradient");
  if (!plain_f32({&dx, &dy, &x, &y})) {
    if (cuda16::activation_backward(*this, dx, dy, x, y, a, alpha)) return;
    // Only the input the gradient reads (x for the relu family, y for sigmoid and tanh).
    const Tensor& d = a == Activation::kRelu || a == Activation::kLeakyRelu ? x : y;
    StandIn sdx(*this, dx, false, true), sdy(*this, dy, true, false), sd(*this, d, true, false);
    activation_backward(sdx.get(), sdy.get(), sd.get(), sd.get(), a, alpha);
    return sdx.finish();
  }
  if (dy.numel() == 0) return;
  activation_backward_kernel<<<grid_for(dy.numel()), kThreads, 0, stream_>>>(
      dx.data(), dy.data(), x.data(), y.data(), dy.numel(), activation_kind(a), alpha);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::dropout_forward(Tensor& y, Tensor& mask, const Tensor& x, float p, uint64_t seed,
                                  uint64_t offset) {
  expect_numel(y, x.numel(), "dropout output");
  expect_numel(mask, x.numel(), "dropout mask");
  if (!plain_f32({&y, &mask, &x})) {  // in fp32, the mask of the logical index as an fp32 run's
    StandIn sy(*this, y, false, true), sm(*this, mask, false, true), sx(*this, x, true, false);
    dropout_forward(sy.get(), sm.get(), sx.get(), p, seed, offset);
    sy.finish();
    return sm.finish();
  }
  if (x.numel() == 0) return;
  const float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;  // the CPU backend's fp32 scale
  dropout_forward_kernel<<<grid_for((x.numel() + 3) / 4), kThreads, 0, stream_>>>(
      y.data(), mask.data(), x.data(), x.numel(), p, scale, seed, offset);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::dropout_backward(Tensor& dx, const Tensor& dy, const Tensor& mask) {
  expect_numel(dx, dy.numel(), "dropout input gradient");
  expect_numel(mask, dy.numel(), "dropout mask");
  if (!plain_f32({&dx, &dy, &mask})) {
    StandIn sdx(*this, dx, false, true), sdy(*this, dy, true, false), sm(*this, mask, true, false);
    dropout_backward(sdx.get(), sdy.get(), sm.get());
    return sdx.finish();
  }
  if (dy.numel() == 0) return;
  multiply_kernel<<<grid_for(dy.numel()), kThreads, 0, stream_>>>(dx.data(), dy.data(), mask.data(),
                                                                  dy.numel());
  CUDA_CHECK_LAUNCH();
}

int64_t CudaBackend::count_nonfinite(const Tensor& t) { return count_nonfinite({&t}); }

int64_t CudaBackend::count_nonfinite(const std::vector<const Tensor*>& ts) {
  // Every tensor's kernel adds to one counter: a single copy back and wait for them all.
  CUDA_CHECK(cudaMemsetAsync(device_flag_, 0, sizeof(unsigned long long), stream_));
  for (const Tensor* t : ts) {
    if (t->numel() == 0) continue;
    if (is_16bit(t->dtype())) {
      cuda16::count_nonfinite(*this, device_flag_, *t);
      continue;
    }
    count_nonfinite_kernel<<<grid_for(t->numel()), kThreads, 0, stream_>>>(
        device_flag_, t->data(), t->numel());
    CUDA_CHECK_LAUNCH();
  }
  CUDA_CHECK(cudaMemcpyAsync(host_flag_, device_flag_, sizeof(unsigned long long),
                             cudaMemcpyDeviceToHost, stream_));
  copy_label_flag();
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  later_pending_ = false;
  check_later_labels();
  check_labels();
  return static_cast<int64_t>(*host_flag_);
}

}  // namespace tandem
