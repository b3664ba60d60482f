// Elementwise ops on the GPU: fill, bias add/backward, add, multiply, scale_by, activations,
// dropout, non-finite count.
//
// Fill, bias, add, the activations and the count run the kernels of cuda/mixed_precision.cu
// (`typed`: one template for fp32, bf16 and fp16, plain or channels-last); a mix of forms they do
// not take runs on fp32 plain stand-ins. bias_backward reduces in a fixed order (channel_sum.cuh),
// so it is deterministic. scale_by and dropout are fp32 kernels here (dropout of 16-bit tensors
// on stand-ins).
#include <algorithm>
#include <cmath>
#include <optional>

#include "cuda/cuda_backend_impl.h"
#include "cuda/kernel_math.h"
#include "engine/rng.h"

namespace tandem {
namespace {

#define GRID_STRIDE(i, n)                                                                \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// t *= factor[0], the factor read on the device (fp16's loss scale on the loss gradient).
__global__ void scale_by_kernel(float* t, const float* factor, int64_t n) {
  const float f = *factor;
  GRID_STRIDE(i, n) t[i] *= f;
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
      const float m = kernel::dropout_mask_of_word(r.v[j], p, scale);
      mask[i] = m;
      y[i] = x[i] * m;
    }
  }
}

__global__ void multiply_kernel(float* y, const float* a, const float* b, int64_t n) {
  GRID_STRIDE(i, n) y[i] = a[i] * b[i];
}

// y = a * b[i / inner]: b one value per row of `inner` values (inner 1: b is a's shape).
__global__ void multiply_rows_kernel(float* y, const float* a, const float* b, int64_t n,
                                     int64_t inner) {
  GRID_STRIDE(i, n) y[i] = a[i] * b[i / inner];
}

// db[row] = sum over the row of dy * a: one block per row, each thread a strided share, then the
// block's tree (a fixed order: deterministic).
__global__ void multiply_row_sums_kernel(float* db, const float* dy, const float* a, int64_t rows,
                                         int64_t inner) {
  __shared__ float part[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x)
      s += dy[r * inner + j] * a[r * inner + j];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) db[r] = part[0];
    __syncthreads();
  }
}

}  // namespace

void CudaBackend::fill(Tensor& t, float value) { typed::fill(*this, t, value); }

void CudaBackend::bias_add(Tensor& y, const Tensor& b) {
  TANDEM_CHECK(y.shape().rank() >= 2, "bias ops need a (N, C, ...) tensor, got " + y.shape().str());
  if (typed::bias_add(*this, y, b)) return;
  StandIn sy(*this, y, true, true), sb(*this, b, true, false);
  bias_add(sy.get(), sb.get());
  sy.finish();
}

void CudaBackend::bias_backward(Tensor& db, const Tensor& dy) {
  TANDEM_CHECK(dy.shape().rank() >= 2,
               "bias ops need a (N, C, ...) tensor, got " + dy.shape().str());
  if (typed::bias_backward(*this, db, dy)) return;
  StandIn sdb(*this, db, false, true), sdy(*this, dy, true, false);
  bias_backward(sdb.get(), sdy.get());
  sdb.finish();
}

void CudaBackend::add(Tensor& y, const Tensor& a, const Tensor& b) {
  expect_numel(a, y.numel(), "add: a");
  expect_numel(b, y.numel(), "add: b");
  if (typed::add(*this, y, a, b)) return;
  // y may alias a or b: both are read into their stand-ins before y's is written back.
  StandIn sy(*this, y, false, true), sa(*this, a, true, false), sb(*this, b, true, false);
  add(sy.get(), sa.get(), sb.get());
  sy.finish();
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
  if (typed::activation_forward(*this, y, x, a, alpha)) return;
  StandIn sy(*this, y, false, true), sx(*this, x, true, false);  // y may alias x
  activation_forward(sy.get(), sx.get(), a, alpha);
  sy.finish();
}

void CudaBackend::activation_backward(Tensor& dx, const Tensor& dy, const Tensor& x,
                                      const Tensor& y, Activation a, float alpha) {
  expect_numel(dx, dy.numel(), "activation input gradient");
  if (typed::activation_backward(*this, dx, dy, x, y, a, alpha)) return;
  // Only the input the gradient reads (y for sigmoid and tanh, x for the others).
  const Tensor& d = activation_uses_output(a) ? y : x;
  StandIn sdx(*this, dx, false, true), sdy(*this, dy, true, false), sd(*this, d, true, false);
  activation_backward(sdx.get(), sdy.get(), sd.get(), sd.get(), a, alpha);
  sdx.finish();
}

void CudaBackend::multiply(Tensor& y, const Tensor& a, const Tensor& b) {
  const MultiplyGeometry g = multiply_geometry(y, a, b);
  if (!plain_f32({&y, &a, &b})) {  // 16-bit or channels-last: in the logical order, in fp32
    StandIn sy(*this, y, &y == &a, true), sa(*this, a, true, false), sb(*this, b, true, false);
    multiply(sy.get(), &y == &a ? sy.get() : sa.get(), sb.get());
    return sy.finish();
  }
  if (a.numel() == 0) return;
  multiply_rows_kernel<<<grid_for(a.numel()), kThreads, 0, stream_>>>(y.data(), a.data(), b.data(),
                                                                      a.numel(), g.inner);
  CUDA_CHECK_LAUNCH();
}

void CudaBackend::multiply_backward(Tensor* da, Tensor* db, const Tensor& dy, const Tensor& a,
                                    const Tensor& b) {
  const MultiplyGeometry g = multiply_geometry(dy, a, b);
  if (!plain_f32({&dy, &a, &b}) || (da && !plain_f32({da})) || (db && !plain_f32({db}))) {
    StandIn sdy(*this, dy, true, false), sa(*this, a, true, false), sb(*this, b, true, false);
    std::optional<StandIn> sda, sdb;
    if (da) sda.emplace(*this, *da, false, true);
    if (db) sdb.emplace(*this, *db, false, true);
    multiply_backward(da ? &sda->get() : nullptr, db ? &sdb->get() : nullptr, sdy.get(), sa.get(),
                      sb.get());
    if (sda) sda->finish();
    if (sdb) sdb->finish();
    return;
  }
  if (a.numel() == 0) return;
  if (da) {
    expect_numel(*da, a.numel(), "multiply: da");
    multiply_rows_kernel<<<grid_for(a.numel()), kThreads, 0, stream_>>>(
        da->data(), dy.data(), b.data(), a.numel(), g.inner);
    CUDA_CHECK_LAUNCH();
  }
  if (db) {
    expect_numel(*db, b.numel(), "multiply: db");
    if (g.inner == 1)  // b is a's shape: db = dy * a, elementwise
      multiply_kernel<<<grid_for(a.numel()), kThreads, 0, stream_>>>(db->data(), dy.data(),
                                                                     a.data(), a.numel());
    else
      multiply_row_sums_kernel<<<static_cast<unsigned>(std::min<int64_t>(g.rows, 65535)), kThreads,
                                 0, stream_>>>(db->data(), dy.data(), a.data(), g.rows, g.inner);
    CUDA_CHECK_LAUNCH();
  }
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
    typed::count_nonfinite(*this, device_flag_, *t);
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
