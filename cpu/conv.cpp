// 2-D convolution forward, backward-data and backward-filter on the CPU through oneDNN.
//
// The primitives are created with memory format `any`, so oneDNN picks its blocked layouts
// (nChw16c, OIhw16i16o, ...) and its fastest jit kernels; plain NCHW tensors are reordered in and
// out by cached reorders. Everything is cached per (op, shapes, parameters). The weights are
// reordered on every call: a Tensor carries no version, so a blocked copy kept across calls could
// not tell that sgd_update changed them; the reorder is tens of microseconds for these kernels.
//
// 16-bit: where its input (x, or dy backward) is bf16 the convolution computes in bf16 with fp32
// accumulation (jit_bf16 / brg kernels); the fp32 weights are rounded to bf16 by the same reorder
// that blocks them, the bias stays fp32 and the weight gradient is written in fp32. A bf16
// channels-last activation is given to the primitive as it is (nhwc), so it reads and writes
// the graph's tensors with no reorder; an fp32 one (the model's input) is converted by its bridge.
//
// fp32 activations kept in oneDNN's blocked order (nChw16c, nChw8c: CpuBackend::activation_layout)
// are given to the primitives as they are: no reorder between one convolution and the next.
//
// One exception: the weight gradient of an fp32 depthwise convolution whose shape oneDNN 2.6's
// depthwise kernels do not take (a 5x5 window, or an output smaller than the window) falls to its
// im2col gemm (or, blocked, its reference kernel), 10 to 30 times slower than the forward
// (EfficientNet's 5x5 layers); there a loop of tandem's (depthwise_backward_filter) runs
// instead, for fp32 tensors, plain or blocked. In bf16 oneDNN's gemm
// stays: staging x and dy to fp32 for the loop measured no faster on efficientnet_b0_cifar.
#include <immintrin.h>

#include <algorithm>
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
constexpr auto kF32 = memory::data_type::f32;

// The shapes and parameters of one convolution, in oneDNN's terms.
struct ConvGeometry {
  memory::dims src, wei, dst, bias, strides, dilates, pad_l, pad_r;
  std::string key;   // "[N, C, H, W]x[K, C, R, S] s1,1 p0,0 d1,1"
  std::string desc;  // for the placement line
};

ConvGeometry geometry(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p) {
  TANDEM_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4,
               "conv2d wants 4-D tensors, got " + x.str() + ", " + w.str() + ", " + y.str());
  TANDEM_CHECK(p.groups >= 1 && x[1] == w[1] * p.groups && w[0] % p.groups == 0 && y[0] == x[0] &&
                   y[1] == w[0],
               "conv2d shapes " + x.str() + " * " + w.str() + " -> " + y.str() + " in " +
                   std::to_string(p.groups) + " groups");
  TANDEM_CHECK(y[2] == conv_out_size(x[2], w[2], p.stride_h, p.pad_h, p.dilation_h) &&
                   y[3] == conv_out_size(x[3], w[3], p.stride_w, p.pad_w, p.dilation_w),
               "conv2d output " + y.str() + " does not match input " + x.str());
  ConvGeometry g;
  g.src = {x[0], x[1], x[2], x[3]};
  // Grouped: oneDNN's (G, K/G, C/G, R, S), whose plain order (goihw) is tandem's (K, C/G, R, S).
  g.wei = p.groups == 1 ? memory::dims{w[0], w[1], w[2], w[3]}
                        : memory::dims{p.groups, w[0] / p.groups, w[1], w[2], w[3]};
  g.dst = {y[0], y[1], y[2], y[3]};
  g.bias = {w[0]};
  g.strides = {p.stride_h, p.stride_w};
  g.dilates = {p.dilation_h - 1, p.dilation_w - 1};  // oneDNN counts dilation from 0
  g.pad_l = {p.pad_h, p.pad_w};
  g.pad_r = {p.pad_h, p.pad_w};  // floor mode: the division drops any excess on the right
  auto pair = [](int a, int b) { return std::to_string(a) + "," + std::to_string(b); };
  g.desc = x.str() + "x" + w.str();
  if (p.groups != 1) g.desc += " g" + std::to_string(p.groups);
  g.key = g.desc + " s" + pair(p.stride_h, p.stride_w) + " p" + pair(p.pad_h, p.pad_w) + " d" +
          pair(p.dilation_h, p.dilation_w);
  return g;
}

