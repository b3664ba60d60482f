// The CPU's 16-bit (bf16) and channels-last tensors: conversions, the ops' 16-bit loops, and fp32
// stand-ins for the ops that compute in fp32 (engine/precision.h has the recipe).
//
// The 16-bit loops are one memory-bound pass each, like their fp32 twins in elementwise.cpp,
// activation.cpp and pool.cpp: values are widened to fp32, computed there, and rounded once to
// nearest even. They keep the fp32 kernels' rules: NaN passes through relu and wins a max window,
// a max window's gradient goes to its first maximum in row-major (h, w) order.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/bf16.h"
#include "cpu/cpu_backend_impl.h"

// clang-format off: last, so that only what follows is compiled for AVX2 with FMA
#include "cpu/isa.h"
// clang-format on

namespace tandem {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// Refuses a 16-bit dtype the CPU has no kernels for (fp16 is a GPU precision).
void require_cpu_dtype(const Tensor& t, const char* what) {
  if (t.dtype() == DType::kF16)
    throw UsageError(std::string(what) + ": the CPU backend computes in fp32 or bf16, not fp16",
                     "use --precision bf16 on the CPU (fp16 is for GPUs)");
}

bool all_bf16_same_layout(std::initializer_list<const Tensor*> ts) {
  const Layout l = (*ts.begin())->layout();
  for (const Tensor* t : ts)
    if (t->dtype() != DType::kBF16 || t->layout() != l) return false;
  return true;
}

// A tensor whose channels are its innermost axis, seen as (rows, C): (N,C) plain, or (N,C,H,W)
// channels-last. False for anything else.
bool channel_rows(const Tensor& t, int64_t* rows, int64_t* c) {
  const int rank = t.shape().rank();
  if (!((rank == 2 && t.layout() == Layout::kPlain) ||
        (rank == 4 && t.layout() == Layout::kChannelsLast)))
    return false;
  *c = t.dim(1);
  *rows = *c ? t.numel() / *c : 0;
  return true;
}

struct ConvertEntry : CpuCacheEntry {
  dnnl::reorder prim;
  memory src, dst;
};

// Max pooling's order (pool.cpp's): a NaN is above every number and equal to a NaN.
// Spelt with bitwise operators, not && and ||: the loops that call them then vectorise.
inline int32_t above(float v, float m) { return (v > m) | ((v != v) & (m == m)); }
inline int32_t same(float v, float m) { return (v == m) | ((v != v) & (m != m)); }

// LeNet's and VGG's pooling, 2x2 windows of stride 2, channels-last: each output row of C values
// is the maximum of four input rows (a bf16 value: converting it back rounds nothing).
void max_pool_2x2_forward(uint16_t* y, const uint16_t* x, int64_t N, int64_t C, int64_t H,
                          int64_t W, int64_t P, int64_t Q) {
#pragma omp parallel for schedule(static) if (N * P > 1)
  for (int64_t np = 0; np < N * P; ++np) {
    const int64_t n = np / P, op = np % P;
    const uint16_t* r0 = x + (n * H + 2 * op) * W * C;
    const uint16_t* r1 = r0 + W * C;
    uint16_t* out = y + np * Q * C;
    for (int64_t oq = 0; oq < Q; ++oq) {
      const int64_t l = 2 * oq * C, r = l + C;
      uint16_t* o = out + oq * C;
#pragma omp simd
      for (int64_t k = 0; k < C; ++k) {
        float m = bf16_to_f32(r0[l + k]);
        const float vb = bf16_to_f32(r0[r + k]), vc = bf16_to_f32(r1[l + k]),
                    vd = bf16_to_f32(r1[r + k]);
        // A NaN wins: taken when it comes, and never replaced (no comparison with it is true).
        m = (vb > m) | (vb != vb) ? vb : m;
        m = (vc > m) | (vc != vc) ? vc : m;
        m = (vd > m) | (vd != vd) ? vd : m;
        o[k] = f32_to_bf16(m);
      }
    }
  }
}

// Its backward: every dx entry belongs to one window (or none, past the last: 0), so each is
// written once, the window's gradient to its first element (row-major) equal to y.
void max_pool_2x2_backward(uint16_t* dx, const uint16_t* dy, const uint16_t* x, const uint16_t* y,
                           int64_t N, int64_t C, int64_t H, int64_t W, int64_t P, int64_t Q) {
#pragma omp parallel for schedule(static) if (N * H > 1)
  for (int64_t nh = 0; nh < N * H; ++nh) {
    const int64_t n = nh / H, h = nh % H;
    uint16_t* row = dx + nh * W * C;
    if (h >= 2 * P) {
      std::memset(row, 0, static_cast<size_t>(W * C) * sizeof(uint16_t));
      continue;
    }
    if (h % 2) continue;  // written with the row above it
    const int64_t op = h / 2;
    const uint16_t* x0 = x + nh * W * C;
    const uint16_t* x1 = x0 + W * C;
    uint16_t* d0 = row;
    uint16_t* d1 = row + W * C;
    for (int64_t oq = 0; oq < Q; ++oq) {
      const int64_t o = ((n * P + op) * Q + oq) * C, l = 2 * oq * C, r = l + C;
#pragma omp simd
      for (int64_t k = 0; k < C; ++k) {
        const float m = bf16_to_f32(y[o + k]);
        const int32_t ha = same(bf16_to_f32(x0[l + k]), m);
        const int32_t hb = same(bf16_to_f32(x0[r + k]), m) & (ha ^ 1);
        const int32_t hc = same(bf16_to_f32(x1[l + k]), m) & ((ha | hb) ^ 1);
        const int32_t hd = same(bf16_to_f32(x1[r + k]), m) & ((ha | hb | hc) ^ 1);
        const uint16_t g = dy[o + k];
        d0[l + k] = select_bf16(ha, g, 0);
        d0[r + k] = select_bf16(hb, g, 0);
        d1[l + k] = select_bf16(hc, g, 0);
        d1[r + k] = select_bf16(hd, g, 0);
      }
    }
    for (uint16_t* d : {d0, d1})  // columns past the last window
      std::memset(d + 2 * Q * C, 0, static_cast<size_t>((W - 2 * Q) * C) * sizeof(uint16_t));
  }
}

}  // namespace

