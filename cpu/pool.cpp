// 2-D max and average pooling on the CPU: average forward through oneDNN, the rest as OpenMP loops.
//
// Max forward is written by hand because oneDNN's drops a NaN in a window, which would hide a
// non-finite activation from the NaN checks; here, as in PyTorch and cuDNN's PROPAGATE_NAN, a NaN
// is the window's maximum. The backward pass is written by hand because it is computed from x and
// y (the interface keeps no oneDNN workspace), which also fixes the tie rule: a max window's
// gradient goes to its first maximum in row-major order (its first NaN, if any), the same element
// on every backend.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cpu/bf16.h"
#include "cpu/cpu_backend_impl.h"

// clang-format off: last, so that only what follows is compiled for AVX2 with FMA
#include "cpu/isa.h"
// clang-format on

namespace tandem {
namespace {

struct PoolForwardEntry : CpuCacheEntry {
  dnnl::pooling_forward prim;
  dnnl::memory::desc scratch_md;
  dnnl::memory src, dst;
};

void check_pool_shapes(const Shape& x, const Shape& y, const Pool2dParams& p) {
  TANDEM_CHECK(x.rank() == 4 && y.rank() == 4 && y == pool_out_shape(x, p),
               "pool2d shapes " + x.str() + " -> " + y.str());
}

std::string pool_key(const Shape& x, const Pool2dParams& p) {
  return std::string(p.mode == PoolMode::kMax ? "max" : "avg") + " " + x.str() + " k" +
         std::to_string(p.kernel_h) + "," + std::to_string(p.kernel_w) + " s" +
         std::to_string(p.stride_h) + "," + std::to_string(p.stride_w) + " p" +
         std::to_string(p.pad_h) + "," + std::to_string(p.pad_w) + (p.ceil_mode ? " ceil" : "");
}

// Max pooling's order: a NaN is above every number, so a window with one has a NaN maximum.
inline bool above(float v, float m) { return v > m || (v != v && m == m); }
// Equality in that order: a NaN is the same as a NaN.
inline bool same(float v, float m) { return v == m || (v != v && m != m); }

// Offset in a plane of row length W of the first maximum of window [hs,he) x [ws,we).
inline int64_t first_max(const float* xs, int64_t W, int64_t hs, int64_t he, int64_t ws,
                         int64_t we) {
  int64_t arg = hs * W + ws;
  for (int64_t h = hs; h < he; ++h) {
    for (int64_t w = ws; w < we; ++w) {
      if (above(xs[h * W + w], xs[arg])) arg = h * W + w;
    }
  }
  return arg;
}

// The non-padding rows [begin, end) of window o along an axis of the given size.
inline std::pair<int64_t, int64_t> span(int64_t o, int kernel, int stride, int pad, int64_t size) {
  const int64_t start = o * stride - pad;
  return {std::max<int64_t>(start, 0), std::min<int64_t>(start + kernel, size)};
}

}  // namespace

// 2x2 windows of stride 2 without padding, each one whole (ceil mode's partial last window is
// not): the fast loops' case.
bool is_2x2_stride_2(const Pool2dParams& p, const Shape& x, const Shape& y) {
  return p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 &&
         p.pad_w == 0 && 2 * y[2] <= x[2] && 2 * y[3] <= x[3];
}

namespace {

// y (planes,P,Q) = max of each window of x (planes,H,W). 2x2 windows of stride 2 (LeNet's and
// VGG's) get a branch-free loop that vectorises.
// Relu: y = relu of the maximum (a relu fused before the pooling: the same values).
template <bool Relu>
void max_pool_forward(float* y, const float* x, int64_t planes, int64_t H, int64_t W, int64_t P,
                      int64_t Q, const Pool2dParams& p, bool fast) {
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float* xs = x + plane * H * W;
    float* ys = y + plane * P * Q;
    for (int64_t op = 0; op < P; ++op) {
      float* yo = ys + op * Q;
      if (fast) {
        const float* x0 = xs + 2 * op * W;
        const float* x1 = x0 + W;
#pragma omp simd
        for (int64_t q = 0; q < Q; ++q) {
          float m = x0[2 * q];
          m = above(x0[2 * q + 1], m) ? x0[2 * q + 1] : m;
          m = above(x1[2 * q], m) ? x1[2 * q] : m;
          m = above(x1[2 * q + 1], m) ? x1[2 * q + 1] : m;
          yo[q] = relu_if<Relu>(m);
        }
        continue;
      }
      const auto [hs, he] = span(op, p.kernel_h, p.stride_h, p.pad_h, H);
      for (int64_t oq = 0; oq < Q; ++oq) {
        const auto [ws, we] = span(oq, p.kernel_w, p.stride_w, p.pad_w, W);
        yo[oq] =
            relu_if<Relu>(hs < he && ws < we ? xs[first_max(xs, W, hs, he, ws, we)] : -HUGE_VALF);
      }
    }
  }
}

// Max-pool backward for 2x2 windows of stride 2 without padding (LeNet's and VGG's pooling): each
// dx entry is written once, branch-free, so the loop vectorises. A window's gradient goes to its
// first element equal to y (a NaN equal to a NaN y). Rows and columns past the last window get 0.
// Relu: dy is the gradient of y = relu(max), masked by relu's gradient first.
template <bool Relu>
void max_pool_backward_2x2(float* dx, const float* dy, const float* x, const float* y,
                           int64_t planes, int64_t H, int64_t W, int64_t P, int64_t Q) {
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float* xs = x + plane * H * W;
    float* dxs = dx + plane * H * W;
    for (int64_t op = 0; op < P; ++op) {
      const float* x0 = xs + 2 * op * W;
      const float* x1 = x0 + W;
      float* d0 = dxs + 2 * op * W;
      float* d1 = d0 + W;
      const float* ym = y + (plane * P + op) * Q;
      const float* g = dy + (plane * P + op) * Q;
#pragma omp simd
      for (int64_t q = 0; q < Q; ++q) {
        // A chain of selects, no branch, so the loop vectorises: t is the gradient not yet routed.
        const float m = ym[q];
        float t = relu_grad_if<Relu>(g[q], ym, q);
        d0[2 * q] = same(x0[2 * q], m) ? t : 0.f;
        t = same(x0[2 * q], m) ? 0.f : t;
        d0[2 * q + 1] = same(x0[2 * q + 1], m) ? t : 0.f;
        t = same(x0[2 * q + 1], m) ? 0.f : t;
        d1[2 * q] = same(x1[2 * q], m) ? t : 0.f;
        t = same(x1[2 * q], m) ? 0.f : t;
        d1[2 * q + 1] = t;
      }
      std::fill(d0 + 2 * Q, d0 + W, 0.f);
      std::fill(d1 + 2 * Q, d1 + W, 0.f);
    }
    std::fill(dxs + 2 * P * W, dxs + H * W, 0.f);
  }
}

