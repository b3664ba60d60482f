// Max and average pooling: forward through cuDNN (ceil mode, which cuDNN's descriptor cannot
// express, through a kernel of ours), backward through gather kernels (first maximum).
// A NaN in a max window is its maximum (CUDNN_PROPAGATE_NAN, as the CPU backend and PyTorch).
//
// Backward is written by hand because the interface routes a max-pool gradient to the *first*
// maximum of its window (ties are common after a relu: windows of zeros), which cuDNN does not
// promise, and because a gather (each dx element sums the windows that cover it) is deterministic
// without atomics, for overlapping windows too.
#include "cuda/cuda_backend_impl.h"
#include "cuda/index_math.h"
#include "cuda/kernel_math.h"

namespace tandem {
namespace {

using kernel::PoolGeom;

// dx (N,C,H,W) from dy (N,C,P,Q) and x: each dx element gathers from the windows that cover it
// (kernel::max_pool_dx).
__global__ void max_pool_backward_kernel(float* __restrict__ dx, const float* __restrict__ dy,
                                         const float* __restrict__ x, PoolGeom g) {
  const int64_t total = static_cast<int64_t>(g.N) * g.C * g.H * g.W;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const PlanePos pos = plane_pos(i, g.H, g.W, total);
    dx[i] =
        kernel::max_pool_dx(x + pos.plane * g.H * g.W, dy + pos.plane * g.P * g.Q, pos.h, pos.w, g);
  }
}

// y (N,C,P,Q): each window's first maximum or mean (kernel::pool_window_value).
__global__ void pool_forward_kernel(float* __restrict__ y, const float* __restrict__ x, bool is_max,
                                    PoolGeom g) {
  const int64_t total = static_cast<int64_t>(g.N) * g.C * g.P * g.Q;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const PlanePos pos = plane_pos(i, g.P, g.Q, total);
    y[i] = kernel::pool_window_value(x + pos.plane * g.H * g.W, pos.h, pos.w, is_max, g);
  }
}

// Average excludes padding from the divisor (cuDNN's AVERAGE_COUNT_EXCLUDE_PADDING).
__global__ void avg_pool_backward_kernel(float* __restrict__ dx, const float* __restrict__ dy,
                                         PoolGeom g) {
  const int64_t total = static_cast<int64_t>(g.N) * g.C * g.H * g.W;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const PlanePos pos = plane_pos(i, g.H, g.W, total);
    dx[i] = kernel::avg_pool_dx(dy + pos.plane * g.P * g.Q, pos.h, pos.w, g);
  }
}

PoolGeom geometry(const Tensor& x, const Tensor& y, const Pool2dParams& p) {
  return PoolGeom{static_cast<int>(x.dim(0)),
                  static_cast<int>(x.dim(1)),
                  static_cast<int>(x.dim(2)),
                  static_cast<int>(x.dim(3)),
                  static_cast<int>(y.dim(2)),
                  static_cast<int>(y.dim(3)),
                  p.kernel_h,
                  p.kernel_w,
                  p.stride_h,
                  p.stride_w,
                  p.pad_h,
                  p.pad_w};
}

}  // namespace

// x (N,C,H,W) -> y (N,C,P,Q). 16-bit or channels-last tensors: in fp32 on plain stand-ins.
void CudaBackend::pool2d_forward(Tensor& y, const Tensor& x, const Pool2dParams& p) {
  if (!plain_f32({&y, &x})) {
    StandIn sy(*this, y, false, true), sx(*this, x, true, false);
    pool2d_forward(sy.get(), sx.get(), p);
    return sy.finish();
  }
  PoolEntry& e = pool_entry(x, y, p);
  if (y.numel() == 0) return;
  if (p.ceil_mode) {
    if (tracing()) placed("pool2d_forward " + x.shape().str() + " -> tandem's kernel (ceil mode)");
    pool_forward_kernel<<<grid_for(y.numel()), kThreads, 0, stream_>>>(
        y.data(), x.data(), p.mode == PoolMode::kMax, geometry(x, y, p));
    CUDA_CHECK_LAUNCH();
    return;
  }
  if (tracing())
    placed(std::string("pool2d_forward ") + x.shape().str() + " -> cuDNN " +
           (p.mode == PoolMode::kMax ? "max (deterministic)" : "average") + " pooling");
  const float one = 1.f, zero = 0.f;
  CUDNN_CHECK(cudnnPoolingForward(cudnn_, e.pool, &one, e.x, x.data(), &zero, e.y, y.data()));
}

// dx (N,C,H,W) from dy (N,C,P,Q), x and y.
void CudaBackend::pool2d_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                                  const Pool2dParams& p) {
  if (!plain_f32({&dx, &dy, &x, &y})) {
    StandIn sdx(*this, dx, false, true), sdy(*this, dy, true, false), sx(*this, x, true, false),
        sy(*this, y, true, false);
    pool2d_backward(sdx.get(), sdy.get(), sx.get(), sy.get(), p);
    return sdx.finish();
  }
  pool_entry(x, y, p);  // checks the shapes
  expect_shape(dx, x.shape(), "pool2d dx");
  expect_shape(dy, y.shape(), "pool2d dy");
  if (dx.numel() == 0) return;
  PoolGeom g = geometry(x, y, p);
  if (p.mode == PoolMode::kMax)
    max_pool_backward_kernel<<<grid_for(dx.numel()), kThreads, 0, stream_>>>(dx.data(), dy.data(),
                                                                             x.data(), g);
  else
    avg_pool_backward_kernel<<<grid_for(dx.numel()), kThreads, 0, stream_>>>(dx.data(), dy.data(),
                                                                             g);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tandem