dnnl::memory::data_type dnnl_dtype(DType d) {
  switch (d) {
    case DType::kF32:
      return memory::data_type::f32;
    case DType::kI32:
      return memory::data_type::s32;
    case DType::kBF16:
      return memory::data_type::bf16;
    case DType::kF16:
      return memory::data_type::f16;
  }
  return memory::data_type::f32;
}

dnnl::memory::desc tensor_desc(const Tensor& t, const dnnl::memory::dims& dims) {
  static const tag kTags[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde};
  TANDEM_CHECK(!dims.empty() && dims.size() <= 5,
               "tensor_desc of rank " + std::to_string(dims.size()));
  tag order = kTags[dims.size() - 1];
  if (dims.size() == 4) {
    switch (t.layout()) {
      case Layout::kPlain:
        break;
      case Layout::kChannelsLast:
        order = tag::acdb;
        break;
      case Layout::kBlocked8:
        order = tag::aBcd8b;
        break;
      case Layout::kBlocked16:
        order = tag::aBcd16b;
        break;
    }
  }
  return memory::desc(dims, dnnl_dtype(t.dtype()), order);
}

dnnl::memory::desc tensor_desc(const Tensor& t) {
  const auto& d = t.shape().dims();
  return tensor_desc(t, memory::dims(d.begin(), d.end()));
}

