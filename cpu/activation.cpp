// Activations forward and backward through oneDNN's eltwise algorithms where it has the kind
// (engine/activation_math.h), else a loop of tandem's own over activation_math.h's definitions.
//
// Tensors of any shape are viewed as 1-D (numel); sigmoid and tanh use the *_use_dst_for_bwd
// algorithms so the backward pass reads y, as the interface promises. Our own loops: relu forward
// (oneDNN's turns a NaN into 0, which would hide a non-finite activation from the loss and from the
// NaN checks; here it passes on, as in PyTorch and on the GPU backend), and the piecewise relu6,
// hardsigmoid and hardswish, whose gradients at the joins oneDNN 2.6 takes otherwise than PyTorch
// (hardswish's slope at 3 is 1.5 in PyTorch, 1 in oneDNN), and elu, whose oneDNN backward takes
// a tiny positive x (1e-30) for a negative one.
#include <string>

#include "cpu/cpu_backend_impl.h"

// clang-format off: last, so that only what follows is compiled for AVX2 with FMA
#include "cpu/isa.h"
// clang-format on

namespace tandem {
namespace {

struct EltwiseForwardEntry : CpuCacheEntry {
  dnnl::eltwise_forward prim;
  dnnl::memory::desc scratch_md;
  dnnl::memory src, dst;
};

struct EltwiseBackwardEntry : CpuCacheEntry {
  dnnl::eltwise_backward prim;
  dnnl::memory::desc scratch_md;
  dnnl::memory data, diff_dst, diff_src;
};

// oneDNN's algorithm for a kind, or none (undef): tandem's loop computes it. Leaky relu is relu
// with a negative slope; silu is swish with alpha 1.
dnnl::algorithm eltwise_algorithm(Activation a) {
  switch (a) {
    case Activation::kRelu:
    case Activation::kLeakyRelu:
      return dnnl::algorithm::eltwise_relu;
    case Activation::kSigmoid:
      return dnnl::algorithm::eltwise_logistic_use_dst_for_bwd;
    case Activation::kTanh:
      return dnnl::algorithm::eltwise_tanh_use_dst_for_bwd;
    case Activation::kSilu:
      return dnnl::algorithm::eltwise_swish;
    case Activation::kGelu:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Activation::kGeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Activation::kSoftplus:
      return dnnl::algorithm::eltwise_soft_relu;
    case Activation::kMish:
      return dnnl::algorithm::eltwise_mish;
    case Activation::kRelu6:
    case Activation::kHardSigmoid:
    case Activation::kHardSwish:
    case Activation::kElu:
      break;
  }
  return dnnl::algorithm::undef;
}

float eltwise_alpha(Activation a, float alpha) {
  switch (a) {
    case Activation::kLeakyRelu:
      return alpha;
    case Activation::kSilu:
      return 1.f;  // swish's x * sigmoid(alpha * x)
    default:
      return 0.f;
  }
}

bool has_alpha(Activation a) { return a == Activation::kLeakyRelu || a == Activation::kElu; }

std::string eltwise_key(Activation a, float alpha, int64_t n) {
  std::string key = activation_name(a);
  if (has_alpha(a)) key.append("(").append(std::to_string(alpha)).append(")");
  return key.append(" [").append(std::to_string(n)).append("]");
}

dnnl::eltwise_forward::primitive_desc forward_pd(Activation a, float alpha, int64_t n,
                                                 const dnnl::engine& eng,
                                                 const dnnl::primitive_attr& attr,
                                                 DType dtype = DType::kF32) {
  dnnl::eltwise_forward::desc d(
      dnnl::prop_kind::forward_training, eltwise_algorithm(a),
      dnnl::memory::desc({n}, dnnl_dtype(dtype), dnnl::memory::format_tag::a),
      eltwise_alpha(a, alpha));
  return dnnl::eltwise_forward::primitive_desc(d, attr, eng);
}

}  // namespace

void CpuBackend::activation_forward(Tensor& y, const Tensor& x, Activation a, float alpha) {
  TANDEM_CHECK(y.numel() == x.numel(), "activation " + x.shape().str() + " -> " + y.shape().str());
  const int64_t n = x.numel();
  if (n == 0) return;
  // bf16 tensors of one memory order run oneDNN's kernel too (widened, computed in fp32, rounded
  // once, as tandem's bf16 loop would, and vectorised where that loop's exp and erf are not).
  const bool bf16 = x.dtype() == DType::kBF16 && y.dtype() == DType::kBF16 &&
                    x.layout() == y.layout() && x.shape() == y.shape();
  const bool own = a == Activation::kRelu || eltwise_algorithm(a) == dnnl::algorithm::undef;
  if ((!all_f32_same_order({&y, &x}) && !bf16) || (bf16 && (own || a == Activation::kLeakyRelu)))
    return mixed::activation_forward(*this, y, x, a, alpha);
  // relu forward too: x <= 0 is false for a NaN, so activation_value copies a NaN through (one
  // select, so the loop vectorises), where oneDNN's relu would make it 0.
  if (own) {
    if (tracing())
      placed("activation_forward " + eltwise_key(a, alpha, n) + " -> tandem's OpenMP loop" +
             (a == Activation::kRelu ? " (NaN-propagating)" : ""));
    const float* xp = x.data();
    float* yp = y.data();
    with_activation(a, [&](auto kind) {
#pragma omp parallel for simd schedule(static) if (parallel : n > 16384)
      for (int64_t i = 0; i < n; ++i) yp[i] = activation_value(kind, xp[i], alpha);
    });
    return;
  }
  const std::string key = eltwise_key(a, alpha, n) + (bf16 ? " bf16" : "");
  auto& e = cached<EltwiseForwardEntry>("act_fwd " + key, [&] {
    return dnnl_guard("activation_forward " + key, [&] {
      auto e = std::make_unique<EltwiseForwardEntry>();
      auto pd =
          forward_pd(a, alpha, n, engine(), scratchpad_attr(), bf16 ? DType::kBF16 : DType::kF32);
      e->prim = dnnl::eltwise_forward(pd);
      e->scratch_md = pd.scratchpad_desc();
      e->src = dnnl::memory(pd.src_desc(), engine(), DNNL_MEMORY_NONE);
      e->dst = dnnl::memory(pd.dst_desc(), engine(), DNNL_MEMORY_NONE);
      e->placement = "activation_forward " + key + " -> " + impl_name(pd);
      return e;
    });
  });
  e.src.set_data_handle(const_cast<void*>(x.raw()));
  e.dst.set_data_handle(y.raw());
  e.prim.execute(stream(), {{DNNL_ARG_SRC, e.src},
                            {DNNL_ARG_DST, e.dst},
                            {DNNL_ARG_SCRATCHPAD, scratchpad(e.scratch_md)}});
  stream().wait();
}

// relu-like: dx = dy * (x > 0 ? 1 : alpha); sigmoid: dx = dy * y * (1 - y); tanh: dy * (1 - y^2);
// the others: dy times the derivative at x (activation_math.h).
void CpuBackend::activation_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                                     Activation a, float alpha) {
  const Tensor& data = activation_uses_output(a) ? y : x;
  TANDEM_CHECK(dx.numel() == dy.numel() && data.numel() == dy.numel(),
               "activation backward " + dy.shape().str() + " -> " + dx.shape().str());
  const int64_t n = dy.numel();
  if (n == 0) return;
  // bf16 tensors of one memory order run oneDNN's kernel too, seen as 1-D like fp32 ones.
  const bool bf16 = dx.dtype() == DType::kBF16 && dy.dtype() == DType::kBF16 &&
                    data.dtype() == DType::kBF16 && dx.layout() == dy.layout() &&
                    data.layout() == dy.layout();
  const bool own = eltwise_algorithm(a) == dnnl::algorithm::undef;
  if ((!all_f32_same_order({&dx, &dy, &data}) && !bf16) || (own && bf16))
    return mixed::activation_backward(*this, dx, dy, x, y, a, alpha);
  if (own) {
    if (tracing())
      placed("activation_backward " + eltwise_key(a, alpha, n) + " -> tandem's OpenMP loop");
    const float* g = dy.data();
    const float* d = data.data();
    float* out = dx.data();
    with_activation(a, [&](auto kind) {
#pragma omp parallel for simd schedule(static) if (parallel : n > 16384)
      for (int64_t i = 0; i < n; ++i) out[i] = activation_grad(kind, g[i], d[i], alpha);
    });
    return;
  }
  const DType dt = bf16 ? DType::kBF16 : DType::kF32;
  const std::string key = eltwise_key(a, alpha, n) + (bf16 ? " bf16" : "");
  auto& e = cached<EltwiseBackwardEntry>("act_bwd " + key, [&] {
    return dnnl_guard("activation_backward " + key, [&] {
      auto e = std::make_unique<EltwiseBackwardEntry>();
      dnnl::memory::desc md({n}, dnnl_dtype(dt), dnnl::memory::format_tag::a);
      dnnl::eltwise_backward::desc d(eltwise_algorithm(a), md, md, eltwise_alpha(a, alpha));
      dnnl::eltwise_backward::primitive_desc pd(
          d, scratchpad_attr(), engine(),
          forward_pd(a, alpha, n, engine(), dnnl::primitive_attr(), dt));
      e->prim = dnnl::eltwise_backward(pd);
      e->scratch_md = pd.scratchpad_desc();
      e->data = dnnl::memory(md, engine(), DNNL_MEMORY_NONE);
      e->diff_dst = dnnl::memory(md, engine(), DNNL_MEMORY_NONE);
      e->diff_src = dnnl::memory(md, engine(), DNNL_MEMORY_NONE);
      e->placement = "activation_backward " + key + " -> " + impl_name(pd);
      return e;
    });
  });
  e.data.set_data_handle(const_cast<void*>(data.raw()));
  e.diff_dst.set_data_handle(const_cast<void*>(dy.raw()));
  e.diff_src.set_data_handle(dx.raw());
  // The use_dst algorithms take y under DNNL_ARG_DST, relu takes x under DNNL_ARG_SRC.
  e.prim.execute(stream(), {{activation_uses_output(a) ? DNNL_ARG_DST : DNNL_ARG_SRC, e.data},
                            {DNNL_ARG_DIFF_DST, e.diff_dst},
                            {DNNL_ARG_DIFF_SRC, e.diff_src},
                            {DNNL_ARG_SCRATCHPAD, scratchpad(e.scratch_md)}});
  stream().wait();
}

}  // namespace tandem