// Max pooling in the blocked order (N, C/B, H, W, B): each sample's block of B channels is an
// (H, W, B) image, pooled B channels at a time with the plain loops' rules (a NaN is the
// maximum; a window's gradient goes to its first maximum in row-major order, found as its first
// element equal to y).
template <int B, bool Relu>
void blocked_max_forward(float* y, const float* x, int64_t chunks, int64_t H, int64_t W, int64_t P,
                         int64_t Q, const Pool2dParams& p) {
#pragma omp parallel for schedule(static) if (chunks * P > 1)
  for (int64_t cp = 0; cp < chunks * P; ++cp) {
    const int64_t chunk = cp / P, op = cp % P;
    const float* xs = x + chunk * H * W * B;
    const auto [hs, he] = span(op, p.kernel_h, p.stride_h, p.pad_h, H);
    for (int64_t oq = 0; oq < Q; ++oq) {
      const auto [ws, we] = span(oq, p.kernel_w, p.stride_w, p.pad_w, W);
      float m[B];
      for (int j = 0; j < B; ++j) m[j] = -HUGE_VALF;
      for (int64_t h = hs; h < he; ++h)
        for (int64_t w = ws; w < we; ++w) {
          const float* px = xs + (h * W + w) * B;
#pragma omp simd
          for (int j = 0; j < B; ++j) {  // bitwise, not ||: it vectorises
            const float v = px[j];
            m[j] = ((v > m[j]) | ((v != v) & (m[j] == m[j]))) ? v : m[j];
          }
        }
      float* py = y + ((chunk * P + op) * Q + oq) * B;
      for (int j = 0; j < B; ++j) py[j] = relu_if<Relu>(m[j]);
    }
  }
}