F32Stage::F32Stage(CpuBackend& backend, const Tensor& t, bool read, bool write)
    : backend_(backend), original_(t), staged_(!t.is_f32_plain()), write_(write) {
  if (!staged_) {
    stand_in_ = t;
    return;
  }
  require_cpu_dtype(t, "this op");
  stand_in_ = Tensor(backend, t.shape());
  if (read) backend.copy(stand_in_, t);
}

void F32Stage::finish() {
  if (staged_ && write_) backend_.copy(original_, stand_in_);
}

namespace mixed {

void convert(CpuBackend& b, Tensor& dst, const Tensor& src) {
  require_cpu_dtype(src, "copy");
  require_cpu_dtype(dst, "copy");
  TANDEM_CHECK(src.dtype() != DType::kI32 && dst.dtype() != DType::kI32,
               "copy converts between float types only");
  if (dst.numel() == 0) return;
  // Logical order is kept: a channels-last or blocked side names the 4-D dims both sides are seen
  // with (a flatten's (N, C*H*W) is its (N,C,H,W) in plain order); otherwise both are flat.
  const Tensor& shaped = src.layout() != Layout::kPlain ? src : dst;
  memory::dims dims = {src.numel()};
  if (shaped.layout() != Layout::kPlain) {
    const auto& d = shaped.shape().dims();
    dims.assign(d.begin(), d.end());
  }
  const memory::desc src_md = tensor_desc(src, dims), dst_md = tensor_desc(dst, dims);
  auto order = [](const Tensor& t) {
    return t.layout() == Layout::kPlain ? std::string()
                                        : std::string(" ") + layout_name(t.layout());
  };
  const std::string key = std::string("convert ") + shaped.shape().str() + " " +
                          dtype_name(src.dtype()) + order(src) + " -> " + dtype_name(dst.dtype()) +
                          order(dst) +
                          (dims.size() == 1 ? " [" + std::to_string(dims[0]) + "]" : "");
  auto& e = b.cached<ConvertEntry>(key, [&] {
    return dnnl_guard(key, [&] {
      auto e = std::make_unique<ConvertEntry>();
      e->src = memory(src_md, b.engine(), DNNL_MEMORY_NONE);
      e->dst = memory(dst_md, b.engine(), DNNL_MEMORY_NONE);
      dnnl::reorder::primitive_desc pd(e->src, e->dst);
      e->prim = dnnl::reorder(pd);
      e->placement = key + " -> reorder " + impl_name(pd);
      return e;
    });
  });
  e.src.set_data_handle(const_cast<void*>(src.raw()));
  e.dst.set_data_handle(dst.raw());
  e.prim.execute(b.stream(), e.src, e.dst);
  b.stream().wait();
}

void fill(Tensor& t, float value) {
  require_cpu_dtype(t, "fill");
  const uint16_t v = f32_to_bf16(value);
  uint16_t* p = bits(t);
  const int64_t n = t.numel();
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) p[i] = v;
}

int64_t count_nonfinite(const Tensor& t) {
  require_cpu_dtype(t, "count_nonfinite");
  const uint16_t* p = bits(t);
  const int64_t n = t.numel();
  int64_t bad = 0;
#pragma omp parallel for simd reduction(+ : bad) schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) bad += bf16_nonfinite(p[i]) ? 1 : 0;
  return bad;
}

