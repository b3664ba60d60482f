// Elementwise and per-channel ops on the CPU as OpenMP loops: bias add and its gradient, add,
// and the non-finite count.
//
// Written by hand: each is one memory-bound pass that a library call would not make faster.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "cpu/bf16.h"
#include "cpu/cpu_backend_impl.h"

// clang-format off: last, so that only what follows is compiled for AVX2 with FMA
#include "cpu/isa.h"
// clang-format on

namespace tandem {
namespace {

// (N, C, inner) view of an (N,C,...) tensor: inner is the product of the axes after C.
struct ChannelView {
  int64_t n, c, inner;
};

ChannelView channel_view(const Tensor& t, const Tensor& b, const char* what) {
  TANDEM_CHECK(t.shape().rank() >= 2 && t.dim(1) == b.numel(),
               std::string(what) + ": " + t.shape().str() + " with bias " + b.shape().str());
  const int64_t n = t.dim(0), c = t.dim(1);
  return {n, c, n * c == 0 ? 0 : t.numel() / (n * c)};
}

// b scales whole samples of a ((N) or (N,1,1,1) against (N,...): drop_path's scale), b fp32 and
// plain: every memory order of a keeps each sample's elements together, so the loops run on a's
// memory as it is.
bool per_sample(const MultiplyGeometry& g, const Tensor& a, const Tensor& b) {
  return b.is_f32_plain() && a.dtype() == DType::kF32 && a.shape().rank() > 0 && g.rows == a.dim(0);
}

// db (C) of dy in the blocked order (N, C/B, inner, B): as the plain loop, each sample's sum in
// fp32, the samples added in double, B channels at a time.
template <int B>
void blocked_bias_backward(float* db, const float* dy, const ChannelView& v) {
  const int64_t blocks = v.c / B;
#pragma omp parallel for schedule(static) if (v.n * v.c * v.inner > 16384)
  for (int64_t cb = 0; cb < blocks; ++cb) {
    double sum[B] = {};
    for (int64_t i = 0; i < v.n; ++i) {
      const float* d = dy + (i * blocks + cb) * v.inner * B;
      float s[B] = {};
      for (int64_t k = 0; k < v.inner; ++k)
#pragma omp simd
        for (int j = 0; j < B; ++j) s[j] += d[k * B + j];
      for (int j = 0; j < B; ++j) sum[j] += s[j];
    }
    for (int j = 0; j < B; ++j) db[cb * B + j] = static_cast<float>(sum[j]);
  }
}

// b gates the channels of a, (N,C,1,1) against (N,C,H,W) (squeeze-and-excitation), with a's
// channels innermost (blocked fp32, channels-last fp32 or bf16) and b of a's dtype: a's channel
// runs, else nullopt. b's memory is (N,C) in any layout, its H and W being 1.
std::optional<ChannelRuns> gate_runs(const MultiplyGeometry& g, const Tensor& a, const Tensor& b) {
  ChannelRuns v;
  if (a.dtype() == DType::kF16 || b.dtype() != a.dtype() || !channel_runs(a, &v) ||
      g.rows != a.dim(0) * a.dim(1) || b.numel() != g.rows)
    return std::nullopt;
  return v;
}

// y = a * gate, a as channel runs, the gate (N, C): run r's channel j is gate[r * width + j].
template <typename T>
void gate_forward(T* y, const T* a, const T* gate, const ChannelRuns& v) {
#pragma omp parallel for schedule(static) if (v.runs * v.inner * v.width > 65536)
  for (int64_t r = 0; r < v.runs; ++r) {
    const T* gp = gate + r * v.width;
    const int64_t base = r * v.inner * v.width;
    for (int64_t k = 0; k < v.inner; ++k)
#pragma omp simd
      for (int64_t j = 0; j < v.width; ++j) {
        const int64_t e = base + k * v.width + j;
        store(y, e, load(a, e) * load(gp, j));
      }
  }
}

// da = dy * gate; dgate = each channel's sum of dy * a in double, in position order as the plain
// loop adds them (in fp32, the same value to the bit).
template <typename T>
void gate_backward(T* da, T* dgate, const T* dy, const T* a, const T* gate, const ChannelRuns& v) {
#pragma omp parallel if (v.runs * v.inner * v.width > 65536)
  {
    std::vector<double> s(static_cast<size_t>(v.width));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < v.runs; ++r) {
      const T* gp = gate + r * v.width;
      const int64_t base = r * v.inner * v.width;
      if (da)
        for (int64_t k = 0; k < v.inner; ++k)
#pragma omp simd
          for (int64_t j = 0; j < v.width; ++j) {
            const int64_t e = base + k * v.width + j;
            store(da, e, load(dy, e) * load(gp, j));
          }
      if (!dgate) continue;
      std::fill(s.begin(), s.end(), 0.0);
      for (int64_t k = 0; k < v.inner; ++k)
        for (int64_t j = 0; j < v.width; ++j) {
          const int64_t e = base + k * v.width + j;
          s[static_cast<size_t>(j)] += static_cast<double>(load(dy, e)) * load(a, e);
        }
      for (int64_t j = 0; j < v.width; ++j)
        store(dgate, r * v.width + j, static_cast<float>(s[static_cast<size_t>(j)]));
    }
  }
}

}  // namespace