// 2x2 windows of stride 2, each whole (is_2x2_stride_2): four rows of B values per output.
template <bool Relu>
void blocked_max_forward_2x2(float* y, const float* x, int64_t B, int64_t chunks, int64_t H,
                             int64_t W, int64_t P, int64_t Q) {
#pragma omp parallel for schedule(static) if (chunks * P > 1)
  for (int64_t cp = 0; cp < chunks * P; ++cp) {
    const int64_t chunk = cp / P, op = cp % P;
    const float* r0 = x + (chunk * H + 2 * op) * W * B;
    const float* r1 = r0 + W * B;
    float* out = y + cp * Q * B;
    for (int64_t oq = 0; oq < Q; ++oq) {
      const float *a = r0 + 2 * oq * B, *b = a + B, *c = r1 + 2 * oq * B, *d = c + B;
#pragma omp simd
      for (int64_t j = 0; j < B; ++j) {
        float m = a[j];
        m = above(b[j], m) ? b[j] : m;
        m = above(c[j], m) ? c[j] : m;
        m = above(d[j], m) ? d[j] : m;
        out[oq * B + j] = relu_if<Relu>(m);
      }
    }
  }
}

// Windows that do not overlap: each input element gets its window's gradient or 0.
template <bool Relu>
void blocked_max_backward_2x2(float* dx, const float* dy, const float* x, const float* y, int64_t B,
                              int64_t chunks, int64_t H, int64_t W, int64_t P, int64_t Q) {
#pragma omp parallel for schedule(static) if (chunks * P > 1)
  for (int64_t cp = 0; cp < chunks * P; ++cp) {
    const int64_t chunk = cp / P, op = cp % P;
    const int64_t row = (chunk * H + 2 * op) * W * B;
    const float* r0 = x + row;
    const float* r1 = r0 + W * B;
    float* d0 = dx + row;
    float* d1 = d0 + W * B;
    for (int64_t oq = 0; oq < Q; ++oq) {
      const int64_t l = 2 * oq * B, r = l + B;
      const float* m = y + (cp * Q + oq) * B;
      const float* g = dy + (cp * Q + oq) * B;
#pragma omp simd
      for (int64_t j = 0; j < B; ++j) {  // selects as in max_pool_backward_2x2: it vectorises
        const float mj = m[j];
        float t = relu_grad_if<Relu>(g[j], m, j);
        d0[l + j] = same(r0[l + j], mj) ? t : 0.f;
        t = same(r0[l + j], mj) ? 0.f : t;
        d0[r + j] = same(r0[r + j], mj) ? t : 0.f;
        t = same(r0[r + j], mj) ? 0.f : t;
        d1[l + j] = same(r1[l + j], mj) ? t : 0.f;
        t = same(r1[l + j], mj) ? 0.f : t;
        d1[r + j] = t;
      }
    }
    for (int64_t w = 2 * Q; w < W; ++w)  // an odd width's last column is in no window
      for (int64_t j = 0; j < B; ++j) d0[w * B + j] = d1[w * B + j] = 0.f;
  }
  for (int64_t chunk = 0; chunk < chunks; ++chunk)  // an odd height's last row, likewise
    for (int64_t h = 2 * P; h < H; ++h) std::fill_n(dx + (chunk * H + h) * W * B, W * B, 0.f);
}

template <int B, bool Relu>
void blocked_max_backward(float* dx, const float* dy, const float* x, const float* y,
                          int64_t chunks, int64_t H, int64_t W, int64_t P, int64_t Q,
                          const Pool2dParams& p) {
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const float* xs = x + chunk * H * W * B;
    float* dxs = dx + chunk * H * W * B;
    std::fill(dxs, dxs + H * W * B, 0.f);
    for (int64_t op = 0; op < P; ++op) {
      const auto [hs, he] = span(op, p.kernel_h, p.stride_h, p.pad_h, H);
      for (int64_t oq = 0; oq < Q; ++oq) {
        const auto [ws, we] = span(oq, p.kernel_w, p.stride_w, p.pad_w, W);
        const int64_t o = ((chunk * P + op) * Q + oq) * B;
        float left[B];
        for (int j = 0; j < B; ++j) left[j] = relu_grad_if<Relu>(dy[o + j], y, o + j);
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w) {
            const float* px = xs + (h * W + w) * B;
            float* pd = dxs + (h * W + w) * B;
#pragma omp simd
            for (int j = 0; j < B; ++j) {  // left[j]: the gradient not yet routed
              const bool hit = same(px[j], y[o + j]);
              pd[j] += hit ? left[j] : 0.f;
              left[j] = hit ? 0.f : left[j];
            }
          }
      }
    }
  }
}