void activation_forward(CpuBackend& b, Tensor& y, const Tensor& x, Activation a, float alpha) {
  if (!all_bf16_same_layout({&y, &x})) {
    F32Stage sy(b, y, false, true), sx(b, x, true, false);
    b.activation_forward(sy.f32(), sx.f32(), a, alpha);
    return sy.finish();
  }
  const uint16_t* xp = bits(x);
  uint16_t* yp = bits(y);
  const int64_t n = x.numel();
  switch (a) {
    case Activation::kRelu:  // x <= 0 is false for a NaN: it is copied through
#pragma omp parallel for simd schedule(static) if (parallel : n > 16384)
      for (int64_t i = 0; i < n; ++i) yp[i] = select_bf16(bf16_to_f32(xp[i]) <= 0.f, 0, xp[i]);
      break;
    case Activation::kLeakyRelu:
#pragma omp parallel for simd schedule(static) if (parallel : n > 16384)
      for (int64_t i = 0; i < n; ++i) {
        const float v = bf16_to_f32(xp[i]);
        yp[i] = select_bf16(v > 0.f, xp[i], f32_to_bf16(v * alpha));
      }
      break;
    default:  // widened, computed in fp32 as activation_math.h defines it, rounded once
      with_activation(a, [&](auto kind) {
#pragma omp parallel for simd schedule(static) if (parallel : n > 16384)
        for (int64_t i = 0; i < n; ++i)
          yp[i] = f32_to_bf16(activation_value(kind, bf16_to_f32(xp[i]), alpha));
      });
      break;
  }
  if (b.tracing_placement())
    b.place("activation_forward bf16 [" + std::to_string(n) + "] -> tandem's OpenMP loop");
}

void activation_backward(CpuBackend& b, Tensor& dx, const Tensor& dy, const Tensor& x,
                         const Tensor& y, Activation a, float alpha) {
  const Tensor& data = activation_uses_output(a) ? y : x;
  if (!all_bf16_same_layout({&dx, &dy, &data})) {
    F32Stage sdx(b, dx, false, true), sdy(b, dy, true, false), sd(b, data, true, false);
    b.activation_backward(sdx.f32(), sdy.f32(), sd.f32(), sd.f32(), a, alpha);
    return sdx.finish();
  }
  const uint16_t* g = bits(dy);
  const uint16_t* d = bits(data);
  uint16_t* out = bits(dx);
  const int64_t n = dy.numel();
  const float slope = a == Activation::kLeakyRelu ? alpha : 0.f;
  switch (a) {
    case Activation::kRelu:
    case Activation::kLeakyRelu:
#pragma omp parallel for simd schedule(static) if (parallel : n > 16384)
      for (int64_t i = 0; i < n; ++i)
        // A NaN x is not <= 0: its gradient passes, as oneDNN's fp32 relu lets it.
        out[i] =
            select_bf16(!(bf16_to_f32(d[i]) <= 0.f), g[i], f32_to_bf16(bf16_to_f32(g[i]) * slope));
      break;
    default:
      with_activation(a, [&](auto kind) {
#pragma omp parallel for simd schedule(static) if (parallel : n > 16384)
        for (int64_t i = 0; i < n; ++i)
          out[i] = f32_to_bf16(activation_grad(kind, bf16_to_f32(g[i]), bf16_to_f32(d[i]), alpha));
      });
      break;
  }
  if (b.tracing_placement())
    b.place("activation_backward bf16 [" + std::to_string(n) + "] -> tandem's OpenMP loop");
}

void add(CpuBackend& b, Tensor& y, const Tensor& x1, const Tensor& x2) {
  if (!all_bf16_same_layout({&y, &x1, &x2})) {
    F32Stage sy(b, y, false, true), s1(b, x1, true, false), s2(b, x2, true, false);
    b.add(sy.f32(), s1.f32(), s2.f32());
    return sy.finish();
  }
  const uint16_t* p = bits(x1);
  const uint16_t* q = bits(x2);
  uint16_t* out = bits(y);
  const int64_t n = y.numel();
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(bf16_to_f32(p[i]) + bf16_to_f32(q[i]));
}

void bias_add(CpuBackend& b, Tensor& y, const Tensor& bias) {
  int64_t rows = 0, c = 0;
  if (y.dtype() != DType::kBF16 || !bias.is_f32_plain() || !channel_rows(y, &rows, &c)) {
    F32Stage sy(b, y, true, true), sb(b, bias, true, false);
    b.bias_add(sy.f32(), sb.f32());
    return sy.finish();
  }
  TANDEM_CHECK(bias.numel() == c,
               "bias_add: " + y.shape().str() + " with bias " + bias.shape().str());
  uint16_t* yp = bits(y);
  const float* bp = bias.data();
#pragma omp parallel for schedule(static) if (rows * c > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t* row = yp + r * c;
#pragma omp simd
    for (int64_t k = 0; k < c; ++k) row[k] = f32_to_bf16(bf16_to_f32(row[k]) + bp[k]);
  }
}