memory::desc any_desc(const memory::dims& d, memory::data_type dt = kF32) {
  return memory::desc(d, dt, tag::any);
}

// The compute dtype of a convolution pass: its input's (x forward and for the weight gradient,
// dy backward). The model's first convolution reads the fp32 input and so computes in fp32: with
// its 1 or 3 channels oneDNN has no bf16 jit kernel for it (ref:any, 20 times slower), and it
// is a small share of the work; its bf16 output is converted by the dst reorder.
memory::data_type compute_type(const Tensor& input) {
  return is_16bit(input.dtype()) ? dnnl_dtype(input.dtype()) : kF32;
}

// How the primitive sees activation t: as stored where that is the compute type in the kernels'
// order, channels-last (16-bit) or blocked (fp32): no reorder. Otherwise `any` (oneDNN's
// choice; the bridge converts).
memory::desc activation_desc(const Tensor& t, const memory::dims& d, memory::data_type dt) {
  if (t.layout() != Layout::kPlain && dnnl_dtype(t.dtype()) == dt) return tensor_desc(t, d);
  return any_desc(d, dt);
}

// Whether a pass reads and writes its two activations as they are, NCHW: both are fp32 and plain
// only because their channels are no whole number of the blocks the backend keeps fp32 images in
// (LeNet's 20 and 50; with `whole_block_in`, a's channels at least a block, for the weight
// gradient: from 1 or 3 input channels the NCHW kernel's took LeNet's first convolution 5 times
// as long as the blocked one with its reorders). oneDNN's
// blocked kernels would then need a reorder of each, around every call; its NCHW kernel (im2col
// and a matrix product, gemm:jit) reads them as they are, and in LeNet it ran each such pass as
// fast or faster, reorders aside (bench/README.md). Not in the plain order asked for with
// TANDEM_CPU_FP32_LAYOUT, which measures the reorders.
bool nchw_pass(const Backend& be, const Tensor& a, const Tensor& b, bool whole_block_in = false) {
  const Layout blocks = be.activation_layout(DType::kF32, Shape{1, 16, 1, 1});
  if (blocks == Layout::kPlain) return false;
  const int64_t min_channels = whole_block_in ? channel_block(blocks) : 1;
  auto unblocked = [&](const Tensor& t) {
    return t.is_f32_plain() && t.shape().rank() == 4 &&
           be.activation_layout(DType::kF32, t.shape()) == Layout::kPlain;
  };
  return unblocked(a) && unblocked(b) && a.dim(1) >= min_channels;
}

// Whether a pass may try oneDNN's Winograd kernel (jit_wino_4x3, on CPUs with AVX-512): fp32, a
// 3x3 window at stride 1, undilated, one group, input and output channels in whole blocks of 16,
// when the backend allows it (cpu.conv_algo). It computes each 4x4 tile of outputs from a 6x6
// tile of inputs in a transformed domain, with a quarter of a direct sum's multiplications: each
// pass of resnet18_cifar's 3x3 layers ran in about half the time (bench/README.md). The price is
// rounding: about 2e-6 of the output's scale against a direct sum's 3e-7, far inside the 1e-3 in
// which CPU and GPU losses must agree (cuDNN takes Winograd algorithms too). oneDNN takes it for
// 3 input channels too, padded to 16, but resnet18_cifar's first convolution then ran 3 times
// as long as the direct kernel. Where oneDNN has no such kernel (AVX2) pass_pd takes the direct.
bool winograd_pass(const CpuBackend& be, const Conv2dParams& p, const memory::dims& wei,
                   memory::data_type dt) {
  return be.winograd() && dt == kF32 && p.groups == 1 && wei[0] % 16 == 0 && wei[1] % 16 == 0 &&
         wei[2] == 3 && wei[3] == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 &&
         p.dilation_w == 1;
}