// Global average pooling (one unpadded window over the whole image: SE's squeeze and a
// network's last pooling), y (N,C,1,1).
bool is_global_average(const Pool2dParams& p, const Shape& x, const Shape& y) {
  return p.mode == PoolMode::kAverage && p.kernel_h == x[2] && p.kernel_w == x[3] && p.pad_h == 0 &&
         p.pad_w == 0 && y[2] == 1 && y[3] == 1;
}

// x as channel runs (blocked fp32, channels-last fp32 or bf16): each run's positions summed in
// fp32 per channel, then divided; y's memory is (N,C) whatever its layout.
template <typename T>
void global_average_forward(T* y, const T* x, const ChannelRuns& v) {
#pragma omp parallel if (v.runs * v.inner * v.width > 65536)
  {
    std::vector<float> s(static_cast<size_t>(v.width));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < v.runs; ++r) {
      const int64_t base = r * v.inner * v.width;
      std::fill(s.begin(), s.end(), 0.f);
      float* sp = s.data();
      for (int64_t k = 0; k < v.inner; ++k)
#pragma omp simd
        for (int64_t j = 0; j < v.width; ++j) sp[j] += load(x, base + k * v.width + j);
      for (int64_t j = 0; j < v.width; ++j)
        store(y, r * v.width + j, sp[j] / static_cast<float>(v.inner));
    }
  }
}

template <typename T>
void global_average_backward(T* dx, const T* dy, const ChannelRuns& v) {
#pragma omp parallel for schedule(static) if (v.runs * v.inner * v.width > 65536)
  for (int64_t r = 0; r < v.runs; ++r) {
    const int64_t base = r * v.inner * v.width;
    for (int64_t k = 0; k < v.inner; ++k)
#pragma omp simd
      for (int64_t j = 0; j < v.width; ++j)
        store(dx, base + k * v.width + j, load(dy, r * v.width + j) / static_cast<float>(v.inner));
  }
}

// A window's non-padding rows [hs, he) and columns [ws, we).
struct Window {
  int64_t hs, he, ws, we;
};

// The plain backward of windows that may overlap: each plane's dx (H*W) zeroed, then f(dx of the
// plane, plane, o, window) for each of its P*Q windows that holds a value, o the window's index in
// dy. One plane per iteration, so that overlapping windows (stride < kernel) stay in one thread.
template <typename F>
void scatter_windows(float* dx, int64_t planes, int64_t H, int64_t W, int64_t P, int64_t Q,
                     const Pool2dParams& p, F f) {
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    float* dxs = dx + plane * H * W;
    std::fill(dxs, dxs + H * W, 0.f);
    for (int64_t op = 0; op < P; ++op) {
      const auto [hs, he] = span(op, p.kernel_h, p.stride_h, p.pad_h, H);
      for (int64_t oq = 0; oq < Q; ++oq) {
        const auto [ws, we] = span(oq, p.kernel_w, p.stride_w, p.pad_w, W);
        if (hs < he && ws < we) f(dxs, plane, (plane * P + op) * Q + oq, Window{hs, he, ws, we});
      }
    }
  }
}