// y (N,C,...) += b (C).
void CpuBackend::bias_add(Tensor& y, const Tensor& b) {
  if (!all_f32_plain({&y, &b})) return mixed::bias_add(*this, y, b);
  const ChannelView v = channel_view(y, b, "bias_add");
  float* yp = y.data();
  const float* bp = b.data();
  if (v.inner == 1) {
#pragma omp parallel for schedule(static) if (v.n * v.c > 16384)
    for (int64_t i = 0; i < v.n; ++i) {
      float* row = yp + i * v.c;
#pragma omp simd
      for (int64_t c = 0; c < v.c; ++c) row[c] += bp[c];
    }
    return;
  }
#pragma omp parallel for schedule(static) if (y.numel() > 16384)
  for (int64_t nc = 0; nc < v.n * v.c; ++nc) {
    float* plane = yp + nc * v.inner;
    const float bias = bp[nc % v.c];
#pragma omp simd
    for (int64_t i = 0; i < v.inner; ++i) plane[i] += bias;
  }
}

// db (C) = sum of dy (N,C,...) over N and the spatial axes, accumulated in double.
void CpuBackend::bias_backward(Tensor& db, const Tensor& dy) {
  if (const int block = channel_block(dy.layout());
      block && dy.dtype() == DType::kF32 && db.is_f32_plain()) {
    const ChannelView v = channel_view(dy, db, "bias_backward");
    return block == 16 ? blocked_bias_backward<16>(db.data(), dy.data(), v)
                       : blocked_bias_backward<8>(db.data(), dy.data(), v);
  }
  if (!all_f32_plain({&db, &dy})) return mixed::bias_backward(*this, db, dy);
  const ChannelView v = channel_view(dy, db, "bias_backward");
  const float* dyp = dy.data();
  float* dbp = db.data();
  if (v.inner == 1) {
    // (N,C): each thread sums a block of rows, then the partial sums are added in thread order.
    const int threads = omp_get_max_threads();
    std::vector<double> partial(static_cast<size_t>(threads) * v.c, 0.0);
#pragma omp parallel num_threads(threads) if (dy.numel() > 16384)
    {
      double* mine = partial.data() + static_cast<size_t>(omp_get_thread_num()) * v.c;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < v.n; ++i) {
        const float* row = dyp + i * v.c;
        for (int64_t c = 0; c < v.c; ++c) mine[c] += row[c];
      }
    }
    for (int64_t c = 0; c < v.c; ++c) {
      double s = 0;
      for (int t = 0; t < threads; ++t) s += partial[static_cast<size_t>(t) * v.c + c];
      dbp[c] = static_cast<float>(s);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (dy.numel() > 16384)
  for (int64_t c = 0; c < v.c; ++c) {
    double s = 0;
    for (int64_t i = 0; i < v.n; ++i) {
      const float* plane = dyp + (i * v.c + c) * v.inner;
      float f = 0.f;  // a plane is short (P*Q); its fp32 partial keeps the loop vectorised
#pragma omp simd reduction(+ : f)
      for (int64_t k = 0; k < v.inner; ++k) f += plane[k];
      s += f;
    }
    dbp[c] = static_cast<float>(s);
  }
}

// y = a + b (y may alias a or b).
void CpuBackend::add(Tensor& y, const Tensor& a, const Tensor& b) {
  TANDEM_CHECK(a.numel() == b.numel() && y.numel() == a.numel(),
               "add " + a.shape().str() + " + " + b.shape().str() + " -> " + y.shape().str());
  if (!all_f32_same_order({&y, &a, &b})) return mixed::add(*this, y, a, b);
  const int64_t n = y.numel();
  const float* ap = a.data();
  const float* bp = b.data();
  float* yp = y.data();
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) yp[i] = ap[i] + bp[i];
}