// The most scratch memory a Winograd pass may take (the GPU's default convolution workspace
// limit). Its weight gradient keeps a transformed copy of the weights per thread: for 512
// channels 131 MB at 2 threads, 660 MB at 16 and 2.5 GB at 64. Above the limit the direct kernel
// runs, which needs almost none.
constexpr size_t kWinogradScratchBytes = size_t{256} << 20;

// A pass's primitive descriptor from make(algorithm, src or diff_src desc, dst or diff_dst desc):
// with `winograd` (winograd_pass), oneDNN's Winograd kernel where it has one for the shape on this
// CPU and its scratchpad is within kWinogradScratchBytes; else NCHW as stored where nchw
// (nchw_pass), unless oneDNN then has only its reference kernel for it; else the direct algorithm
// as activation_desc says.
template <typename Make>
auto pass_pd(bool winograd, bool nchw, const Tensor& a, const memory::dims& da, const Tensor& b,
             const memory::dims& db, memory::data_type dt, Make make) {
  const auto direct = dnnl::algorithm::convolution_direct;
  if (winograd) {
    try {
      auto pd = make(dnnl::algorithm::convolution_winograd, activation_desc(a, da, dt),
                     activation_desc(b, db, dt));
      if (impl_name(pd).find("wino") != std::string::npos &&
          pd.scratchpad_desc().get_size() <= kWinogradScratchBytes)
        return pd;
    } catch (const dnnl::error&) {
      // unimplemented: no Winograd kernel for this shape or CPU; the direct one follows
    }
  }
  if (nchw) {
    auto pd = make(direct, tensor_desc(a, da), tensor_desc(b, db));
    if (impl_name(pd).rfind("ref", 0) != 0) return pd;
  }
  return make(direct, activation_desc(a, da, dt), activation_desc(b, db, dt));
}

std::string type_note(memory::data_type dt) {
  return dt == kF32 ? "" : dt == memory::data_type::bf16 ? " bf16" : " fp16";
}

// The forward descriptor that backward primitives need as a hint (no bias: irrelevant to them).
dnnl::convolution_forward::primitive_desc forward_hint(const ConvGeometry& g, dnnl::algorithm alg,
                                                       const memory::desc& src,
                                                       const memory::desc& dst,
                                                       memory::data_type dt,
                                                       const dnnl::engine& eng) {
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, alg, src,
                                    any_desc(g.wei, dt), dst, g.strides, g.dilates, g.pad_l,
                                    g.pad_r);
  return dnnl::convolution_forward::primitive_desc(d, eng);
}

// The activations' dtypes and orders, for the cache key: " [bf16 nhwc, fp32]" (empty in fp32).
std::string layout_note(const Tensor& a, const Tensor& b) {
  if (a.is_f32_plain() && b.is_f32_plain()) return "";
  auto one = [](const Tensor& t) {
    return std::string(dtype_name(t.dtype())) +
           (t.layout() == Layout::kPlain ? "" : std::string(" ") + layout_name(t.layout()));
  };
  return " [" + one(a) + ", " + one(b) + "]";
}

std::string reorder_note(std::initializer_list<std::pair<const char*, bool>> parts) {
  std::string s;
  for (const auto& [name, r] : parts) {
    if (r) s += (s.empty() ? "" : ", ") + std::string(name);
  }
  return s.empty() ? "" : " (reorders: " + s + ")";
}

struct ConvForwardEntry : CpuCacheEntry {
  dnnl::convolution_forward prim;
  memory::desc scratch_md;
  LayoutBridge src, wei, dst;
  memory bias;
};

struct ConvBackwardDataEntry : CpuCacheEntry {
  dnnl::convolution_backward_data prim;
  memory::desc scratch_md;
  LayoutBridge diff_dst, wei, diff_src;
};