// Max pooling of fp32 tensors, blocked or plain, with the relu before it fused (Relu) or not;
// false where the mode or a tensor's dtype or order is another's.
template <bool Relu>
bool max_forward_f32(const CpuBackend& be, Tensor& y, const Tensor& x, const Pool2dParams& p) {
  if (p.mode != PoolMode::kMax) return false;
  const int block = blocked_f32({&y, &x});
  if (!block && !all_f32_plain({&y, &x})) return false;
  if (be.tracing_placement()) {
    std::string line = Relu ? "relu_max_pool_forward " : "pool2d_forward ";
    line.append(pool_key(x.shape(), p));
    if (block) line.append(" ").append(layout_name(x.layout()));
    be.place(line.append(" -> tandem's OpenMP loop (NaN-propagating)"));
  }
  const bool fast = is_2x2_stride_2(p, x.shape(), y.shape());
  if (!block) {
    max_pool_forward<Relu>(y.data(), x.data(), x.dim(0) * x.dim(1), x.dim(2), x.dim(3), y.dim(2),
                           y.dim(3), p, fast);
    return true;
  }
  const int64_t chunks = x.dim(0) * x.dim(1) / block;
  if (fast)
    blocked_max_forward_2x2<Relu>(y.data(), x.data(), block, chunks, x.dim(2), x.dim(3), y.dim(2),
                                  y.dim(3));
  else if (block == 16)
    blocked_max_forward<16, Relu>(y.data(), x.data(), chunks, x.dim(2), x.dim(3), y.dim(2),
                                  y.dim(3), p);
  else
    blocked_max_forward<8, Relu>(y.data(), x.data(), chunks, x.dim(2), x.dim(3), y.dim(2), y.dim(3),
                                 p);
  return true;
}

template <bool Relu>
bool max_backward_f32(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                      const Pool2dParams& p) {
  if (p.mode != PoolMode::kMax) return false;
  const int block = blocked_f32({&dx, &dy, &x, &y});
  if (!block && !all_f32_plain({&dx, &dy, &x, &y})) return false;
  const int64_t H = x.dim(2), W = x.dim(3), P = y.dim(2), Q = y.dim(3);
  const bool fast = is_2x2_stride_2(p, x.shape(), y.shape());
  if (block) {
    const int64_t chunks = x.dim(0) * x.dim(1) / block;
    if (fast)
      blocked_max_backward_2x2<Relu>(dx.data(), dy.data(), x.data(), y.data(), block, chunks, H, W,
                                     P, Q);
    else if (block == 16)
      blocked_max_backward<16, Relu>(dx.data(), dy.data(), x.data(), y.data(), chunks, H, W, P, Q,
                                     p);
    else
      blocked_max_backward<8, Relu>(dx.data(), dy.data(), x.data(), y.data(), chunks, H, W, P, Q,
                                    p);
    return true;
  }
  const int64_t planes = x.dim(0) * x.dim(1);
  if (fast) {
    max_pool_backward_2x2<Relu>(dx.data(), dy.data(), x.data(), y.data(), planes, H, W, P, Q);
    return true;
  }
  // Each window's gradient goes to its first maximum, found again from x.
  const float* xp = x.data();
  const float* yp = y.data();
  const float* dyp = dy.data();
  scatter_windows(dx.data(), planes, H, W, P, Q, p,
                  [&](float* dxs, int64_t plane, int64_t o, const Window& w) {
                    dxs[first_max(xp + plane * H * W, W, w.hs, w.he, w.ws, w.we)] +=
                        relu_grad_if<Relu>(dyp[o], yp, o);
                  });
  return true;
}

}  // namespace