// relu(a + b) in one pass over fp32 tensors of one order; the two ops otherwise.
void CpuBackend::add_relu(Tensor& y, const Tensor& a, const Tensor& b) {
  TANDEM_CHECK(a.numel() == b.numel() && y.numel() == a.numel(),
               "add " + a.shape().str() + " + " + b.shape().str() + " -> " + y.shape().str());
  if (!all_f32_same_order({&y, &a, &b})) return Backend::add_relu(y, a, b);
  const int64_t n = y.numel();
  const float* ap = a.data();
  const float* bp = b.data();
  float* yp = y.data();
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) yp[i] = activation_value(Activation::kRelu, ap[i] + bp[i], 0.f);
}

// Every input's gradient, relu's from dy and y, in one pass.
void CpuBackend::add_relu_backward(const std::vector<Tensor*>& dxs, const Tensor& dy,
                                   const Tensor& y) {
  std::vector<float*> out;
  bool same = all_f32_same_order({&dy, &y});
  for (Tensor* dx : dxs) {
    if (!dx) continue;
    TANDEM_CHECK(dx->numel() == dy.numel(),
                 "add_relu_backward " + dy.shape().str() + " -> " + dx->shape().str());
    same = same && dx->dtype() == DType::kF32 && dx->layout() == dy.layout();
    out.push_back(dx->data());
  }
  if (!same) return Backend::add_relu_backward(dxs, dy, y);
  const int64_t n = dy.numel();
  const float* g = dy.data();
  const float* yp = y.data();
  if (out.size() == 2) {  // a residual block's add: both branches, one read of dy and y
    float *d0 = out[0], *d1 = out[1];
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
    for (int64_t i = 0; i < n; ++i)
      d0[i] = d1[i] = activation_grad(Activation::kRelu, g[i], yp[i], 0.f);
    return;
  }
  for (float* d : out) {
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
    for (int64_t i = 0; i < n; ++i) d[i] = activation_grad(Activation::kRelu, g[i], yp[i], 0.f);
  }
}

void CpuBackend::multiply(Tensor& y, const Tensor& a, const Tensor& b) {
  const MultiplyGeometry g = multiply_geometry(y, a, b);
  if (const auto v = gate_runs(g, a, b);
      v && y.dtype() == a.dtype() && y.layout() == a.layout() && y.shape() == a.shape()) {
    if (a.dtype() == DType::kBF16) return gate_forward(bits(y), bits(a), bits(b), *v);
    return gate_forward(y.data(), a.data(), b.data(), *v);
  }
  if (b.is_f32_plain() && g.rows == a.dim(0) && a.dtype() == DType::kBF16 &&
      y.dtype() == DType::kBF16 && y.layout() == a.layout() && y.shape() == a.shape()) {
    // drop_path's fp32 scale of 16-bit samples, in any memory order: widened, rounded once.
    const uint16_t* ap = bits(a);
    uint16_t* yp = bits(y);
    const float* bp = b.data();
    const int64_t inner = g.inner;
#pragma omp parallel for schedule(static) if (a.numel() > 65536)
    for (int64_t r = 0; r < g.rows; ++r)
#pragma omp simd
      for (int64_t j = 0; j < inner; ++j)
        yp[r * inner + j] = f32_to_bf16(bf16_to_f32(ap[r * inner + j]) * bp[r]);
    return;
  }
  if (!all_f32_plain({&y, &a, &b}) && !(per_sample(g, a, b) && all_f32_same_order({&y, &a}))) {
    F32Stage sy(*this, y, &y == &a, true), sa(*this, a, true, false), sb(*this, b, true, false);
    multiply(sy.f32(), &y == &a ? sy.f32() : sa.f32(), sb.f32());
    return sy.finish();
  }
  const float* ap = a.data();
  const float* bp = b.data();
  float* yp = y.data();
  const int64_t inner = g.inner;
#pragma omp parallel for schedule(static) if (a.numel() > 65536)
  for (int64_t r = 0; r < g.rows; ++r) {
    const float v = bp[r];
    const float* ar = ap + r * inner;
    float* yr = yp + r * inner;
    if (inner == 1) {
      yr[0] = ar[0] * v;
      continue;
    }
#pragma omp simd
    for (int64_t j = 0; j < inner; ++j) yr[j] = ar[j] * v;
  }
}