// db (C) = the sum of dy's rows. Fixed blocks of rows are summed in fp32 (vectorised along C),
// then the blocks in double in block order: the same result on any number of threads.
void bias_backward(CpuBackend& b, Tensor& db, const Tensor& dy) {
  int64_t rows = 0, c = 0;
  if (dy.dtype() != DType::kBF16 || !db.is_f32_plain() || !channel_rows(dy, &rows, &c)) {
    F32Stage sdb(b, db, false, true), sdy(b, dy, true, false);
    b.bias_backward(sdb.f32(), sdy.f32());
    return sdb.finish();
  }
  TANDEM_CHECK(db.numel() == c, "bias_backward: " + dy.shape().str() + " into " + db.shape().str());
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (rows + kBlock - 1) / kBlock;
  std::vector<float> partial(static_cast<size_t>(blocks * c), 0.f);
  const uint16_t* g = bits(dy);
#pragma omp parallel for schedule(static) if (rows * c > 16384)
  for (int64_t k = 0; k < blocks; ++k) {
    float* acc = partial.data() + k * c;
    const int64_t end = std::min(rows, (k + 1) * kBlock);
    for (int64_t r = k * kBlock; r < end; ++r) {
      const uint16_t* row = g + r * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) acc[j] += bf16_to_f32(row[j]);
    }
  }
  float* out = db.data();
  for (int64_t j = 0; j < c; ++j) {
    double s = 0;
    for (int64_t k = 0; k < blocks; ++k) s += partial[static_cast<size_t>(k * c + j)];
    out[j] = static_cast<float>(s);
  }
}

// Max pooling of channels-last bf16 (N,H,W,C) -> (N,P,Q,C), vectorised along C.
void pool2d_forward(CpuBackend& b, Tensor& y, const Tensor& x, const Pool2dParams& p) {
  if (p.mode != PoolMode::kMax || !all_bf16_same_layout({&y, &x}) ||
      x.layout() != Layout::kChannelsLast) {
    F32Stage sy(b, y, false, true), sx(b, x, true, false);
    b.pool2d_forward(sy.f32(), sx.f32(), p);
    return sy.finish();
  }
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t P = y.dim(2), Q = y.dim(3);
  TANDEM_CHECK(y.dim(0) == N && y.dim(1) == C,
               "pool2d shapes " + x.shape().str() + " -> " + y.shape().str());
  const uint16_t* xp = bits(x);
  uint16_t* yp = bits(y);
  if (b.tracing_placement())
    b.place("pool2d_forward max bf16 nhwc " + x.shape().str() + " -> tandem's OpenMP loop");
  if (is_2x2_stride_2(p, x.shape(), y.shape()))
    return max_pool_2x2_forward(yp, xp, N, C, H, W, P, Q);
#pragma omp parallel for schedule(static) if (N * P > 1)
  for (int64_t np = 0; np < N * P; ++np) {
    const int64_t n = np / P, op = np % P;
    const int64_t h0 = op * p.stride_h - p.pad_h;
    const int64_t hs = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + p.kernel_h, H);
    std::vector<float> m(static_cast<size_t>(C));
    for (int64_t oq = 0; oq < Q; ++oq) {
      const int64_t w0 = oq * p.stride_w - p.pad_w;
      const int64_t ws = std::max<int64_t>(w0, 0), we = std::min<int64_t>(w0 + p.kernel_w, W);
      std::fill(m.begin(), m.end(), -HUGE_VALF);
      for (int64_t h = hs; h < he; ++h)
        for (int64_t w = ws; w < we; ++w) {
          const uint16_t* px = xp + ((n * H + h) * W + w) * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const float v = bf16_to_f32(px[c]);
            m[c] = above(v, m[c]) ? v : m[c];
          }
        }
      uint16_t* py = yp + ((n * P + op) * Q + oq) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) py[c] = f32_to_bf16(m[c]);  // exact: m is a bf16 value
    }
  }
}