// y (N,C,P,Q) = max (NaN if the window holds one) or mean (padding excluded) of each window of
// x (N,C,H,W).
void CpuBackend::pool2d_forward(Tensor& y, const Tensor& x, const Pool2dParams& p) {
  check_pool_shapes(x.shape(), y.shape(), p);
  if (y.numel() == 0) return;
  if (max_forward_f32<false>(*this, y, x, p)) return;
  if (ChannelRuns v; is_global_average(p, x.shape(), y.shape()) && channel_runs(x, &v) &&
                     x.dtype() != DType::kF16 && y.dtype() == x.dtype()) {
    if (x.dtype() == DType::kBF16) return global_average_forward(bits(y), bits(x), v);
    return global_average_forward(y.data(), x.data(), v);
  }
  if (!all_f32_plain({&y, &x})) return mixed::pool2d_forward(*this, y, x, p);
  const std::string key = pool_key(x.shape(), p);
  auto& e = cached<PoolForwardEntry>("pool_fwd " + key, [&] {
    return dnnl_guard("pool2d_forward " + key, [&] {
      auto e = std::make_unique<PoolForwardEntry>();
      const Shape& xs = x.shape();
      const Shape& ys = y.shape();
      dnnl::memory::desc src_md = plain_desc({xs[0], xs[1], xs[2], xs[3]});
      dnnl::memory::desc dst_md = plain_desc({ys[0], ys[1], ys[2], ys[3]});
      // Ceil mode's last window reaches past the end padding: more padding there.
      dnnl::pooling_forward::desc d(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_avg_exclude_padding, src_md,
          dst_md, {p.stride_h, p.stride_w}, {p.kernel_h, p.kernel_w}, {p.pad_h, p.pad_w},
          {pool_end_pad(xs[2], ys[2], p.kernel_h, p.stride_h, p.pad_h),
           pool_end_pad(xs[3], ys[3], p.kernel_w, p.stride_w, p.pad_w)});
      dnnl::pooling_forward::primitive_desc pd(d, scratchpad_attr(), engine());
      e->prim = dnnl::pooling_forward(pd);
      e->scratch_md = pd.scratchpad_desc();
      e->src = dnnl::memory(src_md, engine(), DNNL_MEMORY_NONE);
      e->dst = dnnl::memory(dst_md, engine(), DNNL_MEMORY_NONE);
      e->placement = "pool2d_forward " + key + " -> " + impl_name(pd);
      return e;
    });
  });
  e.src.set_data_handle(const_cast<float*>(x.data()));
  e.dst.set_data_handle(y.data());
  e.prim.execute(stream(), {{DNNL_ARG_SRC, e.src},
                            {DNNL_ARG_DST, e.dst},
                            {DNNL_ARG_SCRATCHPAD, scratchpad(e.scratch_md)}});
  stream().wait();
}

// dx (N,C,H,W) from dy (N,C,P,Q): max routes each dy to the first maximum of its window,
// average spreads dy evenly over the window's non-padded elements. dx is overwritten.
void CpuBackend::pool2d_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                                 const Pool2dParams& p) {
  check_pool_shapes(x.shape(), y.shape(), p);
  expect_shape(dx, x.shape(), "pool2d dx");
  expect_shape(dy, y.shape(), "pool2d dy");
  if (max_backward_f32<false>(dx, dy, x, y, p)) return;
  if (ChannelRuns v; is_global_average(p, x.shape(), y.shape()) && channel_runs(dx, &v) &&
                     dx.dtype() != DType::kF16 && dy.dtype() == dx.dtype()) {
    if (dx.dtype() == DType::kBF16) return global_average_backward(bits(dx), bits(dy), v);
    return global_average_backward(dx.data(), dy.data(), v);
  }
  if (!all_f32_plain({&dx, &dy, &x, &y})) return mixed::pool2d_backward(*this, dx, dy, x, y, p);
  // Average pooling: each window's gradient spread evenly over its non-padded values.
  const int64_t W = x.dim(3);
  const float* dyp = dy.data();
  scatter_windows(dx.data(), x.dim(0) * x.dim(1), x.dim(2), W, y.dim(2), y.dim(3), p,
                  [&](float* dxs, int64_t, int64_t o, const Window& w) {
                    const float share = dyp[o] / static_cast<float>((w.he - w.hs) * (w.we - w.ws));
                    for (int64_t h = w.hs; h < w.he; ++h)
                      for (int64_t c = w.ws; c < w.we; ++c) dxs[h * W + c] += share;
                  });
}

// The relu fused before a max pooling: the max loops with relu's value and gradient.
void CpuBackend::relu_max_pool_forward(Tensor& y, const Tensor& x, const Pool2dParams& p) {
  check_pool_shapes(x.shape(), y.shape(), p);
  if (y.numel() == 0) return;
  if (!max_forward_f32<true>(*this, y, x, p)) Backend::relu_max_pool_forward(y, x, p);
}

void CpuBackend::relu_max_pool_backward(Tensor& dx, const Tensor& dy, const Tensor& x,
                                        const Tensor& y, const Pool2dParams& p) {
  check_pool_shapes(x.shape(), y.shape(), p);
  expect_shape(dx, x.shape(), "pool2d dx");
  expect_shape(dy, y.shape(), "pool2d dy");
  if (!max_backward_f32<true>(dx, dy, x, y, p)) Backend::relu_max_pool_backward(dx, dy, x, y, p);
}

}  // namespace tandem