void CpuBackend::multiply_backward(Tensor* da, Tensor* db, const Tensor& dy, const Tensor& a,
                                   const Tensor& b) {
  const MultiplyGeometry g = multiply_geometry(dy, a, b);
  auto same_form = [&](const Tensor* t) {
    return !t || (t->dtype() == a.dtype() && t->layout() == a.layout() && t->shape() == a.shape());
  };
  if (const auto v = gate_runs(g, a, b);
      v && same_form(&dy) && same_form(da) && (!db || db->dtype() == a.dtype())) {
    if (db) TANDEM_CHECK(db->numel() == b.numel(), "multiply_backward: db " + db->shape().str());
    if (a.dtype() == DType::kBF16)
      return gate_backward(da ? bits(*da) : nullptr, db ? bits(*db) : nullptr, bits(dy), bits(a),
                           bits(b), *v);
    return gate_backward(da ? da->data() : nullptr, db ? db->data() : nullptr, dy.data(), a.data(),
                         b.data(), *v);
  }
  if (!db && da && b.is_f32_plain() && g.rows == a.dim(0) && a.dtype() == DType::kBF16 &&
      same_form(da) && same_form(&dy))
    return multiply(*da, dy, b);  // drop_path's backward: dy times the same per-sample scale
  const bool direct =
      all_f32_plain({&dy, &a, &b}) || (per_sample(g, a, b) && all_f32_same_order({&dy, &a}) &&
                                       (!da || all_f32_same_order({da, &a})));
  if (!direct || (db && !db->is_f32_plain())) {
    F32Stage sdy(*this, dy, true, false), sa(*this, a, true, false), sb(*this, b, true, false);
    std::optional<F32Stage> sda, sdb;
    if (da) sda.emplace(*this, *da, false, true);
    if (db) sdb.emplace(*this, *db, false, true);
    multiply_backward(da ? &sda->f32() : nullptr, db ? &sdb->f32() : nullptr, sdy.f32(), sa.f32(),
                      sb.f32());
    if (sda) sda->finish();
    if (sdb) sdb->finish();
    return;
  }
  if (db) TANDEM_CHECK(db->numel() == b.numel(), "multiply_backward: db " + db->shape().str());
  if (da) TANDEM_CHECK(da->numel() == a.numel(), "multiply_backward: da " + da->shape().str());
  const float* g_ = dy.data();
  const float* ap = a.data();
  const float* bp = b.data();
  float* dap = da ? da->data() : nullptr;
  float* dbp = db ? db->data() : nullptr;
  const int64_t inner = g.inner;
  // Each row's da, and its db as one sum in row order (the same on every run).
#pragma omp parallel for schedule(static) if (a.numel() > 65536)
  for (int64_t r = 0; r < g.rows; ++r) {
    const float* gr = g_ + r * inner;
    const float* ar = ap + r * inner;
    if (dap) {
      float* dar = dap + r * inner;
      const float v = bp[r];
      if (inner == 1) {
        dar[0] = gr[0] * bp[r];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < inner; ++j) dar[j] = gr[j] * v;
      }
    }
    if (dbp) {
      double s = 0;
      for (int64_t j = 0; j < inner; ++j) s += static_cast<double>(gr[j]) * ar[j];
      dbp[r] = static_cast<float>(s);
    }
  }
}

// t *= factor[0].
void CpuBackend::scale_by(Tensor& t, const Tensor& factor) {
  TANDEM_CHECK(t.is_f32_plain() && factor.is_f32_plain() && factor.numel() == 1,
               "scale_by takes an fp32 tensor and a one-element fp32 factor");
  const int64_t n = t.numel();
  const float f = *factor.data();
  float* p = t.data();
#pragma omp parallel for simd schedule(static) if (parallel : n > 65536)
  for (int64_t i = 0; i < n; ++i) p[i] *= f;
}

void CpuBackend::copy_columns(Tensor& dst, int64_t dst_col, const Tensor& src, int64_t src_col,
                              int64_t cols) {
  const ColumnCopy g = check_copy_columns(dst, dst_col, src, src_col, cols);
  if (cols == 0) return;
  if (!all_f32_plain({&dst, &src})) {  // rows of the logical order: on fp32 plain stand-ins
    F32Stage sd(*this, dst, true, true), ss(*this, src, true, false);
    copy_columns(sd.f32(), dst_col, ss.f32(), src_col, cols);
    return sd.finish();
  }
  float* d = dst.data() + dst_col;
  const float* s = src.data() + src_col;
  const size_t bytes = static_cast<size_t>(cols) * sizeof(float);
#pragma omp parallel for schedule(static) if (g.rows * cols > 65536)
  for (int64_t r = 0; r < g.rows; ++r) std::memcpy(d + r * g.dst_row, s + r * g.src_row, bytes);
}

int64_t CpuBackend::count_nonfinite(const Tensor& t) {
  if (is_16bit(t.dtype())) return mixed::count_nonfinite(t);
  const int64_t n = t.numel();
  const float* p = t.data();
  int64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) bad += std::isfinite(p[i]) ? 0 : 1;
  return bad;
}

}  // namespace tandem