// Each window's gradient goes to its first element (row-major over h, w) equal to y. Windows
// that overlap add in fp32, per sample, and are rounded once.
void pool2d_backward(CpuBackend& b, Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                     const Pool2dParams& p) {
  if (p.mode != PoolMode::kMax || !all_bf16_same_layout({&dx, &dy, &x, &y}) ||
      x.layout() != Layout::kChannelsLast) {
    F32Stage sdx(b, dx, false, true), sdy(b, dy, true, false), sx(b, x, true, false),
        sy(b, y, true, false);
    b.pool2d_backward(sdx.f32(), sdy.f32(), sx.f32(), sy.f32(), p);
    return sdx.finish();
  }
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t P = y.dim(2), Q = y.dim(3);
  const uint16_t* xp = bits(x);
  const uint16_t* yp = bits(y);
  const uint16_t* gp = bits(dy);
  uint16_t* dxp = bits(dx);
  if (b.tracing_placement())
    b.place("pool2d_backward max bf16 nhwc " + x.shape().str() + " -> tandem's OpenMP loop");
  if (is_2x2_stride_2(p, x.shape(), y.shape()))
    return max_pool_2x2_backward(dxp, gp, xp, yp, N, C, H, W, P, Q);
#pragma omp parallel for schedule(static) if (N > 1)
  for (int64_t n = 0; n < N; ++n) {
    std::vector<float> acc(static_cast<size_t>(H * W * C), 0.f);
    std::vector<int32_t> found(static_cast<size_t>(C));
    for (int64_t op = 0; op < P; ++op) {
      const int64_t h0 = op * p.stride_h - p.pad_h;
      const int64_t hs = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + p.kernel_h, H);
      for (int64_t oq = 0; oq < Q; ++oq) {
        const int64_t w0 = oq * p.stride_w - p.pad_w;
        const int64_t ws = std::max<int64_t>(w0, 0), we = std::min<int64_t>(w0 + p.kernel_w, W);
        const int64_t o = ((n * P + op) * Q + oq) * C;
        std::fill(found.begin(), found.end(), 0);
        for (int64_t h = hs; h < he; ++h)
          for (int64_t w = ws; w < we; ++w) {
            const uint16_t* px = xp + ((n * H + h) * W + w) * C;
            float* pa = acc.data() + (h * W + w) * C;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) {  // bitwise, not &&/||: it vectorises
              const float v = bf16_to_f32(px[c]), m = bf16_to_f32(yp[o + c]);
              const int32_t hit = ((v == m) | ((v != v) & (m != m))) & (found[c] == 0);
              const float g = bf16_to_f32(gp[o + c]);
              pa[c] += hit ? g : 0.f;
              found[c] |= hit;
            }
          }
      }
    }
    uint16_t* out = dxp + n * H * W * C;
#pragma omp simd
    for (int64_t i = 0; i < H * W * C; ++i) out[i] = f32_to_bf16(acc[static_cast<size_t>(i)]);
  }
}

// --- batch normalization, channels innermost: x seen as (rows, C) ---