struct ConvBackwardFilterEntry : CpuCacheEntry {
  dnnl::convolution_backward_weights prim;
  memory::desc scratch_md;
  LayoutBridge diff_dst, src, diff_wei;
  bool own_depthwise = false;  // depthwise_backward_filter runs instead of prim
};

// dw (C,1,R,S) of a depthwise convolution (groups = C = K), fp32 plain: per channel and tap, the
// sum over the batch and the output positions of dy times the input under that tap. Each
// sample's sums in fp32, the samples added in double, in order (deterministic).
// Subnormals are flushed to zero meanwhile, as oneDNN's kernels do: gradients far from the loss
// underflow, and a multiply of a subnormal costs a microcode assist.
void depthwise_backward_filter(float* dw, const float* dy, const float* x, const Shape& xs,
                               const Shape& ws, const Shape& ys, const Conv2dParams& p) {
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], P = ys[2], Q = ys[3];
  const int R = static_cast<int>(ws[2]), S = static_cast<int>(ws[3]);
#pragma omp parallel
  {
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);  // flush-to-zero and denormals-are-zero
    std::vector<double> acc(static_cast<size_t>(R * S));
    std::vector<float> plane(static_cast<size_t>(R * S));
#pragma omp for schedule(static)
    for (int64_t c = 0; c < C; ++c) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < N; ++n) {
        const float* xp = x + (n * C + c) * H * W;
        const float* dp = dy + (n * C + c) * P * Q;
        std::fill(plane.begin(), plane.end(), 0.f);
        // Each output position adds dy times the input under each tap of its window.
        for (int64_t op = 0; op < P; ++op) {
          for (int64_t oq = 0; oq < Q; ++oq) {
            const float d = dp[op * Q + oq];
            const int64_t h0 = op * p.stride_h - p.pad_h, w0 = oq * p.stride_w - p.pad_w;
            for (int r = 0; r < R; ++r) {
              const int64_t h = h0 + static_cast<int64_t>(r) * p.dilation_h;
              if (h < 0 || h >= H) continue;
              const float* xr = xp + h * W;
              float* pr = plane.data() + r * S;
              for (int s = 0; s < S; ++s) {
                const int64_t w = w0 + static_cast<int64_t>(s) * p.dilation_w;
                pr[s] += w >= 0 && w < W ? d * xr[w] : 0.f;
              }
            }
          }
        }
        for (int k = 0; k < R * S; ++k)
          acc[static_cast<size_t>(k)] += plane[static_cast<size_t>(k)];
      }
      for (int k = 0; k < R * S; ++k)
        dw[c * R * S + k] = static_cast<float>(acc[static_cast<size_t>(k)]);
    }
    _mm_setcsr(csr);
  }
}

// The same sums with x and dy channels innermost: blocked fp32 (N, C/B, H, W, B) or channels-last
// bf16 (N, H, W, C), taken 16 channels at a time (a block: B), each channel's products added in
// the plain loop's order (blocked fp32: the same result to the bit). bf16 products are exact in
// fp32.
template <typename T>
void depthwise_backward_filter_inner(float* dw, const T* dy, const T* x, const Shape& xs,
                                     const Shape& ws, const Shape& ys, const Conv2dParams& p,
                                     int64_t block) {
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], P = ys[2], Q = ys[3];
  const int R = static_cast<int>(ws[2]), S = static_cast<int>(ws[3]);
  const int64_t taps = static_cast<int64_t>(R) * S;
  const int64_t lanes = block ? block : 16, chunks = (C + lanes - 1) / lanes;
  const int64_t step = block ? block : C;  // between neighbouring positions of one channel
#pragma omp parallel
  {
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);  // flush-to-zero and denormals-are-zero
    std::vector<double> acc(static_cast<size_t>(taps * lanes));
    std::vector<float> plane(static_cast<size_t>(taps * lanes));
#pragma omp for schedule(static)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int64_t c0 = chunk * lanes, width = std::min(lanes, C - c0);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < N; ++n) {
        const T* xp = x + (block ? (n * chunks + chunk) * H * W * block : n * H * W * C + c0);
        const T* dp = dy + (block ? (n * chunks + chunk) * P * Q * block : n * P * Q * C + c0);
        std::fill(plane.begin(), plane.end(), 0.f);
        for (int64_t op = 0; op < P; ++op) {
          for (int64_t oq = 0; oq < Q; ++oq) {
            const T* d = dp + (op * Q + oq) * step;
            const int64_t h0 = op * p.stride_h - p.pad_h, w0 = oq * p.stride_w - p.pad_w;
            for (int r = 0; r < R; ++r) {
              const int64_t h = h0 + static_cast<int64_t>(r) * p.dilation_h;
              if (h < 0 || h >= H) continue;
              for (int s = 0; s < S; ++s) {
                const int64_t w = w0 + static_cast<int64_t>(s) * p.dilation_w;
                if (w < 0 || w >= W) continue;
                const T* xv = xp + (h * W + w) * step;
                float* pv = plane.data() + (r * S + s) * lanes;
#pragma omp simd
                for (int64_t j = 0; j < width; ++j) pv[j] += load(d, j) * load(xv, j);
              }
            }
          }
        }
        for (int64_t k = 0; k < taps * lanes; ++k)
          acc[static_cast<size_t>(k)] += plane[static_cast<size_t>(k)];
      }
      for (int64_t j = 0; j < width; ++j)
        for (int64_t k = 0; k < taps; ++k)
          dw[(c0 + j) * taps + k] = static_cast<float>(acc[static_cast<size_t>(k * lanes + j)]);
    }
    _mm_setcsr(csr);
  }
}

}  // namespace

// y (N,K,P,Q) = x (N,C,H,W) (*) w (K,C,R,S) + b (K).
void CpuBackend::conv2d_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b,
                                const Conv2dParams& p) {
  ConvGeometry g = geometry(x.shape(), w.shape(), y.shape(), p);
  if (b) TANDEM_CHECK(b->numel() == w.dim(0), "conv2d bias of shape " + b->shape().str());
  if (y.numel() == 0) return;
  const memory::data_type dt = compute_type(x);
  const std::string types = type_note(dt) + layout_note(x, y);
  auto& e = cached<ConvForwardEntry>("conv_fwd " + g.key + (b ? " bias" : "") + types, [&] {
    return dnnl_guard("conv2d_forward " + g.key, [&] {
      auto e = std::make_unique<ConvForwardEntry>();
      auto prop = dnnl::prop_kind::forward_training;
      auto make = [&](dnnl::algorithm alg, const memory::desc& src, const memory::desc& dst) {
        dnnl::convolution_forward::desc d =
            b ? dnnl::convolution_forward::desc(prop, alg, src, any_desc(g.wei, dt),
                                                plain_desc(g.bias), dst, g.strides, g.dilates,
                                                g.pad_l, g.pad_r)
              : dnnl::convolution_forward::desc(prop, alg, src, any_desc(g.wei, dt), dst, g.strides,
                                                g.dilates, g.pad_l, g.pad_r);
        return dnnl::convolution_forward::primitive_desc(d, scratchpad_attr(), engine());
      };
      auto pd = pass_pd(winograd_pass(*this, p, g.wei, dt), nchw_pass(*this, x, y), x, g.src, y,
                        g.dst, dt, make);
      e->prim = dnnl::convolution_forward(pd);
      e->scratch_md = pd.scratchpad_desc();
      e->src = LayoutBridge(*this, tensor_desc(x, g.src), pd.src_desc(), true);
      e->wei = LayoutBridge(*this, plain_desc(g.wei), pd.weights_desc(), true);
      e->dst = LayoutBridge(*this, tensor_desc(y, g.dst), pd.dst_desc(), false);
      if (b) e->bias = memory(plain_desc(g.bias), engine(), DNNL_MEMORY_NONE);
      e->placement = "conv2d_forward" + types + " " + g.desc + " -> " + impl_name(pd) +
                     reorder_note({{"src", e->src.reorders()},
                                   {"weights", e->wei.reorders()},
                                   {"dst", e->dst.reorders()}});
      return e;
    });
  });
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e.src.bind(x.raw())},
                                       {DNNL_ARG_WEIGHTS, e.wei.bind(w.data())},
                                       {DNNL_ARG_DST, e.dst.bind(y.raw())},
                                       {DNNL_ARG_SCRATCHPAD, scratchpad(e.scratch_md)}};
  if (b) {
    e.bias.set_data_handle(const_cast<float*>(b->data()));
    args[DNNL_ARG_BIAS] = e.bias;
  }
  e.src.run(stream());
  e.wei.run(stream());
  e.prim.execute(stream(), args);
  e.dst.run(stream());
  stream().wait();
}