namespace {

constexpr int64_t kRowBlock = 256;  // rows summed in fp32 before the blocks are added in double

// Per channel, over every row: sums of f(row values) for the two functions the callers need,
// each block of rows in fp32 lanes, the blocks in double, in block order (any thread count gives
// the same sums).
template <typename F>
void channel_sums(int64_t rows, int64_t c, F&& f, std::vector<double>& s1,
                  std::vector<double>& s2) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<float> p1(static_cast<size_t>(blocks * c), 0.f), p2(p1.size(), 0.f);
#pragma omp parallel for schedule(static) if (rows * c > 16384)
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t end = std::min(rows, (k + 1) * kRowBlock);
    for (int64_t r = k * kRowBlock; r < end; ++r) f(r, p1.data() + k * c, p2.data() + k * c);
  }
  s1.assign(static_cast<size_t>(c), 0.0);
  s2.assign(static_cast<size_t>(c), 0.0);
  for (int64_t k = 0; k < blocks; ++k)
    for (int64_t j = 0; j < c; ++j) {
      s1[static_cast<size_t>(j)] += p1[static_cast<size_t>(k * c + j)];
      s2[static_cast<size_t>(j)] += p2[static_cast<size_t>(k * c + j)];
    }
}

bool bn_form(const Tensor& x, const Tensor& gamma, std::initializer_list<const Tensor*> same,
             int64_t* rows, int64_t* c) {
  if (x.dtype() != DType::kBF16 || !channel_rows(x, rows, c) || *c != gamma.numel()) return false;
  for (const Tensor* t : same)
    if (t->dtype() != DType::kBF16 || t->layout() != x.layout() || t->shape() != x.shape())
      return false;
  return true;
}

// y = (x - mean) * a + b per channel, rounded to bf16 once.
void normalize_rows(uint16_t* y, const uint16_t* x, int64_t rows, int64_t c,
                    const std::vector<float>& mean, const std::vector<float>& a,
                    const std::vector<float>& b) {
#pragma omp parallel for schedule(static) if (rows * c > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* xr = x + r * c;
    uint16_t* yr = y + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j)
      yr[j] = f32_to_bf16((bf16_to_f32(xr[j]) - mean[static_cast<size_t>(j)]) *
                              a[static_cast<size_t>(j)] +
                          b[static_cast<size_t>(j)]);
  }
}

}  // namespace

bool batchnorm_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                Tensor& running_mean, Tensor& running_var, const Tensor& x,
                                const Tensor& gamma, const Tensor& beta, float momentum,
                                float eps) {
  int64_t rows = 0, c = 0;
  if (!bn_form(x, gamma, {&y}, &rows, &c)) return false;
  for (const Tensor* t : std::initializer_list<const Tensor*>{&beta, &save_mean, &save_inv_std,
                                                              &running_mean, &running_var})
    TANDEM_CHECK(t->numel() == c, "batchnorm: a per-channel tensor of " + t->shape().str() +
                                      " for " + std::to_string(c) + " channels");
  TANDEM_CHECK(rows > 1,
               "batch normalization needs more than one value per channel, got " + x.shape().str());
  const uint16_t* xp = bits(x);
  std::vector<double> sum, unused, squares;
  channel_sums(
      rows, c,
      [&](int64_t r, float* s, float*) {
        const uint16_t* xr = xp + r * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) s[j] += bf16_to_f32(xr[j]);
      },
      sum, unused);
  std::vector<float> mean(static_cast<size_t>(c)), a(mean.size()), b(mean.size());
  for (size_t j = 0; j < mean.size(); ++j)
    mean[j] = static_cast<float>(sum[j] / static_cast<double>(rows));
  // Two passes, as fp32's: no cancellation of a large mean.
  channel_sums(
      rows, c,
      [&](int64_t r, float* s, float*) {
        const uint16_t* xr = xp + r * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) {
          const float d = bf16_to_f32(xr[j]) - mean[static_cast<size_t>(j)];
          s[j] += d * d;
        }
      },
      squares, unused);
  for (size_t j = 0; j < mean.size(); ++j) {
    const double m = sum[j] / static_cast<double>(rows);
    const double var = squares[j] / static_cast<double>(rows);
    const double inv_std = 1.0 / std::sqrt(var + static_cast<double>(eps));
    save_mean.data()[j] = static_cast<float>(m);
    save_inv_std.data()[j] = static_cast<float>(inv_std);
    float& rm = running_mean.data()[j];
    float& rv = running_var.data()[j];
    const double unbiased = squares[j] / static_cast<double>(rows - 1);
    rm = static_cast<float>((1.0 - momentum) * rm + momentum * m);
    rv = static_cast<float>((1.0 - momentum) * rv + momentum * unbiased);
    a[j] = static_cast<float>(gamma.data()[j] * inv_std);
    b[j] = beta.data()[j];
  }
  normalize_rows(bits(y), xp, rows, c, mean, a, b);
  return true;
}