// dx (N,C,H,W) = dy (N,K,P,Q) (*)^T w (K,C,R,S).
void CpuBackend::conv2d_backward_data(Tensor& dx, const Tensor& dy, const Tensor& w,
                                      const Conv2dParams& p) {
  ConvGeometry g = geometry(dx.shape(), w.shape(), dy.shape(), p);
  if (dx.numel() == 0) return;
  if (dy.numel() == 0) return fill(dx, 0.f);
  const memory::data_type dt = compute_type(dy);
  const std::string types = type_note(dt) + layout_note(dx, dy);
  auto& e = cached<ConvBackwardDataEntry>("conv_bwd_data " + g.key + types, [&] {
    return dnnl_guard("conv2d_backward_data " + g.key, [&] {
      auto e = std::make_unique<ConvBackwardDataEntry>();
      auto make = [&](dnnl::algorithm alg, const memory::desc& src, const memory::desc& dst) {
        dnnl::convolution_backward_data::desc d(alg, src, any_desc(g.wei, dt), dst, g.strides,
                                                g.dilates, g.pad_l, g.pad_r);
        return dnnl::convolution_backward_data::primitive_desc(
            d, scratchpad_attr(), engine(), forward_hint(g, alg, src, dst, dt, engine()));
      };
      auto pd = pass_pd(winograd_pass(*this, p, g.wei, dt), nchw_pass(*this, dx, dy), dx, g.src, dy,
                        g.dst, dt, make);
      e->prim = dnnl::convolution_backward_data(pd);
      e->scratch_md = pd.scratchpad_desc();
      e->diff_dst = LayoutBridge(*this, tensor_desc(dy, g.dst), pd.diff_dst_desc(), true);
      e->wei = LayoutBridge(*this, plain_desc(g.wei), pd.weights_desc(), true);
      e->diff_src = LayoutBridge(*this, tensor_desc(dx, g.src), pd.diff_src_desc(), false);
      e->placement = "conv2d_backward_data" + types + " " + g.desc + " -> " + impl_name(pd) +
                     reorder_note({{"diff_dst", e->diff_dst.reorders()},
                                   {"weights", e->wei.reorders()},
                                   {"diff_src", e->diff_src.reorders()}});
      return e;
    });
  });
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, e.diff_dst.bind(dy.raw())},
                                       {DNNL_ARG_WEIGHTS, e.wei.bind(w.data())},
                                       {DNNL_ARG_DIFF_SRC, e.diff_src.bind(dx.raw())},
                                       {DNNL_ARG_SCRATCHPAD, scratchpad(e.scratch_md)}};
  e.diff_dst.run(stream());
  e.wei.run(stream());
  e.prim.execute(stream(), args);
  e.diff_src.run(stream());
  stream().wait();
}

// dw (K,C,R,S) = sum over n, p, q of dy (N,K,P,Q) times the matching x (N,C,H,W) window.
void CpuBackend::conv2d_backward_filter(Tensor& dw, const Tensor& dy, const Tensor& x,
                                        const Conv2dParams& p) {
  ConvGeometry g = geometry(x.shape(), dw.shape(), dy.shape(), p);
  if (dw.numel() == 0) return;
  if (dy.numel() == 0) return fill(dw, 0.f);
  const memory::data_type dt = compute_type(x);
  const std::string types = type_note(dt) + layout_note(x, dy);
  auto& e = cached<ConvBackwardFilterEntry>("conv_bwd_filter " + g.key + types, [&] {
    return dnnl_guard("conv2d_backward_filter " + g.key, [&] {
      auto e = std::make_unique<ConvBackwardFilterEntry>();
      // The weight gradient in fp32: it goes to the fp32 master weights' optimizer.
      auto make = [&](dnnl::algorithm alg, const memory::desc& src, const memory::desc& dst) {
        dnnl::convolution_backward_weights::desc d(alg, src, any_desc(g.wei), dst, g.strides,
                                                   g.dilates, g.pad_l, g.pad_r);
        return dnnl::convolution_backward_weights::primitive_desc(
            d, scratchpad_attr(), engine(), forward_hint(g, alg, src, dst, dt, engine()));
      };
      auto pd = pass_pd(winograd_pass(*this, p, g.wei, dt), nchw_pass(*this, x, dy, true), x, g.src,
                        dy, g.dst, dt, make);
      e->prim = dnnl::convolution_backward_weights(pd);
      e->scratch_md = pd.scratchpad_desc();
      e->diff_dst = LayoutBridge(*this, tensor_desc(dy, g.dst), pd.diff_dst_desc(), true);
      e->src = LayoutBridge(*this, tensor_desc(x, g.src), pd.src_desc(), true);
      e->diff_wei = LayoutBridge(*this, plain_desc(g.wei), pd.diff_weights_desc(), false);
      const bool depthwise = p.groups == x.dim(1) && dw.dim(0) == x.dim(1) && dw.dim(1) == 1;
      const std::string impl = impl_name(pd);
      // oneDNN's depthwise kernels are named "..._dw..." or "dw..."; for other shapes it
      // offers a gemm (fp32 plain), its reference kernel (fp32 blocked) or a generic bf16
      // kernel, each 10 to 30 times slower than tandem's loop.
      e->own_depthwise = depthwise && impl.find("dw") == std::string::npos &&
                         x.dtype() == dy.dtype() &&
                         (x.dtype() == DType::kF32 || x.dtype() == DType::kBF16);
      e->placement =
          "conv2d_backward_filter" + types + " " + g.desc + " -> " +
          (e->own_depthwise
               ? "tandem's depthwise loop (oneDNN offers " + impl_name(pd) + ")"
               : impl_name(pd) + reorder_note({{"diff_dst", e->diff_dst.reorders()},
                                               {"src", e->src.reorders()},
                                               {"diff_weights", e->diff_wei.reorders()}}));
      return e;
    });
  });
  if (e.own_depthwise && x.layout() == dy.layout()) {
    const int block = channel_block(x.layout());
    if (block)
      return depthwise_backward_filter_inner(dw.data(), dy.data(), x.data(), x.shape(), dw.shape(),
                                             dy.shape(), p, block);
    if (x.layout() == Layout::kChannelsLast && x.dtype() == DType::kBF16)
      return depthwise_backward_filter_inner(dw.data(), static_cast<const uint16_t*>(dy.raw()),
                                             static_cast<const uint16_t*>(x.raw()), x.shape(),
                                             dw.shape(), dy.shape(), p, 0);
  }
  if (e.own_depthwise) {  // on plain stand-ins of other layouts
    F32Stage sdy(*this, dy, true, false), sx(*this, x, true, false);
    return depthwise_backward_filter(dw.data(), sdy.f32().data(), sx.f32().data(), x.shape(),
                                     dw.shape(), dy.shape(), p);
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, e.diff_dst.bind(dy.raw())},
                                       {DNNL_ARG_SRC, e.src.bind(x.raw())},
                                       {DNNL_ARG_DIFF_WEIGHTS, e.diff_wei.bind(dw.data())},
                                       {DNNL_ARG_SCRATCHPAD, scratchpad(e.scratch_md)}};
  e.diff_dst.run(stream());
  e.src.run(stream());
  e.prim.execute(stream(), args);
  e.diff_wei.run(stream());
  stream().wait();
}

}  // namespace tandem