bool batchnorm_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, const Tensor& running_mean,
                                 const Tensor& running_var, float eps) {
  int64_t rows = 0, c = 0;
  if (!bn_form(x, gamma, {&y}, &rows, &c)) return false;
  std::vector<float> mean(static_cast<size_t>(c)), a(mean.size()), b(mean.size());
  for (size_t j = 0; j < mean.size(); ++j) {
    mean[j] = running_mean.data()[j];
    a[j] = static_cast<float>(gamma.data()[j] /
                              std::sqrt(static_cast<double>(running_var.data()[j]) + eps));
    b[j] = beta.data()[j];
  }
  normalize_rows(bits(y), bits(x), rows, c, mean, a, b);
  return true;
}

// dx = gamma * inv_std * (dy - mean(dy) - (x - mean) * inv_std^2 * mean(dy * (x - mean))).
bool batchnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                        const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_inv_std) {
  int64_t rows = 0, c = 0;
  if (!bn_form(x, gamma, {&dy}, &rows, &c)) return false;
  if (dx && (dx->dtype() != DType::kBF16 || dx->layout() != x.layout())) return false;
  for (const Tensor* t :
       std::initializer_list<const Tensor*>{&dgamma, &dbeta, &save_mean, &save_inv_std})
    TANDEM_CHECK(t->numel() == c, "batchnorm backward: a per-channel tensor of " +
                                      t->shape().str() + " for " + std::to_string(c) + " channels");
  const uint16_t *xp = bits(x), *gp = bits(dy);
  const float* mean = save_mean.data();
  std::vector<double> sum_dy, sum_dy_xc;
  channel_sums(
      rows, c,
      [&](int64_t r, float* s, float* t) {
        const uint16_t* xr = xp + r * c;
        const uint16_t* gr = gp + r * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) {
          const float g = bf16_to_f32(gr[j]);
          s[j] += g;
          t[j] += g * (bf16_to_f32(xr[j]) - mean[j]);
        }
      },
      sum_dy, sum_dy_xc);
  std::vector<float> a(static_cast<size_t>(c)), bc(a.size()), mean_dy(a.size());
  const double m = static_cast<double>(rows);
  for (size_t j = 0; j < a.size(); ++j) {
    const double inv_std = save_inv_std.data()[j];
    dbeta.data()[j] = static_cast<float>(sum_dy[j]);
    dgamma.data()[j] = static_cast<float>(sum_dy_xc[j] * inv_std);
    const double aj = gamma.data()[j] * inv_std;
    a[j] = static_cast<float>(aj);
    bc[j] = static_cast<float>(-aj * inv_std * inv_std * sum_dy_xc[j] / m);
    mean_dy[j] = static_cast<float>(sum_dy[j] / m);
  }
  if (!dx) return true;
  uint16_t* dxp = bits(*dx);
#pragma omp parallel for schedule(static) if (rows * c > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* xr = xp + r * c;
    const uint16_t* gr = gp + r * c;
    uint16_t* dr = dxp + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j)
      dr[j] = f32_to_bf16((bf16_to_f32(gr[j]) - mean_dy[static_cast<size_t>(j)]) *
                              a[static_cast<size_t>(j)] +
                          (bf16_to_f32(xr[j]) - mean[j]) * bc[static_cast<size_t>(j)]);
  }
  return true;
}

}  // namespace mixed
}  // namespace tandem
